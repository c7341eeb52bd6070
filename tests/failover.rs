//! Master failover on the real daemons (docs/failover.md): the master candidates h1, h2
//! and h3 (127.0.0.2 to .4) run mbatchd over their replicated event log; the execution host
//! h0 (127.0.0.1) runs sbatchd. The commands and sbatchd find whichever candidate leads
//! (the others answer on LSB_MBD_PORT with the leader's name). Each job appends its id to a file, so that
//! a job run twice shows.

mod util;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Output;
use std::time::Duration;

use lava_batch_wire as wire;
use util::fsync_fault::FsyncFault;
use util::small_fs::SmallFs;
use util::{Cluster, Daemon, STARTUP_TIMEOUT, submitted_job_id, wait_until};

const JOB_TIMEOUT: Duration = Duration::from_secs(120);
const CANDIDATES: [(&str, &str); 3] = [("h1", "127.0.0.2"), ("h2", "127.0.0.3"), ("h3", "127.0.0.4")];

fn run(cluster: &Cluster, name: &str, args: &[&str]) -> Output {
    let bin = util::mbatchd_bin().with_file_name(name);
    cluster.command(bin).args(args).output().unwrap_or_else(|e| panic!("run {name}: {e}"))
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

struct Rig {
    cluster: Cluster,
    /// The candidates of `LSF_MASTER_LIST`, with their addresses.
    candidates: &'static [(&'static str, &'static str)],
    mbd_port: u16,
    mbatchd: BTreeMap<&'static str, Daemon>,
    ran: std::path::PathBuf,
    /// mbatchd's `--snapshot-events` (25: compactions all the time).
    snapshot_events: &'static str,
}

impl Rig {
    /// The cluster with `candidates` in `LSF_MASTER_LIST`; mbatchd not started yet.
    fn new(candidates: &'static [(&'static str, &'static str)]) -> Rig {
        let cluster = Cluster::with_hosts(&["h0", "h1", "h2", "h3"]);
        let list: Vec<&str> = candidates.iter().map(|(name, _)| *name).collect();
        cluster.set_master_candidates(&list);
        let mbd_port = util::fixed_port();
        cluster.rewrite_lsf_conf("LSB_MBD_PORT", &mbd_port.to_string());
        cluster.rewrite_lsf_conf("LAVA_MBD_REPL_PORT", &util::fixed_port().to_string());
        let ran = cluster.dir().join("ran");
        std::fs::write(&ran, "").expect("create the run record");
        Rig { cluster, candidates, mbd_port, mbatchd: BTreeMap::new(), ran, snapshot_events: "25" }
    }

    fn start_all(&mut self) {
        for (name, _) in self.candidates {
            self.start(name);
        }
    }

    fn start(&mut self, name: &'static str) {
        let port = self.mbd_port.to_string();
        let port_file = self.cluster.dir().join(format!("run/mbatchd.{name}.port"));
        let _stale = std::fs::remove_file(&port_file);
        let args: Vec<&OsStr> = vec![
            "--foreground".as_ref(),
            "--host".as_ref(),
            name.as_ref(),
            "--port".as_ref(),
            port.as_ref(),
            "--port-file".as_ref(),
            port_file.as_ref(),
            "--snapshot-events".as_ref(),
            self.snapshot_events.as_ref(),
        ];
        let mut daemon = self.cluster.spawn("mbatchd", &util::mbatchd_bin(), &args);
        daemon.wait_for_port_file(&port_file, STARTUP_TIMEOUT);
        self.mbatchd.insert(name, daemon);
    }

    /// The candidate that serves now, if any (the one whose LSB_MBD_PORT answers a request
    /// other than with "not the master" or "no master").
    fn serving(&self) -> Option<&'static str> {
        self.serving_besides(None)
    }

    /// The candidate other than `skip` that serves now, if any (a paused candidate's port
    /// still accepts connections: the kernel completes them, and nothing answers).
    fn serving_besides(&self, skip: Option<&str>) -> Option<&'static str> {
        self.candidates.iter().filter(|(name, _)| Some(*name) != skip).find_map(|(name, _)| {
            let (status, _) = self.probe(name)?;
            (status != wire::ERR_NOT_MASTER && status != wire::ERR_NO_MASTER).then_some(*name)
        })
    }

    /// Sends candidate `name` one bodiless STATUS_QUERY frame and returns the answer's
    /// status and body; `None` when it does not answer within a second.
    fn probe(&self, name: &str) -> Option<(u32, Vec<u8>)> {
        self.probe_flagged(name, 0)
    }

    /// [`Rig::probe`] with `flags` in the request's header status word.
    fn probe_flagged(&self, name: &str, flags: u32) -> Option<(u32, Vec<u8>)> {
        let (_, ip) = self.candidates.iter().find(|(n, _)| *n == name).expect("a candidate");
        let addr: SocketAddr = format!("{ip}:{}", self.mbd_port).parse().expect("address");
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        let mut frame = Vec::new();
        for word in [7, wire::Operation::StatusQuery.code(), wire::BATCH_VERSION, 0, flags] {
            frame.extend_from_slice(&u32::to_be_bytes(word));
        }
        stream.write_all(&frame).ok()?;
        let mut header = [0u8; 20];
        stream.read_exact(&mut header).ok()?;
        let word = |at: usize| u32::from_be_bytes(header[at..at + 4].try_into().expect("4 bytes"));
        let mut body = vec![0u8; word(12) as usize];
        stream.read_exact(&mut body).ok()?;
        Some((word(16), body))
    }

    /// The candidate that serves, once one does.
    fn leader(&self) -> &'static str {
        wait_until("a candidate serves", Duration::from_secs(30), || self.serving())
    }

    /// Submits a job that records its run; returns its id once acknowledged.
    fn submit(&self) -> u32 {
        let script = format!("echo $LSB_JOBID >> {}", self.ran.display());
        let out = run(&self.cluster, "bsub", &["-m", "h0", "sh", "-c", &script]);
        assert!(out.status.success(), "bsub: {}", text(&out));
        submitted_job_id(&String::from_utf8_lossy(&out.stdout))
    }

    fn kill(&mut self, name: &str) {
        self.mbatchd.get_mut(name).expect("running").kill();
    }

    /// Candidate `name` stops on its own, with a failure that names the disk's I/O error.
    fn wait_failed_flush(&mut self, name: &str) {
        let daemon = self.mbatchd.get_mut(name).expect("started");
        let status = daemon.wait_exit(JOB_TIMEOUT);
        let said = daemon.log();
        assert!(!status.success(), "{name} went on after a failed flush ({status}):\n{said}");
        assert!(said.contains("Input/output error"), "{name} names the I/O error:\n{said}");
        assert!(!said.contains("panicked"), "{said}");
    }

    /// Every job DONE, each recorded as run exactly once.
    fn all_done_once(&self, jobs: &[u32]) {
        wait_until("every job DONE", JOB_TIMEOUT, || {
            let mut args = vec!["-a".to_string(), "-noheader".to_string()];
            args.extend(jobs.iter().map(u32::to_string));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = run(&self.cluster, "bjobs", &args);
            let listed = String::from_utf8_lossy(&out.stdout).into_owned();
            let done = listed.lines().filter(|line| line.split_whitespace().nth(2) == Some("DONE")).count();
            (done == jobs.len()).then_some(())
        });
        let ran = std::fs::read_to_string(&self.ran).expect("the run record");
        for job in jobs {
            let runs = ran.lines().filter(|line| line.trim() == job.to_string()).count();
            assert_eq!(runs, 1, "job {job} ran {runs} times:\n{ran}");
        }
    }
}

