//! The job commands: bsub, bjobs, bkill, bstop, bresume, bpeek, blaunch, bmod, bswitch, btop,
//! bbot, brequeue, brun, bhist, bwait.

use lava_commands::{
    bacct, bhist, bjobs, bkill, blaunch, bmod, bpeek, brequeue, brun, bsub, bswitch, btop, bwait,
};

use super::{ENV_BATCH, EXIT_BATCH, FILES_BATCH, HELP, VERSION};
use crate::lsf::{Kind, LsfPage, Opt, Parser};

/// A page of a job command with the common sections.
fn page(name: &'static str, summary: &'static str, synopsis: String, parser: Parser) -> LsfPage {
    LsfPage {
        name,
        section: 1,
        summary,
        synopsis,
        parser,
        options: &[],
        subcommands: &[],
        description: "",
        output: "",
        exit_status: EXIT_BATCH,
        environment: ENV_BATCH,
        files: FILES_BATCH,
        see_also: &[],
    }
}

const BSUB_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::value(
        "q",
        "queue_name",
        "Submits to this queue (default: `LSB_DEFAULTQUEUE`, else lsb.params' `DEFAULT_QUEUE`).",
    ),
    Opt::value(
        "J",
        "job_name",
        "Names the job. `name[1-10]`, `name[1-10:2]` or `name[1,5,7]` makes a job array, and `%N` after \
         the index list limits how many of its elements run at once.",
    ),
    Opt::value("P", "project_name", "Charges the job to this project (default: `LSB_DEFAULTPROJECT`)."),
    Opt::value("m", "\"host_name ...\"", "Runs the job on one of these hosts only."),
    Opt::value("n", "min[,max]", "Asks for this many job slots (the minimum is asked for)."),
    Opt::value(
        "nnodes",
        "1",
        "LSF's whole-node count, as PSI/J writes it: `-nnodes 1` puts every slot on one host \
         (`span[hosts=1]`, merged with `-R`); another count is refused.",
    ),
    Opt::value(
        "i",
        "input_file",
        "The job's standard input. `%J` and `%I` are replaced by the job id and array index.",
    ),
    Opt::value(
        "o",
        "out_file",
        "Appends the job's standard output (and its error, without `-e`) to this file.",
    ),
    Opt::value("oo", "out_file", "As `-o`, overwriting the file."),
    Opt::value("e", "err_file", "Appends the job's standard error to this file."),
    Opt::value("eo", "err_file", "As `-e`, overwriting the file."),
    Opt::value("cwd", "working_dir", "The job's working directory (default: the current one)."),
    Opt::value("W", "[hour:]minute", "Run limit: the job is killed after this long (`TERM_RUNLIMIT`)."),
    Opt::value(
        "M",
        "mem_limit",
        "Memory limit, in `LSF_UNIT_FOR_LIMITS` (MB in the shipped lsf.conf, KB without the key) \
         or with a suffix `K`, `M`, `G`, `T` (also \
         `KB` ... `TB`; powers of 1024, decimals allowed).",
    ),
    Opt::value(
        "c",
        "[hour:]minute",
        "CPU time limit of the whole job, and of each of its processes (`SIGXCPU`; `TERM_CPULIMIT`).",
    ),
    Opt::value(
        "F",
        "file_limit",
        "Largest file a process of the job may write, as `-M`'s amounts (`SIGXFSZ`).",
    ),
    Opt::value("D", "data_limit", "Data segment limit of each process, as `-M`'s amounts."),
    Opt::value("S", "stack_limit", "Stack limit of each process, as `-M`'s amounts."),
    Opt::value("C", "core_limit", "Core file limit of each process, as `-M`'s amounts; 0 writes none."),
    Opt::value("v", "swap_limit", "Virtual memory limit of the whole job, as `-M`'s amounts (`TERM_SWAP`)."),
    Opt::value("p", "process_limit", "Processes of the job at once (`TERM_PROCESSLIMIT`)."),
    Opt::value("T", "thread_limit", "Threads of the job at once (`TERM_THREADLIMIT`)."),
    Opt::flag("H", "Holds the job pending (PSUSP) until `bresume`."),
    Opt::value(
        "R",
        "\"res_req\"",
        "Resource requirement: `select[...] order[...] rusage[...] span[...]`, as LSF's; several `-R` \
         are merged (selects joined with `&&`, order keys and rusage items in turn). Memory amounts take \
         `KB MB GB TB`; without one they are MB, or `LSF_UNIT_FOR_LIMITS` when larger.",
    ),
    Opt::value(
        "w",
        "\"dependency_expression\"",
        "Starts the job only when this holds: `done(ID)`, `ended(ID)`, `exit(ID)`, `started(ID)`, combined with `&&`, `||`, `!` and parentheses.",
    ),
    Opt::value("b", "[[[year:]month:]day:]hour:minute", "Starts the job no earlier than this local time."),
    Opt::value(
        "E",
        "\"pre_exec_command\"",
        "Runs this command (`/bin/sh -c`, as the job's user, in its directory and environment, output to \
         the job's files) on the execution host before the job, after the queue's `PRE_EXEC`. If it exits \
         non-zero the job does not run and goes back to pending, to be dispatched again up to \
         `LOCAL_MAX_PREEXEC_RETRY` times (lsb.params; unlimited by default), then is held (PSUSP) or ends \
         (`LOCAL_MAX_PREEXEC_RETRY_ACTION=EXIT`); exit 99 ends the job at once.",
    ),
    Opt::value(
        "Ep",
        "\"post_exec_command\"",
        "Runs this command as the job's user on the execution host after the job, before the queue's \
         `POST_EXEC`, with `LSB_JOBEXIT_STAT` set to the job's wait status; its exit does not change the \
         job's DONE or EXIT.",
    ),
    Opt::value("L", "login_shell", "Runs the job under this shell (an absolute path) as a login shell."),
    Opt::value(
        "env",
        "\"none\" | \"all, ~VAR, VAR=value ...\" | \"VAR[=value], ...\"",
        "Which variables of the submission environment the job gets (all of them without `-env`).",
    ),
    Opt::flag(
        "K",
        "Waits for the job to finish and exits with its exit code (0 for DONE, 128 + the signal of a killed \
         job, 126 for a job that never started). Ctrl-C kills the job.",
    ),
    Opt::flag("x", "Runs the job alone on its hosts (exclusive)."),
    Opt::value("u", "mail_user", "").kind(Kind::Ignored),
    Opt::flag("N", "").kind(Kind::Ignored),
    Opt::flag("B", "").kind(Kind::Ignored),
    Opt::flag("r", "").kind(Kind::Ignored),
    Opt::value("t", "", "").kind(Kind::Refused),
    Opt::value("G", "", "").kind(Kind::Refused),
    Opt::value("k", "", "").kind(Kind::Refused),
    Opt::value("sp", "", "").kind(Kind::Refused),
    Opt::value("a", "", "").kind(Kind::Refused),
    Opt::value("f", "", "").kind(Kind::Refused),
    Opt::value("X", "", "").kind(Kind::Refused),
    Opt::value("is", "", "").kind(Kind::Refused),
    Opt::value("app", "", "").kind(Kind::Refused),
    Opt::value("g", "", "").kind(Kind::Refused),
    Opt::value("sla", "", "").kind(Kind::Refused),
    Opt::value("ext", "", "").kind(Kind::Refused),
    Opt::value("jsdl", "", "").kind(Kind::Refused),
    Opt::flag(
        "I",
        "Interactive job: the job's standard input, output and error are this terminal's, through \
         the execution host's sbatchd (its standard error comes on standard output unless \
         `LSF_INTERACTIVE_STDERR=y`; `-i`, `-o`, `-e` keep their files). bsub waits for the \
         dispatch and exits with the job's exit code; if bsub goes away, the job is killed. Not \
         with `-K` or a job array.",
    ),
    Opt::flag(
        "Ip",
        "Interactive job on a pseudo-terminal of the execution host (its controlling terminal): \
         this terminal goes raw while the job runs, and its size follows. The interrupt, quit \
         and suspend keys are bsub's: Ctrl-C and Ctrl-\\ send SIGINT and SIGQUIT to the job, \
         Ctrl-Z suspends the job and bsub (continued, bsub resumes the job).",
    ),
    Opt::flag(
        "Is",
        "As `-Ip`, in shell mode: the interrupt, quit and suspend keys go to the job's terminal \
         as characters (for shells and programs that redefine them); `bsub -Is bash` is a shell \
         on the execution host.",
    ),
    Opt::flag("Zs", "").kind(Kind::Refused),
];

