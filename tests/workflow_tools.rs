//! Workflow tools, unmodified, against a loopback LavaCore cluster (lim, mbatchd,
//! sbatchd, the commands on `PATH`, `LSF_ENVDIR` set as LSF sites set it): Snakemake
//! with its LSF executor (snakemake-executor-plugin-lsf) runs a three-rule workflow
//! (`snakemake --executor lsf --jobs 2`) to the end, and interrupted it kills its job
//! with `bkill`; PSI/J's `lsf` executor (psij-python) submits a job that reaches
//! COMPLETED and cancels another (`job.cancel()`), which `bkill` ends; Dask's
//! `LSFCluster` (dask-jobqueue) starts two workers as jobs, computes on them and, closed,
//! `bkill`s them; Parsl's `LSFProvider` runs a block of workers as a job, computes on it
//! and `bkill`s it when the workflow ends.
//!
//! The tools are installed with pip from the package registry into a virtual
//! environment kept under `CARGO_TARGET_TMPDIR` (made once, reused while it works).
//! Without `python3 -m venv` or the registry the test prints `skipped: why` and passes,
//! unless `LAVA_REQUIRE_WORKFLOW_TOOLS=1` (set by `.ci/run`) makes that a failure.
//!
//! PSI/J 0.9.11 maps LSF's EXIT to FAILED and never reports CANCELED for LSF; and it
//! reads a key LSF never prints (`reason`) as soon as a job's EXIT_REASON is set, so
//! its own view of the cancelled job stays ACTIVE. The test therefore checks the
//! cancel with `bjobs` (EXIT, killed by its owner) after PSI/J's `cancel()` returned.

mod util;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use util::{Cluster, Daemon, wait_until};

/// What pip installs (the newest releases).
const PACKAGES: &[&str] =
    &["snakemake", "snakemake-executor-plugin-lsf", "psij-python", "dask-jobqueue", "parsl"];
const TOOL_TIMEOUT: Duration = Duration::from_secs(240);

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}stderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Skips (returns `None` after printing why), or fails when skipping is not allowed.
fn skip(why: &str) -> Option<PathBuf> {
    assert!(
        std::env::var("LAVA_REQUIRE_WORKFLOW_TOOLS").as_deref() != Ok("1"),
        "LAVA_REQUIRE_WORKFLOW_TOOLS=1 but: {why}"
    );
    println!("skipped: {why}");
    None
}

/// The virtual environment with the tools, made if needed; `None` when it cannot be.
fn tools_venv() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("workflow-venv");
    let ready = venv.join("lavacore-tools-installed");
    fs::create_dir_all(env!("CARGO_TARGET_TMPDIR")).expect("the target's temporary folder");
    // One installer at a time (test binaries of other runs may share the folder).
    let lock =
        File::create(Path::new(env!("CARGO_TARGET_TMPDIR")).join("workflow-venv.lock")).expect("lock file");
    lock.lock().expect("lock the virtual environment");
    // The mark names what was installed: a list grown since is installed afresh.
    let wanted = PACKAGES.join(" ");
    if fs::read_to_string(&ready).is_ok_and(|installed| installed == wanted) {
        return Some(venv);
    }
    let _ = fs::remove_dir_all(&venv);
    let made = Command::new("python3").args(["-m", "venv"]).arg(&venv).output();
    match made {
        Ok(out) if out.status.success() => {}
        Ok(out) => return skip(&format!("python3 -m venv failed: {}", text(&out))),
        Err(error) => return skip(&format!("python3 cannot be run: {error}")),
    }
    let out = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "--timeout", "30"])
        .args(PACKAGES)
        .output()
        .expect("run pip");
    if !out.status.success() {
        return skip(&format!("pip could not install {PACKAGES:?} (no registry?): {}", text(&out)));
    }
    fs::write(&ready, &wanted).expect("mark the environment ready");
    Some(venv)
}

struct Site {
    cluster: Cluster,
    venv: PathBuf,
    _daemons: Vec<Daemon>,
}

