//! The `lsb.events` text view end to end: the real `mbatchd`, `sbatchd` and commands on
//! loopback. Jobs that finish, fail and are killed leave their JOB_NEW, JOB_START,
//! JOB_SIGNAL and JOB_STATUS records in `logdir/lsb.events` in LSF's format, where
//! Snakemake's LSF executor finds them (its awk program's fields); restarts, clean or
//! `kill -9`, and a view cut back or reset leave every record exactly once; the view
//! switches to `lsb.events.1` after `MAX_JOB_NUM` finishes, carrying a living job over
//! (again after a restart).

mod util;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use util::{Cluster, Daemon, wait_until};

const JOB_TIMEOUT: Duration = Duration::from_secs(120);

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A record's fields as Snakemake's awk program splits them
/// (`FPAT = "([^ ]+)|(\"[^\"]+\")"`, gawk's longest match): quoted strings whole.
fn fpat_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut rest = line.trim_start_matches(' ');
    while !rest.is_empty() {
        let word_end = rest.find(' ').unwrap_or(rest.len());
        let end = match rest.strip_prefix('"').and_then(|body| body.find('"')) {
            Some(close) if close > 0 => (close + 2).max(word_end),
            _ => word_end,
        };
        fields.push(rest[..end].to_owned());
        rest = rest[end..].trim_start_matches(' ');
    }
    fields
}

struct Batch {
    cluster: Cluster,
    mbatchd: Daemon,
    _sbatchd: Daemon,
}

impl Batch {
    fn start(max_job_num: Option<u32>) -> Batch {
        let mut cluster = Cluster::new();
        if let Some(max) = max_job_num {
            let path = cluster.envdir().join("lsbatch/lavacore/configdir/lsb.params");
            let params = fs::read_to_string(&path).expect("lsb.params");
            let params: String = params
                .lines()
                .map(|line| {
                    if line.starts_with("MAX_JOB_NUM") {
                        format!("MAX_JOB_NUM = {max}\n")
                    } else {
                        format!("{line}\n")
                    }
                })
                .collect();
            fs::write(&path, params).expect("write lsb.params");
        }
        let mbatchd = cluster.start_mbatchd();
        let sbatchd = cluster.start_sbatchd("localhost");
        Batch { cluster, mbatchd, _sbatchd: sbatchd }
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cluster.command(bin(program)).args(args).output().expect("run a command")
    }

    fn submit(&self, args: &[&str]) -> u32 {
        self.submit_in(self.cluster.dir(), args)
    }

    fn submit_in(&self, cwd: &Path, args: &[&str]) -> u32 {
        let out = self.cluster.command(bin("bsub")).args(args).current_dir(cwd).output().expect("run bsub");
        assert!(out.status.success(), "bsub: {}", text(&out));
        util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
    }

    fn status(&self, job: u32) -> String {
        let out = self.run("bjobs", &["-a", "-noheader", &job.to_string()]);
        String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2).unwrap_or_default().to_owned()
    }

    fn wait_status(&self, job: u32, want: &str) {
        wait_until(&format!("job {job} to reach {want}"), JOB_TIMEOUT, || {
            (self.status(job) == want).then_some(())
        });
    }

    fn view_path(&self, n: u32) -> PathBuf {
        let dir = self.cluster.event_log_dir();
        if n == 0 { dir.join("lsb.events") } else { dir.join(format!("lsb.events.{n}")) }
    }

    /// The view's record lines (the `#` header left out).
    fn records(&self, n: u32) -> Vec<String> {
        let text = fs::read_to_string(self.view_path(n)).unwrap_or_default();
        text.lines().filter(|line| !line.starts_with('#')).map(str::to_owned).collect()
    }

    /// Waits until the view holds a finish (JOB_STATUS 32 or 64) of each of `jobs`.
    fn wait_finishes(&self, jobs: &[u32]) -> Vec<String> {
        wait_until("finishes in the lsb.events view", JOB_TIMEOUT, || {
            let records = self.records(0);
            let finished = |job: u32| {
                records.iter().any(|line| {
                    let f = fpat_fields(line);
                    f[0] == "\"JOB_STATUS\"" && f[3] == job.to_string() && (f[4] == "64" || f[4] == "32")
                })
            };
            jobs.iter().all(|job| finished(*job)).then_some(records)
        })
    }
}

