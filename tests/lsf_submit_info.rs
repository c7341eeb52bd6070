//! The rest of issue 19's LSF surface, end to end against the real `mbatchd`,
//! `sbatchd` and `lim` on loopback: several `-R` on one `bsub` merged as LSF
//! merges them (with the units LSF accepts and `LSF_UNIT_FOR_LIMITS`), `bsub
//! script_file` with `LSB_BSUB_PARSE_SCRIPT`, and the information commands
//! `busers`, `lsinfo`, `bugroup` and `bmgroup`.
//!
//! The byte-exact layouts are pinned by the pure tests of `bins/commands`;
//! these tests check that the real daemons' answers reach the commands and that
//! they exit as LSF's do.

mod util;

use std::process::Output;
use std::time::Duration;

use util::{Cluster, Daemon, wait_until};

/// Longest a job in these tests may take to reach a state (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);

/// A one-host cluster with mbatchd and sbatchd running, and lim when asked.
struct Batch {
    cluster: Cluster,
    _daemons: Vec<Daemon>,
}

impl Batch {
    /// Starts the daemons after `prepare` has adjusted the configuration.
    fn start(with_lim: bool, prepare: impl FnOnce(&Cluster)) -> Batch {
        let mut cluster = Cluster::new();
        let mut daemons = Vec::new();
        if with_lim {
            let port = util::fixed_port().to_string();
            cluster.rewrite_lsf_conf("LSF_LIM_PORT", &port);
            cluster.rewrite_lsf_conf("LAVA_LIM_TCP_PORT", &port);
        }
        prepare(&cluster);
        if with_lim {
            daemons.push(cluster.start_lim("localhost"));
        }
        daemons.push(cluster.start_mbatchd());
        daemons.push(cluster.start_sbatchd("localhost"));
        Batch { cluster, _daemons: daemons }
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        run(&self.cluster, program, args)
    }

    fn submit(&self, args: &[&str]) -> u32 {
        let out = self.run("bsub", args);
        assert!(out.status.success(), "bsub {args:?}: {}", text(&out));
        util::submitted_job_id(&stdout(&out))
    }

    /// The `-o` fields of `job`, by `bjobs -o FIELDS -noheader`.
    fn field(&self, job: u32, fields: &str) -> String {
        stdout(&self.run("bjobs", &["-o", fields, "-noheader", &job.to_string()])).trim().to_owned()
    }

    fn wait_for(&self, job: u32, states: &[&str]) -> String {
        wait_until(&format!("job {job} to reach {states:?}"), JOB_TIMEOUT, || {
            let stat = self.field(job, "stat");
            states.contains(&stat.as_str()).then_some(stat)
        })
    }
}

/// Runs a command of the suite in the cluster's folder.
fn run(cluster: &Cluster, program: &str, args: &[&str]) -> Output {
    cluster
        .command(util::mbatchd_bin().with_file_name(program))
        .args(args)
        .current_dir(cluster.dir())
        .env("TZ", "UTC0")
        .output()
        .expect("run a command")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}stderr:\n{}",
        out.status.code(),
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    )
}

