//! The cluster commands: bhosts, bqueues, bparams, badmin, lsid, lsload, lshosts,
//! lsadmin, lsclusters.

use lava_commands::{bparams, busers, lsclusters, lsinfo};

use super::{ENV_BATCH, ENV_CONF, EXIT_BATCH, FILES_BATCH, FILES_CONF, HELP, VERSION};
use crate::lsf::{LsfPage, Opt, Parser, Sub};

/// EXIT STATUS of the commands that ask lim or read the configuration.
const EXIT_SIMPLE: &str = "\
@0
Success.

@255
A usage error, an unknown name, a configuration that does not load, or a daemon that did not
answer; the reason is on standard error.";

/// ENVIRONMENT of the lim commands.
const ENV_LIM: &str = "\
@LSF_ENVDIR
The folder holding `lsf.conf` (default `/etc`). The master lim is the first host of
`lsf.cluster.<cluster>`, at its `LAVA_ADDR` (else its name) and `LAVA_LIM_PORT` (else
`LAVA_LIM_TCP_PORT`).";

fn page(name: &'static str, summary: &'static str, synopsis: &str, parser: Parser) -> LsfPage {
    LsfPage {
        name,
        section: 1,
        summary,
        synopsis: synopsis.to_owned(),
        parser,
        options: &[],
        subcommands: &[],
        description: "",
        output: "",
        exit_status: EXIT_SIMPLE,
        environment: ENV_CONF,
        files: FILES_CONF,
        see_also: &[],
    }
}

const WIDE_LONG: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("w", "Wide layout: no column is cut, and a closed host says why."),
    Opt::flag("l", "Long layout, a block per item."),
];

const BPARAMS_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("l", "OpenLava's long layout: a sentence and `KEY = value (unit)` per parameter."),
    Opt::flag("a", "Every parameter as a `KEY = value` line, after `lsb.params configuration at <date>`."),
];

const LSCLUSTERS_OPTIONS: &[Opt] = &[HELP, VERSION, Opt::flag("w", "Wide layout: no column is cut.")];

const BUSERS_OPTIONS: &[Opt] =
    &[HELP, VERSION, Opt::flag("w", "LSF 10's pending job thresholds: `PEND MPEND PJOBS MPJOBS`.")];

const GROUP_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("r", "Lists a subgroup's members instead of its name, recursively."),
    Opt::flag("w", "Wide layout: group names are not cut."),
];

const LSINFO_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("l", "A block per resource: type, order, interval, built-in, dynamic, release."),
    Opt::flag("r", "The resources only."),
    Opt::flag("t", "The host types only."),
    Opt::flag("m", "The host models the cluster's hosts use."),
    Opt::flag("M", "Every host model."),
];

const LSLOAD_OPTIONS: &[Opt] = &[
    Opt::flag("l", "Every load index, `io` included."),
    Opt::flag("w", "Wide layout: host names and states are not cut."),
];

const CKCONFIG_V: &[Opt] = &[Opt::flag("v", "Adds a summary line of what was loaded.")];
const LIMLOCK_T: &[Opt] = &[Opt::value("t", "time_seconds", "Locks for this many seconds only.")];

const BADMIN_SUBCOMMANDS: &[Sub] = &[
    Sub {
        name: "showstatus",
        args: "",
        options: &[],
        help: "mbatchd's view of the cluster (servers, jobs, users, its start), then `Counters:` with one `name value` line per counter (any user).",
    },
    Sub {
        name: "reconfig",
        args: "",
        options: &[],
        help: "mbatchd reads the batch configuration again and uses it at once. A broken file leaves the running configuration in force and is reported with `There are fatal errors.`",
    },
    Sub {
        name: "mbdrestart",
        args: "",
        options: &[],
        help: "mbatchd checks its configuration, stops cleanly and starts again from its event log (`MBD restart initiated`).",
    },
    Sub {
        name: "ckconfig",
        args: "[-v]",
        options: CKCONFIG_V,
        help: "Loads every file of the cluster as mbatchd does, without asking any daemon: `No errors found.`, or the first error as `path:line: what` and `There are fatal errors.`",
    },
    Sub {
        name: "showconf",
        args: "mbd",
        options: &[],
        help: "`MBD configuration at <date>` then `    KEY = value` lines: lsf.conf's and lsb.params' values in effect, read from the files.",
    },
    Sub {
        name: "hclose",
        args: "[host_name ...]",
        options: &[],
        help: "Closes hosts (default: this one) to new jobs; their running jobs go on. `bhosts` shows `closed_Adm`.",
    },
    Sub {
        name: "hopen",
        args: "[host_name ...]",
        options: &[],
        help: "Opens closed hosts (default: this one).",
    },
    Sub {
        name: "qclose",
        args: "[queue_name ...]",
        options: &[],
        help: "Closes queues (default: the default queue): they refuse new jobs and still dispatch theirs.",
    },
    Sub { name: "qopen", args: "[queue_name ...]", options: &[], help: "Opens closed queues." },
    Sub {
        name: "qinact",
        args: "[queue_name ...]",
        options: &[],
        help: "Inactivates queues: they accept jobs and dispatch none.",
    },
    Sub { name: "qact", args: "[queue_name ...]", options: &[], help: "Activates inactive queues." },
];