/// How many records of each (type, job) the view holds.
fn counts(records: &[String]) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for line in records {
        let f = fpat_fields(line);
        *counts
            .entry((f[0].trim_matches('"').to_owned(), f.get(3).cloned().unwrap_or_default()))
            .or_default() += 1;
    }
    counts
}

/// What Snakemake's LSF executor reads from the view for jobs named `*<uuid>*` of
/// user `uid`: the jobs' ids and their JOB_STATUS codes, except 192 (its awk program).
fn snakemake_reads(records: &[String], uid: u32, uuid: &str) -> Vec<(String, String)> {
    let mut ours = Vec::new();
    let mut seen = Vec::new();
    for line in records {
        let f = fpat_fields(line);
        if f[0] == "\"JOB_NEW\""
            && f[4] == uid.to_string()
            && f.get(41).is_some_and(|name| name.contains(uuid))
        {
            ours.push(f[3].clone());
        } else if ours.contains(&f[3]) && f[0] == "\"JOB_STATUS\"" && f[4] != "192" {
            seen.push((f[3].clone(), f[4].clone()));
        }
    }
    seen
}

#[test]
fn records_as_lsf_and_snakemake_read_them() {
    // Goal: each job's life is in the view in LSF's layout: JOB_NEW (user id, queue,
    // -o file, job name as the 42nd field, command), JOB_START on the host, JOB_SIGNAL of
    // bkill, JOB_STATUS RUN then DONE (64) / EXIT (32) with the exit status; the file is
    // 0644 and starts with LSF's `#<offset>` line. The job's working folder has a blank,
    // as a quoted field before the job name may.
    let batch = Batch::start(None);
    let cwd = batch.cluster.dir().join("a folder");
    fs::create_dir_all(&cwd).expect("a folder with a blank");
    let uuid = "0b6c1a2e-uuid";
    let name = format!("Snakemake_rule_a___({uuid})");
    let done = batch.submit_in(&cwd, &["-J", &name, "-o", "/dev/null", "-R", "span[hosts=1]", "true"]);
    let three = batch.submit(&["-J", &format!("b_{uuid}"), "sh", "-c", "exit 3"]);
    let killed = batch.submit(&["sleep", "600"]);
    batch.wait_status(done, "DONE");
    batch.wait_status(three, "EXIT");
    batch.wait_status(killed, "RUN");
    let out = batch.run("bkill", &[&killed.to_string()]);
    assert!(out.status.success(), "bkill: {}", text(&out));
    batch.wait_status(killed, "EXIT");
    let records = batch.wait_finishes(&[done, three, killed]);
    let whole = fs::read_to_string(batch.view_path(0)).expect("lsb.events");
    assert!(whole.starts_with('#'), "{whole}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &fs::metadata(batch.view_path(0)).expect("stat").permissions(),
    );
    assert_eq!(mode & 0o777, 0o644);
    assert!(records.iter().all(|line| line.split(' ').nth(1) == Some("\"10.1\"")), "{records:?}");
    assert!(records[0].starts_with("\"MBD_START\" \"10.1\" "), "{records:?}");

    let of = |kind: &str, job: u32| -> Vec<Vec<String>> {
        records
            .iter()
            .map(|line| fpat_fields(line))
            .filter(|f| f[0] == format!("\"{kind}\"") && f[3] == job.to_string())
            .collect()
    };
    let uid = unsafe_uid();
    let new = &of("JOB_NEW", done)[0];
    assert_eq!(new[4], uid.to_string(), "userId: {new:?}");
    assert_eq!(new[28], "\"normal\"", "queue: {new:?}");
    assert_eq!(new[29], "\"span[hosts=1]\"", "resReq: {new:?}");
    assert_eq!(new[31], format!("\"{}\"", cwd.display()), "cwd: {new:?}");
    assert_eq!(new[34], "\"/dev/null\"", "outFile: {new:?}");
    assert_eq!(new[41], format!("\"{name}\""), "jobName: {new:?}");
    assert_eq!(new[42], "\"true\"", "command: {new:?}");
    let start = &of("JOB_START", done)[0];
    assert_eq!(
        (start[4].as_str(), start[8].as_str(), start[9].as_str()),
        ("4", "1", "\"localhost\""),
        "{start:?}"
    );
    let statuses: Vec<String> = of("JOB_STATUS", done).iter().map(|f| f[4].clone()).collect();
    assert_eq!(statuses.last().map(String::as_str), Some("64"), "{statuses:?}");
    let exit = of("JOB_STATUS", three).pop().expect("a finish");
    assert_eq!(
        (exit[4].as_str(), exit[exit.len() - 2].as_str()),
        ("32", "768"),
        "exitStatus 3 << 8: {exit:?}"
    );
    let signal = &of("JOB_SIGNAL", killed)[0];
    assert_eq!(signal[6], "\"KILL\"", "{signal:?}");
    assert_eq!(of("JOB_STATUS", killed).pop().expect("a finish")[4], "32");

    let read = snakemake_reads(&records, uid, uuid);
    assert!(read.contains(&(done.to_string(), "64".into())), "{read:?}");
    assert!(read.contains(&(three.to_string(), "32".into())), "{read:?}");
    assert!(!read.iter().any(|(job, _)| *job == killed.to_string()), "not named with the uuid: {read:?}");
}