#[test]
fn the_cluster_survives_its_leaders_death_and_the_dead_candidate_returns() {
    let mut rig = Rig::new(&CANDIDATES);
    rig.start_all();
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    let first_leader = rig.leader();
    let mut jobs: Vec<u32> = (0..10).map(|_| rig.submit()).collect();
    rig.all_done_once(&jobs);

    // The leader dies with jobs just submitted.
    jobs.extend((0..5).map(|_| rig.submit()));
    rig.kill(first_leader);
    let second_leader = rig.leader();
    assert_ne!(second_leader, first_leader);
    jobs.extend((0..10).map(|_| rig.submit()));
    rig.all_done_once(&jobs);

    // The dead candidate comes back from its disk alone and follows; with the second
    // leader gone too, the cluster goes on only if it caught up.
    rig.start(first_leader);
    jobs.extend((0..5).map(|_| rig.submit()));
    rig.all_done_once(&jobs);
    rig.kill(second_leader);
    let third_leader = rig.leader();
    eprintln!("leaders: {first_leader}, then {second_leader}, then {third_leader}");
    assert_ne!(third_leader, second_leader);
    jobs.extend((0..5).map(|_| rig.submit()));
    rig.all_done_once(&jobs);
    // badmin showstatus names the roles and, once the live candidates caught up, one log index.
    wait_until("badmin showstatus shows every candidate caught up", JOB_TIMEOUT, || {
        let out = run(&rig.cluster, "badmin", &["showstatus"]);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        let block: Vec<&str> =
            said.lines().skip_while(|l| !l.contains("Master candidates:")).skip(1).take(3).collect();
        let leader_line = block.iter().find(|l| l.split_whitespace().nth(1) == Some("leader"))?;
        if leader_line.split_whitespace().next() != Some(third_leader) {
            return None;
        }
        // The second leader is down: the two live candidates hold the same index.
        let indexes: std::collections::BTreeSet<&str> = block
            .iter()
            .filter(|l| l.split_whitespace().next() != Some(second_leader))
            .filter_map(|l| l.split_whitespace().last())
            .collect();
        (block.len() == 3 && indexes.len() == 1).then_some(())
    });
    let out = run(&rig.cluster, "bjobs", &["-a", "-noheader"]);
    let listed = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(listed, jobs.len(), "no job lost or made twice:\n{}", text(&out));
}