fn bsub_page() -> LsfPage {
    LsfPage {
        options: BSUB_OPTIONS,
        description: "\
Submits a job to the cluster's mbatchd, which queues it, chooses its host and has the host's
sbatchd run it as the submitting user. The command line is the arguments after the options,
quoted as LSF quotes them. Without a command, the job script is read from standard input
(`bsub < script`): its leading `#BSUB` lines give options, which options on the command line
override. With `LSB_BSUB_PARSE_SCRIPT=Y` (the shipped `lsf.conf`), a single operand naming a
readable text file is a job script (`bsub script.job`): its `#BSUB` lines count wherever
they stand, and a file the user may not execute is submitted as with `bsub < script.job`.

Options follow LSF's syntax: one-letter options may be bundled (`-Hx`), a value may follow
its letter (`-qnormal`), and options end at the command's first word (`bsub ls -l`).

A submission that cannot reach mbatchd is retried with the same request id, so a retry
never makes a second job.",
        output: "\
On success, standard output has LSF's line, which scripts read:

    Job <1234> is submitted to queue <normal>.

(`default queue` when no queue was named.) With `-K`, `<<Waiting for dispatch ...>>`,
`<<Starting on HOST>>` and `<<Job is finished>>` follow on standard error. With `-I`, `-Ip`
or `-Is`, `<<Waiting for dispatch ...>>` and `<<Starting on HOST>>` (or `<<Terminated while
pending>>`) come on standard error, then the job's own output. A refusal is printed on
standard error, ending in `Job not submitted.`",
        exit_status: "\
@0
The job was submitted (with `-K`, `-I`, `-Ip`, `-Is`: the job ended DONE, or exited 0).

@255
Nothing was submitted: a usage error, a refusal by mbatchd (bad queue, over a limit),
mbatchd not reachable within the retry bound.

@other
With `-K`, `-I`, `-Ip`, `-Is`, the job's exit code (128 + the signal of a job killed by one).",
        environment: "\
@LSB_DEFAULTQUEUE, LSB_DEFAULTPROJECT
The queue and project without `-q` and `-P`.

@BSUB_QUIET, BSUB_QUIET2, BSUB_STDERR
As in LSF: less output, or the submission line on standard error.

@LSB_BSUB_PARSE_SCRIPT
`Y` (environment, else `lsf.conf`): a script file named as the command is read as a job
script.

@LSF_INTERACTIVE_STDERR
`y` (environment, else `lsf.conf`): an interactive job's standard error comes on bsub's
standard error; otherwise on its standard output, as LSF does.

@LSF_ENVDIR, LAVA_RETRY_SECS, LSB_NTRIES
As for every batch command: where `lsf.conf` is, and how long to retry (see `bjobs`(1)).",
        see_also: &["bjobs(1)", "bkill(1)", "bmod(1)", "bpeek(1)", "bqueues(1)", "bhosts(1)", "mbatchd(8)"],
        ..page("bsub", "submit a batch job", bsub::USAGE.to_owned(), Parser::Specs(bsub::SPECS))
    }
}

