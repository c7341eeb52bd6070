//! Helpers the typed modules share to turn generic values into typed ones: numbers, ports,
//! yes/no, names and lists, each error naming file, line and key; and the checks that a section
//! has the right form, known keys and known columns.
//!
//! Nothing here knows a particular file; the typed modules pass in their key and column lists.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use crate::error::{ConfError, ErrorKind};
use crate::section::{Entry, Row, Section, SectionBody, SectionFile, Table};
use crate::value::Value;

/// Longest accepted name of a queue, a host group or a user group (LSF's limit, 59 bytes).
pub const GROUP_NAME_BYTES_MAX: usize = 59;
/// Longest accepted host or user name (a DNS name's limit).
pub const HOST_NAME_BYTES_MAX: usize = 255;

/// The 11 built-in load indices, in LSF's index order.
pub const LOAD_INDICES: [&str; 11] =
    ["r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "mem"];

/// Words that are keywords wherever a name could appear, so they cannot be names.
pub(crate) const RESERVED_NAMES: [&str; 4] = ["all", "default", "others", "none"];

/// One value with where it came from, ready to be converted.
#[derive(Clone, Copy)]
pub(crate) struct Field<'a> {
    pub path: &'a Path,
    pub line: u32,
    pub key: &'a str,
    pub value: &'a Value,
}

impl<'a> Field<'a> {
    pub fn of_entry(path: &'a Path, entry: &'a Entry) -> Self {
        Field { path, line: entry.line, key: &entry.key, value: &entry.value }
    }

    pub fn error(&self, kind: ErrorKind) -> ConfError {
        ConfError::at(self.path, self.line, kind)
    }

    pub fn bad_number(&self, expected: impl Into<String>) -> ConfError {
        self.error(ErrorKind::BadNumber {
            key: self.key.to_string(),
            value: self.value.written(),
            expected: expected.into(),
        })
    }

    pub fn bad_value(&self, expected: impl Into<String>) -> ConfError {
        self.error(ErrorKind::BadValue {
            key: self.key.to_string(),
            value: self.value.written(),
            expected: expected.into(),
        })
    }

    pub fn is_default(&self) -> bool {
        self.value.is_default()
    }

    pub fn text(&self) -> &'a str {
        self.value.text().trim()
    }

    /// An integer in `min..=max`.
    pub fn integer<T>(&self, min: T, max: T) -> Result<T, ConfError>
    where
        T: FromStr + PartialOrd + Copy + std::fmt::Display,
    {
        let expected = || format!("a whole number from {min} to {max}");
        let number: T = self.text().parse().map_err(|_| self.bad_number(expected()))?;
        if number < min || number > max {
            return Err(self.bad_number(expected()));
        }
        Ok(number)
    }

    /// An integer in `min..=max`, or `None` for the default.
    pub fn optional_integer<T>(&self, min: T, max: T) -> Result<Option<T>, ConfError>
    where
        T: FromStr + PartialOrd + Copy + std::fmt::Display,
    {
        if self.is_default() { Ok(None) } else { self.integer(min, max).map(Some) }
    }

    /// A TCP or UDP port; 0 is refused because peers must be able to reach it.
    pub fn port(&self) -> Result<u16, ConfError> {
        self.integer(1u16, u16::MAX).map_err(|_| self.bad_number("a port from 1 to 65535"))
    }

    /// A finite number, at least `min`.
    pub fn float(&self, min: f64) -> Result<f64, ConfError> {
        parse_float(self.text(), min).ok_or_else(|| self.bad_number(format!("a number of at least {min}")))
    }

    /// `y`/`yes`/`n`/`no` in any case (LSF's spelling of booleans).
    pub fn yes_no(&self) -> Result<bool, ConfError> {
        match self.text().to_ascii_lowercase().as_str() {
            "y" | "yes" => Ok(true),
            "n" | "no" => Ok(false),
            _ => Err(self.bad_value("`y` or `n`")),
        }
    }

    /// A name: letters, digits, `_`, `-` and `.`, not starting with `-` or `.`, at most
    /// `bytes_max` bytes.
    pub fn name(&self, what: &str, bytes_max: usize) -> Result<String, ConfError> {
        check_name(self.text(), what, bytes_max, false).map_err(|expected| self.bad_value(expected))?;
        Ok(self.text().to_string())
    }

    /// A name that can appear in a list of hosts or users, where `all`, `default`, `others`
    /// and `none` are keywords and so cannot be names.
    pub fn member_name(&self, what: &str, bytes_max: usize) -> Result<String, ConfError> {
        check_name(self.text(), what, bytes_max, true).map_err(|expected| self.bad_value(expected))?;
        Ok(self.text().to_string())
    }

    /// Every word of the value, each checked as a name (as a member name if `members`).
    pub fn names(&self, what: &str, bytes_max: usize, members: bool) -> Result<Vec<String>, ConfError> {
        self.value
            .words()
            .map(|word| {
                check_name(word, what, bytes_max, members).map_err(|expected| {
                    self.error(ErrorKind::BadValue {
                        key: self.key.to_string(),
                        value: word.to_string(),
                        expected,
                    })
                })?;
                Ok(word.to_string())
            })
            .collect()
    }
}

