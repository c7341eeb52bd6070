//! The `lsb.acct` record the logic derives from a finished job (`Job::acct_record`,
//! `Mbd::finished_acct_records`): what the shell appends to `lsb.acct` after the
//! JOB_STATUS that finished the job is durable, and checks `lsb.acct` against at start.

use lava_batch_ll::JobStatus;

use super::harness::*;
use crate::Mbd;

/// A job of `alice` that ran on `hostA` and finished with `wait_status`, and a second
/// one killed while pending, replayed from their events.
fn finished_jobs(wait_status: i32) -> Mbd {
    let mut mbd = Mbd::new(config()).expect("valid config");
    let mut request = request();
    request.output_file = "out.%J".into();
    request.res_req = "select[mem>10]".into();
    let events = [
        ev_new(1, 1, "alice", "normal", request.clone(), 1_700_000_000_000),
        ev_start(1, "hostA", 1, 1_700_000_010_000),
        ev_accept(1, 4242, 1_700_000_010_500),
        ev_finished(1, 4242, wait_status, 1_700_000_100_500),
        ev_new(2, 2, "alice", "normal", request, 1_700_000_020_000),
        ev_killed_pending(2, 9, 1_700_000_030_000),
    ];
    for event in &events {
        mbd.apply(event).expect("applies");
    }
    mbd
}

#[test]
fn record_of_a_job_that_ran() {
    // Goal: the record carries the job's identity, times, hosts, status and the
    // shepherd's resource usage as lsb.acct's fields want them.
    let mbd = finished_jobs(3 << 8);
    let job = mbd.job(jref(1)).expect("in memory");
    let record = job.acct_record().expect("finished");
    assert_eq!((record.job_id, record.idx, record.user_name.as_str()), (1, 0, "alice"));
    assert_eq!(
        (record.submit_time, record.start_time, record.event_time),
        (1_700_000_000, 1_700_000_010, 1_700_000_100)
    );
    assert_eq!(record.exec_hosts, ["hostA"]);
    assert_eq!((record.j_status, record.exit_status), (JobStatus::Exit.bits(), 3 << 8));
    assert_eq!(
        (record.rusage.utime_s, record.rusage.stime_s, record.rusage.maxrss_kb),
        (0.007, 0.003, 1024.0)
    );
    assert_eq!(record.max_rmem_kb, 1024);
    assert_eq!(record.out_file, "out.%J");
    assert_eq!(record.res_req, "select[mem>10]");
    assert_eq!(record.job_file, "1700000000.1");
    assert_eq!(record.project_name, "default");
    assert!(record.to_line().starts_with("\"JOB_FINISH\" \"10.1\" 1700000100 1 "));
}

#[test]
fn record_of_a_job_killed_while_pending() {
    // Goal: a job that never ran has no start, no hosts and unavailable usage.
    let mbd = finished_jobs(0);
    let record = mbd.job(jref(2)).expect("in memory").acct_record().expect("finished");
    assert_eq!((record.start_time, record.exec_hosts.len()), (0, 0));
    assert!(record.rusage.utime_s < 0.0 && record.rusage.maxrss_kb < 0.0);
    assert_eq!((record.exit_status, record.event_time), (9, 1_700_000_030));
}

#[test]
fn unfinished_jobs_have_no_record_and_the_list_is_by_end() {
    // Goal: only DONE and EXIT jobs are accounted, oldest end first.
    let mut mbd = finished_jobs(0);
    mbd.apply(&ev_new(3, 3, "bob", "normal", request(), 1_700_000_040_000)).expect("applies");
    assert!(mbd.job(jref(3)).expect("in memory").acct_record().is_none());
    let ids: Vec<u32> = mbd.finished_acct_records().iter().map(|r| r.job_id).collect();
    assert_eq!(ids, [2, 1]);
}
