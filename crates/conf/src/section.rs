//! The generic section file, [`SectionFile`]: the syntax of `lsf.shared`, `lsf.cluster.NAME`
//! and the `lsb.*` files.
//!
//! A section file is a list of sections:
//!
//! ```text
//! Begin Queue                 # `Begin` and `End` and the section name are case-insensitive
//! QUEUE_NAME = normal         # either KEY = value lines ...
//! End Queue
//!
//! Begin Host
//! HOSTNAME  model  RESOURCES  # ... or a header line of column names
//! hostA     -      (cs fs)    # followed by rows, one value per column
//! End Host
//! ```
//!
//! - A section whose first line holds a `=` is a `KEY = value` section; otherwise its first line
//!   is the header of a table. A section with no lines is [`SectionBody::Empty`].
//! - In a `KEY = value` section the key is the word before the first `=`, blanks around `=` are
//!   allowed, and the value is the rest of the line (see [`Value`]); an empty value is an error
//!   (write `-` for "default"). Keys are case-insensitive, and a key given twice keeps its last
//!   value, as in LSF.
//! - In a table, column names are case-insensitive and must be distinct, and every row must have
//!   exactly one value per column (LSF refuses short rows too).
//! - Unlike LSF, which skips text outside sections and accepts `End` with the wrong name after a
//!   log line, both are errors here: a typo should stop the daemon, not silently drop a section.
//!
//! This module knows no section or key names; the typed modules do.

use std::path::{Path, PathBuf};

use crate::error::{ConfError, ErrorKind, quoted_snippet};
use crate::lex::{last_line, logical_lines, read_text};
use crate::value::{Value, split_cells};

/// A parsed section file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionFile {
    path: PathBuf,
    sections: Vec<Section>,
}

/// One `Begin NAME ... End NAME` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The name as written after `Begin`.
    pub name: String,
    /// The line of `Begin`.
    pub line: u32,
    /// What the block holds.
    pub body: SectionBody,
}

/// The contents of a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SectionBody {
    /// Nothing between `Begin` and `End`.
    Empty,
    /// `KEY = value` lines, in file order (duplicates included; [`Section::get`] takes the last).
    KeyValues(Vec<Entry>),
    /// A header and rows.
    Table(Table),
}

/// One `KEY = value` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key as written.
    pub key: String,
    /// The value.
    pub value: Value,
    /// The line.
    pub line: u32,
}

/// A table: a header of column names and rows of values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The line of the header.
    pub header_line: u32,
    /// The column names as written.
    pub columns: Vec<String>,
    /// The rows, in file order.
    pub rows: Vec<Row>,
}

/// One row of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The line.
    pub line: u32,
    /// One value per column.
    pub values: Vec<Value>,
}

impl Section {
    /// Whether the section is called `name`, ignoring case as LSF does.
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
    }

    /// The last `KEY = value` line for `key` (case-insensitive), if this is such a section.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        match &self.body {
            SectionBody::KeyValues(entries) => {
                entries.iter().rev().find(|entry| entry.key.eq_ignore_ascii_case(key))
            }
            SectionBody::Empty | SectionBody::Table(_) => None,
        }
    }
}

impl Table {
    /// The index of column `name` (case-insensitive).
    pub fn column_idx(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|column| column.eq_ignore_ascii_case(name))
    }
}

impl Row {
    /// The value in column `column_idx`.
    pub fn get(&self, column_idx: usize) -> Option<&Value> {
        self.values.get(column_idx)
    }
}

impl SectionFile {
    /// Reads and parses the file at `path`; returns `Ok(None)` if it does not exist.
    pub fn read(path: &Path) -> Result<Option<Self>, ConfError> {
        match read_text(path)? {
            Some(text) => Self::parse(path, &text).map(Some),
            None => Ok(None),
        }
    }

    /// Parses `text`; `path` is only used to name the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfError> {
        let mut sections = Vec::new();
        let mut open: Option<Section> = None;
        for line in logical_lines(path, text)? {
            let mut words = line.text.split_whitespace();
            let first = words.next().unwrap_or_default();
            let second = words.next();
            let extra = words.next();
            let at = |kind| ConfError::at(path, line.line, kind);
            match open.take() {
                None => {
                    if !first.eq_ignore_ascii_case("begin") {
                        return Err(at(ErrorKind::Expected {
                            expected: "`Begin <section>`".to_string(),
                            found: quoted_snippet(&line.text),
                        }));
                    }
                    let Some(name) = second else {
                        return Err(at(ErrorKind::Expected {
                            expected: "a section name after `Begin`".to_string(),
                            found: "the end of the line".to_string(),
                        }));
                    };
                    if let Some(extra) = extra {
                        return Err(at(ErrorKind::Expected {
                            expected: format!("the end of the line after `Begin {name}`"),
                            found: quoted_snippet(extra),
                        }));
                    }
                    open =
                        Some(Section { name: name.to_string(), line: line.line, body: SectionBody::Empty });
                }
                Some(mut section) => {
                    if first.eq_ignore_ascii_case("end") {
                        if second.is_none_or(|name| !section.is(name)) || extra.is_some() {
                            return Err(at(ErrorKind::Expected {
                                expected: format!("`End {}`", section.name),
                                found: quoted_snippet(&line.text),
                            }));
                        }
                        sections.push(section);
                    } else if first.eq_ignore_ascii_case("begin") {
                        return Err(at(ErrorKind::Expected {
                            expected: format!("`End {}` before the next `Begin`", section.name),
                            found: quoted_snippet(&line.text),
                        }));
                    } else {
                        add_line(path, &mut section, line.line, &line.text)?;
                        open = Some(section);
                    }
                }
            }
        }
        if let Some(section) = open {
            return Err(ConfError::at(
                path,
                last_line(text),
                ErrorKind::Expected {
                    expected: format!("`End {}` (the section begins at line {})", section.name, section.line),
                    found: "end of file".to_string(),
                },
            ));
        }
        Ok(SectionFile { path: path.to_path_buf(), sections })
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every section, in file order.
    pub fn sections(&self) -> &[Section] {
        &self.sections
    }
}