// Goal: with two candidates, one is not a majority: while either is down nobody serves (a
// lone candidate never acknowledges anything), and once both run again the cluster goes on
// with every job it acknowledged. mbatchd refuses to run as a host that is no candidate,
// naming the list.
#[test]
fn two_candidates_serve_only_together_and_a_stranger_host_is_refused() {
    let mut rig = Rig::new(&CANDIDATES[..2]);
    let refused = run(&rig.cluster, "mbatchd", &["--foreground", "--port", "0", "--host", "h0"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("--host h0: not a master candidate (LSF_MASTER_LIST: h1 h2)"),
        "{}",
        text(&refused)
    );
    rig.start("h2");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(rig.serving(), None, "h2 alone is no majority of two");
    rig.start("h1");
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    let leader = rig.leader();
    let mut jobs = vec![rig.submit()];
    rig.all_done_once(&jobs);

    rig.kill(leader);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(rig.serving(), None, "the candidate left alone does not serve");
    rig.start(leader);
    rig.leader();
    jobs.push(rig.submit());
    rig.all_done_once(&jobs);
}

// Goal (issue 20, case c): the leader's mbatchd is paused (SIGSTOP) longer than an
// election takes. Commands that reach its port — which the kernel still answers — give up
// on it after the candidates' reply timeout and find the new leader; the old one, resumed,
// acknowledges nothing, starts again and follows; every job runs exactly once.
#[test]
fn a_paused_leader_is_replaced_and_acknowledges_nothing_once_resumed() {
    let mut rig = Rig::new(&CANDIDATES);
    rig.start_all();
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    let paused = rig.leader();
    let mut jobs = vec![rig.submit()];
    rig.all_done_once(&jobs);

    let pid = rig.mbatchd[paused].pid().to_string();
    let signal = |name: &str| {
        let status = std::process::Command::new("kill").args([name, &pid]).status().expect("kill");
        assert!(status.success(), "kill {name} {pid}");
    };
    signal("-STOP");
    let second =
        wait_until("another candidate serves", Duration::from_secs(30), || rig.serving_besides(Some(paused)));
    jobs.extend((0..3).map(|_| rig.submit()));
    signal("-CONT");
    rig.all_done_once(&jobs);
    jobs.push(rig.submit());
    rig.all_done_once(&jobs);
    let out = run(&rig.cluster, "bjobs", &["-a", "-noheader"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), jobs.len(), "{}", text(&out));
    let log = rig.mbatchd[paused].log();
    assert!(
        log.contains("no longer the master: starting again to follow from the replicated log"),
        "the resumed leader stepped down (new leader {second}):\n{log}"
    );
    // It started again in the same process, as the same candidate, and follows.
    assert!(rig.mbatchd.get_mut(paused).expect("started").is_running(), "{log}");
    assert!(log.matches("replicated event log opened").count() >= 2, "{log}");
}

// ----- lsb.events and lsb.acct on the candidates (crate::derived in mbatchd) -----

impl Rig {
    /// The folder of candidate `name`: `logdir/<name>`.
    fn candidate_dir(&self, name: &str) -> std::path::PathBuf {
        self.cluster.event_log_dir().join(name)
    }

    /// Every candidate started, h2's folder on a small tmpfs ([`Rig::small_disk`]), h0's
    /// sbatchd, and the leader (h1 stands for election first; h2 follows, as the tests
    /// that fill its disk need); `None` when the test is skipped.
    fn with_small_follower_disk() -> Option<(Rig, SmallFs, Daemon, &'static str)> {
        let mut rig = Rig::new(&CANDIDATES);
        let disk = rig.small_disk("h2")?;
        rig.start_all();
        let sbatchd = rig.cluster.start_sbatchd("h0");
        let leader = rig.leader();
        assert_ne!(leader, "h2", "h1 stands for election first; h2 must follow for this test");
        Some((rig, disk, sbatchd, leader))
    }

    /// Submits jobs into `jobs` (each acknowledged: committed by the two other candidates)
    /// until h2's log says `said`, h2 still running after each.
    fn submit_until_h2_logs(&mut self, jobs: &mut Vec<u32>, what: &str, said: &str) {
        wait_until(what, JOB_TIMEOUT, || {
            jobs.push(self.submit());
            let h2 = self.mbatchd.get_mut("h2").expect("h2");
            assert!(h2.is_running(), "h2 stopped on a full disk:\n{}", h2.log());
            h2.log().contains(said).then_some(())
        });
    }

    /// Candidate `name`'s folder on an 8 MiB tmpfs, and no space reserve on any candidate;
    /// `None` when the test is skipped (no tmpfs can be mounted).
    fn small_disk(&self, name: &str) -> Option<SmallFs> {
        self.cluster.rewrite_lsf_conf("LAVA_STATE_RESERVE_MB", "0");
        let folder = self.candidate_dir(name);
        std::fs::create_dir_all(&folder).expect("create the candidate's folder");
        SmallFs::mount_or_skip(&folder, "8m")
    }

    /// The job ids of the JOB_FINISH lines in candidate `name`'s lsb.acct, each line checked.
    fn acct_jobs(&self, name: &str) -> Vec<u32> {
        let text = std::fs::read_to_string(self.candidate_dir(name).join("lsb.acct")).unwrap_or_default();
        text.lines()
            .map(|line| {
                lava_batch_ll::acct::AcctRecord::parse(line)
                    .unwrap_or_else(|e| panic!("{name}'s lsb.acct: {e}: {line}"))
                    .unwrap_or_else(|| panic!("{name}'s lsb.acct: no JOB_FINISH line: {line}"))
                    .job_id
            })
            .collect()
    }

    /// Waits until candidate `name`'s lsb.acct has a line for each of `jobs`, then checks
    /// it has exactly one for each and none besides.
    fn acct_once(&self, name: &str, jobs: &[u32]) {
        wait_until(&format!("{name}'s lsb.acct holds every job"), JOB_TIMEOUT, || {
            let listed = self.acct_jobs(name);
            jobs.iter().all(|job| listed.contains(job)).then_some(())
        });
        let mut listed = self.acct_jobs(name);
        listed.sort_unstable();
        let mut expected = jobs.to_vec();
        expected.sort_unstable();
        assert_eq!(listed, expected, "{name}'s lsb.acct: one line per finished job");
    }
}

// Goal: every candidate writes the committed events to its own lsb.events, so after the
// leader's death the new leader's bhist shows the whole history of a job finished under
// the old one, and its lsb.events text view words it; a candidate restarted after the
// others compacted past it (caught up by a snapshot) writes no event twice.
#[test]
fn bhist_on_the_new_leader_shows_the_events_of_jobs_run_under_the_old_one() {
    let mut rig = Rig::new(&CANDIDATES);
    rig.start_all();
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    let first = rig.leader();
    let jobs: Vec<u32> = (0..3).map(|_| rig.submit()).collect();
    rig.all_done_once(&jobs);
    rig.kill(first);
    let second = rig.leader();
    assert_ne!(first, second);
    let id = jobs[0].to_string();
    let out = run(&rig.cluster, "bhist", &["-l", &id]);
    let history: String = text(&out).split_whitespace().collect();
    assert!(out.status.success(), "bhist -l {id} on {second}: {}", text(&out));
    assert!(history.contains(&format!("Job<{id}>")), "{history}");
    assert!(history.contains("Submittedfromhost"), "{history}");
    assert!(history.contains("Donesuccessfully"), "{history}");
    // The text view of the new leader's folder words the job's submission, once.
    let view_path = rig.candidate_dir(second).join("lsb.events");
    wait_until("the text view words the job", JOB_TIMEOUT, || {
        let view = std::fs::read_to_string(&view_path).ok()?;
        view.lines()
            .any(|line| line.starts_with("\"JOB_NEW\"") && line.contains(&format!(" {id} ")))
            .then_some(())
    });

    // The dead one comes back after 30 more events were compacted (--snapshot-events 25)
    // and leads after the second's death: its history has every job, none twice.
    let mut later: Vec<u32> = (0..10).map(|_| rig.submit()).collect();
    rig.all_done_once(&later);
    rig.start(first);
    later.push(rig.submit());
    rig.all_done_once(&later);
    rig.kill(second);
    let third = rig.leader();
    let all: Vec<u32> = jobs.iter().chain(&later).copied().collect();
    rig.all_done_once(&all);
    for job in [jobs[0], *later.last().expect("jobs")] {
        let out = run(&rig.cluster, "bhist", &["-l", &job.to_string()]);
        let history: String = text(&out).split_whitespace().collect();
        assert!(history.contains("Donesuccessfully"), "bhist -l {job} on {third}: {history}");
        assert_eq!(history.matches("Submittedfromhost").count(), 1, "bhist -l {job} on {third}: {history}");
    }
}

// Goal: lsb.acct has exactly one line per finished job on every candidate, also when the
// leader dies (a crash point: SIGKILL from itself) right after appending a committed
// event to its lsb.events, before that event's lsb.acct line: the next leader has the
// line, and the dead candidate, back, rebuilds it without writing any twice.
#[test]
fn lsb_acct_has_one_line_per_job_after_the_leader_dies_between_commit_and_line() {
    let mut rig = Rig::new(&CANDIDATES);
    let crash_dir = rig.cluster.dir().join("crash");
    std::fs::create_dir_all(&crash_dir).expect("create the crash folder");
    let arm = crash_dir.join("arm");
    let report = crash_dir.join("report");
    rig.cluster.set_daemon_env("mbatchd", lava_crash::ENV_AT, "mbatchd.event_appended");
    rig.cluster.set_daemon_env("mbatchd", lava_crash::ENV_ARM, &arm);
    rig.cluster.set_daemon_env("mbatchd", lava_crash::ENV_REPORT, &report);
    rig.start_all();
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    rig.leader();
    let mut jobs: Vec<u32> = (0..3).map(|_| rig.submit()).collect();
    rig.all_done_once(&jobs);
    // A job that runs a little, armed while it runs: the next committed event (its
    // finish, as a rule) kills the first candidate that appends it. That is the leader, the
    // first to know it committed, unless a follower is told first; then that follower,
    // which died at the same boundary, starts again, and the next job tries again.
    let leader = rig.leader();
    let mut crashed = None;
    for _attempt in 0..10 {
        let _stale = std::fs::remove_file(&report);
        let script = format!("sleep 2; echo $LSB_JOBID >> {}", rig.ran.display());
        let out = run(&rig.cluster, "bsub", &["-m", "h0", "sh", "-c", &script]);
        assert!(out.status.success(), "bsub: {}", text(&out));
        let slow = submitted_job_id(&String::from_utf8_lossy(&out.stdout));
        jobs.push(slow);
        // Armed once every candidate wrote what the leader wrote (the same text views).
        wait_until("every candidate's lsb.events caught up", JOB_TIMEOUT, || {
            let views: Vec<Option<String>> = rig
                .candidates
                .iter()
                .map(|(name, _)| std::fs::read_to_string(rig.candidate_dir(name).join("lsb.events")).ok())
                .collect();
            let first = views[0].as_ref()?;
            let started = first.lines().filter(|line| line.contains(&format!(" {slow} "))).count() >= 2;
            (started && views.iter().all(|view| view.as_ref() == Some(first))).then_some(())
        });
        std::fs::write(&arm, "").expect("arm the crash point");
        let crashed_pid = wait_until("a candidate crashes at the point", JOB_TIMEOUT, || {
            let said = std::fs::read_to_string(&report).ok()?;
            said.split_whitespace().find_map(|word| word.parse::<u32>().ok())
        });
        let name = rig
            .candidates
            .iter()
            .map(|(name, _)| *name)
            .find(|name| rig.mbatchd[name].pid() == crashed_pid)
            .unwrap_or_else(|| panic!("pid {crashed_pid} is no candidate's"));
        rig.kill(name);
        if name == leader {
            crashed = Some(name);
            break;
        }
        eprintln!("follower {name} crashed first: starting it again");
        rig.start(name);
        rig.all_done_once(&jobs);
    }
    let crashed = crashed.expect("the leader crashed at the point within 10 attempts");

    let next = rig.leader();
    jobs.extend((0..3).map(|_| rig.submit()));
    rig.all_done_once(&jobs);
    rig.acct_once(next, &jobs);
    rig.start(crashed);
    rig.acct_once(crashed, &jobs);
    let third = CANDIDATES.iter().map(|(name, _)| *name).find(|name| *name != crashed && *name != next);
    rig.acct_once(third.expect("three candidates"), &jobs);
    // bacct without -f reads a candidate's own lsb.acct (the newest found on this host).
    let out = run(&rig.cluster, "bacct", &["-u", "all"]);
    assert!(out.status.success(), "bacct: {}", text(&out));
    let want = format!(" Total number of done jobs:{:>8}", jobs.len());
    assert!(String::from_utf8_lossy(&out.stdout).contains(&want), "{}", text(&out));
}

// Goal: a single master's cluster with jobs moves to three candidates: each candidate is
// seeded once from the single master's lsb.events (`mbatchd --seed-from`), and the
// candidates then hold its jobs (bjobs -a lists them) and go on numbering after them; a
// second seed of a candidate whose log is not empty is refused, naming it.
#[test]
fn a_single_masters_jobs_are_kept_when_its_cluster_moves_to_three_candidates() {
    let mut rig = Rig::new(&CANDIDATES);
    let list = rig.candidates.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(" ");
    rig.cluster.rewrite_lsf_conf("LSF_MASTER_LIST", "h1");
    rig.start("h1");
    let sbatchd = rig.cluster.start_sbatchd("h0");
    let mut jobs: Vec<u32> = (0..3).map(|_| rig.submit()).collect();
    rig.all_done_once(&jobs);
    rig.kill("h1");
    drop(sbatchd);

    rig.cluster.rewrite_lsf_conf("LSF_MASTER_LIST", &format!("\"{list}\""));
    let logdir = rig.cluster.event_log_dir();
    let logdir = logdir.to_str().expect("utf-8");
    for (name, _) in CANDIDATES {
        let out = run(&rig.cluster, "mbatchd", &["--host", name, "--seed-from", logdir]);
        assert!(out.status.success(), "seed {name}: {}", text(&out));
        assert!(text(&out).contains(&format!("last job id {}", jobs[2])), "{}", text(&out));
    }
    let again = run(&rig.cluster, "mbatchd", &["--host", "h2", "--seed-from", logdir]);
    assert!(!again.status.success());
    assert!(text(&again).contains("is not empty: a candidate is seeded once"), "{}", text(&again));
    let missing = run(&rig.cluster, "mbatchd", &["--host", "h2", "--seed-from", "/nonexistent/logdir"]);
    assert!(text(&missing).contains("--seed-from /nonexistent/logdir: no such folder"), "{}", text(&missing));

    rig.start_all();
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    rig.leader();
    let out = run(&rig.cluster, "bjobs", &["-a", "-noheader"]);
    for job in &jobs {
        assert!(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.split_whitespace().next() == Some(&job.to_string())),
            "job {job} kept:\n{}",
            text(&out)
        );
    }
    let next = rig.submit();
    assert!(next > jobs[2], "job ids go on after the single master's: {next}");
    jobs.push(next);
    rig.all_done_once(&jobs);
}

