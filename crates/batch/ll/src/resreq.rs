//! Resource requirement strings (`bsub -R`): [`ResReq::parse`] turns the text
//! into a checked value, [`ResReq::selects`] evaluates its `select` section on
//! one host, and the other sections are plain data for the scheduler.
//!
//! The sections are LSF's (see docs/batch.md, "Scheduling"), each at most once,
//! separated by blanks and in any order:
//! - `select[expr]`, or a bare `expr` before any section: which hosts qualify.
//!   `expr` combines comparisons (`== != < <= > >=`) of load indices (`r15s r1m
//!   r15m ut pg io ls it tmp swp mem`), static numbers (`ncpus maxmem maxswp
//!   maxtmp`) and numbers, or of `type`, `model`, `hostname` and a name, with
//!   `&&`, `||`, `!`, parentheses, `defined(name)`, and boolean resources (a
//!   bare name such as `cs`).
//! - `order[key:key...]`: hosts best first by each key in turn; a key is a
//!   number index, best being the lowest for the indices that grow with load
//!   (`r15s r1m r15m ut pg io ls`) and the highest for the others; `-key`
//!   reverses that.
//! - `rusage[mem=N, swp=N, tmp=N]` (`,` or `:` between items): what the job
//!   reserves on each of its hosts.
//! - `span[hosts=1]` (all slots on one host) or `span[ptile=N]` (N slots per host).
//!
//! Memory amounts, in a `select` comparison with `mem swp tmp maxmem maxswp
//! maxtmp` and in `rusage`, may carry a unit (`select[mem>100MB]`,
//! `rusage[mem=2GB]`; `K KB M MB G GB T TB`, any case, powers of 1024). Without
//! one, `mem swp maxmem maxswp` are in the cluster's unit for `-R` (MB, or
//! `LSF_UNIT_FOR_LIMITS` when that is larger: [`ResReq::parse_with_unit`]) and
//! `tmp maxtmp` in MB, as in LSF (whose `tmp` follows the unit only with
//! `LSF_ENABLE_TMP_UNIT`). A unit after any other number is an error.
//!
//! [`merge`] joins several `-R` strings of one `bsub` into one, as LSF does.
//!
//! Everything else (`same[]`, `cu[]`, a duplicated section, an unknown index
//! in an order or a rusage, a bare number used as a condition) is a syntax
//! error: LSF answers each with [`BAD_RESREQ_MESSAGE`]. The parser is pure and
//! never panics (a property test feeds it arbitrary text); expressions nest at
//! most [`RESREQ_DEPTH_MAX`] deep.

use std::fmt;

/// LSF's answer to a resource requirement it cannot parse (`LSBE_BAD_RESREQ`).
pub const BAD_RESREQ_MESSAGE: &str = "Bad resource requirement syntax";
/// Deepest nesting of parentheses and `!` accepted in a select expression.
pub const RESREQ_DEPTH_MAX: usize = 64;

/// The load indices lim reports, in the order of its load vector (lim spec section 5).
pub const LOAD_INDEX_NAMES: [&str; 11] =
    ["r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "mem"];
/// Position of `mem` in the load vector.
pub const LOAD_MEM: usize = 10;
/// Position of `swp` in the load vector.
pub const LOAD_SWP: usize = 9;
/// Position of `tmp` in the load vector.
pub const LOAD_TMP: usize = 8;
/// Load indices that grow with load (`INCREASING` in LSF's terms): the lowest value is best;
/// the others (`it`, `tmp`, `swp`, `mem`) fall as the host gets busier.
pub const INCREASING_LOADS: usize = 7;

/// A number a host has for a select or order: a load index or a static number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NumIndex {
    /// Load index at this position of [`LOAD_INDEX_NAMES`].
    Load(u8),
    /// `ncpus`: processors.
    Ncpus,
    /// `maxmem`: physical memory, MB.
    Maxmem,
    /// `maxswp`: swap space, MB.
    Maxswp,
    /// `maxtmp`: space in /tmp, MB.
    Maxtmp,
}

impl NumIndex {
    fn named(name: &str) -> Option<NumIndex> {
        if let Some(idx) = LOAD_INDEX_NAMES.iter().position(|n| *n == name) {
            return Some(NumIndex::Load(idx as u8));
        }
        Some(match name {
            "ncpus" => NumIndex::Ncpus,
            "maxmem" => NumIndex::Maxmem,
            "maxswp" => NumIndex::Maxswp,
            "maxtmp" => NumIndex::Maxtmp,
            _ => return None,
        })
    }

    /// Whether its values are amounts of memory or disk, which may carry a unit.
    pub fn is_amount(self) -> bool {
        matches!(self, NumIndex::Maxmem | NumIndex::Maxswp | NumIndex::Maxtmp)
            || matches!(self, NumIndex::Load(idx) if matches!(usize::from(idx), LOAD_MEM | LOAD_SWP | LOAD_TMP))
    }