const LSADMIN_SUBCOMMANDS: &[Sub] = &[
    Sub {
        name: "ckconfig",
        args: "[-v]",
        options: CKCONFIG_V,
        help: "Loads lsf.conf, lsf.shared and lsf.cluster.<cluster> as lim does: `No errors found.`, or the first error as `path:line: what` and `There are fatal errors.`",
    },
    Sub {
        name: "reconfig",
        args: "",
        options: &[],
        help: "Every lim of the cluster checks its configuration and restarts in place to read it: `Restart LIM on <host> ...... done`. Root only (the request leaves from a privileged port).",
    },
    Sub {
        name: "showstatus",
        args: "[host_name]",
        options: &[],
        help: "A lim's role, the master, the hosts by status (on the master), with several master candidates (`LSF_MASTER_LIST`) each candidate's lim role in list order, then `Counters:` with one `name value` line each (LavaCore's).",
    },
    Sub {
        name: "sbdstatus",
        args: "",
        options: &[],
        help: "The local sbatchd's host, master, link to mbatchd and counters (LavaCore's).",
    },
    Sub {
        name: "limlock",
        args: "[-t time_seconds]",
        options: LIMLOCK_T,
        help: "Locks this host's lim: `lsload` shows `lockU`, mbatchd sends the host no new job, `bhosts` shows `closed_Lock`. Root only.",
    },
    Sub { name: "limunlock", args: "", options: &[], help: "Unlocks this host's lim. Root only." },
    Sub {
        name: "showconf",
        args: "lim",
        options: &[],
        help: "`LIM configuration at <date>` then `    KEY = value` lines: lsf.conf's values in effect.",
    },
];

