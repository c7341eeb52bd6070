//! The man pages (lava-man): one for every program the workspace builds, each rendered by
//! groff without a warning, each naming every option its program accepts; for the commands
//! that read their arguments by hand, the real binary is run with every option letter and
//! must accept exactly the documented ones.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use lava_man::lsf::{Kind, LsfPage, Opt, Parser};

/// The `[[bin]]` names of the root manifest.
fn workspace_bins() -> BTreeSet<String> {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).expect("manifest");
    let mut names = BTreeSet::new();
    let mut in_bin = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(value) = line.strip_prefix("name = ") {
            names.insert(value.trim_matches('"').to_owned());
        }
    }
    names
}

/// groff, or a failure saying how to get it (`.ci/run` installs it).
fn groff(args: &[&str], page: &Path) -> (bool, String, String) {
    let output =
        Command::new("groff").args(args).arg(page).stdin(Stdio::null()).output().unwrap_or_else(|error| {
            panic!("groff: {error} (apt-get install groff-base; .ci/run installs it)")
        });
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Writes every page with the real `lava-man --out` and returns the folder.
fn write_pages(dir: &Path) {
    let status =
        Command::new(env!("CARGO_BIN_EXE_lava-man")).arg("--out").arg(dir).status().expect("lava-man");
    assert!(status.success(), "lava-man --out failed");
}

fn page_path(dir: &Path, name: &str, section: u8) -> PathBuf {
    dir.join(format!("man{section}")).join(format!("{name}.{section}"))
}

/// The page as plain text: no hyphenation, lines long enough that no tag is broken.
fn plain_text(path: &Path) -> String {
    let (ok, text, errors) = groff(&["-man", "-Tascii", "-P-c", "-P-b", "-P-u", "-rHY=0", "-rLL=250n"], path);
    assert!(ok, "{}: groff failed: {errors}", path.display());
    text
}

/// The option words on tag lines (`-q queue_name`, `-d, --envdir <DIR>`).
fn tags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim_start).filter(|line| line.starts_with('-')) {
        for word in line.split_whitespace() {
            let word = word.trim_end_matches([',', '.']);
            if word.starts_with('-') {
                out.insert(word.to_owned());
            }
        }
    }
    out
}

// Goal: every program the workspace builds has its page (lava-bench and lava-man are tools
// of the repository, not installed), commands in man1, daemons and administrators' programs
// in man8, and every page renders with groff's every warning on without one.
#[test]
fn every_program_has_a_page_that_renders_without_warnings() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_pages(dir.path());
    let mut expected = workspace_bins();
    expected.remove("lava-bench");
    expected.remove("lava-man");
    let pages: BTreeSet<String> = lava_man::all().into_iter().map(|page| page.name).collect();
    assert_eq!(pages, expected, "the pages are not the workspace's programs (bins/man/src/pages)");
    for page in lava_man::all() {
        let path = page_path(dir.path(), &page.name, page.section);
        assert!(path.is_file(), "{} not written", path.display());
        let (ok, _, warnings) = groff(&["-man", "-Tutf8", "-ww", "-z"], &path);
        assert!(ok && warnings.is_empty(), "{}: groff warns:\n{warnings}", path.display());
    }
}

// Goal: each option a program accepts is an entry of its page's OPTIONS (or, for a
// subcommand's, of its SUBCOMMANDS entry); LSF options a command names only to refuse them
// are listed as such.
#[test]
fn every_option_is_on_its_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_pages(dir.path());
    for page in lava_man::pages::lsf_pages() {
        let text = plain_text(&page_path(dir.path(), page.name, page.section));
        let on_page = tags(&text);
        let options = page.options.iter().chain(page.subcommands.iter().flat_map(|sub| sub.options));
        for opt in options {
            let word = format!("-{}", opt.name);
            match opt.kind {
                Kind::Supported | Kind::Ignored => {
                    assert!(on_page.contains(&word), "{}: {word} is not on the page", page.name)
                }
                Kind::Refused => assert!(
                    text.split_whitespace().any(|w| w.trim_end_matches('.') == word),
                    "{}: refused {word} is not listed",
                    page.name
                ),
                Kind::NotThisCommand => {}
            }
        }
    }
    for clap_page in lava_man::pages::clap_pages() {
        let name = clap_page.command.get_name().to_owned();
        let text = plain_text(&page_path(dir.path(), &name, clap_page.section));
        let on_page = tags(&text);
        for word in lava_man::clap_page::option_names(&clap_page.command) {
            assert!(on_page.contains(&word), "{name}: {word} is not on the page");
        }
    }
}