fn parse_float(text: &str, min: f64) -> Option<f64> {
    let number: f64 = text.parse().ok()?;
    (number.is_finite() && number >= min).then_some(number)
}

/// Checks a name (and that it is no keyword, if `is_member`); on failure returns what was
/// expected.
pub(crate) fn check_name(name: &str, what: &str, bytes_max: usize, is_member: bool) -> Result<(), String> {
    let valid_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    let valid_start = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_chars || !valid_start || name.len() > bytes_max {
        return Err(format!(
            "a {what} name of at most {bytes_max} letters, digits, `_`, `-` or `.`, starting with a letter, digit or `_`"
        ));
    }
    if is_member && RESERVED_NAMES.iter().any(|reserved| reserved.eq_ignore_ascii_case(name)) {
        return Err(format!("a {what} name other than the keywords `all`, `default`, `others` and `none`"));
    }
    Ok(())
}

/// The entries of a `KEY = value` section by upper-case key: the known ones (borrowed) and the
/// unimplemented ones (owned, to be handed back to the caller).
pub(crate) type KeyValues<'a> = (BTreeMap<String, &'a Entry>, BTreeMap<String, Entry>);

/// The `KEY = value` entries of `section`, last one per key, keys upper-cased; every key must be
/// in `known` or `unimplemented`. Returns the known entries and the unimplemented ones apart.
pub(crate) fn key_values<'a>(
    path: &Path,
    section: &'a Section,
    known: &[&str],
    unimplemented: &[&str],
) -> Result<KeyValues<'a>, ConfError> {
    let entries: &[Entry] = match &section.body {
        SectionBody::KeyValues(entries) => entries,
        SectionBody::Empty => &[],
        SectionBody::Table(table) => {
            return Err(ConfError::at(
                path,
                table.header_line,
                ErrorKind::SectionForm { section: section.name.clone(), expected: "KEY = value lines" },
            ));
        }
    };
    let mut found = BTreeMap::new();
    let mut other = BTreeMap::new();
    for entry in entries {
        let key = entry.key.to_ascii_uppercase();
        if known.contains(&key.as_str()) {
            found.insert(key, entry);
        } else if unimplemented.contains(&key.as_str()) {
            other.insert(key, entry.clone());
        } else {
            return Err(ConfError::at(
                path,
                entry.line,
                ErrorKind::UnknownKey { section: section.name.clone(), key: entry.key.clone() },
            ));
        }
    }
    Ok((found, other))
}

/// The columns of a table section, checked against the known, required and unimplemented ones.
pub(crate) struct Columns<'a> {
    path: &'a Path,
    table: Option<&'a Table>,
    /// Upper-cased known column name → index in the table.
    index: BTreeMap<String, usize>,
    /// Index → column name as written, for unimplemented columns.
    unimplemented: Vec<(usize, String)>,
    /// The section name, for errors.
    section: String,
}

impl<'a> Columns<'a> {
    /// `known`, `required` and `unimplemented` are upper-case; columns in `unimplemented` are
    /// accepted and their values handed back by [`Columns::unimplemented`].
    pub fn new(
        path: &'a Path,
        section: &'a Section,
        known: &[&str],
        required: &[&str],
        unimplemented: &[&str],
    ) -> Result<Self, ConfError> {
        let table = match &section.body {
            SectionBody::Table(table) => table,
            SectionBody::Empty => {
                return Ok(Columns {
                    path,
                    table: None,
                    index: BTreeMap::new(),
                    unimplemented: Vec::new(),
                    section: section.name.clone(),
                });
            }
            SectionBody::KeyValues(entries) => {
                let line = entries.first().map_or(section.line, |entry| entry.line);
                return Err(ConfError::at(
                    path,
                    line,
                    ErrorKind::SectionForm { section: section.name.clone(), expected: "a table" },
                ));
            }
        };
        let mut index = BTreeMap::new();
        let mut other = Vec::new();
        for (column_idx, column) in table.columns.iter().enumerate() {
            let upper = column.to_ascii_uppercase();
            if known.contains(&upper.as_str()) {
                index.insert(upper, column_idx);
            } else if unimplemented.contains(&upper.as_str()) {
                other.push((column_idx, column.clone()));
            } else {
                return Err(ConfError::at(
                    path,
                    table.header_line,
                    ErrorKind::UnknownColumn { section: section.name.clone(), column: column.clone() },
                ));
            }
        }
        for column in required {
            if !index.contains_key(*column) {
                return Err(ConfError::at(
                    path,
                    table.header_line,
                    ErrorKind::MissingColumn { section: section.name.clone(), column: (*column).to_string() },
                ));
            }
        }
        Ok(Columns { path, table: Some(table), index, unimplemented: other, section: section.name.clone() })
    }

