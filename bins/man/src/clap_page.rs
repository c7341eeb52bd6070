//! The pages of the programs whose command line is clap's (the daemons, `coordctl`,
//! `mxfsctl`): NAME, SYNOPSIS, OPTIONS and VERSION come from `clap_mangen` over the
//! program's own `clap::Command`; subcommands are listed here from the same definitions,
//! with their options; the other sections are the page's hand-written ones.

use clap::{Arg, Command};
use clap_mangen::Man;
use roff::{Roff, bold, italic, roman};

use crate::{Page, markup};

/// One page of a clap program.
#[derive(Clone, Debug)]
pub struct ClapPage {
    /// The program's command line, as it parses it.
    pub command: Command,
    /// 1 for a command, 8 for a daemon.
    pub section: u8,
    /// DESCRIPTION (after clap's one-line summary in NAME).
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

/// Writes one of clap_mangen's sections, without the roff preamble (it is written once, at
/// the top of the page).
fn section(render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut bytes = Vec::new();
    render(&mut bytes).expect("writing to a Vec cannot fail");
    let text = String::from_utf8(bytes).expect("clap_mangen writes UTF-8");
    let preamble = Roff::new().render();
    text.strip_prefix(&preamble).map(str::to_owned).unwrap_or(text)
}

/// How an option is named in a listing: `-d, --envdir <DIR>`.
fn arg_tag(arg: &Arg) -> Vec<roff::Inline> {
    let mut tag = Vec::new();
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    if names.is_empty() {
        let value =
            arg.get_value_names().and_then(|v| v.first()).map_or(arg.get_id().as_str(), |v| v.as_str());
        let value = if arg.is_required_set() { format!("<{value}>") } else { format!("[{value}]") };
        return vec![italic(value)];
    }
    tag.push(bold(names.join(", ")));
    if arg.get_action().takes_values() {
        let value =
            arg.get_value_names().and_then(|v| v.first()).map_or(arg.get_id().as_str(), |v| v.as_str());
        tag.push(roman(" "));
        tag.push(italic(format!("<{value}>")));
    }
    tag
}

/// The description of `arg`, with its default.
fn arg_help(arg: &Arg) -> String {
    let mut help = arg.get_help().map(|help| help.to_string()).unwrap_or_default();
    let defaults: Vec<String> =
        arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    if !defaults.is_empty() && arg.get_action().takes_values() {
        help.push_str(&format!(" [default: {}]", defaults.join(", ")));
    }
    help
}

/// The SUBCOMMANDS section: each visible subcommand with its arguments and options.
fn render_subcommands(roff: &mut Roff, command: &Command) {
    roff.control("SH", ["SUBCOMMANDS"]);
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        roff.control("TP", []);
        let mut tag = vec![bold(sub.get_name())];
        for arg in sub.get_positionals().filter(|arg| !arg.is_hide_set()) {
            tag.push(roman(" "));
            tag.extend(arg_tag(arg));
        }
        if sub.get_opts().any(|arg| !arg.is_hide_set() && !arg.is_global_set()) {
            tag.push(roman(" [options]"));
        }
        roff.text(tag);
        roff.text([roman(sub.get_about().map(|about| about.to_string()).unwrap_or_default())]);
        let args: Vec<&Arg> = sub
            .get_arguments()
            .filter(|arg| !arg.is_hide_set() && !arg.is_global_set())
            .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version"))
            .collect();
        if !args.is_empty() {
            roff.control("RS", []);
            for arg in args {
                roff.control("TP", []);
                roff.text(arg_tag(arg));
                roff.text([roman(arg_help(arg))]);
            }
            roff.control("RE", []);
        }
    }
}

/// Renders `page`.
pub fn render(page: &ClapPage) -> Page {
    let mut command = page.command.clone().disable_help_subcommand(true);
    command.build();
    let name = command.get_name().to_owned();
    let man = Man::new(command.clone())
        .title(name.to_uppercase())
        .section(page.section.to_string())
        .source(crate::SOURCE)
        .manual(crate::MANUAL);
    let mut text = Roff::new().render();
    text.push_str(&section(|w| man.render_title(w)));
    text.push_str(&section(|w| man.render_name_section(w)));
    text.push_str(&section(|w| man.render_synopsis_section(w)));

    let mut roff = Roff::new();
    roff.control("SH", ["DESCRIPTION"]);
    markup::render(&mut roff, page.description);
    text.push_str(&roff.to_roff_with_apostrophes());
    text.push_str(&section(|w| man.render_options_section(w)));

    let mut roff = Roff::new();
    if command.has_subcommands() {
        render_subcommands(&mut roff, &command);
    }
    for (title, body) in [
        ("OUTPUT", page.output),
        ("EXIT STATUS", page.exit_status),
        ("ENVIRONMENT", page.environment),
        ("FILES", page.files),
    ] {
        if !body.trim().is_empty() {
            roff.control("SH", [title]);
            markup::render(&mut roff, body);
        }
    }
    if !page.see_also.is_empty() {
        roff.control("SH", ["SEE ALSO"]);
        markup::see_also(&mut roff, page.see_also);
    }
    text.push_str(&roff.to_roff_with_apostrophes());
    text.push_str(&section(|w| man.render_version_section(w)));
    Page { name, section: page.section, roff: text }
}

/// Rendering a [`Roff`] after the page's preamble.
trait AfterPreamble {
    /// The lines, apostrophes handled as [`Roff::render`] handles them, without the preamble.
    fn to_roff_with_apostrophes(&self) -> String;
}

impl AfterPreamble for Roff {
    fn to_roff_with_apostrophes(&self) -> String {
        let preamble = Roff::new().render();
        let text = self.render();
        text.strip_prefix(&preamble).map(str::to_owned).unwrap_or(text)
    }
}

/// Every option name (`-d`, `--envdir`) of `command` and its visible subcommands, for the
/// tests that check each one is on the page.
pub fn option_names(command: &Command) -> Vec<String> {
    let mut command = command.clone().disable_help_subcommand(true);
    command.build();
    let mut names = Vec::new();
    let mut add = |cmd: &Command| {
        for arg in cmd.get_arguments().filter(|arg| !arg.is_hide_set()) {
            names.extend(arg.get_short().map(|short| format!("-{short}")));
            names.extend(arg.get_long().map(|long| format!("--{long}")));
        }
    };
    add(&command);
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        add(sub);
    }
    names.sort();
    names.dedup();
    names
}
