//! Job dependency expressions: the `-w 'expression'` of `bsub`.
//!
//! An expression combines conditions on other jobs with `&&`, `||`, `!` and
//! parentheses (`!` binds tightest, then `&&`, then `||`). A condition is
//! `done(job)`, `ended(job)`, `exit(job)`, `exit(job, [op] code)` with `op` one
//! of `==` (the default), `!=`, `>`, `>=`, `<`, `<=`, or `started(job)`; a bare
//! job means `done(job)`, as in LSF. A job is an id (`123`), an array element
//! (`123[5]`), or a job name, bare or quoted (`"my job"`, `'my job'`), with an
//! optional `[index]`. Keywords are lowercase, blanks between tokens are free.
//!
//! This module parses only: which job a name means, and whether a condition
//! holds, is mbatchd's decision (`lava-mbd`'s `depend` module). The parser is
//! bounded ([`DEPEND_CONDITIONS_MAX`], [`DEPEND_NESTING_MAX`]) so that no input
//! can exhaust the stack or make evaluation costly.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Most conditions in one expression.
pub const DEPEND_CONDITIONS_MAX: usize = 256;
/// Deepest nesting of `!` and parentheses.
pub const DEPEND_NESTING_MAX: usize = 32;

/// A dependency expression whose conditions name jobs as `J`: as typed
/// ([`JobSelector`]) after parsing, as resolved job ids in mbatchd.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DependExpr<J> {
    /// One condition.
    Cond(Condition<J>),
    /// `!expr`.
    Not(Box<DependExpr<J>>),
    /// `a && b`.
    And(Box<DependExpr<J>>, Box<DependExpr<J>>),
    /// `a || b`.
    Or(Box<DependExpr<J>>, Box<DependExpr<J>>),
}

/// One condition: what state `job` must reach.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition<J> {
    /// The state asked for.
    pub kind: CondKind,
    /// The job it is about.
    pub job: J,
}

/// The states a condition can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CondKind {
    /// `done()`: the job ended DONE.
    Done,
    /// `ended()`: the job ended, DONE or EXIT.
    Ended,
    /// `exit()`: the job ended EXIT; with a comparison, its exit code must satisfy it.
    Exit(Option<(CmpOp, i32)>),
    /// `started()`: the job started (or ended).
    Started,
}

/// A comparison of `exit(job, op code)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
}

impl CmpOp {
    /// Whether `value op operand` holds.
    pub fn holds(self, value: i32, operand: i32) -> bool {
        match self {
            CmpOp::Eq => value == operand,
            CmpOp::Ne => value != operand,
            CmpOp::Gt => value > operand,
            CmpOp::Ge => value >= operand,
            CmpOp::Lt => value < operand,
            CmpOp::Le => value <= operand,
        }
    }
}

/// A job as an expression names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobSelector {
    /// By id, with an array index (0: the whole job or array).
    Id {
        /// The job id.
        id: u32,
        /// The array index, 0 for none.
        index: u32,
    },
    /// By job name, with an array index (0: the whole job or array).
    Name {
        /// The name as typed, without quotes.
        name: String,
        /// The array index, 0 for none.
        index: u32,
    },
}

/// A syntax error; the text is LSF's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Dependency condition syntax error")]
pub struct DependSyntaxError;

impl DependExpr<JobSelector> {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<DependExpr<JobSelector>, DependSyntaxError> {
        let mut parser = Parser { text: text.as_bytes(), pos: 0, n_conditions: 0 };
        let expr = parser.or(0)?;
        parser.skip_blanks();
        if parser.pos != parser.text.len() {
            return Err(DependSyntaxError);
        }
        Ok(expr)
    }
}

