//! Turns the bytes of a configuration file into logical lines, the way LSF's line reader does:
//! `#` comments removed, `\` continuations joined, blank lines dropped, each line tagged with the
//! number of the physical line it starts on.
//!
//! The rules, shared by `lsf.conf` and the section files:
//! - A `#` outside quotes starts a comment that runs to the end of the physical line, and ends the
//!   logical line there (a `\` before the comment does not continue it).
//! - `\#` is a literal `#`. (LSF keeps the backslash; we drop it, which is what an administrator
//!   writing `\#` means.)
//! - A `\` that is the very last character of a physical line joins the next physical line to it;
//!   nothing is inserted between them, exactly as LSF does, so `a \` + `b` gives `a b` and
//!   `a\` + `b` gives `ab`. Any other `\` is kept as it is.
//! - A `"` or `'` that starts a word (at the start of the line or after a blank, `=` or `(`)
//!   opens a quoted string that ends at the next identical quote; `#` inside it is not a comment.
//!   A quote inside a word (`Bob's`) is an ordinary character. A quoted string still open at the
//!   end of its logical line is an error.
//! - Carriage returns before a newline are ignored; leading and trailing blanks are trimmed.
//!
//! This module never interprets what a line means.

use std::io::Read;
use std::path::Path;

use crate::CONF_FILE_BYTES_MAX;
use crate::error::{ConfError, ErrorKind};

/// One logical line: the text after comments and continuations, trimmed, never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogicalLine {
    /// The physical line it starts on, counted from 1.
    pub line: u32,
    /// The text.
    pub text: String,
}

/// Reads a whole configuration file as UTF-8, refusing files over [`CONF_FILE_BYTES_MAX`].
///
/// Returns `Ok(None)` if the file does not exist, so each caller decides whether that is an
/// error.
pub(crate) fn read_text(path: &Path) -> Result<Option<String>, ConfError> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ConfError::Read { path: path.to_path_buf(), source }),
    };
    // Read one byte past the limit so that an oversized file is recognised without reading
    // all of it.
    let mut bytes = Vec::new();
    file.take(CONF_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| ConfError::Read { path: path.to_path_buf(), source })?;
    let n_bytes = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if n_bytes > CONF_FILE_BYTES_MAX {
        return Err(ConfError::file(
            path,
            ErrorKind::TooLarge { bytes: n_bytes, bytes_max: CONF_FILE_BYTES_MAX },
        ));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Some(text)),
        Err(error) => {
            let valid = &error.as_bytes()[..error.utf8_error().valid_up_to()];
            Err(ConfError::at(path, line_number(count_newlines(valid)), ErrorKind::NotUtf8))
        }
    }
}

fn count_newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|byte| **byte == b'\n').count()
}

/// The 1-based line number after `n_newlines` newlines, saturating rather than wrapping.
pub(crate) fn line_number(n_newlines: usize) -> u32 {
    u32::try_from(n_newlines).unwrap_or(u32::MAX - 1).saturating_add(1)
}

/// The number of the last line of `text` (1 for an empty text), where "end of file" errors point.
pub(crate) fn last_line(text: &str) -> u32 {
    let n_newlines = count_newlines(text.as_bytes());
    // A final newline ends the last line rather than starting a new one.
    let n_newlines = if text.ends_with('\n') { n_newlines.saturating_sub(1) } else { n_newlines };
    line_number(n_newlines)
}

/// Checks the size limit for text handed to a `parse` function directly.
pub(crate) fn check_size(path: &Path, text: &str) -> Result<(), ConfError> {
    let n_bytes = u64::try_from(text.len()).unwrap_or(u64::MAX);
    if n_bytes > CONF_FILE_BYTES_MAX {
        return Err(ConfError::file(
            path,
            ErrorKind::TooLarge { bytes: n_bytes, bytes_max: CONF_FILE_BYTES_MAX },
        ));
    }
    Ok(())
}

/// Whether a quote character at this point would start a word.
fn at_word_start(buffer: &str) -> bool {
    match buffer.chars().next_back() {
        None => true,
        Some(c) => c.is_whitespace() || c == '=' || c == '(',
    }
}

/// Splits `text` into logical lines (see the module documentation for the rules).
pub(crate) fn logical_lines(path: &Path, text: &str) -> Result<Vec<LogicalLine>, ConfError> {
    check_size(path, text)?;
    let mut lines = Vec::new();
    let mut buffer = String::new();
    let mut start_line = 1u32;
    let mut continuing = false;
    let mut quote: Option<char> = None;

    for (line_idx, physical) in text.split('\n').enumerate() {
        let line = line_number(line_idx);
        let physical = physical.strip_suffix('\r').unwrap_or(physical);
        if !continuing {
            buffer.clear();
            start_line = line;
            quote = None;
        }
        continuing = false;

        let mut chars = physical.chars().peekable();
        while let Some(c) = chars.next() {
            let next = chars.peek().copied();
            if c == '\\' && next.is_none() {
                continuing = true;
                break;
            }
            match quote {
                Some(open) => {
                    if c == open {
                        quote = None;
                    }
                    buffer.push(c);
                }
                None if c == '#' => break,
                None if (c == '"' || c == '\'') && at_word_start(&buffer) => {
                    quote = Some(c);
                    buffer.push(c);
                }
                None if c == '\\' && next == Some('#') => {
                    buffer.push('#');
                    chars.next();
                }
                None => buffer.push(c),
            }
        }
        if !continuing {
            finish_line(path, start_line, quote, &buffer, &mut lines)?;
        }
    }
    if continuing {
        // A `\` on the very last line: the logical line simply ends with the file.
        finish_line(path, start_line, quote, &buffer, &mut lines)?;
    }
    Ok(lines)
}