// Issue 20: a candidate that does not lead answers on LSB_MBD_PORT with the leader's name;
// a command that knows only that candidate follows it to the leader; a stranger's garbage
// on the follower's port costs only its own connection.
#[test]
fn a_follower_names_the_leader_and_a_command_follows_it() {
    let mut rig = Rig::new(&CANDIDATES);
    rig.start_all();
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    let leader = rig.leader();
    let follower = CANDIDATES.iter().map(|(name, _)| *name).find(|name| *name != leader).expect("a follower");
    let named = wait_until("the follower names the leader", Duration::from_secs(30), || {
        let (status, body) = rig.probe(follower)?;
        (status == wire::ERR_NOT_MASTER).then_some(body)
    });
    let refusal: wire::ErrorReply =
        lava_xdr::from_bytes(&named, &lava_xdr::Limits::default()).expect("an ErrorReply");
    let (_, leader_ip) = CANDIDATES.iter().find(|(n, _)| *n == leader).expect("listed");
    assert_eq!(refusal.message, format!("{leader} {leader_ip}"));

    // A stranger's garbage: a header claiming a huge body, then junk; the follower closes.
    let (_, ip) = CANDIDATES.iter().find(|(n, _)| *n == follower).expect("listed");
    let addr: SocketAddr = format!("{ip}:{}", rig.mbd_port).parse().expect("address");
    let mut stranger = TcpStream::connect(addr).expect("the follower listens");
    stranger.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let _ = stranger.write_all(&[0xff; 20]);
    let _ = stranger.write_all(b"not a frame at all");
    let mut rest = Vec::new();
    // Closed (or reset) within the read timeout, with nothing sent back.
    if let Err(error) = stranger.read_to_end(&mut rest) {
        let timed_out = matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
        assert!(!timed_out, "the follower kept a stranger's connection open for 30 s");
    }
    assert!(rest.is_empty(), "the stranger got an answer: {rest:?}");
    assert_eq!(rig.probe(follower).map(|(status, _)| status), Some(wire::ERR_NOT_MASTER));

    // The command knows the follower only.
    rig.cluster.rewrite_lsf_conf("LSF_MASTER_LIST", &format!("\"{follower}\""));
    let jobs = vec![rig.submit()];
    rig.all_done_once(&jobs);
}

