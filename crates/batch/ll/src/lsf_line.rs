//! One record of LSF's text logs (`lsb.acct`, the `lsb.events` text view), written
//! field by field: fields separated by one blank; a string in double quotes, a quote
//! inside it doubled (`say "hi"` is `"say ""hi"""`), a line break replaced by a blank
//! (one record per line); numbers bare (`lsb.acct(5)`, `lsb.events(5)`).

use std::fmt::Write as _;

/// A record being written into a `String`: each field preceded by a blank, but the first.
pub struct LsfLine<'a>(pub &'a mut String);

impl LsfLine<'_> {
    fn sep(&mut self) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
    }

    /// A field written as it is (a number already formatted, or several fields).
    pub fn raw(&mut self, text: &str) {
        self.sep();
        self.0.push_str(text);
    }

    /// An integer.
    pub fn i(&mut self, n: i64) {
        self.sep();
        let _infallible = write!(self.0, "{n}");
    }

    /// A quoted string: quotes doubled, line breaks made blanks.
    pub fn s(&mut self, text: &str) {
        self.sep();
        self.0.push('"');
        for c in text.chars() {
            match c {
                '"' => self.0.push_str("\"\""),
                '\n' | '\r' => self.0.push(' '),
                c => self.0.push(c),
            }
        }
        self.0.push('"');
    }

    /// A count, then that many quoted strings.
    /// A count, then that many quoted strings.
    pub fn list(&mut self, items: &[String]) {
        self.i(items.len() as i64);
        for item in items {
            self.s(item);
        }
    }
}

/// The fields of a record being read, left to right; each reader names the field in
/// its error.
pub struct LsfFields<'a> {
    rest: &'a str,
}

impl<'a> LsfFields<'a> {
    /// The fields of `line` (without its newline).
    pub fn new(line: &'a str) -> LsfFields<'a> {
        LsfFields { rest: line }
    }

    fn skip_blanks(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t']);
    }

    /// Whether the line has no field left.
    pub fn at_end(&mut self) -> bool {
        self.skip_blanks();
        self.rest.is_empty()
    }

    /// Whether the next field is a quoted string.
    pub fn next_is_string(&mut self) -> bool {
        self.skip_blanks();
        self.rest.starts_with('"')
    }

    /// The next field, a quoted string, unquoted.
    pub fn string(&mut self, name: &str) -> Result<String, String> {
        self.skip_blanks();
        let Some(body) = self.rest.strip_prefix('"') else {
            return Err(format!("{name}: a quoted string was expected"));
        };
        let mut out = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            if c == '"' {
                if body[i + 1..].starts_with('"') {
                    out.push('"');
                    chars.next();
                } else {
                    self.rest = &body[i + 1..];
                    return Ok(out);
                }
            } else {
                out.push(c);
            }
        }
        Err(format!("{name}: the string is not closed"))
    }

    /// The next field as it is written (a number).
    pub fn word(&mut self, name: &str) -> Result<&'a str, String> {
        self.skip_blanks();
        let end = self.rest.find([' ', '\t']).unwrap_or(self.rest.len());
        if end == 0 {
            return Err(format!("{name}: missing"));
        }
        let (word, rest) = self.rest.split_at(end);
        self.rest = rest;
        Ok(word)
    }

    /// The next field, an integer.
    pub fn int(&mut self, name: &str) -> Result<i64, String> {
        let word = self.word(name)?;
        word.parse().map_err(|_| format!("{name}: {word:?} is not an integer"))
    }

    /// The next field, a count.
    pub fn uint(&mut self, name: &str) -> Result<u32, String> {
        let word = self.word(name)?;
        word.parse().map_err(|_| format!("{name}: {word:?} is not a count"))
    }

    /// The next field, a number with or without a fraction.
    pub fn float(&mut self, name: &str) -> Result<f64, String> {
        let word = self.word(name)?;
        word.parse().map_err(|_| format!("{name}: {word:?} is not a number"))
    }

    /// A count, then that many quoted strings.
    pub fn list(&mut self, name: &str) -> Result<Vec<String>, String> {
        let n = self.uint(name)?;
        if n as usize > self.rest.len() {
            return Err(format!("{name}: {n} is more than the line holds"));
        }
        (0..n).map(|_| self.string(name)).collect()
    }
}
