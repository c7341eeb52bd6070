//! `bpeek` cannot make sbatchd (root) look at a path for a user (issue 18, item 9).
//!
//! The output path of a job is its user's to choose, and so is every folder on it: once
//! the job runs, she can swap a folder of its `-o` path for a symbolic link. sbatchd reads
//! a peeked job's output with a reader running as the job's user that opens nothing but a
//! regular file (bins/sbatchd/src/peek.rs), so these tests perform the attack as `nobody`
//! against the real mbatchd, sbatchd and `bpeek` (through mbatchd's relay,
//! `LSB_BPEEK_REMOTE_OUTPUT=y`) and check that:
//! - a folder she cannot search answers the same whether the file there exists (hers or
//!   root's) or not, and never shows its contents;
//! - a FIFO or a device named like the output file is refused without being opened (a
//!   writer blocked in the FIFO's open stays blocked), and sbatchd keeps answering;
//! - the ordinary peek still works for the job's owner and for root.

mod util;

use std::fs;
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use util::{Cluster, Daemon, chmod, wait_until};

/// Longest a job may take to reach a state (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// The unprivileged account the attacks run as.
const NOBODY: u32 = 65534;
/// Longest one `bpeek` may take here: well under mbatchd's 15 s relay timeout, so that
/// an answer that came proves sbatchd answered (and did not leave the peek to time out).
const PEEK_TIMEOUT: Duration = Duration::from_secs(10);

/// A one-host cluster with mbatchd and sbatchd running, reachable by `nobody`.
struct Batch {
    cluster: Cluster,
    _mbatchd: Daemon,
    sbatchd: Daemon,
}

impl Batch {
    fn start() -> Batch {
        let mut cluster = Cluster::new();
        let mbatchd = cluster.start_mbatchd();
        let sbatchd = cluster.start_sbatchd("localhost");
        for folder in [cluster.dir().to_path_buf(), cluster.dir().join("run"), cluster.envdir()] {
            chmod(&folder, 0o755);
        }
        Batch { cluster, _mbatchd: mbatchd, sbatchd }
    }

    fn dir(&self) -> &Path {
        self.cluster.dir()
    }

    fn command(&self, program: &str, as_nobody: bool) -> Command {
        let mut command = self.cluster.command(util::mbatchd_bin().with_file_name(program));
        command.env("LSB_BPEEK_REMOTE_OUTPUT", "y");
        if as_nobody {
            command.current_dir("/tmp").env("HOME", "/tmp").uid(NOBODY).gid(NOBODY);
        }
        command
    }

    /// `bsub ARGS` as nobody; returns the job id.
    fn submit_as_nobody(&self, args: &[&str]) -> u32 {
        let out = self.command("bsub", true).args(args).output().expect("bsub");
        assert!(out.status.success(), "bsub: {}", text(&out));
        util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
    }

    /// `bsub ARGS` as root; returns the job id.
    fn submit_as_root(&self, args: &[&str]) -> u32 {
        let out = self.command("bsub", false).args(args).output().expect("bsub");
        assert!(out.status.success(), "bsub: {}", text(&out));
        util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
    }