/// Runs `program args` with no cluster to talk to, and whether it refused an option.
fn refused(program: &str, args: &[&str], envdir: &Path) -> bool {
    let bin = workspace_bin_path(program);
    let output = Command::new(bin)
        .args(args)
        .env("LSF_ENVDIR", envdir)
        .env("LAVA_RETRY_SECS", "0")
        .env_remove("LSB_NTRIES")
        .stdin(Stdio::null())
        .output()
        .expect("run the command");
    let stderr = String::from_utf8_lossy(&output.stderr);
    ["illegal option", "unknown option", "Invalid command", "Usage: lsadmin limlock"]
        .iter()
        .any(|marker| stderr.contains(marker))
}

fn workspace_bin_path(program: &str) -> PathBuf {
    // Every command sits beside lava-man in the target folder.
    Path::new(env!("CARGO_BIN_EXE_lava-man")).with_file_name(program)
}

/// The option letters `program` accepts after `prefix`: `-X` alone, or followed by a value.
fn accepted_letters(program: &str, prefix: &[&str], envdir: &Path) -> BTreeSet<String> {
    let letters: Vec<char> = ('a'..='z').chain('A'..='Z').collect();
    let accepted = std::sync::Mutex::new(BTreeSet::new());
    std::thread::scope(|scope| {
        for chunk in letters.chunks(13) {
            let accepted = &accepted;
            scope.spawn(move || {
                for letter in chunk {
                    let flag = format!("-{letter}");
                    let mut alone = prefix.to_vec();
                    alone.push(&flag);
                    let mut with_value = alone.clone();
                    with_value.push("1");
                    if !refused(program, &alone, envdir) || !refused(program, &with_value, envdir) {
                        accepted.lock().expect("lock").insert(letter.to_string());
                    }
                }
            });
        }
    });
    accepted.into_inner().expect("lock")
}

fn documented(options: &[Opt]) -> BTreeSet<String> {
    options.iter().filter(|opt| opt.kind != Kind::NotThisCommand).map(|opt| opt.name.to_owned()).collect()
}

// Goal: the commands that read their arguments by hand (bhosts, badmin, lsload, ...) accept
// exactly the option letters their pages document, at the top level and after each
// subcommand that has options; lsid and lshosts ignore their arguments, as their pages say;
// lava-shepherd knows each flag its page names and no other.
#[test]
fn hand_parsed_commands_accept_exactly_the_documented_options() {
    let envdir = tempfile::tempdir().expect("tempdir");
    let pages: Vec<LsfPage> = lava_man::pages::lsf_pages();
    let mut checked = 0;
    for page in &pages {
        match page.parser {
            Parser::Hand => {
                let accepted = accepted_letters(page.name, &[], envdir.path());
                assert_eq!(
                    accepted,
                    documented(page.options),
                    "{}: accepted letters differ from the page's",
                    page.name
                );
                for sub in page.subcommands.iter().filter(|sub| !sub.options.is_empty()) {
                    let accepted = accepted_letters(page.name, &[sub.name], envdir.path());
                    assert_eq!(
                        accepted,
                        documented(sub.options),
                        "{} {}: accepted letters differ",
                        page.name,
                        sub.name
                    );
                }
                checked += 1;
            }
            Parser::IgnoresArguments => {
                assert!(page.options.is_empty(), "{}: documents options it ignores", page.name);
                assert!(!refused(page.name, &["-Z"], envdir.path()), "{} now reads its options", page.name);
            }
            Parser::Internal => {
                for opt in page.options {
                    let flag = format!("-{}", opt.name);
                    // The zygote's socket is a flag of the zygote's mode only.
                    let args: Vec<&str> = if flag == lava_sbatchd::zygote::SOCKET_FD_FLAG {
                        vec![lava_sbatchd::zygote::ZYGOTE_FLAG, &flag]
                    } else {
                        vec![&flag]
                    };
                    assert!(!refused(page.name, &args, envdir.path()), "{}: {flag} is not known", page.name);
                }
                assert!(refused(page.name, &["--no-such-flag"], envdir.path()));
            }
            Parser::Specs(_) => {}
        }
    }
    assert!(checked >= 6, "only {checked} hand-parsed commands probed");
}
