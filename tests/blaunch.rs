//! Parallel jobs across real network stacks (issue 19, part 4): two hosts in network
//! namespaces (10.79.0.1-2/24, `util::netns`), each with its own host name (sbatchd started
//! in a UTS namespace of its own), one sbatchd per host, mbatchd on h0. In order:
//!
//! 1. a `bsub -n 4 -R "span[ptile=2]"` job sees LSF's parallel-job variables and its host
//!    file; its `blaunch` runs a task on h1 whose output, error and exit code come back,
//!    `-z` runs one task per host, and a host the job does not hold is refused (255);
//! 2. blaunch outside a job, for a job this host does not run, and (3) for another user's job
//!    is refused with LSF's exit code 255; a job of `nobody` runs its task as `nobody`;
//! 3. a task (`sleep`) on h1 outlives restarts of both sbatchds, and `bkill` of its job
//!    ends it (its process is gone from h1); a task started in the background goes when its
//!    job ends DONE;
//! 4. remote tasks belong to their job: `bstop` stops a task on h1 (its state `T`) and
//!    `bresume` resumes it; a task over the job's `-M` is killed on h1 and says so; a task
//!    that burns CPU on h1 counts in the job's CPU time (`bjobs -l`, `bacct -l`);
//! 5. MPICH's `mpiexec -launcher lsf` (hydra, which starts its proxies with `blaunch` and
//!    reads the ranks from `LSB_MCPU_HOSTS`) runs an MPI program built here with `mpicc`:
//!    4 ranks, 2 on each host, the job DONE; 6. `bkill` of a running MPI job ends its ranks on
//!    both hosts.
//!
//! Where namespaces cannot be created, or mpich is not installed (for the MPI part), the test
//! prints `skipped: REASON` and passes. `the_task_port_refuses_what_it_must_not_run` needs
//! neither: on loopback it runs blaunch on the job's own host and sends the task port every
//! kind of bad TASK_START (forged, replayed, misdirected grants; other operations; oversized
//! and malformed bodies).

mod util;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use util::netns::Netns;
use util::{Cluster, Daemon, STARTUP_TIMEOUT, submitted_job_id, wait_until};

const HOSTS: [&str; 2] = ["h0", "h1"];
const NS_PREFIX: &str = "lavablt";
const SUBNET: &str = "10.79.0";
/// Longest a job may take to end (debug build, busy 2-core machine; MPI start-up included).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);

const MPI_PROGRAM: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, size;
    char host[256];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s sum %d\n", rank, size, host, sum);
    fflush(stdout);
    if (argc > 1)
        sleep(atoi(argv[1]));
    MPI_Finalize();
    return 0;
}
"#;

/// `ip netns exec NS unshare --uts sh -c 'hostname HOST; exec BIN ARGS'`: the daemon runs
/// on its own host name (what `hostname` and MPI see); its pid is the program's.
fn spawn_host_daemon(
    cluster: &mut Cluster,
    ns: &str,
    host: &str,
    name: &str,
    bin: &Path,
    args: &[&OsStr],
) -> Daemon {
    let mut script = format!("hostname {host} && exec {}", bin.display());
    for arg in args {
        script.push(' ');
        script.push_str(&arg.to_string_lossy());
    }
    let all: Vec<&OsStr> = vec![
        "netns".as_ref(),
        "exec".as_ref(),
        ns.as_ref(),
        "unshare".as_ref(),
        "--uts".as_ref(),
        "sh".as_ref(),
        "-c".as_ref(),
        script.as_ref(),
    ];
    cluster.spawn(name, Path::new("ip"), &all)
}

fn start_sbatchd(cluster: &mut Cluster, ns: &str, host: &str, envdir: &Path) -> Daemon {
    let ready = cluster.dir().join(format!("run/sbatchd.{host}.ready"));
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_sbatchd"));
    let args: Vec<&OsStr> = vec![
        "--envdir".as_ref(),
        envdir.as_os_str(),
        "--host".as_ref(),
        host.as_ref(),
        "--ready-file".as_ref(),
        ready.as_os_str(),
    ];
    let mut daemon = spawn_host_daemon(cluster, ns, host, "sbatchd", &bin, &args);
    wait_until("sbatchd ready file", STARTUP_TIMEOUT, || {
        assert!(daemon.is_running(), "sbatchd {host} exited:\n{}", daemon.log());
        ready.exists().then_some(())
    });
    daemon
}

