//! LSF-style option scanning: what `getopt` does for LSF's commands, plus the
//! multi-letter options LSF added over the years (`-oo`, `-eo`, `-cwd`,
//! `-noheader`).
//!
//! Rules, in the order they are tried for an argument starting with `-`:
//! 1. `--` ends the options; a lone `-` is an operand.
//! 2. The whole word names an option (`-cwd`, `-oo`, `-noheader`, `-q`): a flag
//!    stands alone, an option with a value takes the next argument.
//! 3. Otherwise the word is a bundle of one-letter options (`-aw`, `-lp`), as
//!    getopt reads it: flags follow each other, and the first letter that takes
//!    a value takes the rest of the word (`-qnormal`) or the next argument.
//!
//! `bsub` stops at its first operand (the command's own options are not
//! bsub's: `bsub ls -l`); the other commands accept operands anywhere, as GNU
//! getopt does (`bjobs 12 -l`).

/// Whether an option takes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// `-H`.
    Flag,
    /// `-q queue`.
    Value,
}

/// One option a command knows: its name without the dash, and its arity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptSpec {
    /// `q`, `oo`, `noheader`...
    pub name: &'static str,
    /// Flag or value.
    pub arity: Arity,
}

impl OptSpec {
    /// A flag.
    pub const fn flag(name: &'static str) -> OptSpec {
        OptSpec { name, arity: Arity::Flag }
    }

    /// An option with a value.
    pub const fn value(name: &'static str) -> OptSpec {
        OptSpec { name, arity: Arity::Value }
    }
}

/// Where operands may appear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Options end at the first operand (`bsub`).
    StopAtFirstOperand,
    /// Operands may come between options (`bjobs`, `bkill`).
    Permute,
}

/// One scanned argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// An option by its spec name, with its value if it takes one.
    Opt(&'static str, Option<String>),
    /// An operand.
    Operand(String),
}

/// A command line that does not follow the syntax; printed as `cmd: message`
/// followed by the usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Scans `args` (without the program name) against `specs`.
pub fn scan(args: &[String], specs: &[OptSpec], order: Order) -> Result<Vec<Item>, UsageError> {
    let mut items = Vec::new();
    let mut idx = 0;
    let mut options_done = false;
    while idx < args.len() {
        let arg = &args[idx];
        idx += 1;
        if options_done || arg == "-" || !arg.starts_with('-') {
            items.push(Item::Operand(arg.clone()));
            if order == Order::StopAtFirstOperand {
                options_done = true;
            }
            continue;
        }
        if arg == "--" {
            options_done = true;
            continue;
        }
        let word = &arg[1..];
        if let Some(spec) = specs.iter().find(|spec| spec.name == word) {
            let value = match spec.arity {
                Arity::Flag => None,
                Arity::Value => Some(take_value(args, &mut idx, spec.name)?),
            };
            items.push(Item::Opt(spec.name, value));
            continue;
        }
        for (offset, letter) in word.char_indices() {
            let Some(spec) = specs
                .iter()
                .find(|spec| spec.name.len() == letter.len_utf8() && spec.name.starts_with(letter))
            else {
                return Err(UsageError(format!("illegal option -- {letter}")));
            };
            match spec.arity {
                Arity::Flag => items.push(Item::Opt(spec.name, None)),
                Arity::Value => {
                    let rest = &word[offset + letter.len_utf8()..];
                    let value = if rest.is_empty() {
                        take_value(args, &mut idx, spec.name)?
                    } else {
                        rest.to_owned()
                    };
                    items.push(Item::Opt(spec.name, Some(value)));
                    break;
                }
            }
        }
    }
    Ok(items)
}

fn take_value(args: &[String], idx: &mut usize, name: &str) -> Result<String, UsageError> {
    let value = args.get(*idx).ok_or_else(|| UsageError(format!("option requires an argument -- {name}")))?;
    *idx += 1;
    Ok(value.clone())
}