impl Site {
    fn start(venv: PathBuf) -> Site {
        let mut cluster = Cluster::new();
        let port = util::fixed_port().to_string();
        cluster.rewrite_lsf_conf("LSF_LIM_PORT", &port);
        cluster.rewrite_lsf_conf("LAVA_LIM_TCP_PORT", &port);
        // The shipped etc/lsf.conf's unit (MB, as lsfinstall writes it): Snakemake's executor
        // converts mem_mb to it.
        cluster.rewrite_lsf_conf("LSF_UNIT_FOR_LIMITS", &shipped_unit_for_limits());
        let daemons =
            vec![cluster.start_lim("localhost"), cluster.start_mbatchd(), cluster.start_sbatchd("localhost")];
        Site { cluster, venv, _daemons: daemons }
    }

    /// `program` (a path, or a name found on the site's `PATH`) as a user of the site
    /// runs it: the commands and the tools on `PATH`, `LSF_ENVDIR` set, in `cwd`.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>, cwd: &Path) -> Command {
        let commands = util::mbatchd_bin().parent().expect("a folder").to_owned();
        let path = format!(
            "{}:{}:{}",
            commands.display(),
            self.venv.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = self.cluster.command(program);
        command.env("PATH", path).env("HOME", self.cluster.dir()).current_dir(cwd);
        command
    }

    fn bjobs(&self, args: &[&str]) -> String {
        let out = self
            .command(util::mbatchd_bin().with_file_name("bjobs"), self.cluster.dir())
            .args(args)
            .output()
            .expect("bjobs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn folder(&self, name: &str) -> PathBuf {
        let dir = self.cluster.dir().join(name);
        fs::create_dir_all(&dir).expect("a work folder");
        dir
    }
}

const SNAKEFILE: &str = r#"
rule all:
    input: "c.txt"

rule a:
    output: "a.txt"
    shell: "echo a > {output}"

rule b:
    input: "a.txt"
    output: "b.txt"
    shell: "cat {input} > {output}; echo b >> {output}"

rule c:
    input: "a.txt", "b.txt"
    output: "c.txt"
    threads: 2
    shell: "cat {input} > {output}"
"#;

const SLOW_SNAKEFILE: &str = r#"
rule slow:
    output: "slow.txt"
    shell: "sleep 600; touch {output}"
"#;

const PSIJ_SCRIPT: &str = r#"
import datetime, os, subprocess, sys, time
from psij import Job, JobExecutor, JobSpec, JobState

ex = JobExecutor.get_instance("lsf")
ok = Job(JobSpec(executable="/bin/sh", arguments=["-c", "echo hello > psij-out.txt"], directory=os.getcwd()))
ex.submit(ok)
status = ok.wait(timeout=datetime.timedelta(seconds=180))
print("ok", ok.native_id, status.state, status.exit_code, flush=True)

long = Job(JobSpec(executable="/bin/sleep", arguments=["600"]))
ex.submit(long)
long.wait(target_states=[JobState.ACTIVE], timeout=datetime.timedelta(seconds=180))
print("long", long.native_id, long.status.state, flush=True)
long.cancel()
print("cancelled", long.native_id, flush=True)
os._exit(0)
"#;

const DASK_SCRIPT: &str = r#"
import os, sys
from dask_jobqueue import LSFCluster
from dask.distributed import Client

cluster = LSFCluster(cores=1, memory="1GB", walltime="00:10", interface="lo", log_directory="logs",
                     local_directory=os.getcwd(), python=sys.executable)
print(cluster.job_script(), flush=True)
cluster.scale(jobs=2)
client = Client(cluster)
client.wait_for_workers(2, timeout=180)
print("jobs", " ".join(sorted(client.run(lambda: os.environ["LSB_JOBID"]).values())), flush=True)
print("sum", client.submit(sum, client.map(lambda x: x * x, range(100))).result(), flush=True)
client.close()
cluster.close()
print("closed", flush=True)
"#;

const PARSL_SCRIPT: &str = r#"
import os, sys
import parsl
from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.launchers import SingleNodeLauncher
from parsl.providers import LSFProvider

provider = LSFProvider(launcher=SingleNodeLauncher(), walltime="00:10:00", nodes_per_block=1, init_blocks=1,
                       max_blocks=1, cmd_timeout=60,
                       worker_init="export PATH=%s:$PATH" % os.path.dirname(sys.executable))
config = Config(executors=[HighThroughputExecutor(label="lsf", address="127.0.0.1", max_workers_per_node=1,
                                                  provider=provider)],
                run_dir=os.path.join(os.getcwd(), "runinfo"))

@parsl.python_app
def square(x):
    import os
    return x * x, os.environ["LSB_JOBID"]

with parsl.load(config):
    results = [square(i).result() for i in range(5)]
    print("sum", sum(r[0] for r in results), flush=True)
    print("jobs", " ".join(sorted({r[1] for r in results})), flush=True)
print("closed", flush=True)
"#;

/// Runs `command` to its end, at most [`TOOL_TIMEOUT`]; its output.
fn run_bounded(mut command: Command) -> Output {
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start the tool");
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(TOOL_TIMEOUT);
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    });
    let out = child.wait_with_output().expect("wait for the tool");
    drop(watchdog);
    out
}