    /// Whether its amounts without a unit are in the cluster's unit for `-R`
    /// (`mem swp maxmem maxswp`) rather than MB (`tmp maxtmp`).
    fn follows_unit(self) -> bool {
        matches!(self, NumIndex::Maxmem | NumIndex::Maxswp)
            || matches!(self, NumIndex::Load(idx) if matches!(usize::from(idx), LOAD_MEM | LOAD_SWP))
    }

    /// Whether a lower value is better (the index grows with load).
    pub fn lower_is_better(self) -> bool {
        matches!(self, NumIndex::Load(idx) if usize::from(idx) < INCREASING_LOADS)
    }

    /// Its name as written in a requirement.
    pub fn name(self) -> &'static str {
        match self {
            NumIndex::Load(idx) => LOAD_INDEX_NAMES[usize::from(idx)],
            NumIndex::Ncpus => "ncpus",
            NumIndex::Maxmem => "maxmem",
            NumIndex::Maxswp => "maxswp",
            NumIndex::Maxtmp => "maxtmp",
        }
    }
}

/// A text a host has: `type`, `model`, `hostname`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TextIndex {
    /// `type`: the host type of lsf.cluster.
    Type,
    /// `model`: the host model of lsf.cluster.
    Model,
    /// `hostname`: the host's name.
    Hostname,
}

impl TextIndex {
    fn named(name: &str) -> Option<TextIndex> {
        Some(match name {
            "type" => TextIndex::Type,
            "model" => TextIndex::Model,
            "hostname" => TextIndex::Hostname,
            _ => return None,
        })
    }
}

/// What the evaluator asks of a host. Unknown values (`None`) make every
/// comparison with them false, as LSF treats a host without load information.
pub trait HostFacts {
    /// The value of a number index, `None` when unknown.
    fn number(&self, index: NumIndex) -> Option<f64>;
    /// The value of a text index, `None` when unknown.
    fn text(&self, index: TextIndex) -> Option<&str>;
    /// Whether the host has the boolean resource `name`.
    fn has_resource(&self, name: &str) -> bool;
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CmpOp::Eq => ordering == Equal,
            CmpOp::Ne => ordering != Equal,
            CmpOp::Lt => ordering == Less,
            CmpOp::Le => ordering != Greater,
            CmpOp::Gt => ordering == Greater,
            CmpOp::Ge => ordering != Less,
        }
    }
}

/// One side of a numeric comparison.
#[derive(Clone, Debug, PartialEq)]
pub enum NumOperand {
    /// A constant.
    Value(f64),
    /// A host's number.
    Index(NumIndex),
}

/// A checked select expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Select {
    /// The host has this boolean resource.
    Resource(String),
    /// `defined(name)`: the host has a value for the index or the resource.
    Defined(String),
    /// A numeric comparison.
    Number(NumOperand, CmpOp, NumOperand),
    /// A text comparison (`==` or `!=` only).
    Text(TextIndex, bool, String),
    /// `!`
    Not(Box<Select>),
    /// `&&`
    And(Box<Select>, Box<Select>),
    /// `||`
    Or(Box<Select>, Box<Select>),
}

impl Select {
    fn eval(&self, host: &dyn HostFacts) -> bool {
        match self {
            Select::Resource(name) => host.has_resource(name),
            Select::Defined(name) => match (NumIndex::named(name), TextIndex::named(name)) {
                (Some(index), _) => host.number(index).is_some(),
                (_, Some(index)) => host.text(index).is_some(),
                _ => host.has_resource(name),
            },
            Select::Number(left, op, right) => {
                let value = |operand: &NumOperand| match operand {
                    NumOperand::Value(v) => Some(*v),
                    NumOperand::Index(index) => host.number(*index),
                };
                match (value(left), value(right)) {
                    (Some(l), Some(r)) => l.partial_cmp(&r).is_some_and(|o| op.holds(o)),
                    _ => false,
                }
            }
            Select::Text(index, equal, text) => {
                host.text(*index).is_some_and(|value| value.eq_ignore_ascii_case(text) == *equal)
            }
            Select::Not(inner) => !inner.eval(host),
            Select::And(l, r) => l.eval(host) && r.eval(host),
            Select::Or(l, r) => l.eval(host) || r.eval(host),
        }
    }

    fn resources<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Select::Resource(name) => out.push(name),
            Select::Defined(name) if NumIndex::named(name).is_none() && TextIndex::named(name).is_none() => {
                out.push(name)
            }
            Select::Not(inner) => inner.resources(out),
            Select::And(l, r) | Select::Or(l, r) => {
                l.resources(out);
                r.resources(out);
            }
            _ => {}
        }
    }
}

/// One key of an `order` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OrderKey {
    /// The index.
    pub index: NumIndex,
    /// `-index`: the reverse of the index's usual best-first order.
    pub reversed: bool,
}

/// The `span` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Span {
    /// No span section: slots on as many hosts as needed.
    #[default]
    Any,
    /// `span[hosts=1]`: every slot on one host.
    OneHost,
    /// `span[ptile=N]`: N slots per host (the last host may get fewer).
    Ptile(u32),
}