fn unsafe_uid() -> u32 {
    // The test's own uid, as the daemons vouch for the submitter.
    let out = std::process::Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("a uid")
}

#[test]
fn restarts_leave_every_record_once() {
    // Goal: across a clean restart, a kill -9, a view holding lines its state does not
    // cover (written just before a crash) and a view reset to nothing, every record of a
    // job is in the view exactly once and a view worded again is the same text.
    let mut batch = Batch::start(None);
    let first: Vec<u32> = (0..3).map(|_| batch.submit(&["true"])).collect();
    for job in &first {
        batch.wait_status(*job, "DONE");
    }
    batch.wait_finishes(&first);
    let _stopped = batch.mbatchd.terminate();
    batch.mbatchd = batch.cluster.start_mbatchd();
    let second = batch.submit(&["sh", "-c", "exit 2"]);
    batch.wait_status(second, "EXIT");
    batch.wait_finishes(&[second]);
    batch.mbatchd.kill();
    let before = fs::read_to_string(batch.view_path(0)).expect("lsb.events");

    // Lines written but not recorded in the state (a crash between the two): cut back.
    let tail: String = before.lines().rev().take(2).collect::<Vec<_>>().join("\n") + "\n";
    fs::write(batch.view_path(0), before.clone() + &tail).expect("append");
    batch.mbatchd = batch.cluster.start_mbatchd();
    let third = batch.submit(&["true"]);
    batch.wait_status(third, "DONE");
    let records = batch.wait_finishes(&[third]);
    let all: Vec<u32> = first.iter().copied().chain([second, third]).collect();
    let counts = counts(&records);
    for job in &all {
        for kind in ["JOB_NEW", "JOB_START"] {
            assert_eq!(
                counts.get(&(kind.to_owned(), job.to_string())),
                Some(&1),
                "{kind} of {job}: {records:#?}"
            );
        }
        for kind in ["JOB_START_ACCEPT", "JOB_EXECUTE"] {
            assert!(
                counts.get(&(kind.to_owned(), job.to_string())) <= Some(&1),
                "{kind} of {job}: {records:#?}"
            );
        }
    }
    assert_eq!(counts.iter().filter(|((kind, _), _)| kind == "MBD_START").map(|(_, n)| n).sum::<usize>(), 3);
    batch.mbatchd.kill();

    // The view reset to nothing: worded again from the log, the same text.
    let worded = fs::read_to_string(batch.view_path(0)).expect("lsb.events");
    fs::remove_file(batch.view_path(0)).expect("remove the view");
    fs::remove_file(batch.cluster.event_log_dir().join("lsb.events.state")).expect("remove the state");
    batch.mbatchd = batch.cluster.start_mbatchd();
    let again = wait_until("the view worded again", JOB_TIMEOUT, || {
        let text = fs::read_to_string(batch.view_path(0)).unwrap_or_default();
        (text.lines().filter(|line| line.contains("\"MBD_START\"")).count() == 4).then_some(text)
    });
    assert!(again.starts_with(&worded), "worded again:\n{again}\nbefore:\n{worded}");
}

