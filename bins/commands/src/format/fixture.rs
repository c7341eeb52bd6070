//! What the layouts' tests share: a job of each status and a fixed time zone.

use jiff::tz::TimeZone;
use lava_batch_ll::JobStatus;
use lava_batch_wire::{JobInfo, WireJobRef};

// Times in these tests: 2024-11-25 22:44:01 UTC is 1_732_574_641.
pub(crate) const SUBMIT: i64 = 1_732_574_641;

pub(crate) fn utc() -> TimeZone {
    TimeZone::UTC
}

pub(crate) fn job(id: u32, status: JobStatus) -> JobInfo {
    JobInfo {
        job: WireJobRef { job_id: id, array_index: 0 },
        user_name: "cloudsd".to_owned(),
        status: status.bits(),
        queue: "normal".to_owned(),
        from_host: "vm".to_owned(),
        exec_hosts: if status.is_pending() { vec![] } else { vec!["vm".to_owned()] },
        job_name: "sleep 30".to_owned(),
        command: "sleep 30".to_owned(),
        project: "default".to_owned(),
        cwd: "work".to_owned(),
        exec_cwd: if status.is_pending() { String::new() } else { "/home/cloudsd/work".to_owned() },
        n_slots: 1,
        submit_time: SUBMIT,
        start_time: if status.is_pending() { 0 } else { SUBMIT + 1 },
        end_time: if status.is_finished() { SUBMIT + 31 } else { 0 },
        pid: if status.is_pending() { 0 } else { 4242 },
        reason: if status.is_pending() {
            "New job is waiting for scheduling".to_owned()
        } else {
            String::new()
        },
        ..JobInfo::default()
    }
}

pub(crate) fn check(got: String, expected: &str) {
    assert_eq!(got, expected, "\n--- got ---\n{got}--- expected ---\n{expected}");
}