fn finish_line(
    path: &Path,
    start_line: u32,
    quote: Option<char>,
    buffer: &str,
    lines: &mut Vec<LogicalLine>,
) -> Result<(), ConfError> {
    if let Some(quote) = quote {
        return Err(ConfError::at(path, start_line, ErrorKind::UnterminatedQuote { quote }));
    }
    let text = buffer.trim();
    if !text.is_empty() {
        lines.push(LogicalLine { line: start_line, text: text.to_string() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<(u32, String)> {
        logical_lines(Path::new("test.conf"), text)
            .expect("test text is valid")
            .into_iter()
            .map(|line| (line.line, line.text))
            .collect()
    }

    fn error(text: &str) -> String {
        match logical_lines(Path::new("test.conf"), text) {
            Ok(lines) => panic!("expected an error, got {lines:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn comments_blank_lines_and_trimming() {
        // Goal: comments vanish, blank lines vanish, and every line keeps its own number.
        // Method: a text with full-line and trailing comments, blank lines and CRLF endings.
        let text = "# header\r\n\r\n  A=1  # trailing\r\n\t\nB=2\n";
        assert_eq!(lines(text), vec![(3, "A=1".to_string()), (5, "B=2".to_string())]);
    }

    #[test]
    fn continuation_joins_without_inserting_anything() {
        // Goal: a final backslash joins the next physical line exactly as LSF does, and the
        // logical line keeps the number of its first physical line.
        // Method: a continued list with the blank before the backslash, one without, and a
        // backslash that is not at the end of the line.
        let text = "X\nHOSTS = a \\\n   b\nY=ab\\\ncd\nZ=a\\b\n";
        assert_eq!(
            lines(text),
            vec![
                (1, "X".to_string()),
                (2, "HOSTS = a    b".to_string()),
                (4, "Y=abcd".to_string()),
                (6, "Z=a\\b".to_string()),
            ]
        );
    }

    #[test]
    fn a_comment_ends_a_continued_line() {
        // Goal: a backslash before a comment does not continue the line, and a comment line
        // inside a continuation ends it (LSF's behaviour).
        // Method: both cases in one text.
        let text = "A=1 \\ # no continuation\nB=2\nC=3 \\\n# ends here\nD=4\n";
        assert_eq!(
            lines(text),
            vec![
                (1, "A=1 \\".to_string()),
                (2, "B=2".to_string()),
                (3, "C=3".to_string()),
                (5, "D=4".to_string())
            ]
        );
    }

    #[test]
    fn quotes_protect_hashes_and_apostrophes_inside_words_do_not_open_quotes() {
        // Goal: `#` inside a quoted word is text; a `'` inside a word is an ordinary character;
        // `\#` is a literal `#`.
        // Method: three lines exercising each rule.
        let text = "A=\"x # y\" # comment\nDESCRIPTION = Bob's queue # comment\nB=\\#1\n";
        assert_eq!(
            lines(text),
            vec![
                (1, "A=\"x # y\"".to_string()),
                (2, "DESCRIPTION = Bob's queue".to_string()),
                (3, "B=#1".to_string()),
            ]
        );
    }

    #[test]
    fn a_quote_may_span_a_continuation() {
        // Goal: a quoted string continued with a backslash stays one quoted string.
        // Method: a double-quoted value split over two physical lines.
        assert_eq!(lines("A=\"x \\\ny\"\n"), vec![(1, "A=\"x y\"".to_string())]);
    }

    #[test]
    fn unterminated_quote_names_its_line() {
        // Goal: an unclosed quote is an error at the line where the logical line starts.
        // Method: a good line, then a line with an opening quote only.
        let message = error("A=1\nB='oops\n");
        assert_eq!(message, "test.conf:2: the ' quote that starts here is not closed");
    }

    #[test]
    fn last_line_counts_like_an_editor() {
        // Goal: "end of file" errors point at the last line, whether or not the file ends
        // with a newline.
        // Method: the same text with and without the final newline, and an empty text.
        assert_eq!(last_line("a\nb\n"), 2);
        assert_eq!(last_line("a\nb"), 2);
        assert_eq!(last_line(""), 1);
    }

    #[test]
    fn oversized_text_is_refused() {
        // Goal: the size limit holds for text handed in directly as well as for files.
        // Method: a text one byte over the limit.
        let limit = usize::try_from(CONF_FILE_BYTES_MAX).expect("the limit fits in usize");
        let text = "#".repeat(limit + 1);
        assert!(error(&text).contains("more than the limit"));
    }

    #[test]
    fn non_utf8_file_names_the_line() {
        // Goal: a file that is not UTF-8 is an error at the line of the first bad byte.
        // Method: write such a file to a temporary folder and read it.
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("lsf.conf");
        std::fs::write(&path, b"A=1\nB=\xff\n").expect("write the file");
        let error = read_text(&path).expect_err("not UTF-8");
        assert_eq!(error.line(), Some(2));
        assert!(error.to_string().ends_with("lsf.conf:2: the text is not valid UTF-8"));
    }

    #[test]
    fn absent_file_is_none() {
        // Goal: a missing file is reported as absent, not as an error, so callers choose.
        // Method: read a path inside an empty temporary folder.
        let dir = tempfile::tempdir().expect("a temporary folder");
        assert!(read_text(&dir.path().join("nope")).expect("absent is fine").is_none());
    }
}