const BLAUNCH_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("n", "Standard input of the tasks is /dev/null (always so in LavaCore)."),
    Opt::value("u", "host_file", "One task per line of this file (the line's first word is the host)."),
    Opt::value("z", "\"host_name ...\"", "One task on each of these hosts."),
    Opt::value("use-env", "file", "Adds this file's `NAME=value` lines to the tasks' environment."),
    Opt::flag("use-login-shell", "Accepted; the command runs with `/bin/sh -c`."),
    Opt::flag("no-shell", "Accepted; the command runs with `/bin/sh -c`."),
];

const BJOBS_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("a", "Also lists recently finished jobs (kept for lsb.params' `CLEAN_PERIOD`)."),
    Opt::flag("d", "Lists finished jobs only."),
    Opt::flag("p", "Lists pending jobs; alone, with the reason each one is pending."),
    Opt::flag("r", "Lists running jobs."),
    Opt::flag("s", "Lists suspended jobs."),
    Opt::flag("l", "LSF's long layout, a block per job."),
    Opt::flag("w", "The default columns, never cut."),
    Opt::flag("W", "The wide layout: `-w` plus project, CPU time, memory, pids, start and finish times."),
    Opt::flag("json", "With `-o`: LSF's JSON document instead of columns."),
    Opt::flag("noheader", "Leaves out the header line."),
    Opt::value("u", "user_name | all", "Lists this user's jobs, or everyone's (default: the caller's)."),
    Opt::value("q", "queue_name", "Lists the jobs of this queue only."),
    Opt::value("m", "host_name", "Lists the jobs running on this host only."),
    Opt::value("J", "name_spec", "Lists the jobs with this name; `*` matches any characters."),
    Opt::value("P", "project_name", "Lists the jobs of this project only."),
    Opt::value(
        "o",
        "\"field[:[-][width][:unit]] ... [delimiter='c']\"",
        "LSF's custom format: the named fields of LSF 10.1's list, in any case, `all` for every one.",
    ),
];