/// Splits one line of words the way a shell would for option parsing: blanks
/// separate, `'...'` and `"..."` group (a backslash escapes `"` and `\` inside
/// double quotes), a backslash outside quotes escapes the next character, and
/// an unquoted word starting with `#` ends the line (a comment).
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.peek() {
            None | Some('#') => return Ok(words),
            Some(_) => {}
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            match c {
                '\'' => loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unbalanced single quote".to_owned()),
                    }
                },
                '"' => loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') if matches!(chars.peek(), Some('"' | '\\')) => {
                            word.push(chars.next().expect("peeked"));
                        }
                        Some(c) => word.push(c),
                        None => return Err("unbalanced double quote".to_owned()),
                    }
                },
                '\\' => {
                    if let Some(next) = chars.next() {
                        word.push(next);
                    }
                }
                c => word.push(c),
            }
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[OptSpec] = &[
        OptSpec::flag("a"),
        OptSpec::flag("w"),
        OptSpec::flag("l"),
        OptSpec::value("q"),
        OptSpec::value("o"),
        OptSpec::value("oo"),
        OptSpec::value("cwd"),
        OptSpec::flag("noheader"),
    ];

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    fn check(args: &[&str], order: Order, expected: Result<Vec<Item>, &str>) {
        let got = scan(&strings(args), SPECS, order);
        assert_eq!(got, expected.map_err(|m| UsageError(m.to_owned())), "{args:?}");
    }

    fn opt(name: &'static str, value: Option<&str>) -> Item {
        Item::Opt(name, value.map(str::to_owned))
    }

    fn operand(text: &str) -> Item {
        Item::Operand(text.to_owned())
    }

    // Goal: whole-word options win over bundles; bundles and attached values
    // work as getopt's. Method: a table of command lines and scans.
    #[test]
    fn options_scan_like_getopt_with_lsf_long_words() {
        check(&["-oo", "f"], Order::Permute, Ok(vec![opt("oo", Some("f"))]));
        check(&["-ofile"], Order::Permute, Ok(vec![opt("o", Some("file"))]));
        check(&["-cwd", "/tmp"], Order::Permute, Ok(vec![opt("cwd", Some("/tmp"))]));
        check(&["-noheader"], Order::Permute, Ok(vec![opt("noheader", None)]));
        check(&["-aw"], Order::Permute, Ok(vec![opt("a", None), opt("w", None)]));
        check(&["-aqnormal"], Order::Permute, Ok(vec![opt("a", None), opt("q", Some("normal"))]));
        check(&["-aq", "normal"], Order::Permute, Ok(vec![opt("a", None), opt("q", Some("normal"))]));
        check(&["-z"], Order::Permute, Err("illegal option -- z"));
        check(&["-az"], Order::Permute, Err("illegal option -- z"));
        check(&["-q"], Order::Permute, Err("option requires an argument -- q"));
    }

    // Goal: bsub's command keeps its own options; other commands permute.
    #[test]
    fn operands_stop_or_permute() {
        check(
            &["-a", "ls", "-l"],
            Order::StopAtFirstOperand,
            Ok(vec![opt("a", None), operand("ls"), operand("-l")]),
        );
        check(&["12", "-l"], Order::Permute, Ok(vec![operand("12"), opt("l", None)]));
        check(&["--", "-l"], Order::Permute, Ok(vec![operand("-l")]));
        check(&["-"], Order::Permute, Ok(vec![operand("-")]));
    }

    // Goal: #BSUB words split like a shell's, with quotes and comments.
    #[test]
    fn words_split_like_a_shell() {
        let split = |line: &str| split_words(line);
        assert_eq!(split(r#"-q normal -J "my job""#), Ok(strings(&["-q", "normal", "-J", "my job"])));
        assert_eq!(split("-R 'span[hosts=1]' # a comment"), Ok(strings(&["-R", "span[hosts=1]"])));
        assert_eq!(split(r#"-J a\ b -P "x\"y""#), Ok(strings(&["-J", "a b", "-P", "x\"y"])));
        assert_eq!(split("-P ''"), Ok(strings(&["-P", ""])));
        assert_eq!(split("   "), Ok(vec![]));
        assert!(split("-J 'open").is_err());
    }
}