/// The cluster commands' pages.
pub fn pages() -> Vec<LsfPage> {
    vec![
        LsfPage {
            options: WIDE_LONG,
            description: "\
Lists the execution hosts as mbatchd sees them, in `lsf.cluster` order, or the named ones.
STATUS is `ok`, `unavail` (the master lim says so), `unreach` (its sbatchd is not connected)
or `closed`; with `-w` or `-l` a closed host says why: `closed_Full` (every slot used),
`closed_Adm` (`badmin hclose`), `closed_Excl` (an exclusive job runs there), `closed_Lock`
(`lsadmin limlock`), `closed_Busy` (a load index beyond its threshold).",
            output: "\
    HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV
    hostA              ok              -      2      0      0      0      0      0

`-l` prints a block per host with LSF's `CURRENT LOAD USED FOR SCHEDULING` table when the
master lim answers. `-` is unlimited or not yet known. An unknown name: `NAME: Bad host name,
host group name or cluster name` on standard error.",
            exit_status: EXIT_BATCH,
            environment: ENV_BATCH,
            files: FILES_BATCH,
            see_also: &["bqueues(1)", "lsload(1)", "badmin(8)", "bjobs(1)"],
            ..page(
                "bhosts",
                "display hosts and their static and dynamic resources",
                "bhosts [-h] [-V] [-w | -l] [host_name ...]",
                Parser::Hand,
            )
        },
        LsfPage {
            options: WIDE_LONG,
            description: "\
Lists the queues as mbatchd sees them, highest priority first, or the named ones. STATUS is
`Open:Active`, `Closed:Active`, `Open:Inact` or `Closed:Inact` (`badmin qclose`, `qopen`,
`qinact`, `qact`). Counts are job slots: PEND holds PEND and PSUSP jobs, SUSP the USUSP and
SSUSP ones.",
            output: "\
    QUEUE_NAME      PRIO STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN  SUSP
    normal           30  Open:Active       -    -    -    -     0     0     0     0

`-l` prints a block per queue: its description, parameters and statistics, limits, users and
hosts. An unknown name: `NAME: No such queue` on standard error.",
            exit_status: EXIT_BATCH,
            environment: ENV_BATCH,
            files: FILES_BATCH,
            see_also: &["bhosts(1)", "bsub(1)", "badmin(8)"],
            ..page(
                "bqueues",
                "display information about queues",
                "bqueues [-h] [-V] [-w | -l] [queue_name ...]",
                Parser::Hand,
            )
        },
        LsfPage {
            options: BPARAMS_OPTIONS,
            description: "\
Prints lsb.params' values in effect, LSF's defaults where the file is silent, read from the
file as mbatchd loads it (mbatchd is not asked, so an edit not yet applied by `badmin
reconfig` shows here first).",
            output: "\
By default LSF 10's four lines:

    Default Queues:  normal
    MBD_SLEEP_TIME used for calculations:  60 seconds
    Job Checking Interval:  30 seconds
    Job Accepting Interval:  60 seconds",
            see_also: &["badmin(8)", "bqueues(1)"],
            ..page(
                "bparams",
                "display information about configurable batch parameters",
                bparams::USAGE,
                Parser::Hand,
            )
        },
        LsfPage {
            subcommands: BADMIN_SUBCOMMANDS,
            options: &[HELP, VERSION],
            section: 8,
            description: "\
The batch administrator's command. The orders (`reconfig`, `mbdrestart`, `hclose`, `hopen`,
`qclose`, `qopen`, `qact`, `qinact`) are for cluster administrators (lsf.cluster's
`ClusterAdmins`, and root); others get `User permission denied`. They survive a restart of
mbatchd (they are events of its log). `showstatus`, `ckconfig` and `showconf` are for any
user. Each line mbatchd answers goes to standard output when the order was carried out, else
to standard error.",
            output: "\
`hclose`: `Close <hostA> ...... done`; `qclose`: `Queue <normal> is closed`; `reconfig`:
`Checking configuration files ...`, `No errors found.`, `Reconfiguration initiated`.",
            exit_status: "\
@0
The order was carried out for every name.

@255
It was not for at least one, the configuration has fatal errors, or a usage error (an
unknown subcommand is LSF's `Invalid command <name>`).",
            environment: ENV_BATCH,
            files: FILES_CONF,
            see_also: &["bhosts(1)", "bqueues(1)", "bparams(1)", "lsadmin(8)", "mbatchd(8)"],
            ..page(
                "badmin",
                "administrative tool for the batch system",
                "badmin [-h] [-V] showstatus | reconfig | mbdrestart | ckconfig [-v] | showconf mbd\n\
                 \x20      | hclose [host_name ...] | hopen [host_name ...]\n\
                 \x20      | qclose [queue_name ...] | qopen [queue_name ...]\n\
                 \x20      | qact [queue_name ...] | qinact [queue_name ...]",
                Parser::Hand,
            )
        },
        LsfPage {
            subcommands: LSADMIN_SUBCOMMANDS,
            options: &[HELP, VERSION],
            section: 8,
            description: "\
The administrator's command for lim. LSF's other subcommands (`limstartup`, `limshutdown`,
`limrestart`, ...) are recognised and refused with `not supported by LavaCore yet`.",
            output: "\
`limlock`: `Host is locked` (`Host is locked for N seconds`); `limunlock`: `Host is
unlocked`; a refusal: `ls_lockhost: Host is already locked`.",
            environment: "\
@LSF_ENVDIR
The folder holding `lsf.conf` (default `/etc`).

@LAVA_HOST
This host's name as `lsf.cluster` lists it (`showstatus`'s default host), when it is not
the machine's host name.",
            see_also: &["lsload(1)", "lshosts(1)", "lsid(1)", "badmin(8)", "lim(8)"],
            ..page(
                "lsadmin",
                "administrative tool for lim",
                "lsadmin [-h] [-V] ckconfig [-v] | reconfig | showstatus [host_name] | sbdstatus\n\
                 \x20       | limlock [-t time_seconds] | limunlock | showconf lim",
                Parser::Hand,
            )
        },
        LsfPage {
            options: LSCLUSTERS_OPTIONS,
            description: "\
Prints the cluster's name, status, master host, primary administrator and its numbers of
hosts and servers. The name, administrator and counts come from the configuration; STATUS
and MASTER_HOST from the master lim when it answers, else `unavail` and the configured
master.",
            output: "\
    CLUSTER_NAME   STATUS   MASTER_HOST               ADMIN    HOSTS  SERVERS
    lavacore       ok       hostA                      root        3        2

Another cluster's name: `NAME: Unknown cluster name`.",
            environment: ENV_LIM,
            see_also: &["lsid(1)", "lshosts(1)", "bparams(1)"],
            ..page("lsclusters", "display information about the cluster", lsclusters::USAGE, Parser::Hand)
        },
        LsfPage {
            options: BUSERS_OPTIONS,
            description: "\
Prints job slot counts and limits of users and user groups: the caller without operands,
the named users and groups (a group's row adds up its members' jobs), or with `all` every
user with jobs, every user and group of `lsb.users` and its `default` row. JL/P and MAX come
from `lsb.users`; the counts from mbatchd (unfinished jobs; PEND holds PSUSP).",
            output: "\
    USER/GROUP          JL/P    MAX  NJOBS   PEND    RUN  SSUSP  USUSP    RSV
    alice                  -     10      3      1      2      0      0      0

An unknown name: `NAME: Bad user name`.",
            exit_status: EXIT_BATCH,
            environment: ENV_BATCH,
            files: FILES_BATCH,
            see_also: &["bugroup(1)", "bjobs(1)", "bqueues(1)"],
            ..page("busers", "display information about users and user groups", busers::USAGE, Parser::Hand)
        },
        LsfPage {
            options: GROUP_OPTIONS,
            description: "\
Prints the user groups of `lsb.users` and their members; a subgroup is shown `name/`.",
            output: "\
    GROUP_NAME    USERS
    biology      alice bob chem/

No group: `user group: No user group defined in the system`; an unknown name: `NAME: No such
user/host group`.",
            files: FILES_BATCH,
            see_also: &["bmgroup(1)", "busers(1)"],
            ..page(
                "bugroup",
                "display information about user groups",
                "bugroup [-h] [-V] [-r] [-w] [group_name ...]",
                Parser::Hand,
            )
        },
        LsfPage {
            options: GROUP_OPTIONS,
            description: "\
Prints the host groups of `lsb.hosts` and their members; a subgroup is shown `name/`.",
            output: "\
    GROUP_NAME    HOSTS
    racks        hostA hostB

No group: `host group: No host group defined in the system`; an unknown name: `NAME: No such
user/host group`.",
            files: FILES_BATCH,
            see_also: &["bugroup(1)", "bhosts(1)"],
            ..page(
                "bmgroup",
                "display information about host groups",
                "bmgroup [-h] [-V] [-r] [-w] [group_name ...]",
                Parser::Hand,
            )
        },
        LsfPage {
            options: LSINFO_OPTIONS,
            description: "\
Prints the cluster's resources (lim's built-in ones, then those of `lsf.shared`), its host
types and its host models, read from the configuration. Resource names limit the first table
to them; a name not found is reported as `NAME: Resource name not found`.",
            output: "\
    RESOURCE_NAME   TYPE   ORDER  DESCRIPTION
    r15s          Numeric   Inc   15-second CPU run queue length",
            see_also: &["lshosts(1)", "lsload(1)", "lsclusters(1)"],
            ..page("lsinfo", "display load-sharing configuration information", lsinfo::USAGE, Parser::Hand)
        },
        LsfPage {
            options: LSLOAD_OPTIONS,
            description: "\
Prints the load of the cluster's hosts as the master lim last heard it, or of the named
hosts. A host's status is `ok`, `busy` (an index beyond its threshold), `lockU` (`lsadmin
limlock`) or `unavail`.",
            output: "\
LavaLite's columns:

    HOST_NAME       status  r15s   r1m  r15m   ut    pg  ls    it   tmp   swp   mem
    hostA               ok   0.0   0.1   0.1   2%   0.0   1     5   80G    0M   23G",
            environment: ENV_LIM,
            see_also: &["lshosts(1)", "lsid(1)", "bhosts(1)", "lim(8)"],
            ..page(
                "lsload",
                "display load information for hosts",
                "lsload [-l] [-w] [host_name ...]",
                Parser::Hand,
            )
        },
        LsfPage {
            description: "\
Prints LavaCore's version, the cluster's name and the master host's, as the master lim
answers. Arguments are ignored.",
            output: "\
    LavaCore 0.1.0
    My cluster name is lavacore
    My master name is hostA",
            environment: ENV_LIM,
            see_also: &["lsclusters(1)", "lsload(1)", "lim(8)"],
            ..page(
                "lsid",
                "display the version, the cluster name and the master host",
                "lsid",
                Parser::IgnoresArguments,
            )
        },
        LsfPage {
            description: "\
Prints the hosts of the cluster and their static facts, as the master lim knows them: type,
model, CPU factor (always 1.0 in LavaCore), CPUs, memory, swap, and whether the host is a
server. A host whose lim never answered the master shows `-` for its CPUs, memory and swap.
Arguments are ignored.",
            output: "    HOST_NAME            type    model   cpuf  ncpus  maxmem  maxswp server",
            environment: ENV_LIM,
            see_also: &["lsload(1)", "lsid(1)", "bhosts(1)", "lim(8)"],
            ..page(
                "lshosts",
                "display hosts and their static resource information",
                "lshosts",
                Parser::IgnoresArguments,
            )
        },
    ]
}
