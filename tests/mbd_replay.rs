//! The real `mbatchd` starting from an `lsb.events` that holds what the
//! protocol's replay rules ignore (docs/batch.md, "Recovery"): duplicated stage
//! events and events logged after a job's DONE or EXIT. Such a log used to stop
//! mbatchd at start; now it starts, logs one warning counting what it ignored,
//! and serves `bjobs` with the states the log without those events gives.
//!
//! The log is written here with the daemon's own code (`journal::open`,
//! `codec::encode`, lava-mbd's event records) into the cluster folder of
//! `tests/util`; then mbatchd and sbatchd (whose credential socket the commands
//! use) are started on it and the real `bjobs` is run.

mod util;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lava_batch_ll::{HostName, JobRef, JobStatus, QueueName, SubmitSpec, UserName};
use lava_batch_wire as wire;
use lava_mbd::Event;
use lava_mbd::event::{
    ExecInfo, FinishRecord, JobExecuteRecord, JobNewRecord, JobSignalRecord, JobStartAcceptRecord,
    JobStartRecord, JobStatusRecord,
};
use util::proto::{Client, query_all, request_id, submit_request};
use util::{Cluster, STARTUP_TIMEOUT, wait_until};

fn job(id: u32) -> JobRef {
    JobRef::new(id, 0).expect("a job id above 0")
}

fn host(name: &str) -> HostName {
    HostName::parse("test", name).expect("a host name")
}

fn new(id: u32, t: u64) -> Event {
    Event::JobNew(Box::new(JobNewRecord {
        job: job(id),
        request_id: request_id(u64::from(id)),
        user_id: 1000,
        group_id: 100,
        user: UserName::parse("test", "alice").expect("a user name"),
        from_host: host("localhost"),
        queue: QueueName::parse("test", "normal").expect("a queue name"),
        submit_time_ms: t,
        hold: false,
        spec: SubmitSpec::try_from(submit_request(&format!("sleep {id}"))).expect("a valid submission"),
    }))
}

fn start(id: u32, on: &str, t: u64) -> Event {
    Event::JobStart(JobStartRecord { job: job(id), exec_hosts: vec![host(on)], time_ms: t })
}

fn accept(id: u32, pid: i32, t: u64) -> Event {
    Event::JobStartAccept(JobStartAcceptRecord { job: job(id), pid, pgid: pid, time_ms: t })
}

fn execute(id: u32, pid: i32, t: u64) -> Event {
    let exec = ExecInfo {
        pid,
        pgid: pid,
        exec_uid: 1000,
        exec_user: "alice".into(),
        exec_home: "/tmp".into(),
        exec_cwd: "/tmp".into(),
        exec_time_ms: t,
    };
    Event::JobExecute(JobExecuteRecord { job: job(id), exec, time_ms: t })
}

fn finish(id: u32, pid: i32, wait_status: i32, t: u64) -> Event {
    let finish = FinishRecord {
        wait_status,
        finish_reason: wire::FINISH_NORMAL,
        end_time_ms: t,
        rusage: wire::ResourceUsage::default(),
        pid,
    };
    let status = if wait_status == 0 { JobStatus::Done } else { JobStatus::Exit };
    Event::JobStatus(JobStatusRecord {
        job: job(id),
        status,
        reason: String::new(),
        time_ms: t,
        finish: Some(finish),
    })
}

fn kill(id: u32, seq: u32, t: u64) -> Event {
    Event::JobSignal(JobSignalRecord {
        job: job(id),
        signal_seq: seq,
        action: wire::SignalAction::Terminate,
        requester_uid: 1000,
        requester: UserName::parse("test", "alice").expect("a user name"),
        request_id: Some(request_id(100 + u64::from(id))),
        requeue_hold: None,
        time_ms: t,
    })
}

/// Writes `events` as mbatchd's event log in `dir`, durably, and closes it.
fn write_log(dir: &Path, events: &[Event]) {
    let log = lava_mbatchd::journal::open(dir).expect("the event log opens");
    append_all(&log, events);
    Arc::try_unwrap(log).expect("the only handle").close().expect("the log closes");
}

/// Appends `events` with mbatchd's codec and makes them durable.
fn append_all(log: &lava_eventlog::EventLog, events: &[Event]) {
    for event in events {
        log.append(&lava_mbatchd::codec::encode(event)).expect("an event appends");
    }
    log.sync().expect("the log syncs");
}