impl<J> DependExpr<J> {
    /// The same expression with each condition's job mapped by `f`, or `f`'s first error.
    pub fn try_map<K, E>(&self, f: &mut impl FnMut(&J) -> Result<K, E>) -> Result<DependExpr<K>, E> {
        Ok(match self {
            DependExpr::Cond(cond) => DependExpr::Cond(Condition { kind: cond.kind, job: f(&cond.job)? }),
            DependExpr::Not(inner) => DependExpr::Not(Box::new(inner.try_map(f)?)),
            DependExpr::And(a, b) => DependExpr::And(Box::new(a.try_map(f)?), Box::new(b.try_map(f)?)),
            DependExpr::Or(a, b) => DependExpr::Or(Box::new(a.try_map(f)?), Box::new(b.try_map(f)?)),
        })
    }

    /// Every condition, left to right.
    pub fn conditions(&self) -> Vec<&Condition<J>> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a Condition<J>>) {
        match self {
            DependExpr::Cond(cond) => out.push(cond),
            DependExpr::Not(inner) => inner.collect(out),
            DependExpr::And(a, b) | DependExpr::Or(a, b) => {
                a.collect(out);
                b.collect(out);
            }
        }
    }
}

impl fmt::Display for JobSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (text, index) = match self {
            JobSelector::Id { id, index } => (id.to_string(), *index),
            JobSelector::Name { name, index } => (name.clone(), *index),
        };
        if index == 0 { write!(f, "{text}") } else { write!(f, "{text}[{index}]") }
    }
}

/// How tightly an operator binds, for printing: `||`, then `&&`, then `!` and conditions.
fn binding<J>(expr: &DependExpr<J>) -> u8 {
    match expr {
        DependExpr::Or(..) => 0,
        DependExpr::And(..) => 1,
        DependExpr::Not(_) | DependExpr::Cond(_) => 2,
    }
}

impl fmt::Display for DependExpr<JobSelector> {
    /// The expression in the syntax [`DependExpr::parse`] reads back to this same tree, with
    /// only the parentheses it needs (so never nested deeper than what was parsed).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operand = |f: &mut fmt::Formatter<'_>, expr: &DependExpr<JobSelector>, parens: bool| {
            if parens { write!(f, "({expr})") } else { write!(f, "{expr}") }
        };
        match self {
            DependExpr::Cond(cond) => write!(f, "{cond}"),
            DependExpr::Not(inner) => {
                write!(f, "!")?;
                operand(f, inner, binding(inner) < 2)
            }
            DependExpr::And(a, b) | DependExpr::Or(a, b) => {
                let (level, token) =
                    if matches!(self, DependExpr::And(..)) { (1, " && ") } else { (0, " || ") };
                // Both operators group from the left: a right operand of the same level came
                // in parentheses.
                operand(f, a, binding(a) < level)?;
                write!(f, "{token}")?;
                operand(f, b, binding(b) <= level)
            }
        }
    }
}

impl fmt::Display for Condition<JobSelector> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keyword = match self.kind {
            CondKind::Done => "done",
            CondKind::Ended => "ended",
            CondKind::Exit(_) => "exit",
            CondKind::Started => "started",
        };
        write!(f, "{keyword}(")?;
        match &self.job {
            JobSelector::Id { .. } => write!(f, "{}", self.job)?,
            JobSelector::Name { name, index } => {
                // A name a bare word would not give back is quoted (one that looks like an
                // id, or holds a stop byte or a blank); `parse` takes no escapes, so the
                // quote is the one the name does not hold.
                let bare = !name.bytes().all(|b| b.is_ascii_digit())
                    && !name.bytes().any(|b| NAME_STOP.contains(&b) || b.is_ascii_whitespace());
                let quote = if bare {
                    ""
                } else if name.contains('"') {
                    "'"
                } else {
                    "\""
                };
                write!(f, "{quote}{name}{quote}")?;
                if *index != 0 {
                    write!(f, "[{index}]")?;
                }
            }
        }
        if let CondKind::Exit(Some((op, code))) = self.kind {
            let op = match op {
                CmpOp::Eq => "==",
                CmpOp::Ne => "!=",
                CmpOp::Gt => ">",
                CmpOp::Ge => ">=",
                CmpOp::Lt => "<",
                CmpOp::Le => "<=",
            };
            write!(f, ", {op} {code}")?;
        }
        write!(f, ")")
    }
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
    n_conditions: usize,
}

