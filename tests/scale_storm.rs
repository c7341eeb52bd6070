//! The reconnect storm at a small scale: the real `lava-bench scale` (one real mbatchd,
//! the real sbatchd of the local host for the commands' credentials, 300 simulated
//! execution hosts speaking the sbatchd protocol with the cluster key) runs jobs while
//! submitting, then leaves jobs pending, then kills mbatchd with SIGKILL under load and
//! starts it again. `--check` makes the bench fail unless every job was launched exactly
//! once and acknowledged finished exactly once by the hosts, and mbatchd shows every job
//! DONE. The bench's figures are printed, never asserted (docs/benchmarks.md, "Scale").

use std::process::Command;

#[test]
fn every_job_ends_done_exactly_once_across_a_reconnect_storm() {
    let (hosts, jobs, pending) = (300, 600, 1_500);
    let out = Command::new(env!("CARGO_BIN_EXE_lava-bench"))
        .args(["scale", "--hosts", &hosts.to_string(), "--slots", "4", "--jobs", &jobs.to_string()])
        .args(["--pending", &pending.to_string(), "--submitters", "4", "--check"])
        .output()
        .expect("lava-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lava-bench scale failed ({}):\n{stdout}\n{stderr}", out.status);
    let line = |name: &str| {
        stdout
            .lines()
            .find(|line| line.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{stdout}\n{stderr}"))
            .to_owned()
    };
    let field = |line: &str, key: &str| -> usize {
        line.split_whitespace()
            .find_map(|pair| pair.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {key}= in {line}"))
    };
    // The storm happened: mbatchd was killed with jobs still to run, and every host
    // registered with the new one.
    let storm = line("scale_storm");
    assert!(field(&storm, "finished_at_kill") < jobs + pending, "the kill came after the last job: {storm}");
    assert!(field(&storm, "registrations") >= hosts, "not every host registered again: {storm}");
    // And no job was lost or run twice (the bench's --check failed otherwise; the line says so too).
    let check = line("scale_check");
    let total = jobs + pending;
    for key in ["jobs", "launched_once", "finished_once", "mbd_done"] {
        assert_eq!(field(&check, key), total, "{key} in {check}");
    }
    assert_eq!(field(&check, "problems"), 0, "{check}");
}
