//! The one error type of the reader, [`ConfError`], and the list of what can be wrong, [`ErrorKind`].
//!
//! Every error names the file it is about and, whenever a line is to blame, the line: its
//! `Display` reads `path:line: what was wrong`, the shape compilers use, so an editor can jump to
//! it. Errors about a key or a column name it first (`` `PRIORITY`: bad number ... ``). This module
//! never decides what is an error; the parsers do.

use std::path::{Path, PathBuf};

/// Why a configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfError {
    /// The file exists (or may exist) but could not be read.
    #[error("{}: cannot read: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A file that must exist does not.
    #[error("{}: {what} does not exist{hint}", .path.display())]
    Missing {
        /// The file that was looked for.
        path: PathBuf,
        /// What the file is, in words (`"the lsb.queues file"`).
        what: &'static str,
        /// Empty, or a sentence (starting with `"; "`) saying what may be wrong.
        hint: String,
    },
    /// Something is wrong at one line of a file.
    #[error("{}:{line}: {kind}", .path.display())]
    At {
        /// The file.
        path: PathBuf,
        /// The line, counted from 1. For a value continued over several lines (`\`), the
        /// line where it starts.
        line: u32,
        /// What is wrong.
        kind: ErrorKind,
    },
    /// Something is wrong with a file as a whole.
    #[error("{}: {kind}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        kind: ErrorKind,
    },
}

impl ConfError {
    /// An error at `line` of `path`.
    pub(crate) fn at(path: &Path, line: u32, kind: ErrorKind) -> Self {
        ConfError::At { path: path.to_path_buf(), line, kind }
    }

    /// An error about the whole of `path`.
    pub(crate) fn file(path: &Path, kind: ErrorKind) -> Self {
        ConfError::File { path: path.to_path_buf(), kind }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ConfError::Read { path, .. }
            | ConfError::Missing { path, .. }
            | ConfError::At { path, .. }
            | ConfError::File { path, .. } => path,
        }
    }

    /// The line the error is about, if one is to blame.
    pub fn line(&self) -> Option<u32> {
        match self {
            ConfError::At { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// What is wrong, for the errors that are about the text of a file.
    pub fn kind(&self) -> Option<&ErrorKind> {
        match self {
            ConfError::At { kind, .. } | ConfError::File { kind, .. } => Some(kind),
            ConfError::Read { .. } | ConfError::Missing { .. } => None,
        }
    }
}

/// What is wrong in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file is larger than [`crate::CONF_FILE_BYTES_MAX`].
    #[error("the file is {bytes} bytes, more than the limit of {bytes_max} bytes")]
    TooLarge {
        /// The size of the file.
        bytes: u64,
        /// The limit.
        bytes_max: u64,
    },
    /// The file is not UTF-8 text.
    #[error("the text is not valid UTF-8")]
    NotUtf8,
    /// A quoted string does not end on its line.
    #[error("the {quote} quote that starts here is not closed")]
    UnterminatedQuote {
        /// The quote character, `"` or `'`.
        quote: char,
    },
    /// A parenthesised value does not end on its line.
    #[error("the `(` that starts a value here is not closed by a `)`")]
    UnclosedParenthesis,
    /// The syntax is wrong: something else was expected here.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What would have been right, in words.
        expected: String,
        /// What the file has instead, quoted, or `end of file`.
        found: String,
    },
    /// A row of a table does not have one value per column.
    #[error("row has {n_values} values but the header has {n_columns} columns")]
    RowWidth {
        /// How many values the row has.
        n_values: usize,
        /// How many columns the header names.
        n_columns: usize,
    },
    /// A header names the same column twice.
    #[error("column `{column}` appears twice in the header")]
    DuplicateColumn {
        /// The column.
        column: String,
    },
    /// A header names a column this section does not have.
    #[error("unknown column `{column}` in section `{section}`")]
    UnknownColumn {
        /// The section.
        section: String,
        /// The column.
        column: String,
    },
    /// A header lacks a column this section needs.
    #[error("section `{section}` needs a `{column}` column")]
    MissingColumn {
        /// The section.
        section: String,
        /// The column.
        column: String,
    },
    /// A section this file does not have.
    #[error("unknown section `{section}`")]
    UnknownSection {
        /// The section name as written.
        section: String,
    },
    /// A section this file needs is absent.
    #[error("the file has no `{section}` section")]
    MissingSection {
        /// The section.
        section: String,
    },
    /// A section appears twice where it may appear once.
    #[error("section `{section}` is already defined at line {first_line}")]
    DuplicateSection {
        /// The section.
        section: String,
        /// Where it was first defined.
        first_line: u32,
    },
    /// A section is a table where `KEY = value` lines were expected, or the other way round.
    #[error("section `{section}` must be {expected}")]
    SectionForm {
        /// The section.
        section: String,
        /// `"a table"` or `"KEY = value lines"`.
        expected: &'static str,
    },
    /// A key this section does not have.
    #[error("unknown key `{key}` in section `{section}`")]
    UnknownKey {
        /// The section.
        section: String,
        /// The key as written.
        key: String,
    },
    /// A key this section needs is absent.
    #[error("section `{section}` has no `{key}`")]
    MissingKey {
        /// The section.
        section: String,
        /// The key.
        key: String,
    },
    /// A value that should be a number is not one, or is out of range.
    #[error("`{key}`: bad number `{value}`, expected {expected}")]
    BadNumber {
        /// The key or column.
        key: String,
        /// The value as written.
        value: String,
        /// What would have been right.
        expected: String,
    },
    /// A value that is not a number is not one of the accepted values.
    #[error("`{key}`: bad value `{value}`, expected {expected}")]
    BadValue {
        /// The key or column.
        key: String,
        /// The value as written.
        value: String,
        /// What would have been right.
        expected: String,
    },
    /// A name (of a queue, host, group...) is defined twice.
    #[error("{what} `{name}` is already defined at line {first_line}")]
    Duplicate {
        /// What kind of name (`"queue"`, `"host"`).
        what: &'static str,
        /// The name.
        name: String,
        /// Where it was first defined (in the same file).
        first_line: u32,
    },
    /// A value names something that is not defined.
    #[error("`{key}`: `{name}` is not {expected}")]
    UnknownName {
        /// The key or column holding the name.
        key: String,
        /// The name.
        name: String,
        /// What it should have been, in words (`"a host of lsf.cluster.lava"`).
        expected: String,
    },
    /// Two settings conflict; the sentence says which.
    #[error("{0}")]
    Conflict(String),
}

/// Shows at most the first 60 characters of `text`, in backquotes, for an `Expected` message.
pub(crate) fn quoted_snippet(text: &str) -> String {
    const SNIPPET_CHARS_MAX: usize = 60;
    let mut out = String::from("`");
    for (n_chars, c) in text.chars().enumerate() {
        if n_chars == SNIPPET_CHARS_MAX {
            out.push_str("...");
            break;
        }
        out.push(c);
    }
    out.push('`');
    out
}
