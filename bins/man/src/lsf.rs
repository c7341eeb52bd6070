//! The pages of the LSF commands, whose options are LSF's (`-q queue`, `-oo file`, `-cwd
//! dir`, `-noheader`, bundles such as `-aw`), not clap's: a table of options per page,
//! kept in step with the command's parser by tests ([`Parser`]).

use lava_commands::args::{Arity, OptSpec};
use roff::{Roff, bold, italic, roman};

use crate::{Page, markup};

/// What an option does in LavaCore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Implemented.
    Supported,
    /// Accepted and ignored, with a warning on standard error.
    Ignored,
    /// An LSF option the command names and refuses (`option -X is not supported by
    /// LavaCore`), so that a script learns why.
    Refused,
    /// In the specs the command shares with another (`bstop` scans `bkill`'s) but refused
    /// by this one as an illegal option: not on the page.
    NotThisCommand,
}

/// One option: its name without the leading dash, the name of its value (none for a
/// flag), what LavaCore does with it, and its description in [`markup`].
#[derive(Clone, Copy, Debug)]
pub struct Opt {
    /// `q`, `oo`, `noheader`; `-lock-fd` for the long `--lock-fd`.
    pub name: &'static str,
    /// `queue_name`; `None` for a flag.
    pub value: Option<&'static str>,
    /// Supported, ignored or refused.
    pub kind: Kind,
    /// The description.
    pub help: &'static str,
}

impl Opt {
    /// A supported flag.
    pub const fn flag(name: &'static str, help: &'static str) -> Opt {
        Opt { name, value: None, kind: Kind::Supported, help }
    }

    /// A supported option taking a value.
    pub const fn value(name: &'static str, value: &'static str, help: &'static str) -> Opt {
        Opt { name, value: Some(value), kind: Kind::Supported, help }
    }

    /// This option with another kind.
    pub const fn kind(self, kind: Kind) -> Opt {
        Opt { kind, ..self }
    }

    /// The arity `lava_commands::args` gives it.
    pub fn arity(&self) -> Arity {
        if self.value.is_some() { Arity::Value } else { Arity::Flag }
    }
}

/// A subcommand (`badmin reconfig`, `lsadmin limlock`).
#[derive(Clone, Copy, Debug)]
pub struct Sub {
    /// Its name.
    pub name: &'static str,
    /// What follows the name in the synopsis (`[host_name ...]`).
    pub args: &'static str,
    /// Its own options.
    pub options: &'static [Opt],
    /// Its description.
    pub help: &'static str,
}

/// How the command reads its arguments, which decides how a test checks the table.
#[derive(Clone, Copy, Debug)]
pub enum Parser {
    /// `lava_commands::args::scan` over these specs: the table must name exactly these
    /// options with the same arity (unit test).
    Specs(&'static [OptSpec]),
    /// Read by hand: `tests/man_pages.rs` runs the command with every option letter, at
    /// the top level and after each subcommand, and checks that it accepts exactly the
    /// documented ones.
    Hand,
    /// The command ignores its arguments (`lsid`, `lshosts`): nothing to document but that.
    IgnoresArguments,
    /// A program only another LavaCore program starts (`lava-shepherd`); its flags are the
    /// constants its parser matches, named in the table.
    Internal,
}

/// One LSF-style page.
#[derive(Clone, Debug)]
pub struct LsfPage {
    /// The program's name.
    pub name: &'static str,
    /// 1 for a command, 8 for a daemon or an administrator's program.
    pub section: u8,
    /// The NAME line's text after the dash.
    pub summary: &'static str,
    /// The synopsis, as the command's usage prints it (`Usage: ` is dropped).
    pub synopsis: String,
    /// How the options are read.
    pub parser: Parser,
    /// The options.
    pub options: &'static [Opt],
    /// The subcommands, if any.
    pub subcommands: &'static [Sub],
    /// DESCRIPTION.
    pub description: &'static str,
    /// OUTPUT (empty: none).
    pub output: &'static str,
    /// EXIT STATUS.
    pub exit_status: &'static str,
    /// ENVIRONMENT.
    pub environment: &'static str,
    /// FILES.
    pub files: &'static str,
    /// SEE ALSO, as `name(section)`.
    pub see_also: &'static [&'static str],
}