/// Writes `events` as an `lsb.events` of payload format `format` in `dir` (what another
/// build of mbatchd would have left: lava-eventlog's content version).
fn write_log_of_format(dir: &Path, format: u32, events: &[Event]) {
    std::fs::create_dir_all(dir).expect("create the log folder");
    let options = lava_eventlog::Options {
        content_version: format,
        oldest_content_version: format,
        ..lava_eventlog::Options::new(lava_mbatchd::journal::EVENT_LOG_NAME)
    };
    let (log, _) = lava_eventlog::EventLog::open(dir, options).expect("the event log opens");
    append_all(&log, events);
    log.close().expect("the log closes");
}

// Goal: an lsb.events left by a build that did not record its format (format 0, the
// layout of format 1) is read by this mbatchd, which goes on in a segment of its own
// format: the jobs come back and a new one gets the next id.
// Method: the log written with the daemon's codec under content version 0; mbatchd
// started on it; a protocol query and a submission; the segment headers' formats read.
#[test]
fn mbatchd_reads_an_event_log_of_the_unrecorded_format_and_goes_on_in_its_own() {
    let mut cluster = Cluster::with_hosts(&["localhost", "hostb"]);
    let t = lava_net::system_now_ms() - 60_000;
    let dir = cluster.event_log_dir();
    write_log_of_format(&dir, 0, &[new(1, t), new(2, t + 1)]);
    let mut mbatchd = cluster.start_mbatchd();
    let mut client = Client::connect(mbatchd.addr(), cluster.authenticator());
    let jobs = client.query(query_all()).expect("query");
    let ids: Vec<u32> = jobs.jobs.iter().map(|info| info.job.job_id).collect();
    assert_eq!(ids, [1, 2]);
    let held = wire::SubmitRequest { hold: true, ..submit_request("sleep 4") };
    assert_eq!(client.submit(request_id(3), held).expect("accepted").job_id, 3);
    assert!(mbatchd.is_running(), "mbatchd stopped:\n{}", mbatchd.log());
    mbatchd.terminate();
    let format_of = |segment: &str| {
        let bytes = std::fs::read(dir.join(segment)).expect("read the segment");
        // Bytes 52..56 of a segment header, little-endian (lava-eventlog's format module).
        u32::from_le_bytes(bytes[52..56].try_into().expect("a whole header"))
    };
    assert_eq!(format_of("lsb.events.000001"), 0, "the old segment is left as it was");
    assert_eq!(format_of("lsb.events.000002"), *lava_mbatchd::codec::LOG_FORMATS.end());
}

// Goal: an lsb.events of a format this build does not read (a newer build's) stops
// mbatchd at start with a message naming the file and the formats it reads, instead of
// misreading the records; the file is left untouched.
// Method: the log written under the next content version; mbatchd started on it must
// exit with an error; its log and the file's bytes checked.
#[test]
fn an_event_log_of_a_newer_format_stops_mbatchd_naming_the_file() {
    let mut cluster = Cluster::new();
    let t = lava_net::system_now_ms() - 60_000;
    let dir = cluster.event_log_dir();
    let newer = *lava_mbatchd::codec::LOG_FORMATS.end() + 1;
    write_log_of_format(&dir, newer, &[new(1, t)]);
    let segment = dir.join("lsb.events.000001");
    let before = std::fs::read(&segment).expect("read the segment");
    let port_file = cluster.dir().join("run/mbatchd.port");
    let args: Vec<&std::ffi::OsStr> = vec![
        "--foreground".as_ref(),
        "--port".as_ref(),
        "0".as_ref(),
        "--port-file".as_ref(),
        port_file.as_ref(),
    ];
    let mut mbatchd = cluster.spawn("mbatchd", &util::mbatchd_bin(), &args);
    let status = mbatchd.wait_exit(STARTUP_TIMEOUT);
    assert!(!status.success(), "mbatchd started on a log it does not read:\n{}", mbatchd.log());
    let expected = format!(
        "{} holds records in format version {newer}, and this build reads versions {} to {}",
        segment.display(),
        lava_mbatchd::codec::LOG_FORMATS.start(),
        lava_mbatchd::codec::LOG_FORMATS.end()
    );
    assert!(mbatchd.log().contains(&expected), "{}", mbatchd.log());
    assert!(!port_file.exists(), "it never served");
    assert_eq!(std::fs::read(&segment).expect("read the segment"), before, "the file is untouched");
}