fn start_mbatchd(cluster: &mut Cluster, ns: &str) -> Daemon {
    let port_file = cluster.dir().join("run/mbatchd.port");
    let args: Vec<&OsStr> = vec![
        "--foreground".as_ref(),
        "--port".as_ref(),
        "0".as_ref(),
        "--port-file".as_ref(),
        port_file.as_ref(),
    ];
    let mbatchd = util::mbatchd_bin();
    let all: Vec<&OsStr> =
        [&["netns".as_ref(), "exec".as_ref(), ns.as_ref()][..], &[mbatchd.as_os_str()], &args[..]].concat();
    let mut daemon = cluster.spawn("mbatchd", Path::new("ip"), &all);
    let port = daemon.wait_for_port_file(&port_file, STARTUP_TIMEOUT);
    cluster.rewrite_lsf_conf("LSB_MBD_PORT", &port.to_string());
    daemon
}

/// Runs a command in host `ns` with `envdir`, as that host's user would.
fn run_in(cluster: &Cluster, ns: &str, envdir: &Path, program: &str, args: &[&str]) -> Output {
    cluster
        .command("ip")
        .args(["netns", "exec", ns, program])
        .args(args)
        .env("LSF_ENVDIR", envdir)
        .env_remove("LSB_JOBID")
        .output()
        .expect("run ip netns exec")
}

/// The uid (and gid) of `nobody`, the job user who is not root.
const NOBODY: u32 = 65534;