/// `-name`, bold, and its value in italics.
fn option_tag(opt: &Opt) -> Vec<roff::Inline> {
    let mut tag = vec![bold(format!("-{}", opt.name))];
    if let Some(value) = opt.value {
        tag.push(roman(" "));
        tag.push(italic(value));
    }
    tag
}

/// The `.TP` entries of `options`, the refused ones left out.
fn render_options(roff: &mut Roff, options: &[Opt]) {
    for opt in options.iter().filter(|opt| matches!(opt.kind, Kind::Supported | Kind::Ignored)) {
        roff.control("TP", []);
        roff.text(option_tag(opt));
        markup::render(roff, opt.help);
        if opt.kind == Kind::Ignored {
            roff.text([roman("Accepted for LSF's sake and ignored, with a warning on standard error.")]);
        }
    }
    let refused: Vec<String> =
        options.iter().filter(|opt| opt.kind == Kind::Refused).map(|opt| format!("-{}", opt.name)).collect();
    if !refused.is_empty() {
        roff.control("PP", []);
        roff.text([
            roman("LSF options LavaCore does not implement; each is refused with "),
            bold("option -X is not supported by LavaCore"),
            roman(" and exit status 255: "),
            bold(refused.join(" ")),
            roman("."),
        ]);
    }
}

/// Renders `page`.
pub fn render(page: &LsfPage) -> Page {
    let mut roff = Roff::new();
    roff.control(
        "TH",
        [page.name.to_uppercase().as_str(), &page.section.to_string(), "", crate::SOURCE, crate::MANUAL],
    );
    roff.control("SH", ["NAME"]);
    roff.text([roman(format!("{} - {}", page.name, page.summary))]);

    roff.control("SH", ["SYNOPSIS"]);
    roff.control("nf", []);
    for line in synopsis_lines(&page.synopsis) {
        match line.strip_prefix(page.name) {
            Some(rest) => roff.text([bold(page.name), roman(rest)]),
            None => roff.text([roman(line)]),
        };
    }
    roff.control("fi", []);

    roff.control("SH", ["DESCRIPTION"]);
    markup::render(&mut roff, page.description);

    if !page.options.is_empty() {
        roff.control("SH", ["OPTIONS"]);
        render_options(&mut roff, page.options);
    }
    if !page.subcommands.is_empty() {
        roff.control("SH", ["SUBCOMMANDS"]);
        for sub in page.subcommands {
            roff.control("TP", []);
            let mut tag = vec![bold(sub.name)];
            if !sub.args.is_empty() {
                tag.push(roman(format!(" {}", sub.args)));
            }
            roff.text(tag);
            markup::render(&mut roff, sub.help);
            if !sub.options.is_empty() {
                roff.control("RS", []);
                render_options(&mut roff, sub.options);
                roff.control("RE", []);
            }
        }
    }
    for (title, text) in [
        ("OUTPUT", page.output),
        ("EXIT STATUS", page.exit_status),
        ("ENVIRONMENT", page.environment),
        ("FILES", page.files),
    ] {
        if !text.trim().is_empty() {
            roff.control("SH", [title]);
            markup::render(&mut roff, text);
        }
    }
    if !page.see_also.is_empty() {
        roff.control("SH", ["SEE ALSO"]);
        markup::see_also(&mut roff, page.see_also);
    }
    Page { name: page.name.to_owned(), section: page.section, roff: roff.render() }
}

/// The synopsis lines: `Usage: ` dropped, and the continuation lines' alignment kept
/// relative to the command's name.
fn synopsis_lines(usage: &str) -> Vec<&str> {
    let indent = if usage.starts_with("Usage: ") { "Usage: ".len() } else { 0 };
    usage
        .trim_end()
        .lines()
        .map(|line| {
            let cut = line.len() - line.trim_start().len();
            if line.starts_with("Usage: ") { &line[indent..] } else { &line[cut.min(indent)..] }
        })
        .collect()
}

/// The options a command's parser knows by the table: (name, arity), refused ones included.
pub fn table_specs(page: &LsfPage) -> Vec<(&'static str, Arity)> {
    let mut specs: Vec<_> = page.options.iter().map(|opt| (opt.name, opt.arity())).collect();
    specs.sort_by_key(|(name, _)| *name);
    specs
}
