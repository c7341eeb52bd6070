//! The small markup the hand-written sections are written in, rendered to roff.
//!
//! A text is a sequence of blocks separated by blank lines:
//! - a plain paragraph (its lines are joined);
//! - an example, every line indented by four spaces, printed as it is (no filling);
//! - a list item per line starting with `- ` (continuation lines indented by two);
//! - a tagged paragraph: a first line starting with `@` is the tag (in bold), the
//!   following lines its text (`.TP`), as the OPTIONS and FILES entries of LSF's pages.
//!
//! Inside text, `` `words` `` are set in bold (commands, options, file names, keys); every
//! other character is escaped by the `roff` crate, so nothing written here can reach roff
//! as a request.

use roff::{Inline, Roff, bold, roman};

/// The inline pieces of `text`: `` `code` `` in bold, the rest roman.
pub fn inline(text: &str) -> Vec<Inline> {
    let mut out = Vec::new();
    for (idx, piece) in text.split('`').enumerate() {
        if piece.is_empty() {
            continue;
        }
        out.push(if idx % 2 == 1 { bold(piece) } else { roman(piece) });
    }
    out
}

/// Appends the blocks of `text` to `roff`. The first paragraph of a section needs no
/// `.PP` (the section heading starts one).
pub fn render(roff: &mut Roff, text: &str) {
    let mut first = true;
    for block in text.trim_matches('\n').split("\n\n") {
        let lines: Vec<&str> = block.lines().collect();
        if lines.is_empty() {
            continue;
        }
        if lines.iter().all(|line| line.starts_with("    ")) {
            if !first {
                roff.control("PP", []);
            }
            roff.control("RS", ["4"]).control("nf", []);
            for line in &lines {
                roff.text([roman(&line[4..])]);
            }
            roff.control("fi", []).control("RE", []);
        } else if lines[0].starts_with("- ") {
            let mut items: Vec<String> = Vec::new();
            for line in &lines {
                match line.strip_prefix("- ") {
                    Some(item) => items.push(item.to_owned()),
                    None => {
                        if let Some(last) = items.last_mut() {
                            last.push(' ');
                            last.push_str(line.trim());
                        }
                    }
                }
            }
            for item in items {
                roff.control("IP", ["\\(bu", "2"]);
                roff.text(inline(&item));
            }
        } else if let Some(tag) = lines[0].strip_prefix('@') {
            roff.control("TP", []);
            roff.text(inline_tag(tag.trim()));
            roff.text(inline(&join(&lines[1..])));
        } else {
            if !first {
                roff.control("PP", []);
            }
            roff.text(inline(&join(&lines)));
        }
        first = false;
    }
}

/// A tag: bold unless it says otherwise with backquotes.
fn inline_tag(tag: &str) -> Vec<Inline> {
    if tag.contains('`') { inline(tag) } else { vec![bold(tag)] }
}

/// Lines of a paragraph as one line.
fn join(lines: &[&str]) -> String {
    lines.iter().map(|line| line.trim()).collect::<Vec<_>>().join(" ")
}

/// A SEE ALSO line: `bjobs(1), bkill(1)`.
pub fn see_also(roff: &mut Roff, refs: &[&str]) {
    let mut inlines = Vec::new();
    for (idx, reference) in refs.iter().enumerate() {
        let (name, section) = reference.split_once('(').unwrap_or((reference, ""));
        inlines.push(bold(name));
        let sep = if idx + 1 < refs.len() { ", " } else { "" };
        inlines.push(roman(if section.is_empty() { sep.to_owned() } else { format!("({section}{sep}") }));
    }
    roff.text(inlines);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks() {
        let mut roff = Roff::new();
        render(
            &mut roff,
            "A `bsub` paragraph\nover two lines.\n\n    bsub -q normal sleep 10\n\n- one\n- two\n  more\n\n@LSF_ENVDIR\nThe folder.",
        );
        let text = roff.to_roff();
        assert_eq!(
            text,
            "A \\fBbsub\\fR paragraph over two lines.\n.PP\n.RS 4\n.nf\nbsub \\-q normal sleep 10\n.fi\n.RE\n\
             .IP \\(bu 2\none\n.IP \\(bu 2\ntwo more\n.TP\n\\fBLSF_ENVDIR\\fR\nThe folder.\n"
        );
    }

    #[test]
    fn references() {
        let mut roff = Roff::new();
        see_also(&mut roff, &["bjobs(1)", "lsf.conf(5)"]);
        assert_eq!(roff.to_roff(), "\\fBbjobs\\fR(1), \\fBlsf.conf\\fR(5)\n");
    }
}