/// A parsed and checked resource requirement.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ResReq {
    /// The select expression; `None` selects every host.
    pub select: Option<Select>,
    /// The order keys, best first; empty for the cluster's host order.
    pub order: Vec<OrderKey>,
    /// Reservations per host, in MB: mem, swp, tmp.
    pub rusage_mb: Rusage,
    /// The span.
    pub span: Span,
}

/// What an `rusage` section reserves on each host, MB (0 for nothing).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Rusage {
    /// `mem`.
    pub mem: f64,
    /// `swp`.
    pub swp: f64,
    /// `tmp`.
    pub tmp: f64,
}

impl Rusage {
    /// Whether it reserves anything.
    pub fn is_empty(&self) -> bool {
        self.mem == 0.0 && self.swp == 0.0 && self.tmp == 0.0
    }
}

/// Why a requirement string was refused: where (byte offset) and what.
/// Shown to users as [`BAD_RESREQ_MESSAGE`]; the detail is for logs and tests.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{BAD_RESREQ_MESSAGE}: at byte {at}: {problem}")]
pub struct ResReqError {
    /// Byte offset in the string.
    pub at: usize,
    /// What was wrong.
    pub problem: String,
}

fn fail<T>(at: usize, problem: impl Into<String>) -> Result<T, ResReqError> {
    Err(ResReqError { at, problem: problem.into() })
}

const SECTIONS: [&str; 7] = ["select", "order", "rusage", "span", "same", "cu", "affinity"];

impl ResReq {
    /// Parses `text` (empty or blank is no requirement), memory amounts
    /// without a unit being MB.
    pub fn parse(text: &str) -> Result<ResReq, ResReqError> {
        ResReq::parse_with_unit(text, 1)
    }

    /// Parses `text`, `mem`, `swp`, `maxmem` and `maxswp` amounts without a unit
    /// being in units of `unit_mb` MB (1 for MB, 1024 for `LSF_UNIT_FOR_LIMITS=GB`).
    pub fn parse_with_unit(text: &str, unit_mb: u64) -> Result<ResReq, ResReqError> {
        let mut req = ResReq::default();
        let mut seen: Vec<&str> = Vec::new();
        for (name, body, at) in split_sections(text)? {
            if seen.contains(&name) {
                return fail(at, format!("section `{name}` appears twice"));
            }
            seen.push(name);
            req.section(name, body, at, unit_mb as f64)?;
        }
        Ok(req)
    }

    fn section(&mut self, name: &str, body: &str, at: usize, unit_mb: f64) -> Result<(), ResReqError> {
        match name {
            "select" => self.select = Some(parse_select(body, at, unit_mb)?),
            "order" => self.order = parse_order(body, at)?,
            "rusage" => self.rusage_mb = parse_rusage(body, at, unit_mb)?,
            "span" => self.span = parse_span(body, at)?,
            other => return fail(at, format!("section `{other}` is not supported")),
        }
        Ok(())
    }

    /// Whether `host` satisfies the select section (every host does without one).
    pub fn selects(&self, host: &dyn HostFacts) -> bool {
        self.select.as_ref().is_none_or(|select| select.eval(host))
    }

    /// The boolean resource names the select section uses, for checking them
    /// against the cluster's resources.
    pub fn resource_names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        if let Some(select) = &self.select {
            select.resources(&mut out);
        }
        out
    }
}

fn skip_blanks(text: &str, pos: usize) -> usize {
    text[pos..].find(|c: char| !c.is_whitespace()).map_or(text.len(), |i| pos + i)
}

/// The sections of `text` in their order: name, body and the body's offset. A
/// bare expression before any section is the `select` section's body.
fn split_sections(text: &str) -> Result<Vec<(&'static str, &str, usize)>, ResReqError> {
    let mut out = Vec::new();
    let mut pos = skip_blanks(text, 0);
    while pos < text.len() {
        match section_at(text, pos) {
            Some((name, body_start)) => {
                let Some(close) = text[body_start..].find(']').map(|i| body_start + i) else {
                    return fail(pos, format!("`{name}[` has no closing `]`"));
                };
                out.push((name, &text[body_start..close], body_start));
                pos = close + 1;
                if pos < text.len() && !text[pos..].starts_with(char::is_whitespace) {
                    return fail(pos, "sections must be separated by blanks");
                }
            }
            None if out.is_empty() => {
                // A bare expression is the select section; it ends where a section begins.
                let end = (pos..text.len())
                    .find(|at| text.is_char_boundary(*at) && bare_end(text, *at))
                    .unwrap_or(text.len());
                out.push(("select", &text[pos..end], pos));
                pos = end;
            }
            None => return fail(pos, "expected a section such as `select[...]`"),
        }
        pos = skip_blanks(text, pos);
    }
    Ok(out)
}