/// `LSF_UNIT_FOR_LIMITS` of the shipped etc/lsf.conf.
fn shipped_unit_for_limits() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/lsf.conf");
    let text = fs::read_to_string(&path).expect("the shipped lsf.conf");
    let unit = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("LSF_UNIT_FOR_LIMITS="))
        .unwrap_or_else(|| panic!("{} sets no LSF_UNIT_FOR_LIMITS", path.display()));
    assert_eq!(unit, "MB", "the shipped unit is LSF's installer's");
    unit.to_owned()
}

fn snakemake(site: &Site) {
    // A three-rule workflow, one rule on two threads (-n 2), with memory and run time
    // (-R rusage[mem=100] -R span[hosts=1], -W 10): every job runs, the workflow ends.
    let work = site.folder("snakemake");
    fs::write(work.join("Snakefile"), SNAKEFILE).expect("Snakefile");
    let mut command = site.command("snakemake", &work);
    command.args(["--executor", "lsf", "--jobs", "2", "--latency-wait", "5"]);
    command.args(["--default-resources", "mem_mb=100", "runtime=10"]);
    let out = run_bounded(command);
    assert!(out.status.success(), "snakemake: {}", text(&out));
    assert_eq!(fs::read_to_string(work.join("c.txt")).expect("c.txt"), "a\na\nb\n");
    let jobs = site.bjobs(&["-a", "-noheader", "-o", "stat job_name", "-J", "Snakemake_*"]);
    assert_eq!(jobs.lines().filter(|line| line.starts_with("DONE")).count(), 3, "{jobs}");
    // mem_mb=100 is a 100 MB request: `rusage[mem=100]` (per slot: 50 for the two-thread
    // rule when the executor counts per slot) in the shipped unit (MB), which
    // mbatchd reads as MB (under KB it would have been 102400, a 100 GB reservation).
    let resreqs = site.bjobs(&["-a", "-noheader", "-o", "combined_resreq:80", "-J", "Snakemake_*"]);
    assert_eq!(resreqs.lines().count(), 3, "{resreqs}");
    for resreq in resreqs.lines() {
        let mem = resreq.split("rusage[mem=").nth(1).and_then(|rest| rest.split(']').next());
        let mb: f64 = mem.and_then(|mem| mem.parse().ok()).unwrap_or_else(|| panic!("{resreqs}"));
        assert!((mb - 100.0).abs() < 1e-9 || (mb - 50.0).abs() < 1e-9, "mem_mb=100 per job: {resreqs}");
    }

    // Interrupted (Ctrl-C), it kills the job it submitted (bkill). Snakemake's remote executor
    // empties its list of active jobs while it checks their status (its `bjobs`, 20 s after
    // the start and then every 10 s or more) and cancels only the jobs on that list
    // (snakemake-interface-executor-plugins' `RemoteExecutor`): a Ctrl-C during a check leaves
    // the job running. So the test interrupts it outside a check (no `bjobs` under it), and,
    // the rare time it still met one, tries again with a new job.
    let mut killed_by_snakemake = None;
    for attempt in 1..=3 {
        let slow = site.folder(&format!("snakemake-cancel-{attempt}"));
        fs::write(slow.join("Snakefile"), SLOW_SNAKEFILE).expect("Snakefile");
        let mut command = site.command("snakemake", &slow);
        command.args(["--executor", "lsf", "--jobs", "1", "--default-resources", "mem_mb=100", "runtime=10"]);
        let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start snakemake");
        let job = wait_until("snakemake's slow job to run", TOOL_TIMEOUT, || {
            let jobs = site.bjobs(&["-noheader", "-o", "jobid stat", "-J", "*rule_slow*"]);
            jobs.lines()
                .find(|line| line.ends_with("RUN"))
                .map(|line| line.split_whitespace().next().unwrap_or_default().to_owned())
        });
        wait_until("snakemake between two status checks", TOOL_TIMEOUT, || {
            (!runs_below(child.id(), "bjobs")).then_some(())
        });
        let status =
            Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill -INT");
        assert!(status.success());
        let out = child.wait_with_output().expect("snakemake ends");
        assert!(!out.status.success(), "interrupted snakemake reports failure");
        let ended = util::poll_until(Duration::from_secs(30), || {
            (site.bjobs(&["-a", "-noheader", "-o", "stat", &job]).trim() == "EXIT").then_some(())
        });
        if ended.is_some() {
            killed_by_snakemake = Some(job);
            break;
        }
        eprintln!(
            "attempt {attempt}: snakemake was interrupted during a status check; job {job} killed here"
        );
        let out =
            site.command(util::mbatchd_bin().with_file_name("bkill"), site.cluster.dir()).arg(&job).output();
        assert!(out.expect("bkill").status.success(), "bkill {job}");
    }
    assert!(killed_by_snakemake.is_some(), "interrupted three times, snakemake never killed its job");
}

