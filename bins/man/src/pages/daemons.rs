//! The daemons (mbatchd, sbatchd, lim, mxfsd, coordinator), their clients coordctl and
//! mxfsctl, and lava-shepherd.

use clap::CommandFactory;
use lava_sbatchd::{peek, shepherd, tasks, zygote};

use crate::clap_page::ClapPage;
use crate::lsf::{Kind, LsfPage, Opt, Parser};

const DAEMON_EXIT: &str = "\
@0
The daemon stopped as asked (SIGTERM, SIGINT).

@non-zero
It could not start (a configuration that does not load, a port in use, a cluster key
missing or readable by others) or had to stop (a failed write or fsync of its durable
state); the reason is logged.";

const DAEMON_ENV: &str = "\
@LSF_ENVDIR
The folder holding `lsf.conf` when `--envdir` is not given (default `/etc`).

@LAVA_HOST
This host's name as `lsf.cluster` lists it, when it is not the short host name.

@RUST_LOG
A log filter (`info`, `lava_mbatchd=debug`, ...) that overrides lsf.conf's `LSF_LOG_MASK`.

@NOTIFY_SOCKET
Set by systemd: the daemon reports `READY=1`, `STOPPING=1` and its watchdog there, and logs
to the journal when its standard error is the journal.";

const CONF_FILES: &str = "\
@$LSF_ENVDIR/lsf.conf, lsf.shared, lsf.cluster.<cluster>
The cluster's configuration: hosts, ports, folders.

@$LSF_ENVDIR/lava.cluster.key
The cluster key (`LAVA_CLUSTER_KEY_FILE`) that seals every frame between daemons; mode 0600,
the same on every host.";

fn daemon(
    command: clap::Command,
    description: &'static str,
    files: &'static str,
    see_also: &'static [&'static str],
) -> ClapPage {
    ClapPage {
        command,
        section: 8,
        description,
        output: "",
        exit_status: DAEMON_EXIT,
        environment: DAEMON_ENV,
        files,
        see_also,
    }
}