/// Merges the `-R` strings of one submission into one, as LSF merges several
/// `-R` options ("Specifying multiple -R options" in LSF's *Administering
/// Platform LSF*, 7.3 and later): the `select` expressions are joined with
/// `&&` (each in parentheses), the `order` keys and the `rusage` items are
/// concatenated in the order given (a key or an index given twice is then
/// refused, as LSF refuses one twice in one string), and `span`, `same`, `cu`
/// and `affinity`, which cannot be combined, must be the same wherever they
/// appear. Blank strings are skipped; a single string is returned as typed.
/// The sections come out in LSF's order (`select order rusage span same cu
/// affinity`), separated by one blank. Each string must be valid on its own as
/// far as its sections go (one of each at most); the merged text is then what
/// mbatchd parses and judges.
pub fn merge(texts: &[&str]) -> Result<String, ResReqError> {
    let texts: Vec<&str> = texts.iter().copied().filter(|t| !t.trim().is_empty()).collect();
    if texts.len() <= 1 {
        return Ok(texts.first().map(|t| (*t).to_owned()).unwrap_or_default());
    }
    let mut bodies: Vec<(&'static str, Vec<&str>)> =
        SECTIONS.iter().map(|name| (*name, Vec::new())).collect();
    let mut offset = 0;
    for text in &texts {
        let sections = split_sections(text).map_err(|e| ResReqError { at: e.at + offset, ..e })?;
        for (idx, (name, body, at)) in sections.iter().enumerate() {
            if sections[..idx].iter().any(|(other, _, _)| other == name) {
                return fail(at + offset, format!("section `{name}` appears twice"));
            }
            let slot = bodies.iter_mut().find(|(n, _)| n == name).expect("a known section");
            slot.1.push(body.trim());
        }
        offset += text.len() + 1;
    }
    let mut out: Vec<String> = Vec::new();
    for (name, parts) in bodies {
        let body = match (name, parts.as_slice()) {
            (_, []) => continue,
            (_, [one]) => (*one).to_owned(),
            ("select", many) => many.iter().map(|p| format!("({p})")).collect::<Vec<_>>().join(" && "),
            ("order", many) => many.join(":"),
            ("rusage", many) => many.join(","),
            (_, [first, rest @ ..]) => {
                if let Some(other) = rest.iter().find(|p| *p != first) {
                    return fail(0, format!("`{name}[{first}]` and `{name}[{other}]` cannot be merged"));
                }
                (*first).to_owned()
            }
        };
        out.push(format!("{name}[{body}]"));
    }
    Ok(out.join(" "))
}

/// The section starting at `pos` (`name[`), with the offset of its body.
fn section_at(text: &str, pos: usize) -> Option<(&'static str, usize)> {
    SECTIONS.iter().find_map(|name| {
        let rest = text[pos..].strip_prefix(name)?;
        let after = skip_blanks(text, text.len() - rest.len());
        text[after..].starts_with('[').then_some((*name, after + 1))
    })
}

/// Whether a section starts at `at`, preceded by a blank (the end of a bare select).
fn bare_end(text: &str, at: usize) -> bool {
    at > 0 && text[..at].ends_with(char::is_whitespace) && section_at(text, at).is_some()
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Num(f64),
    /// A number with a memory unit, in MB.
    Amount(f64),
    Name(String),
    Quoted(String),
    Op(&'static str),
}

fn tokens(body: &str, base: usize) -> Result<Vec<(usize, Token)>, ResReqError> {
    const OPS: [&str; 13] = ["==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", ",", "="];
    let mut out = Vec::new();
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < body.len() {
        let c = bytes[i];
        let at = base + i;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let end =
                body[i..].find(|c: char| !(c.is_ascii_digit() || c == '.')).map_or(body.len(), |n| i + n);
            let Ok(value) = body[i..end].parse::<f64>() else {
                return fail(at, format!("`{}` is not a number", &body[i..end]));
            };
            let unit_end =
                body[end..].find(|c: char| !c.is_ascii_alphanumeric()).map_or(body.len(), |n| end + n);
            match unit_factor_mb(&body[end..unit_end]) {
                Some(factor) if unit_end > end => {
                    out.push((at, Token::Amount(value * factor)));
                    i = unit_end;
                }
                _ => {
                    out.push((at, Token::Num(value)));
                    i = end;
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let end = body[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
                .map_or(body.len(), |n| i + n);
            out.push((at, Token::Name(body[i..end].to_owned())));
            i = end;
        } else if c == b'"' || c == b'\'' {
            let Some(len) = body[i + 1..].find(c as char) else {
                return fail(at, "unterminated quoted name");
            };
            out.push((at, Token::Quoted(body[i + 1..i + 1 + len].to_owned())));
            i += len + 2;
        } else if let Some(op) = OPS.iter().find(|op| body[i..].starts_with(**op)) {
            out.push((at, Token::Op(op)));
            i += op.len();
        } else {
            let bad = body[i..].chars().next().unwrap_or('?');
            return fail(at, format!("unexpected `{bad}`"));
        }
    }
    Ok(out)
}

/// An operand before its type is known.
enum Term {
    Num(f64),
    Amount(f64),
    Name(String),
    Quoted(String),
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    next: usize,
    end: usize,
    /// MB per unit of a bare amount of `mem swp maxmem maxswp`.
    unit_mb: f64,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(_, t)| t)
    }

    fn at(&self) -> usize {
        self.tokens.get(self.next).map_or(self.end, |(at, _)| *at)
    }

    fn eat(&mut self, op: &'static str) -> bool {
        let found = self.peek() == Some(&Token::Op(op));
        if found {
            self.next += 1;
        }
        found
    }

    fn or(&mut self, depth: usize) -> Result<Select, ResReqError> {
        let mut left = self.and(depth)?;
        while self.eat("||") {
            left = Select::Or(Box::new(left), Box::new(self.and(depth)?));
        }
        Ok(left)
    }

    fn and(&mut self, depth: usize) -> Result<Select, ResReqError> {
        let mut left = self.unary(depth)?;
        while self.eat("&&") {
            left = Select::And(Box::new(left), Box::new(self.unary(depth)?));
        }
        Ok(left)
    }

    fn unary(&mut self, depth: usize) -> Result<Select, ResReqError> {
        if depth >= RESREQ_DEPTH_MAX {
            return fail(self.at(), format!("nested deeper than {RESREQ_DEPTH_MAX}"));
        }
        if self.eat("!") {
            return Ok(Select::Not(Box::new(self.unary(depth + 1)?)));
        }
        if self.eat("(") {
            let inner = self.or(depth + 1)?;
            if !self.eat(")") {
                return fail(self.at(), "expected `)`");
            }
            return Ok(inner);
        }
        if let Some(Token::Name(name)) = self.peek()
            && name == "defined"
            && self.tokens.get(self.next + 1).map(|(_, t)| t) == Some(&Token::Op("("))
        {
            self.next += 2;
            let at = self.at();
            let Some(Token::Name(inner)) = self.peek().cloned() else {
                return fail(at, "`defined(` needs a name");
            };
            self.next += 1;
            if !self.eat(")") {
                return fail(self.at(), "expected `)` after `defined(name`");
            }
            return Ok(Select::Defined(inner));
        }
        self.comparison()
    }

    fn term(&mut self) -> Result<(usize, Term), ResReqError> {
        let at = self.at();
        let term = match self.peek().cloned() {
            Some(Token::Num(value)) => Term::Num(value),
            Some(Token::Amount(mb)) => Term::Amount(mb),
            Some(Token::Name(name)) => Term::Name(name),
            Some(Token::Quoted(text)) => Term::Quoted(text),
            Some(Token::Op(op)) => return fail(at, format!("unexpected `{op}`")),
            None => return fail(at, "the expression ends too early"),
        };
        self.next += 1;
        Ok((at, term))
    }

    fn comparison(&mut self) -> Result<Select, ResReqError> {
        let (at, left) = self.term()?;
        let op = match self.peek() {
            Some(Token::Op("==")) => CmpOp::Eq,
            Some(Token::Op("!=")) => CmpOp::Ne,
            Some(Token::Op("<")) => CmpOp::Lt,
            Some(Token::Op("<=")) => CmpOp::Le,
            Some(Token::Op(">")) => CmpOp::Gt,
            Some(Token::Op(">=")) => CmpOp::Ge,
            Some(Token::Op("=")) => return fail(self.at(), "`=` is not a comparison (use `==`)"),
            _ => {
                return match left {
                    Term::Name(name)
                        if NumIndex::named(&name).is_none() && TextIndex::named(&name).is_none() =>
                    {
                        Ok(Select::Resource(name))
                    }
                    _ => fail(at, "a number or index alone is not a condition"),
                };
            }
        };
        self.next += 1;
        let (right_at, right) = self.term()?;
        compare(left, op, right, at, right_at, self.unit_mb)
    }
}

fn compare(
    left: Term,
    op: CmpOp,
    right: Term,
    at: usize,
    right_at: usize,
    unit_mb: f64,
) -> Result<Select, ResReqError> {
    let text_index = |term: &Term| match term {
        Term::Name(name) => TextIndex::named(name),
        _ => None,
    };
    let literal = |term: Term| match term {
        Term::Name(name) | Term::Quoted(name) => Some(name),
        Term::Num(value) | Term::Amount(value) => Some(value.to_string()),
    };
    let equality = match op {
        CmpOp::Eq => Some(true),
        CmpOp::Ne => Some(false),
        _ => None,
    };
    if let Some(index) = text_index(&left) {
        let Some(equal) = equality else { return fail(at, "a text compares only with `==` or `!=`") };
        return Ok(Select::Text(index, equal, literal(right).unwrap_or_default()));
    }
    if let Some(index) = text_index(&right) {
        let Some(equal) = equality else { return fail(at, "a text compares only with `==` or `!=`") };
        return Ok(Select::Text(index, equal, literal(left).unwrap_or_default()));
    }
    let index_of = |term: &Term| match term {
        Term::Name(name) => NumIndex::named(name),
        _ => None,
    };
    // A constant compared with an amount index is an amount: its unit, else the index's default.
    let other = [index_of(&right), index_of(&left)];
    let number = |term: Term, at: usize, other: Option<NumIndex>| match term {
        Term::Num(value) => Ok(NumOperand::Value(match other {
            Some(index) if index.follows_unit() => value * unit_mb,
            _ => value,
        })),
        Term::Amount(mb) if other.is_some_and(NumIndex::is_amount) => Ok(NumOperand::Value(mb)),
        Term::Amount(_) => {
            fail(at, "a unit follows only an amount of mem, swp, tmp, maxmem, maxswp or maxtmp")
        }
        Term::Name(name) => match NumIndex::named(&name) {
            Some(index) => Ok(NumOperand::Index(index)),
            None => fail(at, format!("`{name}` is not a load index or a static number")),
        },
        Term::Quoted(text) => fail(at, format!("\"{text}\" is not a number")),
    };
    Ok(Select::Number(number(left, at, other[0])?, op, number(right, right_at, other[1])?))
}

fn parse_select(body: &str, at: usize, unit_mb: f64) -> Result<Select, ResReqError> {
    let mut parser = Parser { tokens: tokens(body, at)?, next: 0, end: at + body.len(), unit_mb };
    if parser.tokens.is_empty() {
        return fail(at, "the select expression is empty");
    }
    let select = parser.or(0)?;
    if parser.next != parser.tokens.len() {
        return fail(parser.at(), "unexpected text after the expression");
    }
    Ok(select)
}

fn parse_order(body: &str, at: usize) -> Result<Vec<OrderKey>, ResReqError> {
    let mut keys: Vec<OrderKey> = Vec::new();
    let mut offset = at;
    for part in body.split(':') {
        let word = part.trim();
        let (reversed, name) = match word.strip_prefix('-') {
            Some(rest) => (true, rest.trim()),
            None => (false, word),
        };
        let Some(index) = NumIndex::named(name) else {
            return fail(offset, format!("`{word}` is not a load index or a static number"));
        };
        if keys.iter().any(|key| key.index == index) {
            return fail(offset, format!("`{name}` is ordered twice"));
        }
        keys.push(OrderKey { index, reversed });
        offset += part.len() + 1;
    }
    Ok(keys)
}

fn parse_rusage(body: &str, at: usize, unit_mb: f64) -> Result<Rusage, ResReqError> {
    let mut rusage = Rusage::default();
    let mut seen: Vec<&str> = Vec::new();
    let mut offset = at;
    for item in body.split([',', ':']) {
        let Some((name, value)) = item.split_once('=') else {
            return fail(offset, format!("`{}` is not `name=value`", item.trim()));
        };
        let name = name.trim();
        let default_mb = if matches!(name, "mem" | "swp") { unit_mb } else { 1.0 };
        let Some(mb) = amount_mb(value.trim(), default_mb) else {
            return fail(offset, format!("`{}` is not an amount such as 500 or 2GB", value.trim()));
        };
        let slot = match name {
            "mem" => &mut rusage.mem,
            "swp" => &mut rusage.swp,
            "tmp" => &mut rusage.tmp,
            other => return fail(offset, format!("`{other}` cannot be reserved (only mem, swp, tmp)")),
        };
        if seen.contains(&name) {
            return fail(offset, format!("`{name}` is reserved twice"));
        }
        seen.push(name);
        *slot = mb;
        offset += item.len() + 1;
    }
    Ok(rusage)
}

/// `500` (in units of `default_mb` MB), `1.5GB`, `200KB`: an amount in MB.
fn amount_mb(text: &str, default_mb: f64) -> Option<f64> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0)?;
    let factor = if unit.is_empty() { default_mb } else { unit_factor_mb(unit)? };
    Some(value * factor)
}