// Goal: Snakemake's `-R rusage[mem=M] -R span[hosts=1]` keeps its memory request:
// the strings are merged (bjobs shows the merged requirement) and the reservation
// counts, in `LSF_UNIT_FOR_LIMITS` (GB here) when the amount has no unit of its
// own; amounts with a unit (`MB`, `KB`, `TB`) are what they say.
// Method: lim reports the host's memory; a job whose merged rusage is larger than
// any machine's memory (1024 GB, then 64 TB) stays pending with LSF's reason, one
// asking 1 MB starts; two span sections that disagree are refused by bsub.
#[test]
fn several_res_reqs_are_merged_and_keep_their_units() {
    let batch = Batch::start(true, |cluster| cluster.rewrite_lsf_conf("LSF_UNIT_FOR_LIMITS", "GB"));
    // Wait for lim's loads to reach mbatchd: a job selecting on mem runs then.
    let probe = batch.submit(&["-R", "select[mem>1KB]", "-R", "order[ut]", "true"]);
    batch.wait_for(probe, &["DONE"]);
    assert_eq!(batch.field(probe, "combined_resreq"), "select[mem>1KB] order[ut]");

    let small = batch.submit(&["-R", "rusage[mem=1MB]", "-R", "span[hosts=1]", "true"]);
    batch.wait_for(small, &["DONE"]);
    assert_eq!(batch.field(small, "combined_resreq"), "rusage[mem=1MB] span[hosts=1]");

    let huge = batch.submit(&["-R", "rusage[mem=1024]", "-R", "span[hosts=1]", "true"]);
    let huge_tb = batch.submit(&["-R", "span[hosts=1]", "-R", "rusage[mem=64TB]", "true"]);
    let after = batch.submit(&["true"]);
    batch.wait_for(after, &["DONE"]);
    for job in [huge, huge_tb] {
        assert_eq!(batch.field(job, "stat"), "PEND", "job {job}");
        let out = batch.run("bjobs", &["-p", &job.to_string()]);
        assert!(
            stdout(&out).contains("Job's requirements for reserving resource (mem) not satisfied"),
            "{}",
            text(&out)
        );
    }
    assert_eq!(batch.field(huge_tb, "combined_resreq"), "rusage[mem=64TB] span[hosts=1]");

    let out = batch.run("bsub", &["-R", "span[hosts=1]", "-R", "span[ptile=2]", "true"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "Bad resource requirement syntax. Job not submitted.\n");
}

// Goal: PSI/J's `bsub /path/to/script.job` (mode 0644) runs the script with its #BSUB
// options under the shipped LSB_BSUB_PARSE_SCRIPT=Y, an executable script keeps running
// as a command with its #BSUB options too, and LSB_BSUB_PARSE_SCRIPT=N in the
// environment runs the 0644 file as a command (the shell refuses it: exit 126).
// Method: each script writes a file; bjobs shows the #BSUB job name and the exit.
#[test]
fn bsub_reads_a_script_file_named_as_the_command() {
    let batch = Batch::start(false, |cluster| {
        assert_eq!(cluster.lsf_conf_value("LSB_BSUB_PARSE_SCRIPT").as_deref(), Some("Y"), "shipped");
    });
    let dir = batch.cluster.dir();
    let script = dir.join("script.job");
    let marker = dir.join("psij.out");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#BSUB -J psij_job\n#BSUB -o {out}\necho from the body > {marker}\nexit 3\n#BSUB -P late_project\n",
            out = dir.join("psij.stdout").display(),
            marker = marker.display()
        ),
    )
    .expect("write the script");
    util::chmod(&script, 0o644);
    let job = batch.submit(&[script.to_str().expect("a UTF-8 path")]);
    assert_eq!(batch.wait_for(job, &["EXIT", "DONE"]), "EXIT");
    assert_eq!(batch.field(job, "job_name proj_name exit_code"), "psij_job late_project 3");
    assert_eq!(std::fs::read_to_string(&marker).expect("the script ran"), "from the body\n");

    let exe = dir.join("run.sh");
    std::fs::write(&exe, "#!/bin/sh\n#BSUB -J exe_job\ntouch \"$0.ran\"\n").expect("write");
    util::chmod(&exe, 0o755);
    let job = batch.submit(&[exe.to_str().expect("a UTF-8 path")]);
    batch.wait_for(job, &["DONE"]);
    assert_eq!(batch.field(job, "job_name"), "exe_job");
    assert!(dir.join("run.sh.ran").exists(), "run as the command named: $0 is the script");

    let out = batch
        .cluster
        .command(util::mbatchd_bin().with_file_name("bsub"))
        .arg(&script)
        .env("LSB_BSUB_PARSE_SCRIPT", "N")
        .current_dir(dir)
        .output()
        .expect("run bsub");
    assert!(out.status.success(), "{}", text(&out));
    let job = util::submitted_job_id(&stdout(&out));
    batch.wait_for(job, &["EXIT"]);
    assert_eq!(batch.field(job, "exit_code"), "126");
    assert_ne!(batch.field(job, "job_name"), "psij_job");
}