/// Whether a process whose command line holds `word` runs below process `ancestor`.
fn runs_below(ancestor: u32, word: &str) -> bool {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
    };
    let Ok(entries) = fs::read_dir("/proc") else { return false };
    entries.flatten().filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok()).any(|pid| {
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains(word) {
            return false;
        }
        let mut at = pid;
        while let Some(parent) = parent_of(at).filter(|parent| *parent > 1) {
            if parent == ancestor {
                return true;
            }
            at = parent;
        }
        false
    })
}

/// Runs `script` with the tools' Python in a fresh folder `name` of the site, to its end;
/// the folder, the output and its standard output, once it succeeded.
fn run_script(site: &Site, name: &str, script: &str) -> (PathBuf, Output, String) {
    let work = site.folder(name);
    fs::write(work.join("run.py"), script).expect("run.py");
    let mut command = site.command(site.venv.join("bin/python"), &work);
    command.arg("run.py");
    let out = run_bounded(command);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{name}: {}", text(&out));
    (work, out, said)
}

/// Waits until `job` is EXIT, killed by its owner (the tool's `bkill`).
fn wait_killed_by_owner(site: &Site, job: &str, what: &str) {
    wait_until(&format!("{what} {job} killed"), TOOL_TIMEOUT, || {
        let line = site.bjobs(&["-a", "-noheader", "-o", "stat exit_reason", job]);
        line.starts_with("EXIT TERM_OWNER").then_some(())
    });
}

fn psij(site: &Site) {
    let (work, out, said) = run_script(site, "psij", PSIJ_SCRIPT);
    let ok = said.lines().find(|line| line.starts_with("ok ")).unwrap_or_else(|| panic!("{}", text(&out)));
    assert!(ok.ends_with(" JobState.COMPLETED 0") || ok.ends_with(" COMPLETED 0"), "{}", text(&out));
    assert_eq!(fs::read_to_string(work.join("psij-out.txt")).expect("the job's output"), "hello\n");
    let long =
        said.lines().find(|line| line.starts_with("long ")).unwrap_or_else(|| panic!("{}", text(&out)));
    assert!(long.contains("ACTIVE"), "{}", text(&out));
    let job = long.split_whitespace().nth(1).expect("the native id").to_owned();
    assert!(said.contains(&format!("cancelled {job}")), "{}", text(&out));
    wait_until(&format!("PSI/J's job {job} killed"), TOOL_TIMEOUT, || {
        let line = site.bjobs(&["-a", "-noheader", "-o", "stat exit_reason", &job]);
        line.starts_with("EXIT").then_some(line)
    });
}

