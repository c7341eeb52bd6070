//! Interactive batch jobs end to end (`bsub -I`, `-Ip`, `-Is`; docs/protocols/batch.md,
//! "Interactive jobs"): the real mbatchd, sbatchd and bsub on loopback, and across two
//! network-namespace hosts; `-Is` driven through a real pseudo-terminal (tmux).

mod util;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use lava_batch_wire::{self as wire, Operation};
use lava_net::{Audience, Credential, Nonce, system_now_ms};
use util::netns::Netns;
use util::proto::{self, FrameConn, header};
use util::{Cluster, Daemon, STARTUP_TIMEOUT, fixed_port, wait_until, wait_until_showing};

/// Longest a job in these tests may take (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// The bound on the end of a job whose bsub was killed: well under the 60 s an unattached
/// job waits for its terminal (lava_sbd::ATTACH_WAIT_MS), so that only the kill can end it.
const KILL_BOUND: Duration = Duration::from_secs(40);

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

    /// The attach port's address.
    fn sbd_addr(&self) -> std::net::SocketAddr {
        let port = self.cluster.lsf_conf_value("LSB_SBD_PORT").expect("set").parse().expect("a port");
        std::net::SocketAddr::new(util::LOOPBACK, port)
    }

    /// A credential for `user` (`uid`) sealed with the cluster's key for a daemon of `kind`.
    fn credential(&self, uid: u32, user: &str, kind: u32) -> Vec<u8> {
        seal(&self.cluster.authenticator(), uid, user, kind)
    }

    /// Submits `command` as root, interactive (`-I`), as bsub would, through mbatchd; waits
    /// until it runs and returns its id.
    fn submit_running(&self, command: &str) -> u32 {
        let mut client = proto::Client::connect(self.cluster.mbd_addr(), self.cluster.authenticator());
        client.user = "root".into();
        client.uid = 0;
        let request = wire::SubmitRequest {
            file_flags: wire::submit_flags::INTERACTIVE,
            ..proto::submit_request(command)
        };
        static SUBMISSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = proto::request_id(SUBMISSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let job = client.submit(id, request).expect("submitted").job_id;
        let deadline = std::time::Instant::now() + JOB_TIMEOUT;
        while self.bjobs_state(job) != "RUN" {
            assert!(std::time::Instant::now() < deadline, "job {job} never ran:\n{}", self.sbatchd.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        job
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
}

fn seal(auth: &lava_net::Authenticator, uid: u32, user: &str, kind: u32) -> Vec<u8> {
    Credential {
        uid,
        gid: uid,
        username: user.into(),
        hostname: "localhost".into(),
        issued_at_ms: system_now_ms(),
        nonce: Nonce::fresh().expect("a nonce"),
        audience: Audience::new(kind, util::CLUSTER_NAME),
    }
    .seal(auth)
    .expect("the credential seals")
}

/// Attaches to `job` as root, trying again while sbatchd says the job has not started (mbatchd
/// shows RUN from the dispatch on, sbatchd knows the process a little later).
fn attach_as_root(batch: &Interactive, job: u32) -> FrameConn {
    wait_until("an attach", JOB_TIMEOUT, || {
        let mut conn = FrameConn::connect(batch.sbd_addr());
        let reply = attach(&mut conn, job, batch.credential(0, "root", Audience::SBATCHD)).expect("a reply");
        match reply.code {
            wire::ATTACH_OK => Some(conn),
            wire::ATTACH_NOT_READY => None,
            _ => panic!("{reply:?}"),
        }
    })
}

/// Sends INTERACTIVE_ATTACH for `job` with `credential`; the reply (`None`: closed unanswered).
fn attach(conn: &mut FrameConn, job: u32, credential: Vec<u8>) -> Option<wire::InteractiveAttachReply> {
    let body = wire::InteractiveAttach {
        credential,
        job: wire::WireJobRef { job_id: job, array_index: 0 },
        rows: 0,
        cols: 0,
    };
    conn.send(header(Operation::InteractiveAttach, 1), &proto::encode(&body));
    let frame = conn.recv()?;
    assert_eq!(frame.header.operation, Operation::InteractiveAttachReply.code());
    Some(proto::decode(&frame.body))
}

// Goal: the attach port refuses a stranger: bytes that are no frame, another operation first,
// an oversized frame, a credential sealed with another key, one made for mbatchd, one of
// another user, a job that is not there; each is closed (with the reason when it got that
// far) and the job goes on undisturbed; then its owner attaches, gets its output and its
// exit, and a second attach is refused (one per job).
#[test]
fn strangers_are_refused_and_the_job_is_undisturbed() {
    let batch = Interactive::start();
    let marker = batch.cluster.dir().join("started");
    let job = batch.submit_running(&format!("touch {}; read line; echo got $line; exit 4", marker.display()));
    wait_until("the job's process", JOB_TIMEOUT, || marker.exists().then_some(()));
    let addr = batch.sbd_addr();
    let mut junk = FrameConn::connect(addr);
    junk.send_raw(b"GET / HTTP/1.0\r\n\r\n\0\0\0\0\0\0\0\0\0\0\0\0");
    assert!(junk.recv().is_none(), "junk is closed unanswered");
    let mut other_op = FrameConn::connect(addr);
    other_op.send(
        header(Operation::InteractiveData, 1),
        &proto::encode(&wire::InteractiveData { stream: 0, data: b"x".to_vec() }),
    );
    assert!(other_op.recv().is_none(), "data before an attach is closed unanswered");
    let mut huge = FrameConn::connect(addr);
    let mut big = header(Operation::InteractiveAttach, 1);
    big.length = 1 << 30;
    let mut bytes = Vec::new();
    big.write(&mut bytes);
    huge.send_raw(&bytes);
    assert!(huge.recv().is_none(), "an oversized attach is closed from its header");
    let forged_key =
        lava_net::ClusterKey::generate_file(batch.cluster.dir().join("other.key")).expect("a key");
    let forged = seal(
        &lava_net::Authenticator::new(lava_net::KeyRing::new(&forged_key), lava_net::AuthConfig::default()),
        0,
        "root",
        Audience::SBATCHD,
    );
    let refusals = [
        (forged, job, wire::ATTACH_AUTH),
        (batch.credential(0, "root", Audience::MBATCHD), job, wire::ATTACH_AUTH),
        (batch.credential(65534, "nobody", Audience::SBATCHD), job, wire::ATTACH_DENIED),
        (batch.credential(0, "root", Audience::SBATCHD), job + 1000, wire::ATTACH_NOT_FOUND),
    ];
    for (credential, target, code) in refusals {
        let mut conn = FrameConn::connect(addr);
        let reply = attach(&mut conn, target, credential).expect("a reply");
        assert_eq!(reply.code, code, "{reply:?}");
        assert!(conn.recv().is_none(), "closed after the refusal");
    }
    assert_eq!(batch.bjobs_state(job), "RUN");
    // The owner attaches and talks to the job.
    let mut owner = attach_as_root(&batch, job);
    let mut second = FrameConn::connect(addr);
    let busy = attach(&mut second, job, batch.credential(0, "root", Audience::SBATCHD)).expect("a reply");
    assert_eq!(busy.code, wire::ATTACH_BUSY, "{busy:?}");
    let line = wire::InteractiveData { stream: wire::STREAM_STDIN, data: b"hi\n".to_vec() };
    owner.send(header(Operation::InteractiveData, 2), &proto::encode(&line));
    let mut output = Vec::new();
    let status = loop {
        let frame = owner.recv().expect("frames until the exit");
        match Operation::from_code(frame.header.operation) {
            Some(Operation::InteractiveData) => {
                output.extend(proto::decode::<wire::InteractiveData>(&frame.body).data)
            }
            Some(Operation::InteractiveExit) => {
                break proto::decode::<wire::InteractiveExit>(&frame.body).wait_status;
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!((String::from_utf8_lossy(&output).as_ref(), status), ("got hi\n", 4 << 8));
    wait_until("the job EXIT", JOB_TIMEOUT, || (batch.bjobs_state(job) == "EXIT").then_some(()));
}

// Goal: a terminal that goes away while the job runs (its connection closed, or a frame
// bsub may not send) gets the job killed: it ends EXIT and its process is gone.
#[test]
fn a_lost_terminal_kills_the_job() {
    let batch = Interactive::start();
    for hangup in [false, true] {
        let job = batch.submit_running("echo $$ > /tmp/lava-interactive-pid.$LSB_JOBID; exec sleep 1000");
        let pid_file = format!("/tmp/lava-interactive-pid.{job}");
        let mut owner = attach_as_root(&batch, job);
        let pid: i32 = wait_until("the job's pid", JOB_TIMEOUT, || {
            std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
        });
        if hangup {
            drop(owner);
        } else {
            // Output is the job's to send, not bsub's.
            owner.send(
                header(Operation::InteractiveData, 2),
                &proto::encode(&wire::InteractiveData { stream: 1, data: b"x".to_vec() }),
            );
        }
        wait_until("the job EXIT", JOB_TIMEOUT, || (batch.bjobs_state(job) == "EXIT").then_some(()));
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the job's process is gone");
        let _ = std::fs::remove_file(&pid_file);
    }
}

// Goal: sbatchd killed (SIGKILL) and restarted while an interactive job runs with its
// terminal attached: the terminal's connection ends with the old sbatchd, the new one kills
// the job (LSF kills it too), which ends EXIT and is never run again.
#[test]
fn an_sbatchd_restart_ends_the_interactive_job() {
    let mut batch = Interactive::start();
    let marker = batch.cluster.dir().join("runs");
    let job = batch.submit_running(&format!("echo $$ >> {}; exec sleep 1000", marker.display()));
    let mut owner = attach_as_root(&batch, job);
    let runs = || std::fs::read_to_string(&marker).unwrap_or_default();
    let pid: i32 = wait_until("the job's pid", JOB_TIMEOUT, || runs().trim().parse().ok());
    batch.sbatchd.kill();
    assert!(owner.recv().is_none(), "the terminal's connection ends with sbatchd");
    batch.sbatchd = batch.cluster.start_sbatchd("localhost");
    wait_until("the job EXIT", JOB_TIMEOUT, || (batch.bjobs_state(job) == "EXIT").then_some(()));
    let gone = || (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(());
    wait_until("the job's process gone", JOB_TIMEOUT, gone);
    assert_eq!(runs().lines().count(), 1, "the job ran once");
}

// Goal: `bsub -I` killed with SIGKILL while its job runs, before it attached or after: the
// job is killed (EXIT) well within the 60 s an unattached job waits for its terminal, and its
// process is gone.
#[test]
fn bsub_killed_kills_the_job() {
    let batch = Interactive::start();
    for after_attach in [false, true] {
        let marker = batch.cluster.dir().join(format!("pid.{after_attach}"));
        let script = format!("echo $$ > {}; exec sleep 1000", marker.display());
        let attached_before = batch.sbatchd.log().matches("terminal attached").count();
        let mut bsub = batch
            .cluster
            .command(bin("bsub"))
            .args(["-I", "sh", "-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("bsub");
        let pid: i32 = wait_until("the job's pid", JOB_TIMEOUT, || {
            std::fs::read_to_string(&marker).ok()?.trim().parse().ok()
        });
        if after_attach {
            let attached = || batch.sbatchd.log().matches("terminal attached").count() > attached_before;
            wait_until("the attach", JOB_TIMEOUT, || attached().then_some(()));
        }
        bsub.kill().expect("kill -9 bsub");
        let _ = bsub.wait();
        let mut said = String::new();
        std::io::Read::read_to_string(bsub.stdout.as_mut().expect("piped"), &mut said)
            .expect("bsub's output");
        let job = util::submitted_job_id(&said);
        wait_until("the job EXIT", KILL_BOUND, || (batch.bjobs_state(job) == "EXIT").then_some(()));
        let gone = || (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(());
        wait_until("the job's process gone", KILL_BOUND, gone);
    }
}

/// A tmux server of its own (its socket in the cluster folder), killed when dropped.
struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux").arg("-S").arg(&self.socket).args(args).output().expect("run tmux")
    }

    /// What the pane shows, its history included.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-J", "-S", "-200", "-t", "t"]).stdout)
            .into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success(), "tmux send-keys");
    }

    fn wait_for(&self, what: &str, found: impl Fn(&str) -> bool) -> String {
        self.wait_showing(what, || {
            let screen = self.screen();
            found(&screen).then_some(screen)
        })
    }

    /// `wait_until`, whose timeout shows the terminal's screen (what the job's shell said).
    fn wait_showing<T>(&self, what: &str, probe: impl FnMut() -> Option<T>) -> T {
        wait_until_showing(what, JOB_TIMEOUT, probe, || format!("the screen:\n{}", self.screen()))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The job id a line `job=N` of the screen shows (the job's output, not the typed command).
fn job_line(screen: &str) -> Option<u32> {
    screen.lines().find_map(|line| line.trim().strip_prefix("job=")).and_then(|id| id.trim().parse().ok())
}

// Goal: `bsub -Is bash` through a real terminal (a tmux pane): the job's shell runs on a
// pseudo-terminal of the execution host (`tty` names /dev/pts/N) with LSB_JOBID set; the size
// of bsub's terminal follows a resize (`stty size` in the job); Ctrl-C interrupts a `sleep`
// in the job's shell without ending the shell, Ctrl-Z stops one; `exit 7` ends bsub with 7, and the terminal's
// settings are back as they were.
#[test]
fn bsub_is_bash_is_a_working_shell() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("skipped: tmux is not installed");
        return;
    }
    let batch = Interactive::start();
    let dir = batch.cluster.dir().to_path_buf();
    let tmux = Tmux { socket: dir.join("tmux.sock") };
    let script = format!(
        "cd /tmp; stty -g > {d}/before; LSF_ENVDIR={envdir} {bsub} -Is bash --norc --noprofile; \
         echo $? > {d}/status; stty -g > {d}/after; sleep 600",
        d = dir.display(),
        envdir = batch.cluster.envdir().display(),
        bsub = bin("bsub").display(),
    );
    let started = tmux.run(&["new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "sh", "-c", &script]);
    assert!(started.status.success(), "tmux: {}", String::from_utf8_lossy(&started.stderr));
    let _ = tmux.run(&["set-option", "-t", "t", "status", "off"]);
    tmux.wait_for("bsub's Starting line", |screen| screen.contains("<<Starting on localhost>>"));
    tmux.keys(&["export PS1='job$ '; tty; echo job=$LSB_JOBID", "Enter"]);
    let screen = tmux.wait_for("tty and the job id", |screen| job_line(screen).is_some());
    assert!(screen.lines().any(|line| line.trim().starts_with("/dev/pts/")), "{screen}");
    let job = job_line(&screen).expect("seen");
    assert_eq!(batch.bjobs_state(job), "RUN");
    let _ = tmux.run(&["resize-window", "-t", "t", "-x", "100", "-y", "30"]);
    // bsub looks at its terminal's size a few times a second.
    wait_until("the new size in the job", JOB_TIMEOUT, || {
        tmux.keys(&["stty size", "Enter"]);
        std::thread::sleep(Duration::from_millis(300));
        tmux.screen().lines().any(|line| line.trim() == "30 100").then_some(())
    });
    tmux.keys(&["sleep 100; echo slept", "Enter"]);
    std::thread::sleep(Duration::from_millis(500));
    tmux.keys(&["C-c"]);
    tmux.keys(&["echo still-$((6*7))", "Enter"]);
    let screen = tmux
        .wait_for("the shell after Ctrl-C", |screen| screen.lines().any(|line| line.trim() == "still-42"));
    assert!(!screen.lines().any(|line| line.trim() == "slept"), "the sleep was interrupted:\n{screen}");
    // Ctrl-Z stops a command of the job's shell (its job control), which can be killed.
    tmux.keys(&["sleep 200", "Enter"]);
    std::thread::sleep(Duration::from_millis(500));
    tmux.keys(&["C-z"]);
    tmux.wait_for("the stopped sleep", |screen| screen.contains("Stopped") && screen.contains("sleep 200"));
    // Until bash has seen the job die: its `wait` may return at once with "job 1 stopped"
    // while its table still says so, and `exit` would then refuse ("There are stopped jobs").
    tmux.keys(&["kill %1; while jobs %1 >/dev/null 2>&1; do sleep 0.1; done; echo killed-$((3*3))", "Enter"]);
    tmux.wait_for("the killed sleep", |screen| screen.lines().any(|line| line.trim() == "killed-9"));
    tmux.keys(&["exit 7", "Enter"]);
    let written =
        |name: &str| std::fs::read_to_string(dir.join(name)).ok().filter(|text| text.ends_with('\n'));
    let status = tmux.wait_showing("bsub's exit status", || written("status"));
    assert_eq!(status.trim(), "7", "{}", tmux.screen());
    let after = tmux.wait_showing("the settings after", || written("after"));
    assert_eq!(
        std::fs::read_to_string(dir.join("before")).expect("before"),
        after,
        "the terminal is restored"
    );
    wait_until("the job EXIT", JOB_TIMEOUT, || (batch.bjobs_state(job) == "EXIT").then_some(()));
}

/// The state letter of process `pid` (`/proc/PID/stat`), empty when it is gone.
fn proc_state(pid: &str) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')').and_then(|at| stat[at + 1..].split_whitespace().next()).unwrap_or_default().to_owned()
}

fn pgrep(pattern: &str) -> Option<String> {
    let out = Command::new("pgrep").args(["-f", pattern]).output().expect("pgrep");
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().map(str::to_owned)
}

// Goal: LSF's difference between -Ip and -Is, through a real terminal (tmux). A job that takes
// its terminal out of signal mode (as an editor that redefines the keys) and reads one key:
// under -Is, Ctrl-C reaches it as the character 03; under -Ip, bsub turns Ctrl-C into SIGINT
// for the job, whose trap ends it with 3. Under -Ip, Ctrl-Z stops the job (its process in
// state T) and bsub itself; `kill -CONT` of bsub resumes both, and Ctrl-C then ends the job
// (bsub's status 130).
#[test]
fn bsub_ip_handles_the_keys_and_bsub_is_passes_them() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("skipped: tmux is not installed");
        return;
    }
    let batch = Interactive::start();
    let dir = batch.cluster.dir().to_path_buf();
    let job_script = dir.join("keys.sh");
    std::fs::write(
        &job_script,
        "trap 'echo got-INT; exit 3' INT\nstty raw -echo -isig\necho ready\n\
         c=$(dd bs=1 count=1 2>/dev/null | od -An -tx1)\nstty sane\necho key=$c\n",
    )
    .expect("the job's script");
    let bsub = |tmux: &Tmux, args: &str| {
        let script = format!(
            "cd /tmp; LSF_ENVDIR={envdir} {bsub} {args}; echo status=$?; sleep 600",
            envdir = batch.cluster.envdir().display(),
            bsub = bin("bsub").display(),
        );
        let started =
            tmux.run(&["new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "sh", "-c", &script]);
        assert!(started.status.success(), "tmux: {}", String::from_utf8_lossy(&started.stderr));
    };
    for (mode, key_seen, status) in [("-Is", "key= 03", "status=0"), ("-Ip", "got-INT", "status=3")] {
        let tmux = Tmux { socket: dir.join(format!("tmux{mode}.sock")) };
        bsub(&tmux, &format!("{mode} sh {}", job_script.display()));
        tmux.wait_for("the job ready for a key", |screen| screen.contains("ready"));
        tmux.keys(&["C-c"]);
        let screen = tmux.wait_for("bsub's status", |screen| screen.contains("status="));
        assert!(screen.contains(key_seen), "{mode}: Ctrl-C shows as {key_seen}:\n{screen}");
        assert!(screen.contains(status), "{mode}:\n{screen}");
    }

    let tmux = Tmux { socket: dir.join("tmux-z.sock") };
    let marker = "3187";
    bsub(&tmux, &format!("-Ip sleep {marker}"));
    let job = wait_until("the job's sleep", JOB_TIMEOUT, || pgrep(&format!("^sleep {marker}$")));
    let bsub_pid = pgrep(&format!("bsub -Ip sleep {marker}$")).expect("bsub runs");
    // bsub has attached once it put its terminal in raw mode.
    let pane_tty =
        String::from_utf8_lossy(&tmux.run(&["display-message", "-p", "-t", "t", "#{pane_tty}"]).stdout)
            .trim()
            .to_owned();
    wait_until("bsub's terminal in raw mode", JOB_TIMEOUT, || {
        let out = Command::new("stty").args(["-a", "-F", &pane_tty]).output().expect("stty");
        String::from_utf8_lossy(&out.stdout).contains("-icanon").then_some(())
    });
    tmux.keys(&["C-z"]);
    wait_until("Ctrl-Z stops bsub", JOB_TIMEOUT, || (proc_state(&bsub_pid) == "T").then_some(()));
    wait_until("Ctrl-Z stops the job", JOB_TIMEOUT, || (proc_state(&job) == "T").then_some(()));
    assert!(Command::new("kill").args(["-CONT", &bsub_pid]).status().expect("kill").success());
    wait_until("bsub continued continues the job", JOB_TIMEOUT, || {
        let state = proc_state(&job);
        (!state.is_empty() && state != "T").then_some(())
    });
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("bsub's status", |screen| screen.contains("status="));
    assert!(screen.contains("status=130"), "Ctrl-C ends the job with SIGINT:\n{screen}");
}

/// `ip netns exec NS BIN ARGS` as a daemon of the cluster (`ip` execs it).
fn spawn_in(cluster: &mut Cluster, ns: &str, name: &str, bin: &std::path::Path, args: &[&str]) -> Daemon {
    let mut all: Vec<&std::ffi::OsStr> =
        vec!["netns".as_ref(), "exec".as_ref(), ns.as_ref(), bin.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    cluster.spawn(name, std::path::Path::new("ip"), &all)
}

// Goal: across two hosts, each in a network namespace of its own: `bsub -I -m h1` on h0 runs
// the job on h1 (it sees h1's address), relays its output and the input piped to bsub through
// h1's sbatchd, and exits with the job's code.
#[test]
fn bsub_i_across_two_network_namespace_hosts() {
    let netns = match Netns::create("lavaint", &["h0", "h1"], "10.79.0") {
        Ok(netns) => netns,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    let mut cluster = Cluster::with_hosts(&["h0", "h1"]);
    cluster.write_file(
        "etc/lsf.cluster.lavacore",
        "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
         HOSTNAME model type server RESOURCES LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT LAVA_MXFSD_PORT\n\
         h0 ! ! 1 (cs linux) 10.79.0.1 - - -\nh1 ! ! 1 (cs linux) 10.79.0.2 - - -\nEnd Host\n",
    );
    let port_file = cluster.dir().join("run/mbatchd.port");
    let port_arg = port_file.display().to_string();
    let mut mbatchd = spawn_in(
        &mut cluster,
        &netns.hosts[0],
        "mbatchd",
        &util::mbatchd_bin(),
        &["--foreground", "--port", "0", "--port-file", &port_arg],
    );
    let port = mbatchd.wait_for_port_file(&port_file, STARTUP_TIMEOUT);
    cluster.rewrite_lsf_conf("LSB_MBD_PORT", &port.to_string());
    let mut daemons = vec![mbatchd];
    let mut envdirs = Vec::new();
    for (idx, host) in ["h0", "h1"].into_iter().enumerate() {
        let envdir = cluster.host_envdir(host);
        let ready = cluster.dir().join(format!("run/sbatchd.{host}.ready"));
        let (envdir_arg, ready_arg) = (envdir.display().to_string(), ready.display().to_string());
        let mut sbatchd = spawn_in(
            &mut cluster,
            &netns.hosts[idx],
            "sbatchd",
            &bin("sbatchd"),
            &["--envdir", &envdir_arg, "--host", host, "--ready-file", &ready_arg],
        );
        wait_until("sbatchd ready", STARTUP_TIMEOUT, || {
            assert!(sbatchd.is_running(), "sbatchd {host} exited:\n{}", sbatchd.log());
            ready.exists().then_some(())
        });
        daemons.push(sbatchd);
        envdirs.push(envdir);
    }
    let mut child = Command::new("ip")
        .args(["netns", "exec", &netns.hosts[0]])
        .arg(bin("bsub"))
        .args(["-I", "-m", "h1", "sh", "-c", "ip -o -4 addr show dev eth0; cat; exit 5"])
        .env("LSF_ENVDIR", &envdirs[0])
        .current_dir("/tmp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bsub in h0's namespace");
    child.stdin.take().expect("piped").write_all(b"across hosts\n").expect("bsub's input");
    let out = child.wait_with_output().expect("bsub ends");
    let logs: String = daemons.iter().map(Daemon::log).collect();
    assert_eq!(out.status.code(), Some(5), "{}\n{logs}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("10.79.0.2/24") && stdout.ends_with("across hosts\n"), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).ends_with("<<Starting on h1>>\n"), "{}", text(&out));
}

// Goal: `bsub -Is` killed with SIGKILL while its terminal is raw: its watcher puts the
// terminal's settings back, and the job is killed (EXIT).
#[test]
fn bsub_is_killed_gives_the_terminal_back() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("skipped: tmux is not installed");
        return;
    }
    let batch = Interactive::start();
    let dir = batch.cluster.dir().to_path_buf();
    let tmux = Tmux { socket: dir.join("tmux.sock") };
    // After bsub, wait (bounded) for the settings to come back, then record them.
    let script = format!(
        "cd /tmp; stty -g > {d}/before; LSF_ENVDIR={envdir} {bsub} -Is bash --norc --noprofile; \
         for i in $(seq 100); do [ \"$(stty -g)\" = \"$(cat {d}/before)\" ] && break; sleep 0.2; done; \
         stty -g > {d}/after; sleep 600",
        d = dir.display(),
        envdir = batch.cluster.envdir().display(),
        bsub = bin("bsub").display(),
    );
    let started = tmux.run(&["new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "sh", "-c", &script]);
    assert!(started.status.success(), "tmux: {}", String::from_utf8_lossy(&started.stderr));
    tmux.wait_for("bsub's Starting line", |screen| screen.contains("<<Starting on localhost>>"));
    tmux.keys(&["echo job=$LSB_JOBID", "Enter"]);
    let job = job_line(&tmux.wait_for("the job id", |screen| job_line(screen).is_some())).expect("seen");
    let pane = tmux.run(&["list-panes", "-t", "t", "-F", "#{pane_pid}"]);
    let shell = String::from_utf8_lossy(&pane.stdout).trim().to_owned();
    let bsub = Command::new("pgrep").args(["-P", &shell, "bsub"]).output().expect("pgrep");
    let bsub = String::from_utf8_lossy(&bsub.stdout).trim().to_owned();
    assert!(!bsub.is_empty(), "bsub under the pane's shell {shell}");
    assert!(Command::new("kill").args(["-KILL", &bsub]).status().expect("kill").success());
    let written =
        |name: &str| std::fs::read_to_string(dir.join(name)).ok().filter(|text| text.ends_with('\n'));
    let after = tmux.wait_showing("the settings after", || written("after"));
    assert_eq!(
        std::fs::read_to_string(dir.join("before")).expect("before"),
        after,
        "the terminal is restored"
    );
    wait_until("the job EXIT", JOB_TIMEOUT, || (batch.bjobs_state(job) == "EXIT").then_some(()));
}
