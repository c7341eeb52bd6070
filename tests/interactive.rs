//! Interactive batch jobs end to end (`bsub -I`, `-Ip`, `-Is`; docs/protocols/batch.md,
//! "Interactive jobs"): the real mbatchd, sbatchd and bsub on loopback, and across two
//! network-namespace hosts; `-Is` driven through a real pseudo-terminal (tmux).

mod util;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use util::{Cluster, Daemon, fixed_port, wait_until};

/// Longest a job in these tests may take (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);

fn bin(name: &str) -> std::path::PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

/// A one-host cluster whose sbatchd listens for attaches on a port of its own.
struct Interactive {
    cluster: Cluster,
    _mbatchd: Daemon,
    sbatchd: Daemon,
}

impl Interactive {
    fn start() -> Interactive {
        let mut cluster = Cluster::new();
        cluster.rewrite_lsf_conf("LSB_SBD_PORT", &fixed_port().to_string());
        let mbatchd = cluster.start_mbatchd();
        let sbatchd = cluster.start_sbatchd("localhost");
        Interactive { cluster, _mbatchd: mbatchd, sbatchd }
    }

    fn bsub(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .cluster
            .command(bin("bsub"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start bsub");
        let mut stdin = child.stdin.take().expect("piped");
        stdin.write_all(input).expect("bsub's input");
        drop(stdin);
        child.wait_with_output().expect("bsub ends")
    }

    fn bjobs_state(&self, job: u32) -> String {
        let out =
            self.cluster.command(bin("bjobs")).args(["-noheader", "-o", "stat", &job.to_string()]).output();
        String::from_utf8_lossy(&out.expect("bjobs").stdout).trim().to_owned()
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

// Goal: `bsub -I` prints LSF's lines (submission on standard output, Waiting and Starting on
// standard error), relays the job's output and exits with the job's exit code; standard input
// is piped through; standard error comes on standard output unless LSF_INTERACTIVE_STDERR=y.
#[test]
fn bsub_i_relays_output_input_and_the_exit_code() {
    let batch = Interactive::start();
    let out = batch.bsub(&["-I", "echo", "hello"], b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let job = util::submitted_job_id(&stdout);
    assert_eq!(
        stdout,
        format!("Job <{job}> is submitted to default queue <normal>.\nhello\n"),
        "{}",
        text(&out)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "<<Waiting for dispatch ...>>\n<<Starting on localhost>>\n",
        "{}",
        text(&out)
    );
    wait_until("the job DONE", JOB_TIMEOUT, || (batch.bjobs_state(job) == "DONE").then_some(()));

    let out = batch.bsub(&["-I", "sh", "-c", "exit 3"], b"");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));

    let out = batch.bsub(&["-I", "cat"], b"data\nmore data\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).ends_with(">.\ndata\nmore data\n"), "{}", text(&out));

    let out = batch.bsub(&["-I", "sh", "-c", "echo out; echo err >&2"], b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("out\n") && stdout.contains("err\n"), "{}", text(&out));
    let mut apart = batch.cluster.command(bin("bsub"));
    apart.env("LSF_INTERACTIVE_STDERR", "y").args(["-I", "sh", "-c", "echo out; echo err >&2"]);
    let out = apart.output().expect("bsub");
    assert!(String::from_utf8_lossy(&out.stdout).ends_with(">.\nout\n"), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).ends_with("<<Starting on localhost>>\nerr\n"),
        "{}",
        text(&out)
    );
    let _ = &batch.sbatchd;
}
