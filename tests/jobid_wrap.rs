//! Job ids wrap at `MAX_JOBID` on the real daemons (issue 18, item 6): after
//! 999,999 (LSF's default and smallest `MAX_JOBID`) `bsub` goes on at 1,
//! skipping the ids of jobs still in the system, across a restart of mbatchd at
//! the wrap; `bjobs` and `bhist` show jobs of both sides; and an id given again
//! runs on an sbatchd that still holds the record of the id's earlier job.
//!
//! Reaching 999,999 by submitting that many jobs would take too long, so the
//! event log is written first, with the daemon's own code (as tests/mbd_replay.rs
//! does): a held job 1, then job 999,998 that ran and ended. Later, with mbatchd
//! stopped, one more JOB_NEW is appended to bring the last id back to 999,998.

mod util;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use lava_batch_ll::{HostName, JobRef, JobStatus, QueueName, SubmitSpec, UserName};
use lava_batch_wire as wire;
use lava_mbd::Event;
use lava_mbd::event::{FinishRecord, JobNewRecord, JobStartAcceptRecord, JobStartRecord, JobStatusRecord};
use util::proto::{request_id, submit_request};
use util::{Cluster, Daemon, wait_until};

/// Longest a job in these tests may take to reach a state (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// `CLEAN_PERIOD` of the test cluster, seconds: finished jobs stay shown this long.
const CLEAN_PERIOD_S: u64 = 30;

fn job(id: u32) -> JobRef {
    JobRef::new(id, 0).expect("a job id above 0")
}

fn host(name: &str) -> HostName {
    HostName::parse("test", name).expect("a host name")
}

fn new(id: u32, request: u64, hold: bool, t: u64) -> Event {
    Event::JobNew(Box::new(JobNewRecord {
        job: job(id),
        request_id: request_id(request),
        user_id: 0,
        group_id: 0,
        user: UserName::parse("test", "root").expect("a user name"),
        from_host: host("localhost"),
        queue: QueueName::parse("test", "normal").expect("a queue name"),
        submit_time_ms: t,
        hold,
        spec: SubmitSpec::try_from(wire::SubmitRequest { hold, ..submit_request(&format!("seeded {id}")) })
            .expect("a valid submission"),
    }))
}

/// The events of job `id` running on localhost and ending DONE.
fn ran(id: u32, t: u64) -> [Event; 3] {
    let finish = FinishRecord {
        wait_status: 0,
        finish_reason: wire::FINISH_NORMAL,
        end_time_ms: t + 2,
        rusage: wire::ResourceUsage::default(),
        pid: 4242,
    };
    [
        Event::JobStart(JobStartRecord { job: job(id), exec_hosts: vec![host("localhost")], time_ms: t }),
        Event::JobStartAccept(JobStartAcceptRecord { job: job(id), pid: 4242, pgid: 4242, time_ms: t + 1 }),
        Event::JobStatus(JobStatusRecord {
            job: job(id),
            status: JobStatus::Done,
            reason: String::new(),
            time_ms: t + 2,
            finish: Some(finish),
        }),
    ]
}

/// Appends `events` to mbatchd's event log in `dir` (creating it), durably, and closes it.
fn append_log(dir: &Path, events: &[Event]) {
    let log = lava_mbatchd::journal::open(dir).expect("the event log opens");
    for event in events {
        log.append(&lava_mbatchd::codec::encode(event)).expect("an event appends");
    }
    log.sync().expect("the log syncs");
    Arc::try_unwrap(log).expect("the only handle").close().expect("the log closes");
}

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

struct Wrap {
    cluster: Cluster,
    mbatchd: Option<Daemon>,
    _sbatchd: Daemon,
}

impl Wrap {
    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cluster.command(bin(program)).args(args).output().expect("run a command")
    }

    /// `bsub -o OUT echo WORD`, asserting success; returns the job id.
    fn submit(&self, word: &str) -> u32 {
        let out_file = self.cluster.dir().join(format!("{word}.out"));
        let out = self.run("bsub", &["-o", &out_file.display().to_string(), "echo", word]);
        assert!(out.status.success(), "bsub failed: {}", text(&out));
        util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
    }

    /// Every job `bjobs -a -u all` shows, with its status, in the order listed.
    fn listed(&self) -> Vec<(u32, String)> {
        let out = self.run("bjobs", &["-a", "-u", "all", "-noheader"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| {
                let mut columns = line.split_whitespace();
                let id = columns.next()?.parse().ok()?;
                Some((id, columns.nth(1)?.to_owned()))
            })
            .collect()
    }

    fn status(&self, id: u32) -> Option<String> {
        self.listed().into_iter().find(|(job, _)| *job == id).map(|(_, status)| status)
    }

    fn wait_done(&self, id: u32) {
        let mut last = None;
        wait_until(&format!("job {id} to be DONE"), JOB_TIMEOUT, || {
            last = self.status(id);
            (last.as_deref() == Some("DONE")).then_some(())
        });
    }

    fn restart_mbatchd(&mut self) {
        if let Some(mut old) = self.mbatchd.take() {
            old.terminate();
        }
        self.mbatchd = Some(self.cluster.start_mbatchd());
    }
}

