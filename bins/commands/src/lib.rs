//! lava-commands: the LSF user commands `bsub`, `bjobs`, `bkill`, `bstop` and
//! `bresume`, as a library of blocking functions that thin `main`s call.
//!
//! # What it owns
//! - The command lines: LSF's option syntax (getopt letters, the multi-letter
//!   options `-oo -eo -cwd -noheader`, `#BSUB` lines in a job script), its
//!   messages and its exit codes (0 on success, 255 on any failure, as LSF's
//!   `exit(-1)`). What each command prints, and why, is documented in its module.
//! - The client side of the command ↔ mbatchd protocol ([`client`]): find the
//!   master through `LSF_ENVDIR`, get a single-use credential from the local
//!   sbatchd's Unix socket, send one framed XDR request, retry while mbatchd is
//!   unreachable or restarting with the *same* request id so that a retry is
//!   recognised rather than repeated.
//! - The `bjobs` layouts ([`format`](mod@format)): the classic LSF columns and widths,
//!   `-w`, `-p`, `-l` (wrapped at 80 columns with the 21-space indent) and
//!   `-o` with every field of LSF 10.1's list, as pure functions of the job list and a time zone.
//!
//! # What it never does
//! - No async runtime, no threads, no logging framework: a command starts,
//!   makes one or two requests with blocking `std` sockets, prints, and exits.
//!   Starting fast matters more than anything else here (a `bsub` should cost a
//!   few milliseconds, scripts call it in loops).
//! - No unsafe code: the caller's uid and umask come from `/proc/self/status`,
//!   the host name from `/proc/sys/kernel/hostname`, the home directory from
//!   `$HOME` or `/etc/passwd`.
//! - It never decides anything mbatchd decides (queues, permissions, the
//!   default queue): it sends what the user asked for and prints the answer.
//! - It never trusts itself for identity: the uid that counts is the one the
//!   local sbatchd vouches for in the credential.
//!
//! # Map
//! - [`bsub`], [`bjobs`], [`bkill`] (with [`bstop`] and [`bresume`]): one module
//!   per command, each with a `main` returning the process exit code.
//! - [`bpeek`]: a running job's output so far (JOB_QUERY, then the output file).
//! - [`bwait`]: wait until a dependency condition holds (WAIT_QUERY, asked again).
//! - [`blaunch`]: tasks of a parallel job on its hosts (a grant from the local sbatchd,
//!   TASK_START to the task host's sbatchd).
//! - [`bhosts`]: the execution hosts as mbatchd sees them (HOST_QUERY).
//! - [`bqueues`]: the queues as mbatchd sees them (QUEUE_QUERY).
//! - [`badmin`]: `badmin showstatus`, mbatchd's status and counters (STATUS_QUERY),
//!   `reconfig`, `ckconfig` (the configuration files checked locally), and the
//!   administrator's orders (`hclose`, `qclose`, `mbdrestart`, …).
//! - [`bmod`], [`bswitch`], [`btop`] (with [`bbot`]): change pending jobs
//!   (JOB_CONTROL, printed by [`control`]); [`brequeue`] runs jobs again
//!   under their ids, killing running ones first (JOB_CONTROL too); [`brun`]
//!   forces a pending job to run, and `bkill -r` ends a job at once (JOB_CONTROL). [`bhist`]: jobs' histories from the log.
//! - [`lsadmin`]: `lsadmin ckconfig` and `lsadmin showstatus`, a lim's status and counters.
//! - [`bparams`]: lsb.params' values in effect.
//! - [`lsclusters`]: the cluster's name, status, master, administrator and host counts.
//! - [`busers`]: users' job slot counts (JOB_QUERY) and lsb.users' limits;
//!   [`groups`]: `bugroup` and `bmgroup`; [`lsinfo`]: lsf.shared's resources, types, models.
//! - [`showconf`]: `badmin showconf mbd` and `lsadmin showconf lim`, the configuration in effect.
//! - [`bsubk`]: `bsub -K`, waiting for the job; [`begin`]: `bsub -b` times;
//!   [`envspec`]: `bsub -env`.
//! - [`args`]: LSF-style option scanning shared by the commands.
//! - [`jobid`]: `ID` and `ID[INDEX]` job references. [`signal`]: signal names.
//! - [`client`]: configuration, credential, framing, retry.
//! - [`format`](mod@format): `bjobs` output; [`fields`]: the fields of `bjobs -o`. [`host`]: facts about the calling process.
//! - [`term`]: printing with broken-pipe tolerance, exit codes, the version line.

#![deny(missing_docs)]

pub mod args;
pub mod bacct;
pub mod badmin;
pub mod bbot;
pub mod begin;
pub mod bhist;
pub mod bhosts;
pub mod bjobs;
pub mod bkill;
pub mod blaunch;
pub mod bmod;
pub mod bparams;
pub mod bpeek;
pub mod bqueues;
pub mod brequeue;
pub mod brun;
pub mod bsub;
pub mod bsubk;
pub mod bswitch;
pub mod btop;
pub mod busers;
pub mod bwait;
pub mod client;
pub mod control;
pub mod envspec;
pub mod fields;
pub mod format;
pub mod groups;
pub mod host;
pub mod interactive;
pub mod jobid;
pub mod lim;
pub mod lsadmin;
pub mod lsclusters;
pub mod lsinfo;
pub mod showconf;
pub mod signal;
pub mod term;

/// `bstop`: suspend jobs (LSF's SIGSTOP action); see [`bkill`] for the shared logic.
pub mod bstop {
    use std::process::ExitCode;

    /// Runs `bstop` with this process's arguments.
    pub fn main() -> ExitCode {
        crate::bkill::run_main(crate::bkill::Mode::Stop)
    }
}

/// `bresume`: resume suspended jobs (LSF's SIGCONT action); see [`bkill`].
pub mod bresume {
    use std::process::ExitCode;

    /// Runs `bresume` with this process's arguments.
    pub fn main() -> ExitCode {
        crate::bkill::run_main(crate::bkill::Mode::Resume)
    }
}
