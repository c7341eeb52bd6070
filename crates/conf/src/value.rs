//! One value of a section file, [`Value`], and how a line is cut into values.
//!
//! A table row is cut into cells at blanks, except that a parenthesised group `(a b c)` and a
//! quoted string `"a b"` / `'a b'` are one cell each, and a lone `-` is the "default" cell. The
//! value of a `KEY = value` line is the rest of the line; if the whole of it is one parenthesised
//! group or one quoted string, the parentheses or quotes are taken off. This module knows nothing
//! about what any value means.

use std::path::Path;

use crate::error::{ConfError, ErrorKind, quoted_snippet};

/// How a value was written, which decides how [`Value::text`] was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueForm {
    /// As is: a word in a table, or free text after `KEY =`.
    Bare,
    /// Between `"` or `'` quotes, which are not part of the text.
    Quoted,
    /// Between `(` and `)`, which are not part of the text; `()` is the empty group.
    Parenthesized,
    /// A lone `-`: "no value, use the default" (LSF's convention).
    Dash,
}

/// A value of a section file: its text, with quotes or parentheses taken off, and its form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    text: String,
    form: ValueForm,
}

impl Value {
    /// A value written as is.
    pub fn bare(text: impl Into<String>) -> Self {
        Value { text: text.into(), form: ValueForm::Bare }
    }

    /// The text, without quotes or parentheses; empty for `-` and `()`.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How the value was written.
    pub fn form(&self) -> ValueForm {
        self.form
    }

    /// Whether the value says "use the default": `-`, `()`, or nothing at all. A quoted
    /// string is never the default, so `"-"` is a literal dash.
    pub fn is_default(&self) -> bool {
        match self.form {
            ValueForm::Dash => true,
            ValueForm::Parenthesized | ValueForm::Bare => self.text.trim().is_empty(),
            ValueForm::Quoted => false,
        }
    }

    /// The text split at blanks: the members of a list such as `(a b c)` or `HOSTS = a b`.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        self.text.split_whitespace()
    }

    /// How the value would be written back, for error messages.
    pub fn written(&self) -> String {
        match self.form {
            ValueForm::Bare => self.text.clone(),
            ValueForm::Quoted => format!("\"{}\"", self.text),
            ValueForm::Parenthesized => format!("({})", self.text),
            ValueForm::Dash => "-".to_string(),
        }
    }

    /// The value of a `KEY = value` line from the text after `=`.
    pub(crate) fn from_rest(rest: &str) -> Value {
        let rest = rest.trim();
        if rest == "-" {
            return Value { text: String::new(), form: ValueForm::Dash };
        }
        if let Some(inner) = whole_group(rest) {
            return Value { text: inner.trim().to_string(), form: ValueForm::Parenthesized };
        }
        if let Some(inner) = whole_quote(rest) {
            return Value { text: inner.to_string(), form: ValueForm::Quoted };
        }
        Value::bare(rest)
    }
}

/// If `text` is exactly one parenthesised group, its inside.
fn whole_group(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('(')?;
    let end = matching_parenthesis(inner)?;
    if end + 1 == inner.len() { Some(&inner[..end]) } else { None }
}

/// If `text` is exactly one quoted string, its inside.
fn whole_quote(text: &str) -> Option<&str> {
    let quote = text.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner = &text[quote.len_utf8()..];
    let end = inner.find(quote)?;
    if end + quote.len_utf8() == inner.len() { Some(&inner[..end]) } else { None }
}