/// The clap programs' pages.
pub fn pages() -> Vec<ClapPage> {
    vec![
        daemon(
            lava_mbatchd::Args::command(),
            "\
The master batch daemon, run on the master host (the first server host of
`lsf.cluster.<cluster>`): it accepts jobs from `bsub`, schedules them onto the hosts, has
each host's sbatchd run them, and answers every batch command. Its event log `lsb.events` is
the truth: every change is appended and made durable before it is acknowledged, and a
restart replays the log (from the newest snapshot) to rebuild every job.

Under systemd it runs as `lavacore-mbatchd.service` with `--foreground`. `badmin reconfig`
makes it read the batch configuration again; `badmin mbdrestart` restarts it from its log.",
            "\
@$LSF_ENVDIR/lsf.conf, lsf.shared, lsf.cluster.<cluster>, lsbatch/<cluster>/configdir/lsb.*
The configuration; `lsb.params`, `lsb.queues`, `lsb.hosts` and `lsb.users` are the batch part.

@$LSB_SHAREDIR/<cluster>/logdir/lsb.events.NNNNNN, lsb.events.snapshot.*, lsb.events.lock
The event log (binary) and its snapshots.

@$LSB_SHAREDIR/<cluster>/logdir/lsb.events, lsb.events.1, ..., lsb.events.state
The event log's text view in LSF's format, for tools that read it; written once events
are durable, never read back (docs/operations.md).

@$LSB_SHAREDIR/<cluster>/logdir/lsb.acct, lsb.acct.1, ...
The accounting log, one JOB_FINISH record per finished job.

@$LSF_LOGDIR/mbatchd.log.<host>
The log when started without `--foreground` and `--log-file`.

@$LSF_ENVDIR/lava.cluster.key
The cluster key, mode 0600, the same on every host.",
            &["sbatchd(8)", "lim(8)", "badmin(8)", "bsub(1)", "bjobs(1)"],
        ),
        daemon(
            lava_sbatchd::Args::command(),
            "\
The batch daemon of every host that runs jobs, and of every host where users type commands:
it runs the jobs mbatchd sends it as their users, each under its own `lava-shepherd`,
reports their ends, and gives the local commands their credentials on its Unix socket
(`LAVA_CMD_SOCKET`), vouching for the caller's uid as the kernel tells it. A job survives a
restart of sbatchd: its record is on disk and the shepherd's `pid` and `exit` files say how
it went.",
            "\
@$LSF_ENVDIR/lsf.conf, lsf.shared, lsf.cluster.<cluster>
The configuration.

@$LSB_SHAREDIR/<cluster>/sbatchd/<host>/
The job records and the jobs' folders.

@$LAVA_CMD_SOCKET
The Unix socket the commands get their credentials from.

@$LSF_ENVDIR/lava.cluster.key
The cluster key, mode 0600, the same on every host.",
            &["mbatchd(8)", "lava-shepherd(8)", "bsub(1)", "bpeek(1)"],
        ),
        daemon(
            lava_lim::Args::command(),
            "\
The load information manager, one per host. Each lim samples its host's load (from /proc)
and reports it to the master lim, the first host of `lsf.cluster.<cluster>`, over UDP; the
master answers `lsload`, `lshosts`, `lsid` and `lsclusters` on its TCP port and tells
mbatchd which hosts are unavailable or busy. It keeps nothing on disk.",
            CONF_FILES,
            &["lsload(1)", "lshosts(1)", "lsid(1)", "lsadmin(8)", "mbatchd(8)"],
        ),
        daemon(
            lava_mxfsd::Args::command(),
            "\
The distributed lock manager, one per host that takes locks: the lowest live node is the
master of the lock table, the others renew their leases with it, and a survivor takes over
when the master dies, rebuilding the table from the nodes left. Local clients (`mxfsctl`)
talk to it over a Unix socket. Its epoch, which never goes back, is kept on disk.",
            "\
@$LSF_ENVDIR/lsf.conf, lsf.shared, lsf.cluster.<cluster>
The configuration (`LAVA_MXFSD_*` keys).

@$LAVA_MXFSD_SOCKET
The local clients' Unix socket.

@$LSF_ENVDIR/lava.cluster.key
The cluster key, mode 0600, the same on every host.",
            &["mxfsctl(1)", "lim(8)"],
        ),
        daemon(
            lava_coordinator::Args::command(),
            "\
The task coordinator, run on the master host: it keeps a queue of tasks that workers lease,
heartbeat and complete (`coordctl`), with every change appended to its write-ahead log and
made durable before it answers. A lease that is not renewed expires and its task is leased
again.",
            "\
@$LSF_ENVDIR/lsf.conf, lsf.shared, lsf.cluster.<cluster>
The configuration (`LAVA_COORD_PORT`, the master host).

@$LSB_SHAREDIR/<cluster>/coordinator/
The write-ahead log and its snapshots.

@$LSF_ENVDIR/lava.cluster.key
The cluster key, mode 0600, the same on every host.",
            &["coordctl(1)", "mbatchd(8)"],
        ),
        ClapPage {
            command: lava_coordinator::ctl::CtlArgs::command(),
            section: 1,
            description: "\
The command-line client of the coordinator: submits tasks, leases them for a worker,
heartbeats, completes or fails them under their lease, and shows the state. Each connection
carries a credential from the local sbatchd, so any user of a cluster host may run it.
`submit` sends its task under a submission id (`--id`, else one chosen at random) and, while
no answer comes, sends it again under the same id, to whichever master candidate leads:
the coordinator answers a repeated id with the task the first attempt created, so the task
is created once.",
            output: "\
`submit` prints the task id (and, on standard error, a note when the id had already
created it); `lease` a `TASK LEASE EXPIRES_AT_MS` line then the payload's
bytes unchanged; `heartbeat` the new expiry (milliseconds since the epoch); `status` the
counts by state (or one task), then `Counters:`.",
            exit_status: "\
@0
Success.

@1
The coordinator refused the request or could not be reached; the reason is on standard
error.

@3
`lease` got no task within `--wait`.",
            environment: "\
@LSF_ENVDIR
The folder holding `lsf.conf` when `--envdir` is not given (default `/etc`).

@LAVA_RETRY_SECS
How long `submit` keeps sending its submission again while no answer comes, in seconds
(default 60; 0: one attempt).",
            files: "\
@$LSF_ENVDIR/lsf.conf
Where the coordinator listens, and the local sbatchd's socket (`LAVA_CMD_SOCKET`).",
            see_also: &["coordinator(8)", "sbatchd(8)"],
        },
        ClapPage {
            command: lava_mxfsd::ctl::CtlArgs::command(),
            section: 1,
            description: "\
The command-line client of mxfsd. `lock` takes a lock, runs the command while holding it
(like flock(1)), releases it and exits with the command's exit code; the lock is not revoked
while the command runs, so waiters wait for it. `status` and `locks` show the lock manager's
state.",
            output: "\
`status`: the master, this node, epochs, leases, the peers' liveness and the counters;
`locks`: holders and waiters with their modes.",
            exit_status: "\
@0
Success.

@1
The lock could not be had (the command was not run), or mxfsd refused or could not be
reached.

@other
With `lock`, the command's exit code (128 + the signal number when it was killed).",
            environment: "\
@LSF_ENVDIR
The folder holding `lsf.conf` when `--envdir` is not given (default `/etc`).",
            files: "\
@$LAVA_MXFSD_SOCKET
mxfsd's client socket, unless `--socket` names another.",
            see_also: &["mxfsd(8)"],
        },
    ]
}

