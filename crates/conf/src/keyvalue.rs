//! The generic `KEY=value` file, [`KeyValueFile`]: the syntax of `lsf.conf`.
//!
//! The rules follow LSF's `lsf.conf` reader, which is strict because the same file is also
//! sourced by shell scripts:
//! - each logical line (see the line rules in the crate documentation) is `KEY=value`;
//! - the key is a shell variable name (`[A-Za-z_][A-Za-z0-9_]*`), case-sensitive;
//! - **no blank is allowed on either side of `=`**: LSF rejects `KEY = value` and `KEY= value`
//!   with a syntax error, and so do we, with a message saying so;
//! - the value is one word, or one string in `"` or `'` quotes (the quotes are taken off);
//!   `KEY=` gives the empty value; a second word after the value is an error (quote it);
//! - a key given twice keeps its last value, as in LSF;
//! - `$VARIABLES` are not expanded, as in LSF.
//!
//! Every key is kept, known or not, so a daemon can read keys this crate has never heard of.
//! This module never gives a value a meaning; [`crate::lsf_conf`] does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{ConfError, ErrorKind, quoted_snippet};
use crate::lex::{logical_lines, read_text};

/// A value of a `KEY=value` file and the line that set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValueEntry {
    /// The value, without its quotes.
    pub value: String,
    /// The line that set it (the last one, if the key appears several times).
    pub line: u32,
}

/// A parsed `KEY=value` file: every key with its last value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValueFile {
    path: PathBuf,
    entries: BTreeMap<String, KeyValueEntry>,
}

impl KeyValueFile {
    /// Reads and parses the file at `path`; a missing file is [`ConfError::Missing`].
    pub fn read(path: &Path) -> Result<Self, ConfError> {
        match read_text(path)? {
            Some(text) => Self::parse(path, &text),
            None => Err(ConfError::Missing {
                path: path.to_path_buf(),
                what: "the lsf.conf file",
                hint: String::new(),
            }),
        }
    }

    /// Parses `text`; `path` is only used to name the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfError> {
        let mut entries = BTreeMap::new();
        for line in logical_lines(path, text)? {
            let (key, value) = parse_line(&line.text).map_err(|kind| ConfError::at(path, line.line, kind))?;
            entries.insert(key.to_string(), KeyValueEntry { value, line: line.line });
        }
        Ok(KeyValueFile { path: path.to_path_buf(), entries })
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The value of `key` (case-sensitive, as in LSF), if the file sets it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(|entry| entry.value.as_str())
    }

    /// The value of `key` and the line that set it.
    pub fn entry(&self, key: &str) -> Option<&KeyValueEntry> {
        self.entries.get(key)
    }

    /// Every key and its entry, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &KeyValueEntry)> {
        self.entries.iter().map(|(key, entry)| (key.as_str(), entry))
    }
}