fn bjobs_page() -> LsfPage {
    LsfPage {
        options: BJOBS_OPTIONS,
        description: "\
Lists jobs as mbatchd knows them. Without job ids: the caller's unfinished jobs; `-u`, `-a`
and the state options widen or narrow the list, and `-q`, `-m`, `-J` and `-P` filter it.
Named jobs are shown whatever their state and owner. Short options bundle as getopt reads
them (`-aJ pattern`), and job ids may come before options.",
        output: "\
The default layout is LSF's:

    JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME
    1234    alice   RUN   normal     hostA       hostB       sleep      Sep  3 22:17

STAT is `PEND`, `PSUSP`, `RUN`, `USUSP`, `SSUSP`, `DONE`, `EXIT` or `UNKWN`. A named job that
does not exist is reported as `Job <N> is not found` on standard error; an empty list prints
`No unfinished job found` (or `No job found`, `No pending job found`, ...) on standard error.

With master candidates (`LSF_MASTER_LIST`) and no majority of them up, a candidate answers from
its last applied state: the listing as usual, and on standard error `Warning: no master:
answered by master candidate NAME from its last applied state (commit index N), last in
contact with a master S s ago; it may be out of date`.",
        exit_status: "\
@0
The listing was printed, even if empty (LSF's `LSB_BJOBS_CONSISTENT_EXIT_CODE=N`), stale
answers included.

@255
A named job was not found, the request failed, or a usage error; with
`LSB_BJOBS_CONSISTENT_EXIT_CODE=Y` an empty listing too.",
        environment: "\
@LSB_BJOBS_FORMAT
The `-o` format of a listing that asks for no layout of its own (environment, else lsf.conf).

@LSB_BJOBS_CONSISTENT_EXIT_CODE
`Y`: exit 255 when nothing is listed (environment, else lsf.conf).

@LSB_SHORT_HOSTLIST
`1`: several execution hosts as `N*host`.

@LSF_ENVDIR
The folder holding `lsf.conf` (default `/etc`); mbatchd is found through it.

@LAVA_RETRY_SECS
How long to keep trying while mbatchd or the local sbatchd cannot be reached, in seconds
(LavaCore's; 0: one attempt). Default 60.

@LSB_NTRIES
LSF's bound: this many attempts, and no time bound (used when `LAVA_RETRY_SECS` is unset).",
        see_also: &["bsub(1)", "bhist(1)", "bkill(1)", "bpeek(1)", "bqueues(1)"],
        ..page(
            "bjobs",
            "display information about batch jobs",
            bjobs::USAGE.to_owned(),
            Parser::Specs(bjobs::SPECS),
        )
    }
}

const BKILL_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("l", "Lists the signal names `-s` accepts and exits."),
    Opt::flag(
        "r",
        "Removes the jobs at once: the same kill is sent, and mbatchd marks each job EXIT without \
         waiting for its execution host (for a job whose host is down or whose kill does not end). \
         The job's run is sent the kill again whenever its host comes back; it never runs on.",
    ),
    Opt::value(
        "s",
        "signal",
        "Sends this signal (a name such as `TERM`, `KILL`, `USR1`, or a number) instead of the kill sequence.",
    ),
    Opt::value("u", "user_name | all", "Acts on this user's jobs, or everyone's (with job id `0`)."),
    Opt::value("q", "queue_name", "Acts on the jobs of this queue only."),
    Opt::value("m", "host_name", "Acts on the jobs running on this host only."),
    Opt::value("J", "job_name", "Acts on the jobs with this name only."),
];

const BSTOP_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::value("u", "user_name | all", "Acts on this user's jobs, or everyone's (with job id `0`)."),
    Opt::value("q", "queue_name", "Acts on the jobs of this queue only."),
    Opt::value("m", "host_name", "Acts on the jobs running on this host only."),
    Opt::value("J", "job_name", "Acts on the jobs with this name only."),
    Opt::flag("l", "").kind(Kind::NotThisCommand),
    Opt::flag("r", "").kind(Kind::NotThisCommand),
    Opt::value("s", "signal", "").kind(Kind::NotThisCommand),
];