// Goal: the wrap end to end. From a log whose last id is 999,998 and which holds a
// held job 1: bsub gives 999,999; after a restart of mbatchd, the next bsub gives 2
// (1 is still known) and the one after 3; the jobs run; bjobs lists both sides by id
// and bhist tells every one of them. Then, with 999,999 cleaned and the last id
// brought back to 999,998, bsub gives 999,999 again and that new job runs on the
// sbatchd that still holds the record of the first 999,999 (it used to be answered
// from that record and never run).
#[test]
fn job_ids_wrap_across_a_restart_and_reused_ids_run() {
    let cluster = Cluster::new();
    let t = lava_net::system_now_ms() - 60_000;
    let mut seeded = vec![new(1, 1, true, t), new(999_998, 2, false, t + 10)];
    seeded.extend(ran(999_998, t + 20));
    append_log(&cluster.event_log_dir(), &seeded);
    let params = cluster.envdir().join("lsbatch/lavacore/configdir/lsb.params");
    let text_params = fs::read_to_string(&params).expect("lsb.params");
    let text_params = text_params
        .replace("CLEAN_PERIOD           = 3600", &format!("CLEAN_PERIOD           = {CLEAN_PERIOD_S}"));
    assert!(text_params.contains(&format!("= {CLEAN_PERIOD_S} ")), "CLEAN_PERIOD set:\n{text_params}");
    fs::write(&params, text_params).expect("write lsb.params");

    let mut cluster = cluster;
    let mbatchd = cluster.start_mbatchd();
    let sbatchd = cluster.start_sbatchd("localhost");
    let mut wrap = Wrap { cluster, mbatchd: Some(mbatchd), _sbatchd: sbatchd };
    assert_eq!(wrap.status(1).as_deref(), Some("PSUSP"));

    let last = wrap.submit("last");
    assert_eq!(last, 999_999);
    wrap.wait_done(last);
    // A restart at the wrap: replay gives the same next id, 2 (1 is held).
    wrap.restart_mbatchd();
    let first_after = wrap.submit("wrapped");
    assert_eq!(first_after, 2);
    wrap.wait_done(first_after);
    assert_eq!(wrap.submit("third"), 3);
    wrap.wait_done(3);
    let listed: Vec<u32> = wrap.listed().into_iter().map(|(id, _)| id).collect();
    assert_eq!(listed, vec![1, 2, 3, 999_999], "both sides of the wrap, by id");
    for word in ["last", "wrapped", "third"] {
        let out =
            fs::read_to_string(wrap.cluster.dir().join(format!("{word}.out"))).expect("the job's output");
        assert!(out.contains(word), "{word}.out: {out}");
    }
    let bhist = wrap.run("bhist", &["-a", "-u", "all"]);
    assert!(bhist.status.success(), "bhist: {}", text(&bhist));
    let told: Vec<u32> = String::from_utf8_lossy(&bhist.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(told, vec![1, 2, 3, 999_998, 999_999], "bhist tells both sides:\n{}", text(&bhist));
    let long = wrap.run("bhist", &["-l", "999999", "2"]);
    let long_text = text(&long);
    assert!(long_text.contains("Job <999999>") && long_text.contains("Job <2>"), "{long_text}");
    assert!(long_text.contains("Done successfully"), "{long_text}");

    // The first 999,999 is cleaned after CLEAN_PERIOD; sbatchd keeps its record (24 h).
    wait_until("job 999999 to be cleaned", JOB_TIMEOUT, || wrap.status(999_999).is_none().then_some(()));
    let mut mbatchd = wrap.mbatchd.take().expect("running");
    mbatchd.terminate();
    append_log(&wrap.cluster.event_log_dir(), &[new(999_998, 3, true, lava_net::system_now_ms())]);
    wrap.mbatchd = Some(wrap.cluster.start_mbatchd());
    let again = wrap.submit("reused");
    assert_eq!(again, 999_999);
    wrap.wait_done(again);
    let out = fs::read_to_string(wrap.cluster.dir().join("reused.out")).expect("the reused id's output");
    assert!(out.contains("reused"), "reused.out: {out}");
    let states: BTreeMap<u32, String> = wrap.listed().into_iter().collect();
    assert_eq!(states.get(&999_998).map(String::as_str), Some("PSUSP"));
}