fn is_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_line(text: &str) -> Result<(&str, String), ErrorKind> {
    let Some(eq_idx) = text.find('=') else {
        return Err(ErrorKind::Expected { expected: "`KEY=value`".to_string(), found: quoted_snippet(text) });
    };
    let key = &text[..eq_idx];
    let rest = &text[eq_idx + 1..];
    if key.ends_with(char::is_whitespace) || rest.starts_with(char::is_whitespace) {
        return Err(ErrorKind::Expected {
            expected: "`KEY=value` with no blank around `=` (lsf.conf is also read by the shell)".to_string(),
            found: quoted_snippet(text),
        });
    }
    if !is_key(key) {
        return Err(ErrorKind::Expected {
            expected: "a key made of letters, digits and `_` before `=`".to_string(),
            found: quoted_snippet(key),
        });
    }
    let (value, after) = match rest.chars().next() {
        Some(quote @ ('"' | '\'')) => {
            let inner = &rest[1..];
            match inner.find(quote) {
                Some(end) => (inner[..end].to_string(), &inner[end + 1..]),
                None => return Err(ErrorKind::UnterminatedQuote { quote }),
            }
        }
        _ => {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            (rest[..end].to_string(), &rest[end..])
        }
    };
    if !after.trim().is_empty() {
        return Err(ErrorKind::Expected {
            expected: format!(
                "the end of the line after the value of `{key}` (quote a value that has blanks)"
            ),
            found: quoted_snippet(after.trim()),
        });
    }
    Ok((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> KeyValueFile {
        KeyValueFile::parse(Path::new("lsf.conf"), text).expect("valid lsf.conf text")
    }

    fn error(text: &str) -> String {
        KeyValueFile::parse(Path::new("lsf.conf"), text).expect_err("invalid lsf.conf text").to_string()
    }

    #[test]
    fn plain_quoted_empty_and_continued_values() {
        // Goal: every accepted way of writing a value gives the expected text.
        // Method: a file with a plain value, both quote kinds (one holding `#`), an empty value,
        // a value continued over two lines and comments, then read each key.
        let file = parse(
            "# comment\nLSF_CONFDIR=/etc/lava\nA=\"x y # z\" # c\nB='single quoted'\nC=\n\
             D=/very/long/\\\npath\n   E=indented\n",
        );
        assert_eq!(file.get("LSF_CONFDIR"), Some("/etc/lava"));
        assert_eq!(file.get("A"), Some("x y # z"));
        assert_eq!(file.get("B"), Some("single quoted"));
        assert_eq!(file.get("C"), Some(""));
        assert_eq!(file.get("D"), Some("/very/long/path"));
        assert_eq!(file.get("E"), Some("indented"));
        assert_eq!(file.entry("A").map(|entry| entry.line), Some(3));
        assert_eq!(file.get("a"), None, "keys are case-sensitive");
    }

    #[test]
    fn duplicate_key_last_wins() {
        // Goal: a key set twice keeps its last value and line, as LSF does.
        // Method: set the same key on lines 1 and 3.
        let file = parse("PORT=1\nOTHER=2\nPORT=3\n");
        assert_eq!(file.entry("PORT"), Some(&KeyValueEntry { value: "3".to_string(), line: 3 }));
    }

    #[test]
    fn blanks_around_equals_are_refused_like_lsf() {
        // Goal: `KEY = value`, `KEY =value` and `KEY= value` are syntax errors naming the line,
        // because LSF rejects them and shells misread them.
        // Method: parse each and check the message.
        for text in ["A=1\nKEY = value\n", "A=1\nKEY =value\n", "A=1\nKEY= value\n"] {
            let message = error(text);
            assert!(
                message.starts_with("lsf.conf:2: expected `KEY=value` with no blank around `=`"),
                "{message}"
            );
        }
    }

    #[test]
    fn other_syntax_errors_name_file_and_line() {
        // Goal: each kind of bad line is refused with its line number and what was expected.
        // Method: one bad line per case, checked against the full message.
        assert_eq!(error("\n\nnot a setting\n"), "lsf.conf:3: expected `KEY=value`, found `not a setting`");
        assert_eq!(
            error("X=a b\n"),
            "lsf.conf:1: expected the end of the line after the value of `X` (quote a value that has blanks), found `b`"
        );
        assert_eq!(
            error("1X=a\n"),
            "lsf.conf:1: expected a key made of letters, digits and `_` before `=`, found `1X`"
        );
        assert_eq!(
            error("X=\"a\"b\n"),
            "lsf.conf:1: expected the end of the line after the value of `X` (quote a value that has blanks), found `b`"
        );
        assert_eq!(error("X=\"open\n"), "lsf.conf:1: the \" quote that starts here is not closed");
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        // Goal: reading an absent lsf.conf says which file is missing.
        // Method: read from an empty temporary folder.
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("lsf.conf");
        let message = KeyValueFile::read(&path).expect_err("absent").to_string();
        assert_eq!(message, format!("{}: the lsf.conf file does not exist", path.display()));
    }
}