/// Bytes that end a bare job name.
const NAME_STOP: &[u8] = b"()[],&|!\"' \t";

impl Parser<'_> {
    fn skip_blanks(&mut self) {
        while self.text.get(self.pos).is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// Consumes `token` (after blanks) if it is next.
    fn eat(&mut self, token: &str) -> bool {
        self.skip_blanks();
        if self.text[self.pos..].starts_with(token.as_bytes()) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), DependSyntaxError> {
        if self.eat(token) { Ok(()) } else { Err(DependSyntaxError) }
    }

    fn or(&mut self, depth: usize) -> Result<DependExpr<JobSelector>, DependSyntaxError> {
        let mut left = self.and(depth)?;
        while self.eat("||") {
            let right = self.and(depth)?;
            left = DependExpr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self, depth: usize) -> Result<DependExpr<JobSelector>, DependSyntaxError> {
        let mut left = self.unary(depth)?;
        while self.eat("&&") {
            let right = self.unary(depth)?;
            left = DependExpr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self, depth: usize) -> Result<DependExpr<JobSelector>, DependSyntaxError> {
        if depth >= DEPEND_NESTING_MAX {
            return Err(DependSyntaxError);
        }
        if self.eat("!") {
            return Ok(DependExpr::Not(Box::new(self.unary(depth + 1)?)));
        }
        if self.eat("(") {
            let inner = self.or(depth + 1)?;
            self.expect(")")?;
            return Ok(inner);
        }
        self.n_conditions += 1;
        if self.n_conditions > DEPEND_CONDITIONS_MAX {
            return Err(DependSyntaxError);
        }
        self.condition()
    }

    fn condition(&mut self) -> Result<DependExpr<JobSelector>, DependSyntaxError> {
        let start = self.pos;
        for (keyword, kind) in [
            ("done", CondKind::Done),
            ("ended", CondKind::Ended),
            ("exit", CondKind::Exit(None)),
            ("started", CondKind::Started),
        ] {
            if self.eat(keyword) && self.eat("(") {
                let job = self.job()?;
                let kind = if kind == CondKind::Exit(None) && self.eat(",") {
                    CondKind::Exit(Some(self.comparison()?))
                } else {
                    kind
                };
                self.expect(")")?;
                return Ok(DependExpr::Cond(Condition { kind, job }));
            }
            self.pos = start;
        }
        // A bare job means done(job).
        let job = self.job()?;
        Ok(DependExpr::Cond(Condition { kind: CondKind::Done, job }))
    }

    fn comparison(&mut self) -> Result<(CmpOp, i32), DependSyntaxError> {
        let op = [
            ("==", CmpOp::Eq),
            ("!=", CmpOp::Ne),
            (">=", CmpOp::Ge),
            ("<=", CmpOp::Le),
            (">", CmpOp::Gt),
            ("<", CmpOp::Lt),
        ]
        .into_iter()
        .find(|(token, _)| self.eat(token))
        .map_or(CmpOp::Eq, |(_, op)| op);
        self.skip_blanks();
        let digits = self.take_while(|b| b.is_ascii_digit());
        let code = digits.parse::<i32>().map_err(|_| DependSyntaxError)?;
        Ok((op, code))
    }

    fn take_while(&mut self, keep: impl Fn(u8) -> bool) -> String {
        let start = self.pos;
        while self.text.get(self.pos).is_some_and(|b| keep(*b)) {
            self.pos += 1;
        }
        String::from_utf8_lossy(&self.text[start..self.pos]).into_owned()
    }

    fn job(&mut self) -> Result<JobSelector, DependSyntaxError> {
        self.skip_blanks();
        let quote = self.text.get(self.pos).copied().filter(|b| *b == b'"' || *b == b'\'');
        let (text, quoted) = match quote {
            Some(quote) => {
                self.pos += 1;
                let name = self.take_while(|b| b != quote);
                self.expect(if quote == b'"' { "\"" } else { "'" })?;
                (name, true)
            }
            None => (self.take_while(|b| !NAME_STOP.contains(&b)), false),
        };
        if text.is_empty() || text.contains('\0') {
            return Err(DependSyntaxError);
        }
        let index = if self.eat("[") {
            self.skip_blanks();
            let index = self.take_while(|b| b.is_ascii_digit()).parse::<u32>().ok().filter(|i| *i > 0);
            self.expect("]")?;
            index.ok_or(DependSyntaxError)?
        } else {
            0
        };
        let is_id = !quoted && text.bytes().all(|b| b.is_ascii_digit());
        Ok(if is_id {
            let id = text.parse::<u32>().ok().filter(|id| *id > 0).ok_or(DependSyntaxError)?;
            JobSelector::Id { id, index }
        } else {
            JobSelector::Name { name: text, index }
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn id(id: u32, index: u32) -> JobSelector {
        JobSelector::Id { id, index }
    }

    fn cond(kind: CondKind, job: JobSelector) -> DependExpr<JobSelector> {
        DependExpr::Cond(Condition { kind, job })
    }

    fn check(text: &str, expected: DependExpr<JobSelector>) {
        assert_eq!(DependExpr::parse(text), Ok(expected), "{text}");
    }

    // Goal: each condition form and each way of naming a job parses as meant.
    #[test]
    fn conditions_parse() {
        check("done(12)", cond(CondKind::Done, id(12, 0)));
        check(" ended( 12[3] ) ", cond(CondKind::Ended, id(12, 3)));
        check(
            "started(build)",
            cond(CondKind::Started, JobSelector::Name { name: "build".into(), index: 0 }),
        );
        check(
            "exit(\"my job\")",
            cond(CondKind::Exit(None), JobSelector::Name { name: "my job".into(), index: 0 }),
        );
        check(
            "exit('7', >= 2)",
            cond(CondKind::Exit(Some((CmpOp::Ge, 2))), JobSelector::Name { name: "7".into(), index: 0 }),
        );
        check("exit(7, 3)", cond(CondKind::Exit(Some((CmpOp::Eq, 3))), id(7, 0)));
        check("arr[2]", cond(CondKind::Done, JobSelector::Name { name: "arr".into(), index: 2 }));
        check("42", cond(CondKind::Done, id(42, 0)));
    }

    // Goal: ! binds tighter than &&, which binds tighter than ||; parentheses override.
    #[test]
    fn precedence_is_lsf_s() {
        let (a, b, c) =
            (cond(CondKind::Done, id(1, 0)), cond(CondKind::Done, id(2, 0)), cond(CondKind::Done, id(3, 0)));
        let bx = |e: DependExpr<JobSelector>| Box::new(e);
        check(
            "done(1) || done(2) && !done(3)",
            DependExpr::Or(
                bx(a.clone()),
                bx(DependExpr::And(bx(b.clone()), bx(DependExpr::Not(bx(c.clone()))))),
            ),
        );
        check("(done(1) || done(2)) && done(3)", DependExpr::And(bx(DependExpr::Or(bx(a), bx(b))), bx(c)));
    }

    // Goal: malformed expressions are syntax errors with LSF's message.
    #[test]
    fn malformed_expressions_are_refused() {
        for bad in [
            "",
            "done(",
            "done()",
            "done(1",
            "done(1))",
            "done(1) &&",
            "&& done(1)",
            "done(1) & done(2)",
            "done(1) done(2)",
            "exit(1,)",
            "exit(1, >)",
            "done(0)",
            "done(1[0])",
            "done(1[x])",
            "(done(1)",
            "done(\"x)",
            "!",
            "()",
            "done(1) ||| done(2)",
        ] {
            assert_eq!(DependExpr::parse(bad), Err(DependSyntaxError), "{bad:?}");
        }
        assert_eq!(DependSyntaxError.to_string(), "Dependency condition syntax error");
        let deep =
            format!("{}done(1){}", "(".repeat(DEPEND_NESTING_MAX + 1), ")".repeat(DEPEND_NESTING_MAX + 1));
        assert_eq!(DependExpr::parse(&deep), Err(DependSyntaxError));
        let wide = vec!["done(1)"; DEPEND_CONDITIONS_MAX + 1].join("&&");
        assert_eq!(DependExpr::parse(&wide), Err(DependSyntaxError));
    }

    // Goal: printing gives back text that parses to the same tree, with the parentheses the
    // tree needs and no more.
    #[test]
    fn expressions_print_as_they_parse() {
        for (text, printed) in [
            ("12", "done(12)"),
            (
                "exit(7,3) && !(ended(a[2]) || started('x y'))",
                "exit(7, == 3) && !(ended(a[2]) || started(\"x y\"))",
            ),
            ("done(1) || done(2) && done(3)", "done(1) || done(2) && done(3)"),
            ("(done(1) || done(2)) && done(3)", "(done(1) || done(2)) && done(3)"),
            ("done(1) && (done(2) && done(3))", "done(1) && (done(2) && done(3))"),
            ("!!done('7')", "!!done(\"7\")"),
            ("exit(\"it's\", < 2)", "exit(\"it's\", < 2)"),
            ("exit('say \"hi\"')", "exit('say \"hi\"')"),
        ] {
            let expr = DependExpr::parse(text).expect(text);
            assert_eq!(expr.to_string(), printed, "{text}");
            assert_eq!(DependExpr::parse(printed), Ok(expr), "{printed}");
        }
    }

    fn any_expr() -> impl Strategy<Value = DependExpr<JobSelector>> {
        let names = prop::sample::select(vec!["a", "my job", "7", "x'y", "x\"y", "p[q", "t\tu"]);
        let job = prop_oneof![
            (1..100u32, 0..3u32).prop_map(|(id, index)| JobSelector::Id { id, index }),
            (names, 0..3u32).prop_map(|(name, index)| JobSelector::Name { name: name.to_owned(), index }),
        ];
        let ops =
            prop::sample::select(vec![CmpOp::Eq, CmpOp::Ne, CmpOp::Gt, CmpOp::Ge, CmpOp::Lt, CmpOp::Le]);
        let kind = prop_oneof![
            Just(CondKind::Done),
            Just(CondKind::Ended),
            Just(CondKind::Started),
            Just(CondKind::Exit(None)),
            (ops, 0..256i32).prop_map(|(op, code)| CondKind::Exit(Some((op, code)))),
        ];
        let leaf = (kind, job).prop_map(|(kind, job)| DependExpr::Cond(Condition { kind, job }));
        leaf.prop_recursive(6, 40, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|e| DependExpr::Not(Box::new(e))),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| DependExpr::And(Box::new(a), Box::new(b))),
                (inner.clone(), inner).prop_map(|(a, b)| DependExpr::Or(Box::new(a), Box::new(b))),
            ]
        })
    }

    proptest! {
        // Goal: any expression prints as text that parses back to it.
        #[test]
        fn printing_round_trips(expr in any_expr()) {
            prop_assert_eq!(DependExpr::parse(&expr.to_string()), Ok(expr));
        }

        // Goal: no input panics the parser or overflows its stack.
        #[test]
        fn parser_is_total(text in "[a-z0-9()\\[\\]&|!,'\" <>=]{0,60}") {
            let _ = DependExpr::parse(&text);
        }

        // Goal: every conjunction of well-formed conditions parses, with its conditions in order.
        #[test]
        fn conjunctions_parse(ids in proptest::collection::vec(1..1000u32, 1..20)) {
            let text = ids.iter().map(|i| format!("ended({i})")).collect::<Vec<_>>().join(" && ");
            let expr = DependExpr::parse(&text).expect("well formed");
            let found: Vec<JobSelector> = expr.conditions().into_iter().map(|c| c.job.clone()).collect();
            prop_assert_eq!(found, ids.iter().map(|i| id(*i, 0)).collect::<Vec<_>>());
        }
    }
}