// Goal: mbd-sbd §7 on the real daemon: an lsb.events holding a duplicated
// JOB_START_ACCEPT, a duplicated JOB_START and events after DONE (a second
// FINISH, an EXECUTE) and after EXIT (a kill, a DONE) does not stop mbatchd; it
// logs one warning with the count (6) and the first one, and `bjobs` shows job 1
// DONE, job 2 EXIT and job 3 RUN, with job 1's first accepted pid.
// Method: the log written with the daemon's codec; mbatchd started on it (its
// port file is the proof it started); sbatchd started for the commands'
// credentials; the real `bjobs -a -u all -noheader`; a protocol query for the pid.
#[test]
fn mbatchd_starts_from_a_log_with_duplicate_and_late_events() {
    let mut cluster = Cluster::with_hosts(&["localhost", "hostb"]);
    let t = lava_net::system_now_ms() - 60_000;
    let events = [
        // Job 1: runs on localhost and ends DONE.
        new(1, t),
        start(1, "localhost", t + 1),
        accept(1, 4201, t + 2),
        accept(1, 9999, t + 3), // duplicated stage (position 4): the first accept stands
        execute(1, 4201, t + 4),
        finish(1, 4201, 0, t + 5),
        finish(1, 4201, 0, t + 6), // after DONE: a second FINISH
        execute(1, 4201, t + 7),   // after DONE
        // Job 2: runs on localhost and ends EXIT.
        new(2, t + 10),
        start(2, "localhost", t + 11),
        accept(2, 4202, t + 12),
        finish(2, 4202, 1 << 8, t + 13),
        kill(2, 1, t + 14),         // after EXIT
        finish(2, 4202, 0, t + 15), // after EXIT: a DONE
        // Job 3: runs on hostb (no sbatchd there, so nothing changes it).
        new(3, t + 20),
        start(3, "hostb", t + 21),
        start(3, "hostb", t + 22), // duplicated stage
        accept(3, 4203, t + 23),
    ];
    write_log(&cluster.event_log_dir(), &events);

    let mut mbatchd = cluster.start_mbatchd();
    assert!(mbatchd.is_running(), "mbatchd stopped:\n{}", mbatchd.log());
    let log = mbatchd.log();
    let warnings: Vec<&str> = log.lines().filter(|line| line.contains("replay ignored")).collect();
    assert_eq!(warnings.len(), 1, "one warning for all ignored events:\n{log}");
    assert!(warnings[0].contains("WARN"), "{}", warnings[0]);
    assert!(warnings[0].contains("replay ignored 6 logged event(s)"), "{}", warnings[0]);
    assert!(
        warnings[0]
            .contains("at position 4: JOB_START_ACCEPT for job 1: a stage the job's run already passed"),
        "{}",
        warnings[0]
    );

    let _sbatchd = cluster.start_sbatchd("localhost");
    let bjobs = Path::new(env!("CARGO_BIN_EXE_bjobs"));
    let states = wait_until("bjobs to list the three jobs", STARTUP_TIMEOUT, || {
        let out = cluster.command(bjobs).args(["-a", "-u", "all", "-noheader"]).output().expect("run bjobs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let states: BTreeMap<u32, String> = text
            .lines()
            .filter_map(|line| {
                let mut columns = line.split_whitespace();
                let id = columns.next()?.parse().ok()?;
                Some((id, columns.nth(1)?.to_owned()))
            })
            .collect();
        (states.len() == 3).then_some(states)
    });
    let expected: BTreeMap<u32, String> =
        [(1, "DONE"), (2, "EXIT"), (3, "RUN")].into_iter().map(|(id, stat)| (id, stat.to_owned())).collect();
    assert_eq!(states, expected);

    let mut client = Client::connect(mbatchd.addr(), cluster.authenticator());
    let jobs = client.query(query_all()).expect("query");
    let pids: Vec<(u32, i32)> = jobs.jobs.iter().map(|info| (info.job.job_id, info.pid)).collect();
    assert_eq!(pids, [(1, 4201), (2, 4202), (3, 4203)], "the first accept stands");
    // The next submission gets the next id: replay counted every JOB_NEW.
    let held = wire::SubmitRequest { hold: true, ..submit_request("sleep 4") };
    assert_eq!(client.submit(request_id(4), held).expect("accepted").job_id, 4);
    assert!(mbatchd.is_running(), "mbatchd stopped:\n{}", mbatchd.log());
}