#[test]
fn switches_after_max_job_num_finishes() {
    // Goal: with MAX_JOB_NUM = 2, the view becomes lsb.events.1 after two finishes and the
    // new lsb.events starts with the records of the job still running (its JOB_NEW), so a
    // reader of lsb.events alone still finds it; its finish lands in the new file.
    let mut batch = Batch::start(Some(2));
    let long = batch.submit(&["sleep", "600"]);
    batch.wait_status(long, "RUN");
    let short: Vec<u32> = (0..2).map(|_| batch.submit(&["true"])).collect();
    for job in &short {
        batch.wait_status(*job, "DONE");
    }
    // The switch renames lsb.events to lsb.events.1, then the new file into place: wait for
    // both renames, not just the first.
    wait_until("lsb.events.1 and the new lsb.events", JOB_TIMEOUT, || {
        (batch.view_path(1).exists() && batch.view_path(0).exists()).then_some(())
    });
    let old = batch.records(1);
    assert!(counts(&old).contains_key(&("JOB_NEW".to_owned(), short[0].to_string())), "{old:?}");
    let header = fs::read_to_string(batch.view_path(0)).expect("lsb.events");
    let current = batch.records(0);
    assert!(
        counts(&current).contains_key(&("JOB_NEW".to_owned(), long.to_string())),
        "carried over: {header}"
    );
    let offset: usize = header.lines().next().expect("a header")[1..].parse().expect("#<offset>");
    assert!(header[offset..].lines().all(|line| !line.contains("\"JOB_NEW\"")), "{header}");

    // mbatchd notes where the living jobs' lines are and copies them from the file at the
    // next switch: after a kill -9 and restart too (noted again by reading the file),
    // byte for byte, the header again naming the end of what was carried.
    let long_lines = |batch: &Batch, n: u32| -> Vec<String> {
        let records = batch.records(n);
        records.into_iter().filter(|line| fpat_fields(line)[3] == long.to_string()).collect()
    };
    let carried = long_lines(&batch, 0);
    batch.mbatchd.kill();
    batch.mbatchd = batch.cluster.start_mbatchd();
    let more: Vec<u32> = (0..2).map(|_| batch.submit(&["true"])).collect();
    for job in &more {
        batch.wait_status(*job, "DONE");
    }
    wait_until("the second switch", JOB_TIMEOUT, || {
        (batch.view_path(2).exists() && batch.view_path(0).exists()).then_some(())
    });
    let again = long_lines(&batch, 0);
    assert!(again.starts_with(&carried), "carried again: {again:#?}, first: {carried:#?}");
    let header = fs::read_to_string(batch.view_path(0)).expect("lsb.events");
    let offset: usize = header.lines().next().expect("a header")[1..].parse().expect("#<offset>");
    let (head, rest) = header.split_at(offset);
    assert!(head.lines().skip(1).all(|line| fpat_fields(line)[3] == long.to_string()), "{header}");
    assert!(rest.lines().all(|line| !line.contains("\"JOB_NEW\"")), "{header}");
    let out = batch.run("bkill", &[&long.to_string()]);
    assert!(out.status.success(), "bkill: {}", text(&out));
    batch.wait_status(long, "EXIT");
    let current = wait_until("the long job's finish", JOB_TIMEOUT, || {
        let records = batch.records(0);
        records
            .iter()
            .any(|line| {
                line.starts_with("\"JOB_STATUS\"")
                    && fpat_fields(line)[3] == long.to_string()
                    && fpat_fields(line)[4] == "32"
            })
            .then_some(records)
    });
    assert_eq!(counts(&current).get(&("JOB_NEW".to_owned(), long.to_string())), Some(&1), "{current:?}");
}
