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

/// lsb.users with groups (one nested, one of `all`) and limits for root, a group and `default`.
const LSB_USERS: &str = "Begin UserGroup\nGROUP_NAME  GROUP_MEMBER\nstaff       (root nobody)\n\
everyone    (all)\nouter       (staff daemon)\nEnd UserGroup\n\n\
Begin User\nUSER_NAME  MAX_JOBS  JL/P  MAX_PEND_JOBS\nroot       10        2     50\n\
staff      20        -     -\ndefault    5         -     -\nEnd User\n";

fn configdir() -> String {
    format!("etc/lsbatch/{}/configdir", util::CLUSTER_NAME)
}

// Goal: busers counts the caller's job slots as LSF does (PEND holds PSUSP) with the
// limits of lsb.users, a group's row adds up its members, `all` lists the default row,
// `-w` the pending thresholds; bugroup and bmgroup list lsb.users' and lsb.hosts' groups
// in OpenLava's layout; the errors are LSF's words with exit 255.
// Method: a running and a held job of the test's user (root), then each command.
#[test]
fn busers_and_group_commands() {
    let batch = Batch::start(false, |cluster| {
        cluster.write_file(&format!("{}/lsb.users", configdir()), LSB_USERS);
        cluster.write_file(
            &format!("{}/lsb.hosts", configdir()),
            "Begin Host\nHOST_NAME  MXJ  JL/U\ndefault    !    ()\nEnd Host\n\n\
             Begin HostGroup\nGROUP_NAME  GROUP_MEMBER\nlocal_hosts (localhost)\nEnd HostGroup\n",
        );
    });
    let id = std::process::Command::new("id").arg("-un").output().expect("run id");
    let user = stdout(&id).trim().to_owned();
    let running = batch.submit(&["-n", "2", "sleep", "60"]);
    let held = batch.submit(&["-H", "true"]);
    batch.wait_for(running, &["RUN"]);
    assert_eq!(batch.field(held, "stat"), "PSUSP");
    let header = "USER/GROUP          JL/P    MAX  NJOBS   PEND    RUN  SSUSP  USUSP    RSV\n";

    let out = batch.run("busers", &[]);
    assert!(out.status.success(), "{}", text(&out));
    let expected_row = if user == "root" {
        "root                 2.0     10      3      1      2      0      0      0\n".to_owned()
    } else {
        format!("{user:<18}     -      5      3      1      2      0      0      0\n")
    };
    assert_eq!(stdout(&out), format!("{header}{expected_row}"));

    let out = batch.run("busers", &["staff", "everyone", "all"]);
    assert!(out.status.success(), "{}", text(&out));
    let listing = stdout(&out);
    assert!(
        listing.contains("\ndefault                -      5      -      -      -      -      -      -\n"),
        "{listing}"
    );
    assert!(
        listing.contains("\neveryone               -      -      3      1      2      0      0      0\n"),
        "{listing}"
    );
    let staff_njobs = if user == "root" { 3 } else { 0 };
    assert!(listing.contains(&format!("\nstaff                  -     20 {staff_njobs:>6}")), "{listing}");

    let out = batch.run("busers", &["-w"]);
    assert!(stdout(&out).starts_with("USER/GROUP           PEND  MPEND  PJOBS MPJOBS\n"), "{}", text(&out));
    let out = batch.run("busers", &["no_such_user_xyz"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "no_such_user_xyz: Bad user name\n");

    let out = batch.run("bugroup", &[]);
    assert_eq!(
        stdout(&out),
        "GROUP_NAME    USERS\nstaff        root nobody \neveryone     all users\nouter        staff/ daemon \n",
        "{}",
        text(&out)
    );
    let out = batch.run("bugroup", &["-r", "outer"]);
    assert_eq!(stdout(&out), "GROUP_NAME    USERS\nouter        root nobody daemon \n", "{}", text(&out));
    let out = batch.run("bugroup", &["nosuch"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "nosuch: No such user/host group\n");
    let out = batch.run("bmgroup", &["-w"]);
    assert_eq!(stdout(&out), "GROUP_NAME    HOSTS\nlocal_hosts  localhost \n", "{}", text(&out));
    assert!(out.status.success());
}

// Goal: bmgroup on a cluster without host groups, and lsinfo's three blocks from
// lsf.shared (built-in resources first), a resource by name and an unknown one.
#[test]
fn lsinfo_and_empty_groups() {
    let cluster = Cluster::new();
    let out = run(&cluster, "bmgroup", &[]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "host group: No host group defined in the system\n");

    let out = run(&cluster, "lsinfo", &[]);
    assert!(out.status.success(), "{}", text(&out));
    let said = stdout(&out);
    assert!(said.starts_with(
        "RESOURCE_NAME   TYPE   ORDER  DESCRIPTION\nr15s          Numeric   Inc   15-second CPU run queue length\n"
    ));
    assert!(said.contains("\nmem           Numeric   Dec   Available memory (Mbytes)\n"), "{said}");
    assert!(said.contains("\ncs            Boolean   N/A   Compute server\n"), "{said}");
    assert!(
        said.contains(
            "\n\nTYPE_NAME\nx86_64_linux\naarch64_linux\n\nMODEL_NAME      CPU_FACTOR      ARCHITECTURE\n"
        ),
        "{said}"
    );
    assert!(
        said.ends_with(
            "x86_64_default      100.00      x86_64_linux\naarch64_default     100.00      aarch64_linux\n"
        ),
        "{said}"
    );

    let out = run(&cluster, "lsinfo", &["mem", "nope"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        stdout(&out),
        "RESOURCE_NAME   TYPE   ORDER  DESCRIPTION\nmem           Numeric   Dec   Available memory (Mbytes)\nnope: Resource name not found\n"
    );
    let out = run(&cluster, "lsinfo", &["-x"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
}