    fn wait_running(&self, job: u32) {
        wait_until(&format!("job {job} to run"), JOB_TIMEOUT, || {
            let out =
                self.command("bjobs", false).args(["-a", "-noheader", &job.to_string()]).output().ok()?;
            let stat = String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2)?.to_owned();
            assert!(!matches!(stat.as_str(), "DONE" | "EXIT"), "job {job} ended: {stat}");
            (stat == "RUN").then_some(())
        });
    }

    /// `bpeek JOB` as root with LSF's default order (the file read on this host first):
    /// exit code, standard output and error.
    fn bpeek_as_root_here(&self, job: u32) -> (Option<i32>, String, String) {
        let started = Instant::now();
        let out = self
            .cluster
            .command(util::mbatchd_bin().with_file_name("bpeek"))
            .arg(job.to_string())
            .output()
            .expect("bpeek");
        assert!(started.elapsed() < PEEK_TIMEOUT, "bpeek took {:?}: {}", started.elapsed(), text(&out));
        let said = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (out.status.code(), said(&out.stdout), said(&out.stderr))
    }

    /// `bpeek JOB` through mbatchd's relay (as nobody or as root): exit code, standard
    /// output and error. Fails the test if it takes longer than [`PEEK_TIMEOUT`].
    fn bpeek(&self, job: u32, as_nobody: bool) -> (Option<i32>, String, String) {
        let started = Instant::now();
        let out = self.command("bpeek", as_nobody).arg(job.to_string()).output().expect("bpeek");
        assert!(started.elapsed() < PEEK_TIMEOUT, "bpeek took {:?}: {}", started.elapsed(), text(&out));
        let said = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (out.status.code(), said(&out.stdout), said(&out.stderr))
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A folder owned by nobody, mode 0755.
fn nobodys_folder(path: &Path) -> PathBuf {
    fs::create_dir_all(path).expect("create a folder");
    chown(path, Some(NOBODY), Some(NOBODY)).expect("chown");
    chmod(path, 0o755);
    path.to_path_buf()
}

/// Makes `link` a symbolic link to `target`, as nobody (who owns the folder holding it),
/// replacing the folder or link there: the attack.
fn swap_as_nobody(link: &Path, target: &Path) {
    let script = format!(
        "if [ -d {link} ] && [ ! -L {link} ]; then mv {link} {link}.real; fi; ln -sfn {target} {link}",
        link = path_str(link),
        target = path_str(target)
    );
    let out =
        Command::new("sh").args(["-c", &script]).uid(NOBODY).gid(NOBODY).output().expect("swap as nobody");
    assert!(out.status.success(), "swap {} -> {}: {}", link.display(), target.display(), text(&out));
}

/// A job of nobody's that writes `first-line` to `output` and then waits; returns its id
/// once the line is there.
fn waiting_job(batch: &Batch, output: &Path) -> u32 {
    let gate = batch.dir().join("gate");
    let job = batch.submit_as_nobody(&[
        "-o",
        path_str(output),
        &format!("echo first-line; while [ ! -e {} ]; do sleep 0.2; done", path_str(&gate)),
    ]);
    batch.wait_running(job);
    wait_until("the job's first line", JOB_TIMEOUT, || {
        fs::read_to_string(output).ok().filter(|text| text.contains("first-line"))
    });
    job
}

// Goal: a folder of the output path swapped for a link to a folder nobody cannot search
// tells her nothing: the answer is the same whether the file named like her output
// exists there (hers, or root's) or not, and its contents never come back. Before,
// sbatchd opened the path as root: a root file answered "not a regular file owned by the
// job's user", a missing one an empty output, and a file of hers there its contents.
#[test]
fn a_folder_she_cannot_search_answers_the_same_whether_the_file_exists_or_not() {
    let batch = Batch::start();
    let play = nobodys_folder(&batch.dir().join("play"));
    let folder = nobodys_folder(&play.join("d"));
    let job = waiting_job(&batch, &folder.join("out"));
    let normal = batch.bpeek(job, true);
    assert_eq!(normal, (Some(0), "<< output from stdout >>\nfirst-line\n".to_owned(), String::new()));

    let secret = batch.dir().join("secret");
    fs::create_dir(&secret).expect("create the secret folder");
    chmod(&secret, 0o700);
    let hidden = secret.join("out");
    swap_as_nobody(&folder, &secret);

    // Hers (the worst case before: its contents came back), root's, then none at all.
    fs::write(&hidden, "SECRET-TEXT\n").expect("write");
    chown(&hidden, Some(NOBODY), Some(NOBODY)).expect("chown");
    let hers = batch.bpeek(job, true);
    chown(&hidden, Some(0), Some(0)).expect("chown");
    let roots = batch.bpeek(job, true);
    fs::remove_file(&hidden).expect("remove");
    let none = batch.bpeek(job, true);
    let refused = (
        Some(255),
        "<< output from stdout >>\n".to_owned(),
        format!("Job <{job}> : cannot read {}: Permission denied\n", path_str(&folder.join("out"))),
    );
    assert_eq!(hers, refused, "her file in a folder she cannot search");
    assert_eq!(roots, refused, "root's file there");
    assert_eq!(none, refused, "no file there");
    // The same answers to root, who may peek at any job: the reader is the job's user.
    assert_eq!(batch.bpeek(job, false), refused);

    // Put back, the output reads again, as nobody and as root.
    swap_as_nobody(&folder, &play.join("d.real"));
    assert_eq!(batch.bpeek(job, true), normal);
    assert_eq!(batch.bpeek(job, false), normal);
}

// Goal: a folder of the output path swapped for a link to a folder holding a FIFO or a
// device named like the output file: the peek is refused, the FIFO is never opened (a
// writer blocked in its open stays blocked, where an open for reading, even a
// non-blocking one, would release it), sbatchd keeps answering, and the peek works again
// once the folder is back.
#[test]
fn a_fifo_or_a_device_in_place_of_the_output_is_never_opened() {
    let mut batch = Batch::start();
    let play = nobodys_folder(&batch.dir().join("play"));
    let folder = nobodys_folder(&play.join("e"));
    // `null`: named like a device of /dev.
    let job = waiting_job(&batch, &folder.join("null"));
    let normal = batch.bpeek(job, true);
    assert_eq!(normal, (Some(0), "<< output from stdout >>\nfirst-line\n".to_owned(), String::new()));
    let refused = (
        Some(255),
        "<< output from stdout >>\n".to_owned(),
        format!(
            "Job <{job}> : cannot read {}: not a regular file owned by the job's user\n",
            path_str(&folder.join("null"))
        ),
    );

    // A FIFO in a root folder nobody may search (0755), writable by all, with a writer
    // waiting in its open for a reader to come.
    let devices = batch.dir().join("devices");
    fs::create_dir(&devices).expect("create a folder");
    chmod(&devices, 0o755);
    let fifo = devices.join("null");
    let made = Command::new("mkfifo").args(["-m", "666"]).arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::OpenOptions::new().write(true).open(fifo).map(drop))
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!writer.is_finished(), "the writer waits for a reader");
    swap_as_nobody(&folder, &devices);
    assert_eq!(batch.bpeek(job, true), refused, "the FIFO");
    assert_eq!(batch.bpeek(job, false), refused, "the FIFO, peeked by root");
    // Root on the job's own host, local first: another user's path is not opened as root
    // either (it used to be, and the open waited on the FIFO).
    assert_eq!(batch.bpeek_as_root_here(job), refused, "the FIFO, peeked by root here");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!writer.is_finished(), "sbatchd opened the FIFO");

    // /dev itself: /dev/null is a character device.
    swap_as_nobody(&folder, Path::new("/dev"));
    assert_eq!(batch.bpeek(job, true), refused, "/dev/null");
    assert_eq!(batch.bpeek(job, false), refused, "/dev/null, peeked by root");

    // sbatchd still serves: the folder put back reads again, and a new job runs.
    swap_as_nobody(&folder, &play.join("e.real"));
    assert_eq!(batch.bpeek(job, true), normal);
    let other = waiting_job(&batch, &play.join("other.out"));
    assert_eq!(batch.bpeek(other, true), normal);
    assert!(batch.sbatchd.is_running(), "sbatchd is still running");

    // Release the writer (a reader of our own: the writer waits, so this open returns at
    // once) so that its thread ends.
    let _reader = fs::File::open(&fifo).expect("open the FIFO to release its writer");
    writer.join().expect("the writer's thread").expect("the writer's open returns once a reader came");
}

