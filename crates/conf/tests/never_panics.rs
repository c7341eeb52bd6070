//! Property tests: no text, however malformed, panics the parser; it yields values or an error
//! that names the file (and a line no later than the file's last).

use std::path::Path;

use lava_conf::{
    ConfError, KeyValueFile, LimitUnit, LsbHosts, LsbParams, LsbQueues, LsbUsers, LsfCluster, LsfConf,
    LsfShared, SectionFile,
};
use proptest::prelude::*;

/// The line numbers of `text` run from 1 to this.
fn n_lines(text: &str) -> u32 {
    u32::try_from(text.split('\n').count()).unwrap_or(u32::MAX)
}

/// An error, if any, names `path` and a line inside the text.
fn check_error<T>(path: &Path, text: &str, result: Result<T, ConfError>) -> Result<(), TestCaseError> {
    if let Err(error) = result {
        prop_assert_eq!(error.path(), path);
        if let Some(line) = error.line() {
            prop_assert!(line >= 1 && line <= n_lines(text), "line {} outside 1..={}", line, n_lines(text));
        }
        prop_assert!(!error.to_string().is_empty());
    }
    Ok(())
}

/// Runs every parser on `text`.
fn parse_everything(text: &str) -> Result<(), TestCaseError> {
    let path = Path::new("f");
    check_error(path, text, KeyValueFile::parse(path, text))?;
    check_error(path, text, SectionFile::parse(path, text))?;
    check_error(path, text, LsfShared::parse(path, text))?;
    check_error(path, text, LsfCluster::parse(path, text))?;
    check_error(path, text, LsbQueues::parse(path, text, LimitUnit::Kb))?;
    check_error(path, text, LsbParams::parse(path, text))?;
    check_error(path, text, LsbHosts::parse(path, text))?;
    check_error(path, text, LsbUsers::parse(path, text))?;
    let envdir = Path::new("/e");
    check_error(&envdir.join("lsf.conf"), text, LsfConf::parse(envdir, text))?;
    Ok(())
}

/// Pieces of configuration text, so that random texts reach deep into the parsers instead of
/// stopping at the first character.
const PIECES: &[&str] = &[
    "Begin ",
    "End ",
    "begin ",
    "Queue",
    "Host",
    "HostGroup",
    "Parameters",
    "Cluster",
    "HostModel",
    "Resource",
    "User",
    "UserGroup",
    "ClusterAdmins",
    "\n",
    "\n",
    "\n",
    " ",
    " ",
    "\t",
    "=",
    " = ",
    "(",
    ")",
    "()",
    "\"",
    "'",
    "#",
    "\\",
    "\\\n",
    "-",
    "!",
    "/",
    ":",
    "+2",
    "QUEUE_NAME",
    "PRIORITY",
    "HOSTS",
    "USERS",
    "RUNLIMIT",
    "MEMLIMIT",
    "NICE",
    "DEFAULT",
    "HOSTNAME",
    "HOST_NAME",
    "MXJ",
    "JL/U",
    "r1m",
    "server",
    "model",
    "type",
    "RESOURCES",
    "LAVA_ADDR",
    "LAVA_SBD_PORT",
    "GROUP_NAME",
    "GROUP_MEMBER",
    "ClusterName",
    "MODELNAME",
    "CPUFACTOR",
    "RESOURCENAME",
    "TYPE",
    "USER_NAME",
    "MAX_JOBS",
    "DEFAULT_QUEUE",
    "MAX_JOBID",
    "MAX_JOB_ARRAY_SIZE",
    "LSB_MBD_PORT=",
    "LSF_LOG_MASK=",
    "Administrators",
    "all",
    "default",
    "normal",
    "h1",
    "0",
    "1",
    "30",
    "3.5/4.5",
    "-20",
    "99999999999999999999",
    "2GB",
    "1:30",
    "127.0.0.1",
    "::1",
    "y",
    "n",
    "é",
    "\r",
];

fn pieces() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..120).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        // Goal: any Unicode text gives values or a well-formed error, never a panic.
        // Method: run every parser on proptest's arbitrary strings.
        parse_everything(&text)?;
    }

    #[test]
    fn configuration_like_text_never_panics(text in pieces()) {
        // Goal: texts made of configuration keywords and punctuation, which get past the
        // syntax checks and into the typed layer, never panic either.
        // Method: random sequences of configuration pieces through every parser.
        parse_everything(&text)?;
    }

    #[test]
    fn mutated_default_files_never_panic(
        file_idx in 0usize..7,
        cuts in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(PIECES)), 1..6),
    ) {
        // Goal: small edits of the real default files (the likeliest mistakes) never panic.
        // Method: insert random pieces at random places in one of etc/'s files.
        let etc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../etc");
        let files = [
            "lsf.conf", "lsf.shared", "lsf.cluster.lavacore", "lsbatch/lavacore/configdir/lsb.queues",
            "lsbatch/lavacore/configdir/lsb.params", "lsbatch/lavacore/configdir/lsb.hosts",
            "lsbatch/lavacore/configdir/lsb.users",
        ];
        let mut text = std::fs::read_to_string(etc.join(files[file_idx])).expect("read an etc/ file");
        for (place, piece) in cuts {
            let mut idx = place.index(text.len() + 1);
            while !text.is_char_boundary(idx) {
                idx -= 1;
            }
            text.insert_str(idx, piece);
        }
        parse_everything(&text)?;
    }
}