/// The byte index in `text` (which follows an opening `(`) of the `)` that closes it.
fn matching_parenthesis(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (idx, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(idx),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Cuts a table line into cells (see the module documentation).
pub(crate) fn split_cells(path: &Path, line: u32, text: &str) -> Result<Vec<Value>, ConfError> {
    let mut cells = Vec::new();
    let mut rest = text.trim_start();
    while let Some(first) = rest.chars().next() {
        let (value, after) = if first == '(' {
            let inner = &rest[1..];
            let end = matching_parenthesis(inner)
                .ok_or_else(|| ConfError::at(path, line, ErrorKind::UnclosedParenthesis))?;
            let value = Value { text: inner[..end].trim().to_string(), form: ValueForm::Parenthesized };
            (value, &inner[end + 1..])
        } else if first == '"' || first == '\'' {
            let inner = &rest[first.len_utf8()..];
            let end = inner
                .find(first)
                .ok_or_else(|| ConfError::at(path, line, ErrorKind::UnterminatedQuote { quote: first }))?;
            let value = Value { text: inner[..end].to_string(), form: ValueForm::Quoted };
            (value, &inner[end + first.len_utf8()..])
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let word = &rest[..end];
            let value = if word == "-" {
                Value { text: String::new(), form: ValueForm::Dash }
            } else {
                Value::bare(word)
            };
            (value, &rest[end..])
        };
        if after.chars().next().is_some_and(|c| !c.is_whitespace()) {
            return Err(ConfError::at(
                path,
                line,
                ErrorKind::Expected {
                    expected: format!("a blank after {}", quoted_snippet(&value.written())),
                    found: quoted_snippet(after),
                },
            ));
        }
        cells.push(value);
        rest = after.trim_start();
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(text: &str) -> Vec<(ValueForm, String)> {
        split_cells(Path::new("t"), 1, text)
            .expect("valid cells")
            .into_iter()
            .map(|value| (value.form(), value.text().to_string()))
            .collect()
    }

    #[test]
    fn cells_of_every_form() {
        // Goal: each way of writing a cell gives one cell of the right form and text.
        // Method: one row with a word, a group, a nested group, an empty group, a quoted string
        // of each kind, and a dash.
        use ValueForm::*;
        assert_eq!(
            cells("host1 (a b  c) (x (y)) () \"two words\" 'it s' -"),
            vec![
                (Bare, "host1".to_string()),
                (Parenthesized, "a b  c".to_string()),
                (Parenthesized, "x (y)".to_string()),
                (Parenthesized, String::new()),
                (Quoted, "two words".to_string()),
                (Quoted, "it s".to_string()),
                (Dash, String::new()),
            ]
        );
    }

    #[test]
    fn defaults_and_literal_dash() {
        // Goal: `-`, `()` and an empty rest are defaults; a quoted dash is not.
        // Method: build each value and ask.
        assert!(Value::from_rest(" - ").is_default());
        assert!(Value::from_rest("()").is_default());
        assert!(Value::from_rest("").is_default());
        assert!(!Value::from_rest("\"-\"").is_default());
        assert_eq!(Value::from_rest("\"-\"").text(), "-");
    }

    #[test]
    fn rest_of_line_unwraps_only_whole_groups_and_quotes() {
        // Goal: `KEY = (a b)` and `KEY = "a b"` lose their wrapping, but a command that merely
        // contains quotes or groups keeps its text as written.
        // Method: four values compared with their expected text.
        assert_eq!(Value::from_rest("(a b)").text(), "a b");
        assert_eq!(Value::from_rest("\"a b\"").text(), "a b");
        assert_eq!(Value::from_rest("/bin/sh -c \"x; y\"").text(), "/bin/sh -c \"x; y\"");
        assert_eq!(Value::from_rest("(a) (b)").text(), "(a) (b)");
        assert_eq!(Value::from_rest("\"a\" \"b\"").text(), "\"a\" \"b\"");
    }

    #[test]
    fn unclosed_group_and_glued_text_are_errors() {
        // Goal: a group without `)` and text glued to a closing quote are errors naming the line.
        // Method: split two bad rows and read the messages.
        let unclosed = split_cells(Path::new("lsb.hosts"), 4, "a (b c").expect_err("unclosed");
        assert_eq!(
            unclosed.to_string(),
            "lsb.hosts:4: the `(` that starts a value here is not closed by a `)`"
        );
        let glued = split_cells(Path::new("lsb.hosts"), 5, "\"a\"b").expect_err("glued");
        assert_eq!(glued.to_string(), "lsb.hosts:5: expected a blank after `\"a\"`, found `b`");
    }
}