    /// The rows, none for an empty section.
    pub fn rows(&self) -> &'a [Row] {
        self.table.map_or(&[], |table| &table.rows)
    }

    /// The field of `row` in column `column` (upper-case), if the header has that column.
    pub fn field(&self, row: &'a Row, column: &str) -> Option<Field<'a>> {
        let column_idx = *self.index.get(column)?;
        let value = row.get(column_idx)?;
        let key = self.table?.columns.get(column_idx)?;
        Some(Field { path: self.path, line: row.line, key, value })
    }

    /// The field of `row` in a column that [`Columns::new`] was told is required.
    pub fn required(&self, row: &'a Row, column: &str) -> Result<Field<'a>, ConfError> {
        // `new` checked the header and the section parser checked the row's width, so this
        // only fails if a caller asks for a column it did not declare required.
        self.field(row, column).ok_or_else(|| {
            ConfError::at(
                self.path,
                row.line,
                ErrorKind::MissingColumn { section: self.section.clone(), column: column.to_string() },
            )
        })
    }

    /// The values of `row` in the unimplemented columns.
    pub fn unimplemented(&self, row: &Row) -> BTreeMap<String, Value> {
        self.unimplemented
            .iter()
            .filter_map(|(column_idx, name)| Some((name.to_ascii_uppercase(), row.get(*column_idx)?.clone())))
            .collect()
    }
}

/// Names already defined, per kind, to refuse duplicates with the line of the first.
#[derive(Default)]
pub(crate) struct Names {
    seen: BTreeMap<(&'static str, String), u32>,
}

impl Names {
    pub fn add(&mut self, path: &Path, what: &'static str, name: &str, line: u32) -> Result<(), ConfError> {
        if let Some(first_line) = self.seen.get(&(what, name.to_string())) {
            return Err(ConfError::at(
                path,
                line,
                ErrorKind::Duplicate { what, name: name.to_string(), first_line: *first_line },
            ));
        }
        self.seen.insert((what, name.to_string()), line);
        Ok(())
    }
}

/// Rejects sections the file does not have, and sections given twice that may appear once.
/// `once` and `many` are the known names (any case); sections in `unimplemented` are accepted
/// and their names returned.
pub(crate) fn check_sections(
    file: &SectionFile,
    once: &[&str],
    many: &[&str],
    unimplemented: &[&str],
) -> Result<Vec<String>, ConfError> {
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut other = Vec::new();
    for section in file.sections() {
        let upper = section.name.to_ascii_uppercase();
        let is_known = |names: &[&str]| names.iter().any(|name| name.eq_ignore_ascii_case(&upper));
        if is_known(once) {
            if let Some(first_line) = seen.get(&upper) {
                return Err(ConfError::at(
                    file.path(),
                    section.line,
                    ErrorKind::DuplicateSection { section: section.name.clone(), first_line: *first_line },
                ));
            }
            seen.insert(upper, section.line);
        } else if is_known(unimplemented) {
            other.push(section.name.clone());
        } else if !is_known(many) {
            return Err(ConfError::at(
                file.path(),
                section.line,
                ErrorKind::UnknownSection { section: section.name.clone() },
            ));
        }
    }
    Ok(other)
}

/// The sections of `file` called `name`, in any case.
pub(crate) fn sections_named<'a>(file: &'a SectionFile, name: &'a str) -> impl Iterator<Item = &'a Section> {
    file.sections().iter().filter(move |section| section.is(name))
}

/// A time written `[hours:]minutes`, as LSF writes RUNLIMIT and CPULIMIT, in seconds.
pub(crate) fn hours_minutes_s(text: &str) -> Option<u64> {
    let (hours, minutes) = match text.split_once(':') {
        Some((hours, minutes)) => (hours.parse::<u64>().ok()?, minutes.parse::<u64>().ok()?),
        None => (0, text.parse::<u64>().ok()?),
    };
    hours.checked_mul(60)?.checked_add(minutes)?.checked_mul(60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        // Goal: names accept the usual characters and refuse blanks, odd starts and long names;
        // keywords are refused only where a name is a member of a host or user list.
        // Method: check a few names against the rules.
        assert!(check_name("host-1.example_x", "host", 255, true).is_ok());
        assert!(check_name("-x", "host", 255, true).is_err());
        assert!(check_name("a/b", "host", 255, true).is_err());
        assert!(check_name("", "host", 255, true).is_err());
        assert!(check_name(&"q".repeat(60), "queue", GROUP_NAME_BYTES_MAX, false).is_err());
        assert!(check_name("ALL", "host", 255, true).is_err());
        assert!(check_name("default", "queue", GROUP_NAME_BYTES_MAX, false).is_ok());
    }

    #[test]
    fn hours_and_minutes() {
        // Goal: LSF's `[hours:]minutes` notation converts to seconds and refuses junk.
        // Method: a few values, including an overflowing one.
        assert_eq!(hours_minutes_s("30"), Some(1800));
        assert_eq!(hours_minutes_s("2:15"), Some(8100));
        assert_eq!(hours_minutes_s("1:x"), None);
        assert_eq!(hours_minutes_s("18446744073709551615"), None);
    }
}