fn dask_jobqueue(site: &Site) {
    // Dask's LSFCluster writes a job script of #BSUB lines (-J, -o/-e with %J, -n, -M in the
    // lsf.conf unit, -W) and submits it (`bsub script`); each job is a Dask worker that
    // connects back to the scheduler in this process. Closed, it `bkill`s its jobs.
    let (work, out, said) = run_script(site, "dask", DASK_SCRIPT);
    assert!(said.contains("#BSUB -M 1000\n"), "1 GB in MB: {}", text(&out));
    let jobs: Vec<String> = said
        .lines()
        .find_map(|line| line.strip_prefix("jobs "))
        .unwrap_or_else(|| panic!("{}", text(&out)))
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(jobs.len(), 2, "two workers, each its own job (LSB_JOBID): {}", text(&out));
    assert_ne!(jobs[0], jobs[1], "{}", text(&out));
    assert!(said.lines().any(|line| line == "sum 328350"), "{}", text(&out));
    assert!(said.lines().any(|line| line == "closed"), "{}", text(&out));
    for job in &jobs {
        let listed = site.bjobs(&["-a", "-noheader", "-o", "job_name memlimit runtimelimit", job]);
        assert!(listed.starts_with("dask-worker 1000 "), "-J and -M 1000 (MB): {listed}");
        let logs = fs::read_dir(work.join("logs")).expect("the log folder").flatten();
        let named =
            logs.filter(|entry| entry.file_name().to_string_lossy().ends_with(&format!("-{job}.out")));
        assert_eq!(named.count(), 1, "-o logs/NAME-%J.out names job {job}'s output");
        wait_killed_by_owner(site, job, "Dask's worker job");
    }
}

fn parsl(site: &Site) {
    // Parsl's LSFProvider writes a job script (#BSUB -W in minutes, -J, -o, -e), submits it
    // (`bsub script`), follows it with `bjobs -noheader -o 'jobid stat' IDS` and, when the
    // workflow ends, `bkill`s it. The job runs Parsl's worker pool, which connects back.
    let (_, out, said) = run_script(site, "parsl", PARSL_SCRIPT);
    assert!(said.lines().any(|line| line == "sum 30"), "{}", text(&out));
    assert!(said.lines().any(|line| line == "closed"), "{}", text(&out));
    let job = said
        .lines()
        .find_map(|line| line.strip_prefix("jobs "))
        .filter(|jobs| !jobs.contains(' '))
        .unwrap_or_else(|| panic!("every task ran in the one block's job: {}", text(&out)))
        .to_owned();
    let listed = site.bjobs(&["-a", "-noheader", "-o", "job_name runtimelimit", &job]);
    assert!(listed.starts_with("parsl.lsf.block-0.") && listed.contains(" 10.0"), "-J, -W 10: {listed}");
    wait_killed_by_owner(site, &job, "Parsl's block job");
}

#[test]
fn workflow_tools_run_unmodified() {
    let Some(venv) = tools_venv() else { return };
    let site = Site::start(venv);
    snakemake(&site);
    psij(&site);
    dask_jobqueue(&site);
    parsl(&site);
}

// Goal: `runs_below` sees a grandchild by its command line, and nothing once it is gone (the
// Snakemake interruption above relies on it to find a status check's `bjobs` under its shell).
#[test]
fn runs_below_sees_a_grandchild() {
    let mut shell = Command::new("sh")
        .args(["-c", "sh -c 'sleep 31.5; :' & wait"])
        .spawn()
        .expect("start a shell with a grandchild");
    wait_until("the grandchild", Duration::from_secs(10), || runs_below(shell.id(), "31.5").then_some(()));
    assert!(!runs_below(shell.id(), "no-such-word"));
    let _ = shell.kill();
    let _ = shell.wait();
    let _ = Command::new("pkill").args(["-f", "sleep 31.5"]).status();
    wait_until("the grandchild gone", Duration::from_secs(10), || {
        (!runs_below(shell.id(), "31.5")).then_some(())
    });
}