/// lava-shepherd's page: not a user's program, documented for the administrator who sees it
/// in `ps`.
pub fn shepherd() -> LsfPage {
    LsfPage {
        name: "lava-shepherd",
        section: 8,
        summary: "the per-job shepherd of sbatchd",
        synopsis: format!(
            "lava-shepherd {zygote} {socket} fd state_root\n\
             lava-shepherd {peek} uid gid user offset path\n\
             lava-shepherd {task}\n\
             lava-shepherd {lock} fd {plan} fd [{notify} fd] [{go} fd] state_dir",
            zygote = zygote::ZYGOTE_FLAG,
            socket = zygote::SOCKET_FD_FLAG,
            peek = peek::READER_FLAG,
            task = tasks::TASK_FLAG,
            lock = shepherd::LOCK_FD_FLAG,
            plan = shepherd::PLAN_FD_FLAG,
            notify = shepherd::NOTIFY_FD_FLAG,
            go = shepherd::GO_FD_FLAG,
        ),
        parser: Parser::Internal,
        options: shepherd_options(),
        subcommands: &[],
        description: "\
Only sbatchd starts this program, from its own folder (the two are installed side by side).
With `--zygote` it is the small single-threaded process each sbatchd keeps to fork one
shepherd per job; a shepherd makes the job a session of its own, runs it as its user, and
writes the job's `pid` and `exit` files in the job's state folder, which sbatchd reads back
after a restart. With `--peek` it reads one job's output for `bpeek`, as the job's user.
With `--task` it runs one task of a parallel job for `blaunch` (its plan on standard input,
the connection to `blaunch` on standard output), as the job's user, and kills the task when
that connection ends. Started by hand it refuses to run.",
        output: "",
        exit_status: "\
@0
The job was run and its end written.

@1
The job could not be started (the `exit` file says why).

@2
Not started by sbatchd (a bad command line or descriptors).

@3
The go pipe ended before the job was told to start; nothing ran.",
        environment: "",
        files: "\
@$LSB_SHAREDIR/<cluster>/sbatchd/<host>/
The jobs' state folders with their `pid` and `exit` files.",
        see_also: &["sbatchd(8)", "bpeek(1)", "blaunch(1)"],
    }
}

fn shepherd_options() -> &'static [Opt] {
    const fn long(name: &'static str, value: Option<&'static str>, help: &'static str) -> Opt {
        Opt { name, value, kind: Kind::Supported, help }
    }
    // The names without their first dash (rendered `--zygote`), from the parser's constants.
    const fn strip(flag: &'static str) -> &'static str {
        match flag.as_bytes() {
            [b'-', rest @ ..] => match std::str::from_utf8(rest) {
                Ok(rest) => rest,
                Err(_) => flag,
            },
            _ => flag,
        }
    }
    const OPTIONS: &[Opt] = &[
        long(strip(zygote::ZYGOTE_FLAG), None, "Runs as the zygote that forks shepherds."),
        long(strip(zygote::SOCKET_FD_FLAG), Some("fd"), "The zygote's socket to sbatchd."),
        long(strip(peek::READER_FLAG), None, "Reads one job's output for `bpeek`."),
        long(strip(tasks::TASK_FLAG), None, "Runs one task of a parallel job for `blaunch`."),
        long(strip(shepherd::LOCK_FD_FLAG), Some("fd"), "The job's lock, held while the shepherd lives."),
        long(strip(shepherd::PLAN_FD_FLAG), Some("fd"), "The launch plan: what to run, as whom, where."),
        long(
            strip(shepherd::NOTIFY_FD_FLAG),
            Some("fd"),
            "The pipe on which sbatchd hears of the job's start and end.",
        ),
        long(
            strip(shepherd::GO_FD_FLAG),
            Some("fd"),
            "The pipe on which the job waits for the word to start.",
        ),
    ];
    OPTIONS
}