fn add_line(path: &Path, section: &mut Section, line: u32, text: &str) -> Result<(), ConfError> {
    let at = |kind| ConfError::at(path, line, kind);
    if matches!(section.body, SectionBody::Empty) {
        section.body = if text.contains('=') {
            SectionBody::KeyValues(Vec::new())
        } else {
            let columns = split_cells(path, line, text)?;
            let mut names: Vec<String> = Vec::with_capacity(columns.len());
            for column in columns {
                if column.form() != crate::value::ValueForm::Bare {
                    return Err(at(ErrorKind::Expected {
                        expected: "a column name".to_string(),
                        found: quoted_snippet(&column.written()),
                    }));
                }
                if names.iter().any(|name| name.eq_ignore_ascii_case(column.text())) {
                    return Err(at(ErrorKind::DuplicateColumn { column: column.text().to_string() }));
                }
                names.push(column.text().to_string());
            }
            SectionBody::Table(Table { header_line: line, columns: names, rows: Vec::new() })
        };
        if let SectionBody::Table(_) = section.body {
            return Ok(());
        }
    }
    match &mut section.body {
        SectionBody::KeyValues(entries) => {
            let Some((key, rest)) = text.split_once('=') else {
                return Err(at(ErrorKind::Expected {
                    expected: format!("`KEY = value` or `End {}`", section.name),
                    found: quoted_snippet(text),
                }));
            };
            let key = key.trim();
            if key.is_empty() || key.contains(char::is_whitespace) || key.contains(['"', '\'', '(', ')']) {
                return Err(at(ErrorKind::Expected {
                    expected: "one key before `=`".to_string(),
                    found: quoted_snippet(key),
                }));
            }
            if rest.trim().is_empty() {
                return Err(at(ErrorKind::Expected {
                    expected: format!("a value after `{key} =` (write `-` for the default)"),
                    found: "the end of the line".to_string(),
                }));
            }
            entries.push(Entry { key: key.to_string(), value: Value::from_rest(rest), line });
        }
        SectionBody::Table(table) => {
            let values = split_cells(path, line, text)?;
            if values.len() != table.columns.len() {
                return Err(at(ErrorKind::RowWidth {
                    n_values: values.len(),
                    n_columns: table.columns.len(),
                }));
            }
            table.rows.push(Row { line, values });
        }
        SectionBody::Empty => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::ValueForm;

    fn parse(name: &str, text: &str) -> SectionFile {
        SectionFile::parse(Path::new(name), text).expect("valid section file")
    }

    fn error(name: &str, text: &str) -> String {
        SectionFile::parse(Path::new(name), text).expect_err("invalid section file").to_string()
    }

    #[test]
    fn key_value_section_with_mixed_case_keywords() {
        // Goal: `begin`/`END` in any case open and close a section, keys are found in any case,
        // blanks around `=` are allowed, and a duplicate key keeps its last value.
        // Method: a Queue section written untidily, then look keys up.
        let file = parse(
            "lsb.queues",
            "# a queue\nbegin queue\nQUEUE_NAME=normal\n  priority   =  30 \nDESCRIPTION = the usual (default) queue\n\
             USERS = (alice bob)\nPRIORITY = 40\nEND Queue\n",
        );
        let section = &file.sections()[0];
        assert!(section.is("Queue"));
        assert_eq!(section.line, 2);
        assert_eq!(section.get("queue_name").map(|entry| entry.value.text()), Some("normal"));
        assert_eq!(section.get("PRIORITY").map(|entry| (entry.value.text(), entry.line)), Some(("40", 7)));
        assert_eq!(
            section.get("description").map(|entry| entry.value.text()),
            Some("the usual (default) queue")
        );
        let users = section.get("USERS").expect("USERS is set");
        assert_eq!(users.value.words().collect::<Vec<_>>(), ["alice", "bob"]);
    }

    #[test]
    fn table_section_with_groups_quotes_dashes_and_continuations() {
        // Goal: a table keeps its columns and rows, with grouped, quoted and default cells, and
        // a row continued with `\` counts as one row at its first line.
        // Method: a Host section in lsf.cluster style.
        let file = parse(
            "lsf.cluster.lava",
            "Begin Host\nHOSTNAME model type server RESOURCES\nhostA - ! 1 (cs fs)\n\
             hostB \"m 1\" - 0 \\\n  ()\nEnd Host\n",
        );
        let SectionBody::Table(table) = &file.sections()[0].body else { panic!("a table") };
        assert_eq!(table.columns, ["HOSTNAME", "model", "type", "server", "RESOURCES"]);
        assert_eq!(table.column_idx("resources"), Some(4));
        assert_eq!(table.rows.len(), 2);
        let row_b = &table.rows[1];
        assert_eq!(row_b.line, 4);
        assert_eq!(row_b.values[1].form(), ValueForm::Quoted);
        assert_eq!(row_b.values[1].text(), "m 1");
        assert!(row_b.values[2].is_default());
        assert!(row_b.values[4].is_default());
        let row_a = &table.rows[0];
        assert_eq!(row_a.values[4].words().collect::<Vec<_>>(), ["cs", "fs"]);
        assert_eq!(row_a.values[2].text(), "!");
    }

    #[test]
    fn empty_section_and_several_sections() {
        // Goal: a section with no lines is Empty, and sections come back in file order.
        // Method: two sections, the first empty.
        let file =
            parse("lsb.users", "Begin UserGroup\nEnd UserGroup\nBegin User\nUSER_NAME MAX_JOBS\nEnd User\n");
        assert_eq!(file.sections().len(), 2);
        assert_eq!(file.sections()[0].body, SectionBody::Empty);
        assert!(file.sections()[1].is("user"));
    }

    #[test]
    fn missing_end_is_reported_at_end_of_file() {
        // Goal: the message the brief asks for: file, last line, the `End` expected, "end of file".
        // Method: a Queue section never closed, in a 12-line file.
        let text = "Begin Queue\nQUEUE_NAME = normal\n\n\n\n\n\n\n\n\n\nPRIORITY = 1\n";
        assert_eq!(
            error("lsb.queues", text),
            "lsb.queues:12: expected `End Queue` (the section begins at line 1), found end of file"
        );
    }

    #[test]
    fn row_width_mismatch_names_both_counts() {
        // Goal: a row with too many values is refused with both counts and its line.
        // Method: a 4-column header and a 5-value row on line 7.
        let text = "# lsf.cluster\n\nBegin Host\nHOSTNAME model type server\nh1 - - 1\n# comment\nh2 - - 1 extra\nEnd Host\n";
        assert_eq!(
            error("lsf.cluster.lava", text),
            "lsf.cluster.lava:7: row has 5 values but the header has 4 columns"
        );
        let short = "Begin Host\nHOSTNAME model type\nh1 -\nEnd Host\n";
        assert_eq!(
            error("lsf.cluster.lava", short),
            "lsf.cluster.lava:3: row has 2 values but the header has 3 columns"
        );
    }

    #[test]
    fn structural_errors() {
        // Goal: every structural mistake is an error naming the line and what was expected.
        // Method: one small bad file per mistake.
        assert_eq!(error("f", "stray text\n"), "f:1: expected `Begin <section>`, found `stray text`");
        assert_eq!(
            error("f", "Begin\n"),
            "f:1: expected a section name after `Begin`, found the end of the line"
        );
        assert_eq!(
            error("f", "Begin A B\nEnd A\n"),
            "f:1: expected the end of the line after `Begin A`, found `B`"
        );
        assert_eq!(error("f", "Begin Queue\nEnd Host\n"), "f:2: expected `End Queue`, found `End Host`");
        assert_eq!(error("f", "Begin Queue\nEnd\n"), "f:2: expected `End Queue`, found `End`");
        assert_eq!(
            error("f", "Begin Queue\nBegin Host\n"),
            "f:2: expected `End Queue` before the next `Begin`, found `Begin Host`"
        );
        assert_eq!(error("f", "End Queue\n"), "f:1: expected `Begin <section>`, found `End Queue`");
        assert_eq!(
            error("f", "Begin Queue\nA = 1\nB\nEnd Queue\n"),
            "f:3: expected `KEY = value` or `End Queue`, found `B`"
        );
        assert_eq!(
            error("f", "Begin Queue\nA =\nEnd Queue\n"),
            "f:2: expected a value after `A =` (write `-` for the default), found the end of the line"
        );
        assert_eq!(
            error("f", "Begin Queue\nA B = 1\nEnd Queue\n"),
            "f:2: expected one key before `=`, found `A B`"
        );
        assert_eq!(
            error("f", "Begin Host\nA B a\nEnd Host\n"),
            "f:2: column `a` appears twice in the header"
        );
        assert_eq!(error("f", "Begin Host\nA (B)\nEnd Host\n"), "f:2: expected a column name, found `(B)`");
        assert_eq!(
            error("f", "Begin Host\nA B\nx (y\nEnd Host\n"),
            "f:3: the `(` that starts a value here is not closed by a `)`"
        );
    }
}