fn signal_page(
    name: &'static str,
    summary: &'static str,
    mode: bkill::Mode,
    description: &'static str,
) -> LsfPage {
    LsfPage {
        options: if mode == bkill::Mode::Kill { BKILL_OPTIONS } else { BSTOP_OPTIONS },
        description,
        output: "\
One line per job on standard output, LSF's: `Job <1234> is being terminated` (`stopped`,
`resumed`, `signaled`). A job that cannot be acted on is reported on standard error: `Job
<1234>: No matching job found`, `Job <1234>: User permission denied`, `Job <1234>: Job has
already finished`.",
        exit_status: "\
@0
Every named job was acted on.

@255
At least one was not, or a usage error, or mbatchd could not be reached.",
        see_also: &["bkill(1)", "bstop(1)", "bresume(1)", "bjobs(1)", "bsub(1)"],
        ..page(name, summary, mode.usage(), Parser::Specs(bkill::SPECS))
    }
}

const BPEEK_OPTIONS: &[Opt] =
    &[HELP, VERSION, Opt::flag("f", "Follows the output as `tail -f` does, until the job ends.")];

const BWAIT_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::value(
        "w",
        "wait_condition",
        "The condition to wait for (required): a `bsub -w` dependency expression, such as \
         `done(12) && ended(build)`; a job name means the caller's most recent job of that name.",
    ),
    Opt::value(
        "t",
        "timeout",
        "Gives up after this many minutes (1 to 525600); without it, bwait waits until the condition holds or never can.",
    ),
    Opt::value(
        "r",
        "rereg_interval",
        "Minutes between two registrations of the condition with mbatchd in LSF (1 to 525600): checked, with no \
         other effect, since this bwait asks mbatchd again itself every two seconds at most.",
    ),
];

const BMOD_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::value("q", "queue_name", "Moves the job to this queue."),
    Opt::flag("qn", "Takes the queue back to the default."),
    Opt::value("J", "job_name", "Renames the job."),
    Opt::flag("Jn", "Removes the job's name."),
    Opt::value("n", "num_processors", "Changes the number of slots asked for."),
    Opt::flag("nn", "Takes the number of slots back to one."),
    Opt::value("W", "[hour:]minute", "Changes the run limit."),
    Opt::flag("Wn", "Removes the run limit."),
    Opt::value("M", "mem_limit", "Changes the memory limit (units as `bsub -M`)."),
    Opt::flag("Mn", "Removes the memory limit."),
    Opt::value("R", "\"res_req\"", "Changes the resource requirement."),
    Opt::flag("Rn", "Removes the resource requirement."),
];

const BHIST_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("l", "LSF's long layout: every event of each job's history, dated."),
    Opt::flag("w", "The summary's columns, never cut."),
    Opt::flag("a", "Every job, finished or not (default: unfinished ones)."),
    Opt::flag("d", "Finished jobs only."),
    Opt::flag("p", "Pending jobs only."),
    Opt::flag("r", "Running jobs only."),
    Opt::flag("s", "Suspended jobs only."),
    Opt::value("u", "user_name | all", "This user's jobs, or everyone's (default: the caller's)."),
];