/// MB in one of the unit written `unit` (`K KB M MB G GB T TB`, any case).
fn unit_factor_mb(unit: &str) -> Option<f64> {
    Some(match unit.to_ascii_uppercase().as_str() {
        "M" | "MB" => 1.0,
        "K" | "KB" => 1.0 / 1024.0,
        "G" | "GB" => 1024.0,
        "T" | "TB" => 1024.0 * 1024.0,
        _ => return None,
    })
}

fn parse_span(body: &str, at: usize) -> Result<Span, ResReqError> {
    let Some((name, value)) = body.split_once('=') else {
        return fail(at, "span needs `hosts=1` or `ptile=N`");
    };
    let value: Option<u32> = value.trim().parse().ok();
    match (name.trim(), value) {
        ("hosts", Some(1)) => Ok(Span::OneHost),
        ("ptile", Some(n)) if n >= 1 => Ok(Span::Ptile(n)),
        _ => fail(at, format!("`{}` is not `hosts=1` or `ptile=N` (N at least 1)", body.trim())),
    }
}

impl fmt::Display for NumIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A host for the tests: loads by name, static facts, resources.
    struct Host {
        numbers: Vec<(NumIndex, f64)>,
        host_type: &'static str,
        resources: Vec<&'static str>,
    }

    impl HostFacts for Host {
        fn number(&self, index: NumIndex) -> Option<f64> {
            self.numbers.iter().find(|(i, _)| *i == index).map(|(_, v)| *v)
        }
        fn text(&self, index: TextIndex) -> Option<&str> {
            match index {
                TextIndex::Type => Some(self.host_type),
                TextIndex::Model => None,
                TextIndex::Hostname => Some("hostA"),
            }
        }
        fn has_resource(&self, name: &str) -> bool {
            self.resources.contains(&name)
        }
    }

    fn host() -> Host {
        Host {
            numbers: vec![
                (NumIndex::Load(LOAD_MEM as u8), 4000.0),
                (NumIndex::Load(0), 0.5),
                (NumIndex::Ncpus, 8.0),
            ],
            host_type: "LINUX64",
            resources: vec!["cs", "fast"],
        }
    }

    fn check(text: &str, expected: bool) {
        let req = ResReq::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(req.selects(&host()), expected, "{text:?}");
    }

    // Goal: every operator, index kind and grouping evaluates as LSF defines it.
    #[test]
    fn select_evaluates() {
        check("", true);
        check("mem>2000", true);
        check("select[mem>2000 && ncpus>=8]", true);
        check("select[mem>5000]", false);
        check("mem>5000 || r15s<1", true);
        check("!(mem>5000)", true);
        check("cs && !slow", true);
        check("slow", false);
        check("type==LINUX64", true);
        check("type==\"linux64\"", true);
        check("type!=LINUX64", false);
        check("hostname==hostA", true);
        check("defined(cs) && defined(mem) && !defined(model) && !defined(ut)", true);
        check("ut<1", false); // unknown load: every comparison is false
        check("2000 < mem", true);
        check("select[(mem>=4000) && (r15s<=0.5)] order[r15s]", true);
    }

    // Goal: every section is read into its value; sections go in any order.
    #[test]
    fn sections_are_read() {
        let req =
            ResReq::parse("rusage[mem=500:swp=1GB] order[r15s:-ut] span[ptile=4] select[cs]").expect("valid");
        assert_eq!(req.rusage_mb, Rusage { mem: 500.0, swp: 1024.0, tmp: 0.0 });
        assert_eq!(
            req.order,
            vec![
                OrderKey { index: NumIndex::Load(0), reversed: false },
                OrderKey { index: NumIndex::Load(3), reversed: true }
            ]
        );
        assert_eq!(req.span, Span::Ptile(4));
        assert_eq!(req.resource_names(), vec!["cs"]);
        let req = ResReq::parse("mem>100 span[hosts=1]").expect("bare select then a section");
        assert_eq!(req.span, Span::OneHost);
        assert!(req.select.is_some());
        assert!(ResReq::parse("rusage[mem=10, tmp=5]").expect("comma").rusage_mb.tmp == 5.0);
    }

    // Goal: malformed strings are refused, each with a problem that says why.
    #[test]
    fn malformed_strings_are_refused() {
        let cases = [
            ("select[mem>]", "ends too early"),
            ("select[mem>100", "no closing"),
            ("select[mem=100]", "`=` is not a comparison"),
            ("select[mem>100] select[cs]", "twice"),
            ("select[(mem>100]", "expected `)`"),
            ("select[mem>100)]", "unexpected text"),
            ("select[]", "empty"),
            ("select[100]", "alone is not a condition"),
            ("select[mem]", "alone is not a condition"),
            ("select[foo>1]", "not a load index"),
            ("select[type<a]", "only with `==`"),
            ("select[mem>1 @]", "unexpected `@`"),
            ("order[bogus]", "not a load index"),
            ("order[r15s:r15s]", "twice"),
            ("rusage[mem]", "not `name=value`"),
            ("rusage[mem=lots]", "not an amount"),
            ("rusage[licence=1]", "cannot be reserved"),
            ("span[hosts=2]", "not `hosts=1`"),
            ("span[ptile=0]", "not `hosts=1`"),
            ("same[type]", "not supported"),
            ("select[cs]order[r15s]", "separated by blanks"),
            ("select[cs] mem>1", "expected a section"),
            ("select[defined(]", "needs a name"),
        ];
        for (text, problem) in cases {
            let error = ResReq::parse(text).expect_err(text);
            assert!(error.problem.contains(problem), "{text:?}: {error}");
            assert!(error.to_string().starts_with(BAD_RESREQ_MESSAGE), "{error}");
        }
        let deep = format!("{}cs{}", "(".repeat(RESREQ_DEPTH_MAX + 1), ")".repeat(RESREQ_DEPTH_MAX + 1));
        assert!(ResReq::parse(&deep).expect_err("deep").problem.contains("nested deeper"));
    }

    // Goal: memory amounts take LSF's units in select and rusage, and a bare amount of
    // mem or swp is in the cluster's unit (MB, or LSF_UNIT_FOR_LIMITS when larger).
    #[test]
    fn units_of_amounts() {
        check("select[mem>3900MB]", true);
        check("select[mem>3.9GB]", true); // 3993.6 MB
        check("select[mem > 4G]", false); // 4096 MB
        check("select[mem>3000000KB]", true);
        check("mem<4gb && ncpus>=8", true);
        check("select[4000M <= mem]", true);
        let gb = |text: &str| ResReq::parse_with_unit(text, 1024).expect(text);
        assert!(gb("select[mem>3]").selects(&host())); // 3 GB < 4000 MB
        assert!(!gb("select[mem>4]").selects(&host()));
        assert!(gb("select[mem>3900MB]").selects(&host()));
        assert_eq!(
            ResReq::parse("rusage[mem=2GB:swp=512K:tmp=1T]").expect("units").rusage_mb,
            Rusage { mem: 2048.0, swp: 0.5, tmp: 1024.0 * 1024.0 }
        );
        // tmp stays in MB whatever the unit (LSF: only with LSF_ENABLE_TMP_UNIT).
        assert_eq!(
            gb("rusage[mem=2, swp=1, tmp=5]").rusage_mb,
            Rusage { mem: 2048.0, swp: 1024.0, tmp: 5.0 }
        );
        for text in ["select[ut>1GB]", "select[ncpus>2K]", "select[mem>100QB]", "rusage[mem=2QB]"] {
            assert!(ResReq::parse(text).is_err(), "{text}");
        }
    }

    // Goal: several -R strings merge as LSF merges them: selects with &&, order keys and
    // rusage items one after the other, span/same/cu/affinity only when they agree.
    #[test]
    fn several_strings_merge() {
        let merged = |texts: &[&str]| merge(texts).unwrap_or_else(|e| panic!("{texts:?}: {e}"));
        assert_eq!(merged(&["rusage[mem=100]", "span[hosts=1]"]), "rusage[mem=100] span[hosts=1]");
        assert_eq!(
            merged(&["span[hosts=1]", "select[mem>10] rusage[mem=5]"]),
            "select[mem>10] rusage[mem=5] span[hosts=1]"
        );
        assert_eq!(
            merged(&["mem>100 order[r15s]", "select[cs]", "order[ut]"]),
            "select[(mem>100) && (cs)] order[r15s:ut]"
        );
        assert_eq!(merged(&["rusage[mem=100]", "rusage[tmp=50]"]), "rusage[mem=100,tmp=50]");
        assert_eq!(merged(&["span[ptile=2]", "span[ptile=2]"]), "span[ptile=2]");
        assert_eq!(merged(&["  ", "select[a || b]"]), "select[a || b]");
        assert_eq!(merged(&["cs || fast"]), "cs || fast");
        assert_eq!(merged(&[]), "");
        // What merges parses, and means what the pieces meant together.
        let req = ResReq::parse(&merged(&["rusage[mem=2GB]", "span[hosts=1]", "mem>1000"])).expect("merged");
        assert_eq!((req.rusage_mb.mem, req.span), (2048.0, Span::OneHost));
        assert!(req.selects(&host()));
        assert!(!ResReq::parse(&merged(&["mem>1000", "cs", "slow"])).expect("merged").selects(&host()));
        // The same index twice is refused once merged, as in one string.
        assert!(ResReq::parse(&merged(&["rusage[mem=1]", "rusage[mem=2]"])).is_err());
        for texts in [
            &["span[hosts=1]", "span[ptile=2]"][..],
            &["select[cs] select[fast]", "order[ut]"],
            &["order[ut]", "select[cs"],
        ] {
            assert!(merge(texts).is_err(), "{texts:?}");
        }
    }

    // Goal: order keys know which way is best.
    #[test]
    fn best_first_direction() {
        assert!(NumIndex::named("r15s").is_some_and(NumIndex::lower_is_better));
        assert!(NumIndex::named("ls").is_some_and(NumIndex::lower_is_better));
        assert!(!NumIndex::named("mem").is_some_and(NumIndex::lower_is_better));
        assert!(!NumIndex::named("ncpus").is_some_and(NumIndex::lower_is_better));
    }

    proptest! {
        // Goal: the parser never panics, whatever the text; an error points inside it.
        #[test]
        fn parse_never_panics(text in "\\PC{0,80}") {
            if let Err(error) = ResReq::parse(&text) {
                prop_assert!(error.at <= text.len());
            }
            let _ = merge(&[&text, "span[hosts=1]", &text]);
        }

        // Goal: text made of the grammar's own pieces never panics either, and what parses evaluates.
        #[test]
        fn grammar_pieces_never_panic(parts in proptest::collection::vec(
            proptest::sample::select(vec!["select[", "]", "(", ")", "mem", ">", "100", "&&", "||", "!", " ",
                "order[", "r15s", ":", "-ut", "rusage[", "mem=10", "span[", "hosts=1", "cs", "==", "type"]),
            0..20)) {
            let text: String = parts.concat();
            if let Ok(req) = ResReq::parse(&text) {
                let _ = req.selects(&host());
            }
        }
    }
}