/// Runs a command in host `ns` as `nobody` (`setpriv`), from /tmp.
fn run_as_nobody(
    cluster: &Cluster,
    ns: &str,
    envdir: &Path,
    program: &str,
    args: &[&str],
    job: Option<u32>,
) -> Output {
    let mut command = cluster.command("ip");
    command
        .args(["netns", "exec", ns, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", program])
        .args(args)
        .current_dir("/tmp")
        .env("HOME", "/tmp")
        .env("LSF_ENVDIR", envdir)
        .env_remove("LSB_JOBID");
    if let Some(job) = job {
        command.env("LSB_JOBID", job.to_string());
    }
    command.output().expect("run ip netns exec setpriv")
}

fn bin(name: &str) -> String {
    util::mbatchd_bin().with_file_name(name).display().to_string()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Submits from h0; returns the job id.
fn bsub(cluster: &Cluster, ns: &str, envdir: &Path, args: &[&str]) -> u32 {
    let output = run_in(cluster, ns, envdir, &bin("bsub"), args);
    assert!(output.status.success(), "bsub {args:?}: {}", text(&output));
    submitted_job_id(&String::from_utf8_lossy(&output.stdout))
}

fn stat(cluster: &Cluster, ns: &str, envdir: &Path, job: u32) -> String {
    let output = run_in(cluster, ns, envdir, &bin("bjobs"), &["-a", "-noheader", &job.to_string()]);
    String::from_utf8_lossy(&output.stdout).split_whitespace().nth(2).unwrap_or_default().to_owned()
}

fn wait_stat(cluster: &Cluster, ns: &str, envdir: &Path, job: u32, want: &[&str]) -> String {
    wait_until(&format!("job {job} in {want:?}"), JOB_TIMEOUT, || {
        let now = stat(cluster, ns, envdir, job);
        want.contains(&now.as_str()).then_some(now)
    })
}

fn have(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

// Goal: blaunch and MPI across two hosts, end to end (see the module doc).
#[test]
fn parallel_jobs_run_tasks_on_their_hosts() {
    let netns = match Netns::create(NS_PREFIX, &HOSTS, SUBNET) {
        Ok(netns) => netns,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    if !have("unshare") {
        eprintln!("skipped: no unshare(1)");
        return;
    }
    let mut cluster = Cluster::with_hosts(&HOSTS);
    let rows: String = HOSTS
        .iter()
        .enumerate()
        .map(|(idx, h)| format!("{h} ! ! 1 (cs linux) {} - - -\n", netns.addr(idx)))
        .collect();
    cluster.write_file(
        "etc/lsf.cluster.lavacore",
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME model type server RESOURCES LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT LAVA_MXFSD_PORT\n{rows}End Host\n"
        ),
    );
    cluster.write_file(
        "etc/lsbatch/lavacore/configdir/lsb.hosts",
        "Begin Host\nHOST_NAME MXJ\ndefault 2\nEnd Host\n",
    );
    cluster.rewrite_lsf_conf("LSF_RES_PORT", &util::fixed_port().to_string());
    let ns = netns.hosts.clone();
    let _mbatchd = start_mbatchd(&mut cluster, &ns[0]);
    let envdirs: Vec<PathBuf> = HOSTS.iter().map(|host| cluster.host_envdir(host)).collect();
    let mut sbatchds: Vec<Daemon> = (0..HOSTS.len())
        .map(|idx| start_sbatchd(&mut cluster, &ns[idx], HOSTS[idx], &envdirs[idx]))
        .collect();
    let (h0, env0) = (&ns[0], &envdirs[0]);
    let out_dir = cluster.dir().join("out");
    std::fs::create_dir_all(&out_dir).expect("an output folder");
    // nobody reaches the configuration, the credential sockets and the output folder.
    for folder in [cluster.dir().to_path_buf(), cluster.dir().join("run"), env0.clone(), envdirs[1].clone()] {
        util::chmod(&folder, 0o755);
    }
    util::chmod(&out_dir, 0o1777);
    let out = |name: &str| out_dir.join(name).display().to_string();
    let blaunch = bin("blaunch");

    // 1. The parallel-job environment, the host file, and blaunch to each host.
    let script = format!(
        "echo NUMPROC=$LSB_DJOB_NUMPROC; echo MCPU=$LSB_MCPU_HOSTS; echo HOSTS=$LSB_HOSTS; \
         echo BINDIR=$LSF_BINDIR; echo FILE; cat $LSB_DJOB_HOSTFILE; echo END; \
         {blaunch} h1 'echo remote $(hostname) job $LSB_JOBID; echo oops >&2; exit 3'; echo RC=$?; \
         {blaunch} -z 'h0 h1' hostname | sort | tr '\\n' ' '; echo; \
         {blaunch} h2 true; echo RC2=$?"
    );
    let job = bsub(&cluster, h0, env0, &["-n", "4", "-R", "span[ptile=2]", "-o", &out("env.out"), &script]);
    let state = wait_stat(&cluster, h0, env0, job, &["DONE", "EXIT"]);
    let said = std::fs::read_to_string(out("env.out")).unwrap_or_default();
    assert_eq!(state, "DONE", "{said}");
    assert!(said.contains("NUMPROC=4\n"), "{said}");
    assert!(said.contains("MCPU=h0 2 h1 2\n"), "{said}");
    assert!(said.contains("HOSTS=h0 h0 h1 h1\n"), "{said}");
    assert!(
        said.contains(&format!("BINDIR={}\n", util::mbatchd_bin().parent().expect("a folder").display())),
        "{said}"
    );
    assert!(said.contains("FILE\nh0\nh0\nh1\nh1\nEND\n"), "{said}");
    assert!(said.contains(&format!("remote h1 job {job}\n")), "{said}");
    assert!(said.contains("oops\n"), "the remote task's standard error is relayed: {said}");
    assert!(said.contains("RC=3\n"), "{said}");
    assert!(said.contains("h0 h1 \n"), "{said}");
    assert!(said.contains("RC2=255\n"), "{said}");
    assert!(said.contains("not allocated to job"), "{said}");

    // 2. Refusals outside a job: no LSB_JOBID, and a job that is not ours to launch for.
    let output = run_in(&cluster, h0, env0, &blaunch, &["h1", "true"]);
    assert_eq!(output.status.code(), Some(255), "{}", text(&output));
    assert!(text(&output).contains("LSB_JOBID is not set"), "{}", text(&output));
    let output = cluster
        .command("ip")
        .args(["netns", "exec", h0, &blaunch, "h1", "true"])
        .env("LSF_ENVDIR", env0)
        .env("LSB_JOBID", "999")
        .output()
        .expect("run blaunch");
    assert_eq!(output.status.code(), Some(255), "{}", text(&output));
    assert!(text(&output).contains("Job <999> is not running on this host"), "{}", text(&output));

    // A user's job runs its tasks as that user, in blaunch's working directory.
    let output = run_as_nobody(
        &cluster,
        h0,
        env0,
        &bin("bsub"),
        &[
            "-n",
            "2",
            "-m",
            "h0 h1",
            "-R",
            "span[ptile=1]",
            "-o",
            &out("nobody.out"),
            &format!("{blaunch} h1 'id -u; pwd; hostname'"),
        ],
        None,
    );
    assert!(output.status.success(), "bsub as nobody: {}", text(&output));
    let nobody_job = submitted_job_id(&String::from_utf8_lossy(&output.stdout));
    let state = wait_stat(&cluster, h0, env0, nobody_job, &["DONE", "EXIT"]);
    let said = std::fs::read_to_string(out("nobody.out")).unwrap_or_default();
    assert_eq!(state, "DONE", "{said}");
    assert!(said.contains(&format!("{NOBODY}\n/tmp\nh1\n")), "{said}");

    // 3. bkill reaches a remote task: the job's blaunch runs `sleep` on h1; once it is there,
    // the kill ends it (no such process left in h1's sbatchd's view).
    let marker = "3217";
    let job = bsub(
        &cluster,
        h0,
        env0,
        &["-n", "4", "-R", "span[ptile=2]", "-o", &out("kill.out"), &format!("{blaunch} h1 sleep {marker}")],
    );
    wait_stat(&cluster, h0, env0, job, &["RUN"]);
    let sleeping = || {
        let output = std::process::Command::new("pgrep")
            .args(["-f", &format!("^sleep {marker}$")])
            .output()
            .expect("pgrep");
        String::from_utf8_lossy(&output.stdout).split_whitespace().map(str::to_owned).collect::<Vec<_>>()
    };
    let pids = wait_until("the remote sleep runs", JOB_TIMEOUT, || {
        let pids = sleeping();
        (!pids.is_empty()).then_some(pids)
    });
    // It runs on h1: its network namespace is h1's.
    let ns_of = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
    let h1_sbd = sbatchds[1].pid().to_string();
    assert_eq!(ns_of(&pids[0]), ns_of(&h1_sbd), "the task runs in h1's namespace");
    // Another user may not launch tasks of this (root's) job.
    let output = run_as_nobody(&cluster, h0, env0, &blaunch, &["h1", "true"], Some(job));
    assert_eq!(output.status.code(), Some(255), "{}", text(&output));
    assert!(
        text(&output).contains(&format!("User (uid {NOBODY}) is not the owner of job <{job}>")),
        "{}",
        text(&output)
    );
    // Both sbatchds restart (the task's host's, then the job's): the task is neither ended
    // nor orphaned, and the job, adopted, is still RUN.
    for idx in [1, 0] {
        sbatchds[idx].kill();
        sbatchds[idx] = start_sbatchd(&mut cluster, &ns[idx], HOSTS[idx], &envdirs[idx]);
    }
    assert_eq!(sleeping(), pids, "the task outlives restarts of the sbatchds");
    wait_stat(&cluster, h0, env0, job, &["RUN"]);
    let output = run_in(&cluster, h0, env0, &bin("bkill"), &[&job.to_string()]);
    assert!(output.status.success(), "{}", text(&output));
    wait_stat(&cluster, h0, env0, job, &["EXIT"]);
    wait_until("the remote sleep is gone", JOB_TIMEOUT, || sleeping().is_empty().then_some(()));
    // Reaped too (not left a zombie): its /proc entry goes.
    for pid in &pids {
        wait_until(&format!("task {pid} reaped"), JOB_TIMEOUT, || {
            (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
        });
    }

    // A task started in the background does not outlive its job: the job ends DONE once the
    // remote sleep runs, and the sleep goes.
    let marker = "3221";
    let script = format!(
        "{blaunch} h1 sleep {marker} & until pgrep -f '^sleep {marker}$' >/dev/null; do sleep 0.1; done; echo started"
    );
    let job = bsub(&cluster, h0, env0, &["-n", "4", "-R", "span[ptile=2]", "-o", &out("bg.out"), &script]);
    let state = wait_stat(&cluster, h0, env0, job, &["DONE", "EXIT"]);
    assert_eq!(state, "DONE", "{}", std::fs::read_to_string(out("bg.out")).unwrap_or_default());
    let background = || {
        let output = std::process::Command::new("pgrep")
            .args(["-f", &format!("^sleep {marker}$")])
            .output()
            .expect("pgrep");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    wait_until("the background task is gone", JOB_TIMEOUT, || background().is_empty().then_some(()));
    let said = wait_until("blaunch says why it ended", JOB_TIMEOUT, || {
        let said = std::fs::read_to_string(out("bg.out")).unwrap_or_default();
        said.contains("has ended").then_some(said)
    });
    assert!(said.contains(&format!("blaunch: job <{job}> has ended; its tasks are ended with it")), "{said}");

    // 4. The job's signals, limits and accounting reach its remote tasks.
    tasks_belong_to_their_job(&cluster, h0, env0, &out);

    // 5. MPI: mpiexec (hydra, launcher and resource manager detected from LSF_BINDIR and
    // LSB_MCPU_HOSTS) starts 4 ranks, 2 on each host, through blaunch.
    if !have("mpicc") || !have("mpiexec") {
        eprintln!("skipped: the MPI part: mpich is not installed (apt-get install mpich libmpich-dev)");
        return;
    }
    let source = out_dir.join("hello.c");
    std::fs::write(&source, MPI_PROGRAM).expect("write the MPI program");
    let program = out_dir.join("hello");
    let built =
        std::process::Command::new("mpicc").arg("-o").arg(&program).arg(&source).output().expect("run mpicc");
    assert!(built.status.success(), "mpicc: {}", text(&built));
    // No -n: hydra's LSF resource manager takes the ranks from LSB_MCPU_HOSTS. `-iface eth0`:
    // the proxies call back to eth0's address (no namespace resolves another host's name).
    let mpi = format!("mpiexec -launcher lsf -iface eth0 {}", program.display());
    let job = bsub(&cluster, h0, env0, &["-n", "4", "-R", "span[ptile=2]", "-o", &out("mpi.out"), &mpi]);
    let state = wait_stat(&cluster, h0, env0, job, &["DONE", "EXIT"]);
    let said = std::fs::read_to_string(out("mpi.out")).unwrap_or_default();
    assert_eq!(state, "DONE", "{said}");
    eprintln!("{said}");
    let ranks: Vec<&str> = said.lines().filter(|line| line.starts_with("rank ")).collect();
    assert_eq!(ranks.len(), 4, "{said}");
    for host in HOSTS {
        let on = ranks.iter().filter(|line| line.contains(&format!(" of 4 on {host} sum 6"))).count();
        assert_eq!(on, 2, "two ranks on {host}: {said}");
    }

    // 6. bkill of a running MPI job ends its ranks on h1 too.
    let marker = "3219";
    let mpi = format!("mpiexec -launcher lsf -iface eth0 {} {marker}", program.display());
    let job = bsub(&cluster, h0, env0, &["-n", "4", "-R", "span[ptile=2]", "-o", &out("mpikill.out"), &mpi]);
    let ranks = || {
        let pattern = format!("^{} {marker}$", program.display());
        let output = std::process::Command::new("pgrep").args(["-f", &pattern]).output().expect("pgrep");
        String::from_utf8_lossy(&output.stdout).split_whitespace().map(str::to_owned).collect::<Vec<_>>()
    };
    let running = wait_until("four ranks sleep", JOB_TIMEOUT, || {
        let pids = ranks();
        (pids.len() == 4).then_some(pids)
    });
    let on_h1 = running.iter().filter(|pid| ns_of(pid) == ns_of(&sbatchds[1].pid().to_string())).count();
    assert_eq!(on_h1, 2, "two ranks run in h1's namespace");
    let output = run_in(&cluster, h0, env0, &bin("bkill"), &[&job.to_string()]);
    assert!(output.status.success(), "{}", text(&output));
    // mpiexec forwards the SIGINT to its ranks and may then exit 0 itself.
    wait_stat(&cluster, h0, env0, job, &["EXIT", "DONE"]);
    wait_until("every rank is gone", JOB_TIMEOUT, || ranks().is_empty().then_some(()));
}

/// The processes whose command line is exactly `pattern`'s match (`pgrep -f`).
fn pgrep(pattern: &str) -> Vec<String> {
    let output = std::process::Command::new("pgrep").args(["-f", pattern]).output().expect("pgrep");
    String::from_utf8_lossy(&output.stdout).split_whitespace().map(str::to_owned).collect()
}

/// The state letter of process `pid` (field 3 of `/proc/PID/stat`).
fn proc_state(pid: &str) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')').and_then(|at| stat[at + 1..].split_whitespace().next()).unwrap_or_default().to_owned()
}

/// Part 4 of the module doc: `bstop`/`bresume` reach a task on h1, `-M` kills a task on h1
/// that is over it, and a task's CPU time on h1 is the job's.
fn tasks_belong_to_their_job(cluster: &Cluster, h0: &str, env0: &Path, out: &dyn Fn(&str) -> String) {
    let blaunch = bin("blaunch");
    let control = |command: &str, job: u32| {
        let output = run_in(cluster, h0, env0, &bin(command), &[&job.to_string()]);
        assert!(output.status.success(), "{command}: {}", text(&output));
    };
    // bstop stops the remote task (SIGSTOP forwarded to h1), bresume resumes it.
    let marker = "3233";
    let job = bsub(
        cluster,
        h0,
        env0,
        &["-n", "4", "-R", "span[ptile=2]", "-o", &out("stop.out"), &format!("{blaunch} h1 sleep {marker}")],
    );
    let pattern = format!("^sleep {marker}$");
    let task = wait_until("the remote sleep runs", JOB_TIMEOUT, || pgrep(&pattern).into_iter().next());
    wait_stat(cluster, h0, env0, job, &["RUN"]);
    assert_ne!(proc_state(&task), "T");
    control("bstop", job);
    wait_stat(cluster, h0, env0, job, &["USUSP"]);
    wait_until("bstop stops the task on h1", JOB_TIMEOUT, || (proc_state(&task) == "T").then_some(()));
    control("bresume", job);
    wait_stat(cluster, h0, env0, job, &["RUN"]);
    wait_until("bresume resumes the task on h1", JOB_TIMEOUT, || {
        let state = proc_state(&task);
        (!state.is_empty() && state != "T").then_some(())
    });
    control("bkill", job);
    wait_stat(cluster, h0, env0, job, &["EXIT"]);
    wait_until("the stopped-then-resumed task is gone", JOB_TIMEOUT, || {
        pgrep(&pattern).is_empty().then_some(())
    });

    // -M 40MB: a task on h1 holding 200 MB is killed there, and says why.
    let hog = "perl -e '\\$x = q(a) x (200 * 1024 * 1024); sleep 600'";
    let script = format!("{blaunch} h1 \"{hog}\"; echo RC=$?");
    let job = bsub(
        cluster,
        h0,
        env0,
        &["-n", "4", "-R", "span[ptile=2]", "-M", "40MB", "-o", &out("mem.out"), &script],
    );
    let state = wait_stat(cluster, h0, env0, job, &["DONE", "EXIT"]);
    let said = std::fs::read_to_string(out("mem.out")).unwrap_or_default();
    assert_eq!(state, "DONE", "the job goes on after its task is killed: {said}");
    assert!(said.contains("over the job's memory limit of 40960 KB; it is killed"), "{said}");
    assert!(said.contains("on host <h1>"), "{said}");
    assert!(said.contains("RC=143\n") || said.contains("RC=137\n"), "killed by SIGTERM or SIGKILL: {said}");

    // A task that burns 3 s of CPU on h1: the job's CPU time (its own is next to nothing)
    // counts it, in bjobs -l and in bacct -l's CPU_T.
    let burn = "perl -e '1 while (times)[0] < 3'";
    let job = bsub(
        cluster,
        h0,
        env0,
        &["-n", "4", "-R", "span[ptile=2]", "-o", &out("cpu.out"), &format!("{blaunch} h1 \"{burn}\"")],
    );
    let state = wait_stat(cluster, h0, env0, job, &["DONE", "EXIT"]);
    assert_eq!(state, "DONE", "{}", std::fs::read_to_string(out("cpu.out")).unwrap_or_default());
    let output = run_in(cluster, h0, env0, &bin("bjobs"), &["-l", &job.to_string()]);
    let long = text(&output);
    let seconds: f64 = long
        .split("The CPU time used is ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no CPU time in bjobs -l: {long}"));
    assert!(seconds >= 3.0, "the remote task's 3 s of CPU are the job's: {long}");
    let acct = wait_until("bacct -l has the job", JOB_TIMEOUT, || {
        let output = run_in(cluster, h0, env0, &bin("bacct"), &["-l", &job.to_string()]);
        let said = text(&output);
        said.contains("CPU_T").then_some(said)
    });
    let cpu_t: f64 = acct
        .lines()
        .skip_while(|line| !line.contains("CPU_T"))
        .nth(1)
        .and_then(|line| line.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no CPU_T in bacct -l: {acct}"));
    assert!(cpu_t >= 3.0, "bacct -l counts the remote task's CPU: {acct}");
}

/// The sealed grant of `grant`, as an sbatchd holding `auth`'s key makes it.
fn seal_grant(auth: &lava_net::Authenticator, grant: &lava_batch_wire::TaskGrant) -> Vec<u8> {
    let mut sealed = lava_batch_wire::TASK_GRANT_MAGIC.to_vec();
    sealed.extend(util::proto::encode(grant));
    let nonce = lava_net::Nonce::fresh().expect("a nonce");
    let trailer = auth.seal_bytes(&sealed, lava_net::system_now_ms(), nonce);
    sealed.extend_from_slice(&trailer);
    sealed
}

/// Sends one TASK_START-coded frame with `body` to the task port and returns the refusal's
/// message (the port answers REQUEST_FAILED and closes), or `None` when the task started.
fn task_port_says(
    addr: std::net::SocketAddr,
    operation: lava_batch_wire::Operation,
    body: &[u8],
) -> Option<String> {
    use lava_batch_wire::{ErrorReply, Operation};
    let mut conn = util::proto::FrameConn::connect(addr);
    conn.send(util::proto::header(operation, 1), body);
    let frame = conn.recv().expect("an answer");
    if frame.header.operation == Operation::RequestFailed.code() {
        let error: ErrorReply = util::proto::decode(&frame.body);
        assert!(conn.recv().is_none(), "the port closes after a refusal");
        return Some(error.message);
    }
    assert_eq!(frame.header.operation, Operation::TaskStarted.code());
    while let Some(frame) = conn.recv() {
        if frame.header.operation == Operation::TaskExit.code() {
            break;
        }
    }
    None
}

/// A grant from the local sbatchd's socket, as blaunch asks it.
fn grant_from_socket(socket: &Path, job: u32, host: &str) -> Result<Vec<u8>, String> {
    use lava_batch_wire::{ErrorReply, Operation, TaskGrantReply, TaskGrantRequest, WireJobRef};
    use std::io::{Read, Write};
    let mut stream =
        std::os::unix::net::UnixStream::connect(socket).expect("connect to the credential socket");
    let body = util::proto::encode(&TaskGrantRequest {
        job: WireJobRef { job_id: job, array_index: 0 },
        host: host.to_owned(),
    });
    stream
        .write_all(&util::proto::frame_bytes(util::proto::header(Operation::TaskGrantRequest, 1), &body))
        .expect("send");
    let mut head = [0u8; lava_xdr::frame::HEADER_BYTES];
    stream.read_exact(&mut head).expect("an answer");
    let header = lava_xdr::frame::FrameHeader::parse(&head).expect("a header");
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).expect("a body");
    if header.operation == Operation::TaskGrantReply.code() {
        Ok(util::proto::decode::<TaskGrantReply>(&body).grant)
    } else {
        Err(util::proto::decode::<ErrorReply>(&body).message)
    }
}

// Goal: on one host (loopback), blaunch runs a task of its job on its own host; the task port
// refuses, with a reason and without harm to the daemon, every TASK_START it must not carry
// out: another operation, an oversized or malformed body, a grant sealed with another key,
// a replayed grant, a grant for another host, for a user without an account, or whose uid
// differs from the host's; the credential socket refuses a grant for a job it does not run.
#[test]
fn the_task_port_refuses_what_it_must_not_run() {
    use lava_batch_wire::{EnvVar, Operation, TaskGrant, TaskStart, WireJobRef};
    let mut cluster = Cluster::new();
    let port = util::fixed_port();
    cluster.rewrite_lsf_conf("LSF_RES_PORT", &port.to_string());
    let _mbatchd = cluster.start_mbatchd();
    let _sbatchd = cluster.start_sbatchd("localhost");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let output = cluster.command(bin("bsub")).args(["sleep", "60"]).output().expect("bsub");
    assert!(output.status.success(), "{}", text(&output));
    let job = submitted_job_id(&String::from_utf8_lossy(&output.stdout));
    wait_until("the job runs", JOB_TIMEOUT, || {
        let output =
            cluster.command(bin("bjobs")).args(["-noheader", &job.to_string()]).output().expect("bjobs");
        String::from_utf8_lossy(&output.stdout).contains(" RUN ").then_some(())
    });
    let blaunch = |args: &[&str]| {
        cluster
            .command(bin("blaunch"))
            .args(args)
            .env("LSB_JOBID", job.to_string())
            .output()
            .expect("blaunch")
    };
    let output = blaunch(&["localhost", "echo", "hi", "there"]);
    assert_eq!(
        (output.status.code(), String::from_utf8_lossy(&output.stdout).as_ref()),
        (Some(0), "hi there\n"),
        "{}",
        text(&output)
    );

    let socket = cluster.dir().join("run/lava.sock");
    let start = |grant: Vec<u8>| {
        util::proto::encode(&TaskStart {
            grant,
            command: "true".into(),
            env: vec![EnvVar { name: "PATH".into(), value: "/bin:/usr/bin".into() }],
            cwd: "/".into(),
        })
    };
    // A real grant starts one task, and only one.
    let grant = grant_from_socket(&socket, job, "localhost").expect("a grant for the running job");
    assert_eq!(task_port_says(addr, Operation::TaskStart, &start(grant.clone())), None);
    let said = task_port_says(addr, Operation::TaskStart, &start(grant)).expect("a replay is refused");
    assert!(said.contains("not valid"), "{said}");
    assert_eq!(
        grant_from_socket(&socket, job + 100, "localhost"),
        Err(format!("Job <{}> is not running on this host", job + 100))
    );

    let said = task_port_says(addr, Operation::JobQuery, &[]).expect("another operation");
    assert!(said.contains("is not TASK_START"), "{said}");
    let said = task_port_says(addr, Operation::TaskStart, &[1, 2, 3]).expect("garbage");
    assert!(said.contains("malformed TASK_START"), "{said}");
    let mut big = util::proto::header(Operation::TaskStart, 1);
    big.length = lava_batch_wire::TASK_START_BYTES_MAX + 1;
    let mut conn = util::proto::FrameConn::connect(addr);
    let mut head = Vec::new();
    big.write(&mut head);
    conn.send_raw(&head);
    let refusals = conn.expect_closed();
    assert!(refusals.iter().any(|error| error.message.contains("is over")), "{refusals:?}");

    let grant = |user: &str, uid: u32, to_host: &str| TaskGrant {
        job: WireJobRef { job_id: job, array_index: 0 },
        user: user.into(),
        uid,
        gid: 0,
        from_host: "localhost".into(),
        to_host: to_host.into(),
        cluster: util::CLUSTER_NAME.into(),
        mem_limit_kb: 0,
    };
    let other_key = Cluster::new().authenticator();
    let said = task_port_says(
        addr,
        Operation::TaskStart,
        &start(seal_grant(&other_key, &grant("root", 0, "localhost"))),
    )
    .expect("another cluster's key");
    assert!(said.contains("not valid"), "{said}");
    let auth = cluster.authenticator();
    let said =
        task_port_says(addr, Operation::TaskStart, &start(seal_grant(&auth, &grant("root", 0, "elsewhere"))))
            .expect("another host's grant");
    assert!(said.contains("is for host <elsewhere>, not <localhost>"), "{said}");
    let said = task_port_says(
        addr,
        Operation::TaskStart,
        &start(seal_grant(&auth, &grant("no-such-user-x", 0, "localhost"))),
    )
    .expect("an unknown user");
    assert!(said.contains("user <no-such-user-x> has no account"), "{said}");
    let said = task_port_says(
        addr,
        Operation::TaskStart,
        &start(seal_grant(&auth, &grant("root", 4242, "localhost"))),
    )
    .expect("another uid");
    assert!(said.contains("is uid 0 on host <localhost> but uid 4242"), "{said}");

    // Signal orders (TASK_JOB_SIGNAL): only one sealed with the cluster key, for this host,
    // is carried out (no task of the job runs here: none is signalled).
    let order = |to_host: &str| lava_batch_wire::TaskSignalOrder {
        job: WireJobRef { job_id: job, array_index: 0 },
        uid: 0,
        signal: 18,
        from_host: "elsewhere".into(),
        to_host: to_host.into(),
        cluster: util::CLUSTER_NAME.into(),
    };
    let signal_says = |sealed: Vec<u8>| {
        use lava_batch_wire::{ErrorReply, TaskJobSignal, TaskJobSignalReply};
        let mut conn = util::proto::FrameConn::connect(addr);
        conn.send(
            util::proto::header(Operation::TaskJobSignal, 1),
            &util::proto::encode(&TaskJobSignal { order: sealed }),
        );
        let frame = conn.recv().expect("an answer");
        if frame.header.operation == Operation::RequestFailed.code() {
            return Err(util::proto::decode::<ErrorReply>(&frame.body).message);
        }
        assert_eq!(frame.header.operation, Operation::TaskJobSignalReply.code());
        Ok(util::proto::decode::<TaskJobSignalReply>(&frame.body).tasks)
    };
    let seal_order = |auth: &lava_net::Authenticator, order: &lava_batch_wire::TaskSignalOrder| {
        let mut sealed = lava_batch_wire::TASK_SIGNAL_ORDER_MAGIC.to_vec();
        sealed.extend(util::proto::encode(order));
        let trailer =
            auth.seal_bytes(&sealed, lava_net::system_now_ms(), lava_net::Nonce::fresh().expect("a nonce"));
        sealed.extend_from_slice(&trailer);
        sealed
    };
    let said = signal_says(seal_order(&other_key, &order("localhost"))).expect_err("another key");
    assert!(said.contains("signal order is not valid"), "{said}");
    let said = signal_says(seal_order(&auth, &order("elsewhere"))).expect_err("another host");
    assert!(said.contains("is for host <elsewhere>, not <localhost>"), "{said}");
    // A grant is no signal order, even sealed with the key.
    let said = signal_says(seal_grant(&auth, &grant("root", 0, "localhost"))).expect_err("a grant");
    assert!(said.contains("signal order is not valid"), "{said}");
    let sealed = seal_order(&auth, &order("localhost"));
    assert_eq!(signal_says(sealed.clone()), Ok(0));
    assert!(signal_says(sealed).expect_err("a replay").contains("not valid"));

    // The port still serves.
    let output = blaunch(&["-z", "localhost", "echo ok"]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n", "{}", text(&output));
}