const BACCT_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("b", "The brief report (the same as the default in LavaCore)."),
    Opt::flag("l", "Each job's long report before the summary."),
    Opt::flag("d", "DONE jobs only."),
    Opt::flag("e", "EXIT jobs only."),
    Opt::value("u", "user_name | all", "This user's jobs, or everyone's (default: the caller's)."),
    Opt::value("q", "queue_name", "Jobs of this queue only."),
    Opt::value("C", "time0,time1", "Jobs completed within the window."),
    Opt::value("S", "time0,time1", "Jobs submitted within the window."),
    Opt::value("f", "logfile", "Reads this file instead of lsb.acct."),
];

const BREQUEUE_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("d", "Requeues DONE jobs."),
    Opt::flag("e", "Requeues EXIT jobs."),
    Opt::flag("a", "Requeues DONE, EXIT and running or suspended jobs."),
    Opt::flag("r", "Requeues running or suspended jobs, killing them first (the default)."),
    Opt::flag("p", "Requeues pending jobs (PEND, PSUSP)."),
    Opt::flag("H", "Puts the requeued jobs in PSUSP (held) instead of PEND."),
    Opt::value("J", "job_name", "Acts on the jobs with this name only."),
    Opt::value("u", "user_name | all", "Acts on this user's jobs, or everyone's (with job id `0`)."),
];