// Goal: the ordinary peek works for the job's owner and for root, for a job of nobody's
// and a job of root's, from the offsets bpeek asks (a long output comes in several
// bounded answers, in order).
#[test]
fn the_owner_and_root_peek_as_before() {
    let batch = Batch::start();
    let play = nobodys_folder(&batch.dir().join("play"));
    let theirs = waiting_job(&batch, &play.join("theirs.out"));
    let expected = (Some(0), "<< output from stdout >>\nfirst-line\n".to_owned(), String::new());
    assert_eq!(batch.bpeek(theirs, true), expected, "nobody's job, peeked by nobody");
    assert_eq!(batch.bpeek(theirs, false), expected, "nobody's job, peeked by root");

    let long_out = batch.dir().join("long.out");
    let mine = batch.submit_as_root(&[
        "-o",
        path_str(&long_out),
        &format!("seq 1 100000; while [ ! -e {} ]; do sleep 0.2; done", path_str(&batch.dir().join("gate"))),
    ]);
    batch.wait_running(mine);
    wait_until("the long output", JOB_TIMEOUT, || {
        fs::read_to_string(&long_out).ok().filter(|text| text.ends_with("\n100000\n"))
    });
    let (code, stdout, stderr) = batch.bpeek(mine, false);
    let numbers: String = (1..=100_000).map(|n| format!("{n}\n")).collect();
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    assert!(stdout == format!("<< output from stdout >>\n{numbers}"), "root's long output differs");
    // nobody may not peek at root's job (mbatchd's check, unchanged).
    let (code, _, stderr) = batch.bpeek(mine, true);
    assert_eq!(code, Some(255));
    assert!(stderr.contains("User permission denied"), "{stderr}");
}
