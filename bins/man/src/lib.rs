//! lava-man: the man pages of LavaCore's commands and daemons.
//!
//! Every page is made from the program's own argument definitions, so that it cannot
//! drift from what the program accepts:
//! - the clap programs (`mbatchd sbatchd lim mxfsd coordinator coordctl mxfsctl`): their
//!   `clap::Command` (`CommandFactory` of their `Args`) goes through `clap_mangen`, which
//!   writes NAME, SYNOPSIS, OPTIONS and VERSION; subcommands are listed with their options
//!   from the same definitions ([`clap_page`]);
//! - the LSF commands (`bsub bjobs ...`), whose LSF-style options (`-oo`, `-cwd`,
//!   `-noheader`, bundles such as `-aw`) clap cannot express: each page holds a table of its
//!   options ([`lsf::Opt`]); where the command scans its arguments with
//!   `lava_commands::args::scan`, the table is checked against the command's own `SPECS`
//!   (unit tests here), and for the commands that read their arguments by hand,
//!   `tests/man_pages.rs` runs the real binary with every option letter and checks that it
//!   accepts exactly the documented ones ([`lsf::Parser`]).
//!
//! The LSF-style sections (DESCRIPTION, OUTPUT, EXIT STATUS, ENVIRONMENT, FILES, SEE ALSO)
//! are written for LavaCore in [`pages`], in a small markup ([`markup`]) rendered to roff
//! with the `roff` crate (clap_mangen's own writer), which escapes every character roff
//! would otherwise read as a request.
//!
//! `lava-man --out DIR` writes `DIR/man1/NAME.1` (commands) and `DIR/man8/NAME.8`
//! (daemons); `scripts/install` runs it. `tests/man_pages.rs` renders every page with
//! groff and fails on any warning.

pub mod clap_page;
pub mod lsf;
pub mod markup;
pub mod pages;

/// One rendered man page.
#[derive(Clone, Debug)]
pub struct Page {
    /// The program's name (`bsub`).
    pub name: String,
    /// The manual section: 1 for commands, 8 for daemons.
    pub section: u8,
    /// The page's roff source.
    pub roff: String,
}

impl Page {
    /// The file name of the page (`bsub.1`).
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.name, self.section)
    }
}

/// The page title's source and manual fields (LSF's pages say "IBM Spectrum LSF").
pub const SOURCE: &str = concat!("LavaCore ", env!("CARGO_PKG_VERSION"));
/// The manual's name on each page's title line.
pub const MANUAL: &str = "LavaCore";

/// Every page: the LSF commands, the clap commands and the daemons, by name.
pub fn all() -> Vec<Page> {
    let mut out: Vec<Page> = pages::lsf_pages().iter().map(lsf::render).collect();
    out.extend(pages::clap_pages().iter().map(clap_page::render));
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsf::{Parser, table_specs};

    // Goal: a command that scans its arguments with `lava_commands::args::scan` has a page
    // naming exactly the options of its SPECS, each with the same arity: an option added to
    // the parser without its description, or a description of an option it lost, fails here.
    #[test]
    fn option_tables_match_the_parsers_specs() {
        let mut checked = 0;
        for page in pages::lsf_pages() {
            let Parser::Specs(specs) = page.parser else { continue };
            let mut parser: Vec<_> = specs.iter().map(|spec| (spec.name, spec.arity)).collect();
            parser.sort_by_key(|(name, _)| *name);
            assert_eq!(table_specs(&page), parser, "{}: the page's options are not the parser's", page.name);
            checked += 1;
        }
        assert!(checked >= 12, "only {checked} pages checked against SPECS");
    }

    // Goal: one page per program, each name once, in section 1 or 8.
    #[test]
    fn pages_are_unique() {
        let pages = all();
        let mut names: Vec<_> = pages.iter().map(|page| page.name.as_str()).collect();
        names.dedup();
        assert_eq!(names.len(), pages.len(), "a page is listed twice");
        assert!(pages.iter().all(|page| matches!(page.section, 1 | 8)));
        assert!(
            pages.iter().all(|page| page.roff.contains(".SH NAME") && page.roff.contains(".SH SYNOPSIS"))
        );
    }
}