// Issue 20: with two of three candidates dead no candidate leads. Writes are refused: bsub
// says there is no master and gives up within its retry bound. Read-only queries are
// answered by the candidate left (the deposed leader) from its last applied state, marked: a
// warning on standard error naming it, its commit index and its last contact with a master,
// standard output as LSF prints it, exit 0. A follower that knows a leader never answers so (it names the
// leader), and a query asking for a stale answer is checked as the leader checks it. Once a
// majority is back, no warning.
#[test]
fn without_a_majority_writes_are_refused_and_queries_answered_marked_stale() {
    let mut rig = Rig::new(&CANDIDATES);
    rig.start_all();
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    let leader = rig.leader();
    let mut jobs: Vec<u32> = (0..3).map(|_| rig.submit()).collect();
    rig.all_done_once(&jobs);
    let others: Vec<&str> = CANDIDATES.iter().map(|(name, _)| *name).filter(|name| *name != leader).collect();
    // A follower that knows the leader names it, stale answer asked for or not.
    let (status, _) = wait_until("a follower names the leader", Duration::from_secs(30), || {
        rig.probe_flagged(others[0], wire::REQUEST_ACCEPT_STALE)
            .filter(|(status, _)| *status == wire::ERR_NOT_MASTER)
    });
    assert_eq!(status, wire::ERR_NOT_MASTER);

    // The leader loses both followers: it hears from no majority, so it is deposed and starts
    // again (the same process, `exec`), then answers from its last applied state, naming when
    // it last knew a master (itself, before it started again), not its own start.
    rig.kill(others[0]);
    rig.kill(others[1]);
    let survivor = leader;
    wait_until("the survivor says there is no master", Duration::from_secs(30), || {
        let (status, _) = rig.probe(survivor)?;
        (status == wire::ERR_NO_MASTER).then_some(())
    });
    let command = |cluster: &Cluster, name: &str, args: &[&str], retry_secs: &str| {
        let bin = util::mbatchd_bin().with_file_name(name);
        cluster.command(bin).args(args).env("LAVA_RETRY_SECS", retry_secs).output().expect("run")
    };
    let out = command(&rig.cluster, "bsub", &["sleep", "1"], "3");
    assert!(!out.status.success(), "bsub succeeded without a majority: {}", text(&out));
    assert!(
        text(&out).contains("no master elected yet among the 3 master candidates"),
        "bsub: {}",
        text(&out)
    );
    let out = command(&rig.cluster, "bkill", &[&jobs[0].to_string()], "3");
    assert!(!out.status.success(), "bkill succeeded without a majority: {}", text(&out));

    // bjobs: every job acknowledged before, on standard output; the warning on standard error.
    let out = command(&rig.cluster, "bjobs", &["-a", "-noheader"], "30");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "bjobs without a majority: {}", text(&out));
    for job in &jobs {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(&job.to_string()) && l.contains(" DONE ")),
            "job {job} listed DONE:\n{stdout}"
        );
    }
    assert!(!stdout.contains("Warning"), "standard output stays LSF's: {stdout}");
    let warning = format!(
        "Warning: no master: answered by master candidate {survivor} from its last applied state (commit index "
    );
    assert!(stderr.contains(&warning), "bjobs: {stderr}");
    assert!(
        stderr.contains("last in contact with a master ") && stderr.contains("it may be out of date"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("Warning: no master").count(), 1, "one warning: {stderr}");
    for (name, args) in
        [("bhosts", &[][..]), ("bqueues", &[][..]), ("busers", &["all"][..]), ("badmin", &["showstatus"][..])]
    {
        let out = command(&rig.cluster, name, args, "30");
        assert!(out.status.success(), "{name} without a majority: {}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains(&warning), "{name}: {}", text(&out));
        if name == "badmin" {
            assert!(String::from_utf8_lossy(&out.stdout).contains("no master)"), "{}", text(&out));
        }
    }
    // A query asking for a stale answer is checked as any: a STATUS_QUERY without a body is refused.
    let (status, _) = rig.probe_flagged(survivor, wire::REQUEST_ACCEPT_STALE).expect("an answer");
    assert_eq!(status, wire::ERR_BAD_REQUEST, "a malformed query is refused, not answered");

    // A majority again: no warning, every job, and new ones go on.
    rig.start(others[0]);
    rig.leader();
    jobs.push(rig.submit());
    rig.all_done_once(&jobs);
    let out = command(&rig.cluster, "bjobs", &["-a", "-noheader"], "30");
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("Warning"), "no warning with a master: {}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), jobs.len(), "{}", text(&out));
}

// ----- changing the candidates (docs/operations.md, "Adding or removing a candidate") -----

const FOUR: [(&str, &str); 4] =
    [("h1", "127.0.0.2"), ("h2", "127.0.0.3"), ("h3", "127.0.0.4"), ("h4", "127.0.0.5")];
const THREE_LATER: [(&str, &str); 3] = [("h2", "127.0.0.3"), ("h3", "127.0.0.4"), ("h4", "127.0.0.5")];

impl Rig {
    /// Step 1 of the procedure: `systemctl stop` (SIGTERM) of mbatchd on every candidate.
    fn stop_all(&mut self) {
        for (name, mut daemon) in std::mem::take(&mut self.mbatchd) {
            let status = daemon.terminate();
            assert!(status.success(), "mbatchd on {name} stopped cleanly: {status}\n{}", daemon.log());
        }
    }

    /// Step 2: the new `LSF_MASTER_LIST` on every host, and a line in lsf.cluster for each
    /// candidate (the one test configuration is every host's).
    fn change_candidates(&mut self, candidates: &'static [(&'static str, &'static str)]) {
        let mut rows = String::from("h0 ! ! 1 (cs linux) 127.0.0.1\n");
        for (name, ip) in
            FOUR.iter().filter(|(name, _)| *name != "h4" || candidates.iter().any(|c| c.0 == "h4"))
        {
            rows.push_str(&format!("{name} ! ! 1 (cs linux) {ip}\n"));
        }
        self.cluster.write_file(
            "etc/lsf.cluster.lavacore",
            &format!(
                "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
                 HOSTNAME model type server RESOURCES LAVA_ADDR\n{rows}End Host\n"
            ),
        );
        let list: Vec<&str> = candidates.iter().map(|(name, _)| *name).collect();
        self.cluster.rewrite_lsf_conf("LSF_MASTER_LIST", &format!("\"{}\"", list.join(" ")));
        self.candidates = candidates;
    }

    /// `badmin showstatus` on the leader shows `n` candidates, `leader` leading, and every
    /// live candidate of `live` holding the same log index (caught up).
    fn wait_caught_up(&self, leader: &str, live: &[&str], n: usize) {
        wait_until(&format!("{live:?} caught up under {leader}"), JOB_TIMEOUT, || {
            let out = run(&self.cluster, "badmin", &["showstatus"]);
            let said = String::from_utf8_lossy(&out.stdout).into_owned();
            let block: Vec<&str> =
                said.lines().skip_while(|l| !l.contains("Master candidates:")).skip(1).take(n).collect();
            let leads = block.iter().any(|l| {
                let mut words = l.split_whitespace();
                words.next() == Some(leader) && words.next() == Some("leader")
            });
            let indexes: std::collections::BTreeSet<&str> = block
                .iter()
                .filter(|l| live.contains(&l.split_whitespace().next().unwrap_or("")))
                .filter_map(|l| l.split_whitespace().last())
                .collect();
            let listed =
                block.iter().filter(|l| live.contains(&l.split_whitespace().next().unwrap_or(""))).count();
            (leads && listed == live.len() && indexes.len() == 1).then_some(())
        });
    }
}

// Goal (issue 20): docs/operations.md's procedure for changing the candidates, followed
// step by step on a cluster with jobs. Three candidates; a fourth is added (every mbatchd
// stopped, the new list everywhere, every candidate started, sbatchd restarted): it catches
// up from the leader. Then the first is removed the same way, and the new one leads once the
// others are killed or behind it. Every acknowledged job is kept, runs once, and job ids go
// on after the last.
#[test]
fn candidates_are_added_and_removed_by_the_operations_guide() {
    let mut rig = Rig::new(&CANDIDATES);
    rig.start_all();
    let mut sbatchd = rig.cluster.start_sbatchd("h0");
    rig.leader();
    let mut jobs: Vec<u32> = (0..4).map(|_| rig.submit()).collect();
    rig.all_done_once(&jobs);
    // A job still running during the change: it goes on and is not run again.
    let script = format!("sleep 4; echo $LSB_JOBID >> {}", rig.ran.display());
    let out = run(&rig.cluster, "bsub", &["-m", "h0", "sh", "-c", &script]);
    assert!(out.status.success(), "bsub: {}", text(&out));
    jobs.push(submitted_job_id(&String::from_utf8_lossy(&out.stdout)));

    // Adding h4: steps 1 to 4.
    rig.stop_all();
    rig.change_candidates(&FOUR);
    rig.start_all();
    drop(sbatchd);
    sbatchd = rig.cluster.start_sbatchd("h0");
    let leader = rig.leader();
    let last = *jobs.iter().max().expect("jobs");
    let next = rig.submit();
    assert!(next > last, "job ids go on after {last}: {next}");
    jobs.push(next);
    rig.all_done_once(&jobs);
    rig.wait_caught_up(leader, &["h1", "h2", "h3", "h4"], 4);

    // Removing h1: the same steps; the three left were up to date (checked just above).
    jobs.extend((0..2).map(|_| rig.submit()));
    rig.all_done_once(&jobs);
    rig.stop_all();
    rig.change_candidates(&THREE_LATER);
    rig.start_all();
    drop(sbatchd);
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    let leader = rig.leader();
    assert_ne!(leader, "h1", "h1 is no candidate any more");
    jobs.push(rig.submit());
    rig.all_done_once(&jobs);
    rig.wait_caught_up(leader, &["h2", "h3", "h4"], 3);

    // h4 leads once the others are dead or behind it: h2 misses what h3 and h4 commit, then
    // h3 dies and h2 comes back; h4's log is the newer, so it is elected.
    rig.kill("h2");
    let leader = rig.leader();
    assert_eq!(leader, "h3", "h3 is next in the list");
    jobs.extend((0..3).map(|_| rig.submit()));
    rig.all_done_once(&jobs);
    rig.wait_caught_up("h3", &["h3", "h4"], 3);
    rig.kill("h3");
    rig.start("h2");
    let leader = rig.leader();
    assert_eq!(leader, "h4", "the newest candidate leads");
    let last = *jobs.iter().max().expect("jobs");
    let next = rig.submit();
    assert!(next > last, "job ids go on after {last} under h4: {next}");
    jobs.push(next);
    rig.all_done_once(&jobs);
    let out = run(&rig.cluster, "bjobs", &["-a", "-noheader"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), jobs.len(), "{}", text(&out));
}

// Goal: a full disk stops no candidate (docs/operations.md, "A full disk"; docs/failover.md,
// "A full disk on a candidate"): a follower whose replica log finds its disk full stays up
// and acknowledges nothing while the two others commit every job; once space returns it
// writes what waited and catches up, and with the third candidate killed the cluster
// commits on it. Every acknowledged job ends DONE, run once.
// Method: h2's candidate folder on an 8 MiB tmpfs and no space reserve
// (`LAVA_STATE_RESERVE_MB=0`); the tmpfs kept full by a file that takes whatever h2's
// pruning frees (the leader compacts every 25 events; h2 holds what it received in memory,
// so it needs no snapshot: `tests/replica_full_disk.rs` keeps one on a full disk); jobs
// submitted until h2 logs that its replica log waits for room; the file deleted;
// `badmin showstatus` until h2 holds the leader's index; h3 killed; one more job.
#[test]
fn a_followers_full_disk_stops_nothing_and_it_catches_up_once_space_returns() {
    let Some((mut rig, disk, _sbatchd, leader)) = Rig::with_small_follower_disk() else { return };
    let mut jobs = vec![rig.submit()];
    let filler = disk.keep_full("filler");
    let stalled = "acknowledges nothing more until its replica log can be written";
    rig.submit_until_h2_logs(&mut jobs, "h2's replica log waits for room", stalled);
    jobs.push(rig.submit());
    assert!(rig.mbatchd.get_mut("h2").expect("h2").is_running(), "h2 stopped for a full disk");
    filler.free();
    rig.wait_caught_up(leader, &["h1", "h2", "h3"], 3);
    let h2 = rig.mbatchd["h2"].log();
    assert!(h2.contains("the replica log is written again"), "{h2}");
    let other = if leader == "h1" { "h3" } else { "h1" };
    rig.kill(other);
    // A majority is the leader and h2 now.
    jobs.push(rig.submit());
    rig.all_done_once(&jobs);
    eprintln!("{} jobs", jobs.len());
}

// Goal (docs/failover.md, "A full disk on a candidate"): a follower that takes a leader's
// snapshot its full disk cannot keep does not campaign when the leader dies (raft-rs stopped
// the process on it before: it read entries its store had compacted), and once it has room
// it keeps the snapshot, votes, and the cluster goes on. Every acknowledged job ends DONE,
// run once.
// Method: h2's folder on a small tmpfs; h2 killed; jobs until the others compacted past it
// (every 25 events); the tmpfs filled; h2 started again, and jobs until it logs that the
// leader's snapshot waits for room; the leader killed; h2 still runs 5 s later (three
// election timeouts); the tmpfs freed; a candidate serves and takes one more job.
#[test]
fn a_follower_behind_a_snapshot_its_full_disk_cannot_keep_does_not_campaign() {
    let Some((mut rig, disk, _sbatchd, leader)) = Rig::with_small_follower_disk() else { return };
    let mut jobs = vec![rig.submit()];
    rig.kill("h2");
    jobs.extend((0..40).map(|_| rig.submit()));
    let filler = disk.keep_full("filler");
    rig.start("h2");
    rig.submit_until_h2_logs(&mut jobs, "h2 to take the leader's snapshot", "the snapshot waits for room");
    rig.kill(leader);
    std::thread::sleep(Duration::from_secs(5));
    let h2 = rig.mbatchd.get_mut("h2").expect("h2");
    assert!(h2.is_running(), "h2 stopped behind its snapshot:\n{}", h2.log());
    filler.free();
    jobs.push(rig.submit());
    rig.all_done_once(&jobs);
    assert!(!rig.mbatchd["h2"].log().contains("panicked"), "{}", rig.mbatchd["h2"].log());
}

// Goal (docs/operations.md, "A failed fsync"): a candidate whose disk fails a flush stops,
// alone, acknowledging nothing that waited for that flush: the leader stops and another
// candidate leads; a follower stops and the two others go on. Each comes back from its own
// disk and is caught up; every acknowledged job ends DONE, run once.
// Method: every candidate under `util::fsync_fault`; five jobs; the leader's flushes made to
// fail and one more job submitted (bsub follows whichever candidate serves, retrying the
// same request): the leader exits with a failure naming the I/O error; a new leader takes
// five more; the failed candidate is started again (a new process, whose flushes succeed)
// and caught up. Then a follower's flushes fail while jobs are submitted until it exits; it
// too is started again and caught up.
#[test]
fn a_candidate_whose_disk_fails_a_flush_stops_alone_and_comes_back() {
    let mut rig = Rig::new(&CANDIDATES);
    let Some(fault) = FsyncFault::install(&mut rig.cluster, "mbatchd") else { return };
    rig.start_all();
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    let leader = rig.leader();
    let mut jobs: Vec<u32> = (0..5).map(|_| rig.submit()).collect();

    fault.fail(rig.mbatchd[leader].pid());
    jobs.push(rig.submit());
    rig.wait_failed_flush(leader);
    let second = rig.leader();
    assert_ne!(second, leader);
    jobs.extend((0..5).map(|_| rig.submit()));
    rig.start(leader);
    rig.wait_caught_up(second, &["h1", "h2", "h3"], 3);

    let follower = CANDIDATES.iter().map(|(name, _)| *name).find(|name| *name != second).expect("a follower");
    fault.fail(rig.mbatchd[follower].pid());
    wait_until("the follower to stop on its failed flush", JOB_TIMEOUT, || {
        jobs.push(rig.submit());
        (!rig.mbatchd.get_mut(follower).expect("started").is_running()).then_some(())
    });
    rig.wait_failed_flush(follower);
    jobs.extend((0..3).map(|_| rig.submit()));
    rig.start(follower);
    rig.wait_caught_up(second, &["h1", "h2", "h3"], 3);
    rig.all_done_once(&jobs);
}

// Goal (docs/failover.md, "A full disk on a candidate"): a leader whose disk fills hands the
// leadership to a caught-up candidate, so that new jobs are taken by two healthy candidates
// instead of being refused; once it has room again it catches up, and it can carry commits
// with the new leader when the third candidate dies. Every acknowledged job ends DONE, run
// once.
// Method: h1's candidate folder on an 8 MiB tmpfs with no space reserve; h1 leads (first
// in LSF_MASTER_LIST); its tmpfs kept full by a filler; jobs submitted (each acknowledged by
// whichever candidate serves) until another candidate serves and h1's log says it handed
// over (a job refused for the full disk meanwhile is allowed); the filler freed; `badmin
// showstatus` until all three hold one log index; the third candidate killed; more jobs.
#[test]
fn a_leaders_full_disk_hands_the_leadership_to_a_healthy_candidate() {
    let mut rig = Rig::new(&CANDIDATES);
    let Some(disk) = rig.small_disk("h1") else { return };
    rig.start_all();
    let _sbatchd = rig.cluster.start_sbatchd("h0");
    assert_eq!(rig.leader(), "h1", "h1 stands for election first");
    let mut jobs: Vec<u32> = (0..3).map(|_| rig.submit()).collect();

    let filler = disk.keep_full("filler");
    let second = wait_until("another candidate to serve", JOB_TIMEOUT, || {
        // Until the hand-over, the full leader may refuse a job (exit 255, the disk-full
        // message); every job it took is kept.
        let script = format!("echo $LSB_JOBID >> {}", rig.ran.display());
        let out = run(&rig.cluster, "bsub", &["-m", "h0", "sh", "-c", &script]);
        if out.status.success() {
            jobs.push(submitted_job_id(&String::from_utf8_lossy(&out.stdout)));
        } else {
            assert!(text(&out).contains("is full"), "bsub: {}", text(&out));
        }
        rig.serving_besides(Some("h1"))
    });
    let h1 = rig.mbatchd.get_mut("h1").expect("h1");
    assert!(h1.is_running(), "h1 stopped on a full disk:\n{}", h1.log());
    assert!(h1.log().contains("the leadership goes to a caught-up candidate"), "{}", h1.log());
    jobs.extend((0..3).map(|_| rig.submit()));

    filler.free();
    rig.wait_caught_up(second, &["h1", "h2", "h3"], 3);
    let third = if second == "h2" { "h3" } else { "h2" };
    rig.kill(third);
    // A majority is the new leader and h1 now.
    jobs.extend((0..3).map(|_| rig.submit()));
    rig.all_done_once(&jobs);
}