/// The job commands' pages.
pub fn pages() -> Vec<LsfPage> {
    vec![
        bsub_page(),
        bjobs_page(),
        signal_page(
            "bkill",
            "send signals to or kill batch jobs",
            bkill::Mode::Kill,
            "\
Kills the named jobs: a running job gets SIGINT, then SIGTERM, then SIGKILL (lsb.params'
`JOB_TERMINATE_INTERVAL` apart), a pending job is removed. With `-s`, the job gets that
signal only. Job id `0` means every unfinished job of the user (or of `-u`) that `-J`,
`-q` and `-m` select; without a job id, the most recently submitted such job. Only the job's owner, root or a `ClusterAdmins` member may act on a job.
With `-r`, the job is EXIT at once (`bjobs -l`: `TERM_FORCE_OWNER`, or `TERM_FORCE_ADMIN`
when root or an administrator asked).",
        ),
        signal_page(
            "bstop",
            "suspend batch jobs",
            bkill::Mode::Stop,
            "\
Suspends the named jobs: a running job gets SIGSTOP and becomes USUSP, a pending one PSUSP.
Job id `0` means every job of the user (or of `-u`).",
        ),
        signal_page(
            "bresume",
            "resume suspended batch jobs",
            bkill::Mode::Resume,
            "\
Resumes the named suspended jobs: a USUSP job gets SIGCONT and runs again, a PSUSP job is
pending again. Job id `0` means every job of the user (or of `-u`).",
        ),
        LsfPage {
            options: BPEEK_OPTIONS,
            description: "\
Prints what a running job has written to its output so far: `<< output from stdout >>` and the
output file, then `<< output from stderr >>` and the error file when `-e` named another one.
Without a job id, the caller's most recent running job. The file is read by `bpeek` itself
when it is visible on this host (`LSB_BPEEK_REMOTE_OUTPUT=N`, LSF's default), else through
mbatchd and the execution host's sbatchd.",
            output: "\
The job's output as described. Messages on standard error: `Job <N> is not found`, `Job <N> :
Not a running job`, `Job <N> : User permission denied`, `No unfinished job found`.",
            environment: "\
@LSB_BPEEK_REMOTE_OUTPUT
`Y`: always ask the execution host (environment, else lsf.conf).

@LSF_ENVDIR, LAVA_RETRY_SECS, LSB_NTRIES, LAVA_HOST
As for every batch command (see `bjobs`(1)).",
            see_also: &["bjobs(1)", "bsub(1)", "sbatchd(8)"],
            ..page("bpeek", "display the output of an unfinished job", bpeek::USAGE.to_owned(), Parser::Specs(bpeek::SPECS))
        },
        LsfPage {
            options: BWAIT_OPTIONS,
            description: "\
Waits until a job dependency condition holds, then exits 0 without printing anything: a
script's way to wait for its jobs without calling `bjobs` in a loop. mbatchd decides, with
the rules of a job submitted with `bsub -w`: the jobs the condition names are those it meant
when bwait started, even when a newer job takes the same name.",
            output: "\
Nothing when the condition holds. Messages on standard error: `Wait condition is never
satisfied` (a job it needs DONE ended EXIT, for example), `Wait condition is not satisfied
within N minutes` (`-t`), `Dependency condition syntax error`, `No matching job found`.",
            see_also: &["bsub(1)", "bjobs(1)"],
            ..page("bwait", "wait for a job dependency condition", bwait::USAGE.to_owned(), Parser::Specs(bwait::SPECS))
        },
        LsfPage {
            options: BLAUNCH_OPTIONS,
            description: "\
Starts tasks of the parallel job it runs in (`LSB_JOBID`) on the job's hosts, through each
host's sbatchd: one task on `host_name` (the first of several operands, as for rsh and ssh),
one per host of `-z` or per line of the `-u` file, or, with a single operand, one per slot
of the job (`LSB_MCPU_HOSTS`). The command's words are joined with blanks and run by
`/bin/sh -c` on the task host as the job's user, with blaunch's environment and working
directory and standard input /dev/null. blaunch waits for every task; a task ends when
blaunch ends, so killing the job kills its tasks on every host. MPICH's `mpiexec` uses
blaunch by itself inside a job (it finds it through `LSF_BINDIR`).",
            output: "\
The tasks' standard output and error. Messages on standard error: `LSB_JOBID is not set:
blaunch can only be used within an LSF job`, `Host <H> is not allocated to job <J>`, `Job
<J> is not running on this host`, `host <H> refused the task: why`.",
            exit_status: "\
@0
Every task exited 0.

@1-254
The first failing task's exit code (128 + the signal number for a task killed by a signal).

@255
A usage error, blaunch outside a job, or a task that could not be started.

`-h` and `-V` exit 0.",
            environment: "\
@LSB_JOBID, LSB_JOBINDEX, LSB_MCPU_HOSTS
The job blaunch runs in and its slots, as sbatchd set them.

@LSF_ENVDIR
The folder holding `lsf.conf`: the task port (`LSF_RES_PORT`), the hosts' addresses and
the local sbatchd's socket (`LAVA_CMD_SOCKET`).",
            see_also: &["bsub(1)", "bkill(1)", "sbatchd(8)"],
            ..page("blaunch", "launch the tasks of a parallel job", blaunch::USAGE.to_owned(), Parser::Specs(blaunch::SPECS))
        },
        LsfPage {
            options: BMOD_OPTIONS,
            description: "\
Changes a pending job's submission: each option replaces the value given at `bsub`, each
`-Xn` removes it. mbatchd refuses to modify a job that has started.",
            output: "`Parameters of job <N> are being changed` on standard output; a refusal on standard error.",
            see_also: &["bsub(1)", "bswitch(1)", "bjobs(1)"],
            ..page("bmod", "modify a pending job", bmod::USAGE.to_owned(), Parser::Specs(bmod::SPECS))
        },
        LsfPage {
            options: &[HELP, VERSION],
            description: "Moves the named jobs to another queue. The queue must be open and accept the jobs' owners.",
            output: "`Job <N> is switched to queue <q>` on standard output for each job; a refusal on standard error.",
            see_also: &["bmod(1)", "bqueues(1)", "bjobs(1)"],
            ..page("bswitch", "switch jobs to another queue", bswitch::USAGE.to_owned(), Parser::Specs(bswitch::SPECS))
        },
        top_page("btop", true),
        top_page("bbot", false),
        LsfPage {
            options: BREQUEUE_OPTIONS,
            description: "\
Runs jobs again under their own ids: a running job is killed first, then the job is pending
again, after every job of its queue, with its original submission. Without a job id, the
most recently submitted job that the options select; job id `0` means every such job of the
user (or of `-u`). Only the owner, root or a cluster administrator may requeue a job.",
            output: "`Job <N> is being requeued` on standard output for each job; a refusal on standard error.",
            see_also: &["bkill(1)", "bjobs(1)", "bhist(1)"],
            ..page("brequeue", "kill and requeue jobs", brequeue::USAGE.to_owned(), Parser::Specs(brequeue::SPECS))
        },
        LsfPage {
            section: 8,
            options: BRUN_OPTIONS,
            description: "\
Forces a pending job to run now on the hosts named, taking as many slots on each as it has
CPUs, in the order named. The queue, user and host job limits, a closed host or queue and
the hosts' loads are not considered: the job counts as running and may exceed them. Only
root and the `ClusterAdmins` of lsb.params may force a job. A job that is suspended
(PSUSP, USUSP, SSUSP), has started or has finished cannot be forced.",
            output: "\
`Job <N> is being forced to run.` on standard output; otherwise `Failed to run the job:` and
LSF's reason on standard error: `No matching job found`, `User permission denied`, `Job
has already started`, `Job has already finished`, `Operation not supported for a suspended
job`, `Bad host name, host group name or cluster name`, `Too many processors requested`,
`Cannot operate on job array`.",
            see_also: &["bkill(1)", "bjobs(1)", "bhosts(1)", "badmin(8)"],
            ..page("brun", "force a job to run immediately", brun::USAGE.to_owned(), Parser::Specs(brun::SPECS))
        },
        LsfPage {
            options: BHIST_OPTIONS,
            description: "\
Prints jobs' histories as mbatchd reads them from its event log (`lsb.events`): by default a
summary of the time each job spent pending, suspended and running; with `-l`, every event.",
            output: "\
`Summary of time in seconds spent in various states:` then a table with the columns `JOBID
USER JOB_NAME PEND PSUSP RUN USUSP SSUSP UNKWN TOTAL`.",
            see_also: &["bjobs(1)", "bsub(1)", "mbatchd(8)"],
            ..page("bhist", "display the history of jobs", bhist::USAGE.to_owned(), Parser::Specs(bhist::SPECS))
        },
        LsfPage {
            options: BACCT_OPTIONS,
            description: "\
Reports finished jobs from the accounting log `lsb.acct` (LSF's JOB_FINISH records, which
mbatchd appends once a job's end is durable in its event log): by default a summary of the
caller's jobs (counts, CPU, wait, turnaround, hog factor, run time, throughput); with `-l`,
each job first. Times of `-C` and `-S` are `[[[year/]month/]day/]hour:minute`,
`[year/]month/day` or `.` (now); either side of the comma may be empty.",
            output: "\
`Accounting information about jobs that are:` and the selection, a line of dashes, then
`SUMMARY:      ( time unit: second )` and its lines; `No matching job found` when nothing
matches.",
            exit_status: "0, also when no job matches; 255 for a wrong option or a file that cannot be read.",
            files: "`$LSB_SHAREDIR/<cluster>/logdir/lsb.acct`, switched files `lsb.acct.1`, `lsb.acct.2`, ... (read with `-f`).",
            see_also: &["bhist(1)", "bjobs(1)", "mbatchd(8)"],
            ..page("bacct", "report accounting information about finished jobs", bacct::USAGE.to_owned(), Parser::Specs(bacct::SPECS))
        },
    ]
}

const BRUN_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::value("m", "\"host_name ...\"", "Required: the hosts to run the job on; several `-m` add up."),
    Opt::flag(
        "f",
        "LSF's: run without being suspended by run windows or load thresholds. Accepted; LavaCore \
         suspends no job on its own.",
    ),
];

const BTOP_OPTIONS: &[Opt] = &[
    HELP,
    VERSION,
    Opt::flag("u", "Moves the job among the user's own jobs only (LSF's user-level position)."),
];

fn top_page(name: &'static str, to_top: bool) -> LsfPage {
    LsfPage {
        options: BTOP_OPTIONS,
        description: if to_top {
            "Moves a pending job to the top of its queue (or to `position` from the top), so it is dispatched before the jobs of the same priority."
        } else {
            "Moves a pending job to the bottom of its queue (or to `position` from the bottom)."
        },
        output: "`Job <N> has been moved to position P from top.` (`bottom`) on standard output; a refusal on standard error.",
        see_also: &["btop(1)", "bbot(1)", "bjobs(1)"],
        ..page(
            name,
            if to_top {
                "move a pending job to the top of its queue"
            } else {
                "move a pending job to the bottom of its queue"
            },
            btop::usage(to_top),
            Parser::Specs(btop::SPECS),
        )
    }
}
