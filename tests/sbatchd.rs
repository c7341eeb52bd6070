//! Integration tests of sbatchd: the real binary, with real shepherds and jobs, against a
//! fake mbatchd written here (a lava-net authenticated TCP server speaking the batch
//! protocol frame by frame), in a fresh temporary cluster folder per test.
//!
//! The harness is self-contained (tests/util was not yet written when these were): a
//! [`Cluster`] writes a one-host configuration (host `node1` on 127.0.0.1, the fake
//! mbatchd's port, a fresh cluster key), starts sbatchd in its own process group, and on
//! drop kills sbatchd's group, every job's process group, and every process whose command
//! line names the test's folder (shepherds), so nothing outlives a test. Every wait is
//! bounded by [`WAIT`].

use std::collections::VecDeque;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_net::{AuthConfig, Authenticator, ClusterKey, Credential, FramedConn, KeyRing, Nonce, Timeouts};
use lava_xdr::frame::{FrameHeader, FrameLimits};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::{TcpListener, TcpStream, UnixStream};

/// Longest any single wait of a test may take.
const WAIT: Duration = Duration::from_secs(30);
/// Pause between two looks at something a test waits for.
const POLL: Duration = Duration::from_millis(20);
/// The test cluster's only host.
const HOST: &str = "node1";
/// Decoding limits for sbatchd's messages.
const LIMITS: lava_xdr::Limits =
    lava_xdr::Limits { input_bytes_max: 8 << 20, string_bytes_max: 1 << 20, ..lava_xdr::Limits::DEFAULT };

fn now_ms() -> u64 {
    lava_net::system_now_ms()
}

fn pid_of(child: &Child) -> i32 {
    i32::try_from(child.id()).expect("pid fits")
}

/// One temporary cluster: configuration, key, fake mbatchd listener, sbatchd.
struct Cluster {
    dir: tempfile::TempDir,
    envdir: PathBuf,
    auth: Arc<Authenticator>,
    listener: TcpListener,
    sbatchd: Option<Child>,
}

impl Cluster {
    async fn new() -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        // Job users (nobody) must traverse the folder to reach their job script.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
        let listener = loop {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let port = listener.local_addr().expect("addr").port();
            // lava-conf refuses two daemons on one port; stay clear of the defaults.
            if !(6878..=6884).contains(&port) {
                break listener;
            }
        };
        let port = listener.local_addr().expect("addr").port();
        let envdir = dir.path().join("etc");
        fs::create_dir_all(&envdir).expect("mkdir");
        let key_path = envdir.join("cluster.key");
        let key = ClusterKey::generate_file(&key_path).expect("key");
        let top = dir.path().display();
        fs::write(
            envdir.join("lsf.conf"),
            format!(
                "LSB_SHAREDIR={top}/work\nLSB_MBD_PORT={port}\nLAVA_CMD_SOCKET={top}/run/lava.sock\n\
                 LAVA_CLUSTER_KEY_FILE={}\nLSF_LOG_MASK=LOG_DEBUG\n",
                key_path.display()
            ),
        )
        .expect("lsf.conf");
        fs::write(envdir.join("lsf.shared"), "Begin Cluster\nClusterName\ntestcl\nEnd Cluster\n")
            .expect("shared");
        fs::write(
            envdir.join("lsf.cluster.testcl"),
            format!(
                "Begin Host\nHOSTNAME model type server RESOURCES LAVA_ADDR\n{HOST} ! ! 1 () 127.0.0.1\nEnd Host\n"
            ),
        )
        .expect("lsf.cluster");
        // Verifies credentials as mbatchd of this cluster would.
        let audience = lava_net::Audience::new(lava_net::Audience::MBATCHD, "testcl");
        let auth =
            Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()).with_audience(audience));
        Cluster { dir, envdir, auth, listener, sbatchd: None }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn host_dir(&self) -> PathBuf {
        self.path("work/testcl/sbd").join(HOST)
    }

    fn socket(&self) -> PathBuf {
        self.path("run/lava.sock")
    }

    /// Starts sbatchd and waits for its ready file.
    async fn start_sbatchd(&mut self) {
        let ready = self.path("sbatchd.ready");
        let _ = fs::remove_file(&ready);
        let log =
            fs::OpenOptions::new().create(true).append(true).open(self.path("sbatchd.log")).expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_sbatchd"))
            .arg("--envdir")
            .arg(&self.envdir)
            .args(["--host", HOST, "--ready-file"])
            .arg(&ready)
            .env_remove("LSF_ENVDIR")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start sbatchd");
        self.sbatchd = Some(child);
        let started = Instant::now();
        while !ready.exists() {
            if let Some(status) = self.sbatchd.as_mut().and_then(|c| c.try_wait().expect("try_wait")) {
                panic!("sbatchd exited with {status} before it was ready:\n{}", self.log());
            }
            assert!(started.elapsed() < WAIT, "sbatchd not ready within {WAIT:?}:\n{}", self.log());
            tokio::time::sleep(POLL).await;
        }
    }

    /// Kills sbatchd (SIGKILL to its process group; shepherds live in their own sessions).
    fn kill_sbatchd(&mut self) {
        if let Some(mut child) = self.sbatchd.take() {
            killpg(pid_of(&child));
            let _ = child.wait();
        }
    }

    fn sbatchd_running(&mut self) -> bool {
        self.sbatchd.as_mut().is_some_and(|child| child.try_wait().expect("try_wait").is_none())
    }

    fn log(&self) -> String {
        fs::read_to_string(self.path("sbatchd.log")).unwrap_or_default()
    }

    /// Accepts sbatchd's next connection and completes its registration.
    async fn accept(&self) -> Mbd {
        let (stream, _) = tokio::time::timeout(WAIT, self.listener.accept())
            .await
            .unwrap_or_else(|_| panic!("sbatchd did not connect within {WAIT:?}:\n{}", self.log()))
            .expect("accept");
        stream.set_nodelay(true).expect("nodelay");
        let conn = FramedConn::new(stream, FrameLimits { body_bytes_max: 8 << 20 }, Timeouts::default());
        let mut mbd = Mbd { conn, auth: Arc::clone(&self.auth), sequence: 0, pending: VecDeque::new() };
        let register: wire::SbdRegister = mbd.expect(Operation::SbdRegister).await;
        assert_eq!(register.host_name, HOST);
        assert!(register.n_cpus >= 1);
        let ack = wire::SbdRegisterAck { cluster_name: "testcl".into(), master_name: HOST.into() };
        mbd.send(Operation::SbdRegisterAck, &ack).await;
        mbd
    }

    /// The job's state folder.
    fn state_dir(&self, spec: &wire::JobSpecs) -> PathBuf {
        self.host_dir().join("state").join(format!("{}.{}", spec.submit_time, spec.job.job_id))
    }
}

/// SIGKILL to a process group, through kill(1) (the tests have no unsafe code); errors
/// (no such group) are irrelevant to the clean-up.
fn killpg(pgid: i32) {
    if pgid > 1 {
        let _ = Command::new("kill").args(["-9", "--", &format!("-{pgid}")]).status();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_sbatchd();
        // Every job's process group, from the pid files its shepherd wrote.
        if let Ok(entries) = fs::read_dir(self.host_dir().join("state")) {
            for entry in entries.flatten() {
                let line = fs::read_to_string(entry.path().join("pid")).unwrap_or_default();
                let pgid = line
                    .split(' ')
                    .find_map(|field| field.strip_prefix("pgid="))
                    .and_then(|p| p.parse().ok());
                if let Some(pgid) = pgid {
                    killpg(pgid);
                }
            }
        }
        // Shepherds (and anything else) whose command line names this test's folder.
        let marker = self.dir.path().display().to_string();
        if let Ok(entries) = fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else {
                    continue;
                };
                let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains(&marker) && pid != std::process::id() as i32 {
                    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                }
            }
        }
        if std::thread::panicking() {
            eprintln!("---- sbatchd log ----\n{}", self.log());
        }
    }
}

/// The fake mbatchd's end of one connection: frames sealed and opened by hand, so tests can
/// also send what a real mbatchd never would.
struct Mbd {
    conn: FramedConn<TcpStream>,
    auth: Arc<Authenticator>,
    sequence: u32,
    /// Frames read while looking for another operation.
    pending: VecDeque<(Operation, Bytes)>,
}

impl Mbd {
    fn header(&mut self, operation: u32) -> FrameHeader {
        self.sequence += 1;
        FrameHeader { sequence: self.sequence, operation, version: BATCH_VERSION, length: 0, status: 0 }
    }

    async fn send<T: Serialize>(&mut self, operation: Operation, message: &T) {
        let payload = lava_xdr::to_bytes(message).expect("encode");
        self.send_payload(operation.code(), &payload).await;
    }

    async fn send_payload(&mut self, operation: u32, payload: &[u8]) {
        let header = self.header(operation);
        let body = self.auth.seal(header, payload, now_ms(), Nonce::fresh().expect("nonce")).expect("seal");
        self.conn.write_frame(header, &body).await.expect("write");
    }

    /// The next authenticated frame; `None` when sbatchd closed the connection.
    async fn recv(&mut self) -> Option<(Operation, Bytes)> {
        let frame = match tokio::time::timeout(WAIT, self.conn.read_frame()).await {
            Err(_) => panic!("no frame from sbatchd within {WAIT:?}"),
            Ok(Ok(Some(frame))) => frame,
            Ok(Ok(None) | Err(_)) => return None,
        };
        assert_eq!(frame.header.version, BATCH_VERSION);
        let payload = self.auth.open(&frame, now_ms()).expect("sbatchd's frames authenticate");
        let operation = Operation::from_code(frame.header.operation).expect("known operation");
        Some((operation, payload))
    }

    /// The next message of `operation`, keeping others (resends, later stages) for later.
    async fn expect<T: DeserializeOwned>(&mut self, operation: Operation) -> T {
        let idx = self.pending.iter().position(|(op, _)| *op == operation);
        let payload = match idx.and_then(|idx| self.pending.remove(idx)) {
            Some((_, payload)) => payload,
            None => loop {
                let (op, payload) = self
                    .recv()
                    .await
                    .unwrap_or_else(|| panic!("connection closed waiting for {}", operation.name()));
                if op == operation {
                    break payload;
                }
                self.pending.push_back((op, payload));
            },
        };
        lava_xdr::from_bytes(&payload, &LIMITS).expect("decode")
    }

    /// The next message of `operation`, answering every NEW_JOB_REPLY met on the way with
    /// its ACK, as mbatchd does. After a restart sbatchd resends the reply when the ACK was
    /// only noted, not yet written (docs/batch.md, "What sbatchd makes durable"); each
    /// resent reply must name `pid`.
    async fn expect_acking_replies<T: DeserializeOwned>(&mut self, operation: Operation, pid: i32) -> T {
        loop {
            while let Some(idx) = self.pending.iter().position(|(op, _)| *op == Operation::NewJobReply) {
                let (_, payload) = self.pending.remove(idx).expect("found");
                let reply: wire::NewJobReply = lava_xdr::from_bytes(&payload, &LIMITS).expect("decode");
                assert_eq!(started_pid(&reply), pid, "a resent reply names the same process");
                let ack = wire::JobAck { job: reply.job, dispatch_seq: reply.dispatch_seq };
                self.send(Operation::NewJobReplyAck, &ack).await;
            }
            if let Some(idx) = self.pending.iter().position(|(op, _)| *op == operation) {
                let (_, payload) = self.pending.remove(idx).expect("found");
                return lava_xdr::from_bytes(&payload, &LIMITS).expect("decode");
            }
            let message = self
                .recv()
                .await
                .unwrap_or_else(|| panic!("connection closed waiting for {}", operation.name()));
            self.pending.push_back(message);
        }
    }

    /// Waits until sbatchd drops the connection.
    async fn expect_closed(&mut self) {
        while self.recv().await.is_some() {}
    }
}

/// A dispatch snapshot for job `id` on `node1`.
fn job_spec(id: u32, user: &str, uid: u32, cwd: &Path, command: &str) -> wire::JobSpecs {
    let now_s = i64::try_from(now_ms() / 1000).expect("time");
    wire::JobSpecs {
        job: wire::WireJobRef { job_id: id, array_index: 0 },
        submit_time: now_s - 10,
        dispatch_time: now_s,
        dispatch_seq: 1,
        user_id: uid,
        group_id: uid,
        user_name: user.into(),
        queue: "normal".into(),
        job_name: format!("job{id}"),
        command: command.into(),
        from_host: HOST.into(),
        cwd: cwd.display().to_string(),
        sub_home_dir: "/tmp".into(),
        input_file: String::new(),
        output_file: String::new(),
        error_file: String::new(),
        file_flags: 0,
        n_slots: 1,
        exec_hosts: vec![HOST.into()],
        umask: 0o022,
        run_limit_s: 0,
        mem_limit_kb: 0,
        terminate_interval_s: 1,
        project: "default".into(),
        login_shell: String::new(),
        pre_exec: String::new(),
        post_exec: String::new(),
        queue_pre_exec: String::new(),
        queue_post_exec: String::new(),
        nice: 0,
        limits: wire::ResourceLimits::default(),
        job_starter: String::new(),
        env: vec![wire::EnvVar { name: "PATH".into(), value: "/usr/bin:/bin".into() }],
    }
}

fn ack(spec: &wire::JobSpecs) -> wire::JobAck {
    wire::JobAck { job: spec.job, dispatch_seq: spec.dispatch_seq }
}

fn started_pid(reply: &wire::NewJobReply) -> i32 {
    match reply.outcome {
        wire::NewJobOutcome::Started { pid, pgid, .. } => {
            assert!(pid > 0);
            assert_eq!(pid, pgid, "the job leads its own process group");
            pid
        }
        ref refused => panic!("job refused: {refused:?}"),
    }
}

/// Waits until `condition` holds.
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < WAIT, "{what}: not within {WAIT:?}");
        tokio::time::sleep(POLL).await;
    }
}

/// The state letter of a process (`R`, `S`, `T`, `Z`...), `None` when it does not exist.
fn process_state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rfind(')').and_then(|at| stat[at + 1..].trim_start().chars().next())
}

fn gone(pid: i32) -> bool {
    matches!(process_state(pid), None | Some('Z'))
}

fn read_pid_file(path: &Path) -> Option<i32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn lines(path: &Path) -> usize {
    fs::read_to_string(path).map(|text| text.lines().count()).unwrap_or(0)
}

// Goal: the whole pipeline of one job run as another user. A NEW_JOB for `nobody` whose
// command prints and exits 3 is answered with its pid; EXECUTE (only after the reply's
// ACK) carries the absolute working directory and the user; FINISH carries exit status 3;
// the output file holds what the job printed and nobody's uid; the job's folder and script
// belonged to nobody while it ran, and the folder is released (renamed away as a spare)
// once the job has ended; the record ends acknowledged.
// Method: fake mbatchd, one connection, each stage acknowledged in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_runs_as_its_user_through_every_stage() {
    let mut cluster = Cluster::new().await;
    let out_dir = cluster.path("out");
    fs::create_dir(&out_dir).expect("mkdir");
    fs::set_permissions(&out_dir, fs::Permissions::from_mode(0o777)).expect("chmod");
    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;

    let command = r#"echo hello; id -u; stat -c %u "$LSB_JOBDIR" "$LSB_JOBFILENAME"; exit 3"#;
    let mut spec = job_spec(101, "nobody", 65534, &out_dir, command);
    spec.output_file = out_dir.join("job.out").display().to_string();
    mbd.send(Operation::NewJob, &spec).await;
    let reply: wire::NewJobReply = mbd.expect(Operation::NewJobReply).await;
    assert_eq!(reply.job, spec.job);
    let pid = started_pid(&reply);
    mbd.send(Operation::NewJobReplyAck, &ack(&spec)).await;

    let execute: wire::JobExecute = mbd.expect(Operation::JobExecute).await;
    assert_eq!((execute.pid, execute.pgid), (pid, pid));
    assert_eq!(execute.exec_cwd, out_dir.display().to_string());
    assert_eq!((execute.exec_user.as_str(), execute.exec_uid), ("nobody", 65534));
    mbd.send(Operation::JobExecuteAck, &ack(&spec)).await;

    let finish: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
    assert_eq!(finish.pid, pid);
    assert_eq!(finish.wait_status, 3 << 8, "exit status 3");
    assert_eq!(finish.finish_reason, wire::FINISH_NORMAL);
    mbd.send(Operation::JobFinishAck, &ack(&spec)).await;

    assert_eq!(fs::read_to_string(out_dir.join("job.out")).expect("output"), "hello\n65534\n65534\n65534\n");
    let jobfile = format!("{}.101", spec.submit_time);
    let job_dir = cluster.host_dir().join("jobs").join(&jobfile);
    wait_until("the ended job's folder released", || !job_dir.exists()).await;
    let spare = cluster.host_dir().join("jobs").join(format!("{}0", lava_sbatchd::layout::SPARE_PREFIX));
    assert_eq!(fs::metadata(&spare).expect("the spare").uid(), 0, "a spare is root's again");
    let record_dir = cluster.host_dir().join("state").join(&jobfile);
    wait_until("FINISH_ACK recorded", || {
        lava_sbatchd::store::read_newest(&record_dir)
            .ok()
            .flatten()
            .is_some_and(|(_, record)| record.finish_acked && record.execute_acked && record.pid_acked)
    })
    .await;
}

// Goal: a job survives sbatchd's death and its end is still reported, once. sbatchd is
// killed with SIGKILL while the job sleeps; a new sbatchd adopts the shepherd and sends
// FINISH (status 0) when the job ends; the job ran exactly once.
// Method: the job appends a line to a counter file, then sleeps 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_outlives_a_killed_sbatchd_and_is_reported_once() {
    let mut cluster = Cluster::new().await;
    let counter = cluster.path("counter");
    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;

    let command = format!("echo run >> {}; sleep 2; exit 0", counter.display());
    let spec = job_spec(202, "root", 0, cluster.dir.path(), &command);
    mbd.send(Operation::NewJob, &spec).await;
    let pid = started_pid(&mbd.expect(Operation::NewJobReply).await);
    mbd.send(Operation::NewJobReplyAck, &ack(&spec)).await;
    let _: wire::JobExecute = mbd.expect(Operation::JobExecute).await;
    assert!(!gone(pid), "the job runs");

    cluster.kill_sbatchd();
    mbd.expect_closed().await;
    assert!(!gone(pid), "the job survives sbatchd's death");
    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;
    let finish: wire::JobFinish = mbd.expect_acking_replies(Operation::JobFinish, pid).await;
    assert_eq!(finish.pid, pid);
    assert_eq!(finish.wait_status, 0);
    mbd.send(Operation::JobFinishAck, &ack(&spec)).await;
    assert_eq!(lines(&counter), 1, "the job ran exactly once");
}

// Goal: pre-execution commands run before the job's process exists, and a crash of sbatchd
// while they run neither loses their outcome nor runs a job twice (docs/batch.md, "Pre- and
// post-execution commands"): of two jobs whose queue PRE_EXEC then -E are running when
// sbatchd is killed, the one whose -E exits 7 is refused with code 0x100 + 7 (its command
// never ran), the other starts once, after both commands ran once each, in LSF's order.
// Method: the -E commands wait for a file the test creates while sbatchd is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_exec_outcomes_survive_a_killed_sbatchd() {
    let mut cluster = Cluster::new().await;
    let trace = cluster.path("trace");
    let release = cluster.path("release");
    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;

    let mut specs = Vec::new();
    for (id, exit) in [(601, 7), (602, 0)] {
        let command = format!("echo job {id} >> {}", trace.display());
        let mut spec = job_spec(id, "root", 0, cluster.dir.path(), &command);
        spec.queue_pre_exec = format!("echo qpre {id} >> {}", trace.display());
        spec.pre_exec = format!(
            "echo pre {id} >> {trace}; while [ ! -e {release} ]; do sleep 0.05; done; exit {exit}",
            trace = trace.display(),
            release = release.display()
        );
        mbd.send(Operation::NewJob, &spec).await;
        specs.push(spec);
    }
    wait_until("both -E commands to run", || {
        fs::read_to_string(&trace).is_ok_and(|t| t.lines().count() == 4)
    })
    .await;
    cluster.kill_sbatchd();
    mbd.expect_closed().await;
    fs::write(&release, b"").expect("release the -E commands");
    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;
    let mut outcomes = std::collections::BTreeMap::new();
    while outcomes.len() < 2 {
        let reply: wire::NewJobReply = mbd.expect(Operation::NewJobReply).await;
        outcomes.insert(reply.job.job_id, reply.outcome.clone());
        mbd.send(Operation::NewJobReplyAck, &wire::JobAck { job: reply.job, dispatch_seq: 1 }).await;
    }
    assert!(
        matches!(&outcomes[&601], wire::NewJobOutcome::Refused { code, .. } if *code == wire::REFUSE_PRE_EXEC_BASE + 7),
        "{outcomes:?}"
    );
    assert!(matches!(outcomes[&602], wire::NewJobOutcome::Started { .. }), "{outcomes:?}");
    let finish: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
    assert_eq!((finish.job.job_id, finish.wait_status), (602, 0));
    mbd.send(Operation::JobFinishAck, &ack(&specs[1])).await;
    let mut seen: Vec<String> =
        fs::read_to_string(&trace).expect("trace").lines().map(str::to_owned).collect();
    let job_line = seen.pop().expect("the job's line");
    assert_eq!(job_line, "job 602", "only the job whose -E succeeded ran, once, last");
    seen.sort();
    assert_eq!(seen, ["pre 601", "pre 602", "qpre 601", "qpre 602"], "each command ran once");
}

// Goal: STOP, CONT and Terminate act on the job's whole process group: a job shell and the
// child it started are both stopped, both continued, and both gone after Terminate, whose
// FINISH says the job was killed.
// Method: the job starts `sleep 300` in the background and waits; each signal's reply is
// awaited, then the processes' states are read from /proc.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_act_on_the_whole_process_group() {
    let mut cluster = Cluster::new().await;
    let (shell_file, child_file) = (cluster.path("shell.pid"), cluster.path("child.pid"));
    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;

    let command = format!(
        "sleep 300 & echo $! > {}.tmp; mv {0}.tmp {0}; echo $$ > {}.tmp; mv {1}.tmp {1}; wait",
        child_file.display(),
        shell_file.display()
    );
    let spec = job_spec(303, "root", 0, cluster.dir.path(), &command);
    mbd.send(Operation::NewJob, &spec).await;
    let pid = started_pid(&mbd.expect(Operation::NewJobReply).await);
    mbd.send(Operation::NewJobReplyAck, &ack(&spec)).await;
    wait_until("the job wrote its pids", || shell_file.exists() && child_file.exists()).await;
    let shell = read_pid_file(&shell_file).expect("shell pid");
    let child = read_pid_file(&child_file).expect("child pid");
    assert_eq!(shell, pid);

    let mut signal_seq = 0;
    for (action, stopped) in [(wire::SignalAction::Stop, true), (wire::SignalAction::Continue, false)] {
        signal_seq += 1;
        mbd.send(Operation::JobSignal, &wire::JobSignal { job: spec.job, signal_seq, action }).await;
        let reply: wire::JobSignalReply = mbd.expect(Operation::JobSignalReply).await;
        assert_eq!((reply.signal_seq, reply.outcome), (signal_seq, wire::SignalOutcome::Delivered));
        wait_until(&format!("{action:?} reaches both processes"), || {
            [shell, child].iter().all(|pid| (process_state(*pid) == Some('T')) == stopped)
        })
        .await;
    }

    signal_seq += 1;
    let terminate = wire::JobSignal { job: spec.job, signal_seq, action: wire::SignalAction::Terminate };
    mbd.send(Operation::JobSignal, &terminate).await;
    let reply: wire::JobSignalReply = mbd.expect(Operation::JobSignalReply).await;
    assert_eq!(reply.outcome, wire::SignalOutcome::Delivered);
    let finish: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
    assert_eq!(finish.finish_reason, wire::FINISH_KILLED);
    mbd.send(Operation::JobFinishAck, &ack(&spec)).await;
    wait_until("both processes are gone", || gone(shell) && gone(child)).await;
}

// Goal: a duplicate NEW_JOB is answered from the record (same pid) and never runs the job
// again, neither while it runs nor after its FINISH was acknowledged.
// Method: the job appends to a counter file; NEW_JOB is sent three times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_new_job_is_answered_from_the_record() {
    let mut cluster = Cluster::new().await;
    let counter = cluster.path("counter");
    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;

    let command = format!("echo run >> {}; sleep 1", counter.display());
    let spec = job_spec(404, "root", 0, cluster.dir.path(), &command);
    mbd.send(Operation::NewJob, &spec).await;
    let pid = started_pid(&mbd.expect(Operation::NewJobReply).await);
    mbd.send(Operation::NewJob, &spec).await;
    assert_eq!(started_pid(&mbd.expect(Operation::NewJobReply).await), pid);
    mbd.send(Operation::NewJobReplyAck, &ack(&spec)).await;
    let finish: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
    assert_eq!((finish.pid, finish.wait_status), (pid, 0));
    mbd.send(Operation::JobFinishAck, &ack(&spec)).await;
    let record_dir = cluster.state_dir(&spec);
    wait_until("FINISH_ACK recorded", || {
        lava_sbatchd::store::read_newest(&record_dir)
            .ok()
            .flatten()
            .is_some_and(|(_, record)| record.finish_acked)
    })
    .await;

    mbd.pending.clear();
    mbd.send(Operation::NewJob, &spec).await;
    assert_eq!(started_pid(&mbd.expect(Operation::NewJobReply).await), pid, "the tombstone answers");
    assert_eq!(lines(&counter), 1, "the job ran exactly once");
}

// Goal: a second dispatch of the same job (dispatch number 2) runs it again, once the
// first run's FINISH is acknowledged, and only then: before that ACK the new NEW_JOB gets
// the old FINISH again (dispatch 1), nothing is launched; after it the job runs afresh with
// a new pid, its messages name dispatch 2, and the first run's shepherd files are gone.
// Method: the job appends to a counter file and exits 1 the first time, 0 the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_dispatch_runs_the_job_again_after_the_first_finish_is_acked() {
    let mut cluster = Cluster::new().await;
    let counter = cluster.path("counter");
    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;

    let command = format!("echo run >> {0}; test $(wc -l < {0}) -gt 1", counter.display());
    let first = job_spec(505, "root", 0, cluster.dir.path(), &command);
    mbd.send(Operation::NewJob, &first).await;
    let pid = started_pid(&mbd.expect(Operation::NewJobReply).await);
    mbd.send(Operation::NewJobReplyAck, &ack(&first)).await;
    let finish: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
    assert_eq!((finish.pid, finish.wait_status, finish.dispatch_seq), (pid, 1 << 8, 1));

    let second = wire::JobSpecs { dispatch_seq: 2, ..first.clone() };
    mbd.pending.clear();
    mbd.send(Operation::NewJob, &second).await;
    let again: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
    assert_eq!((again.pid, again.dispatch_seq), (pid, 1), "the old FINISH is resent, nothing started");
    assert_eq!(lines(&counter), 1);
    mbd.send(Operation::JobFinishAck, &ack(&first)).await;

    // mbatchd resends NEW_JOB until it is answered.
    let reply: wire::NewJobReply = loop {
        mbd.send(Operation::NewJob, &second).await;
        tokio::time::sleep(POLL).await;
        if let Some(idx) = mbd.pending.iter().position(|(op, _)| *op == Operation::NewJobReply) {
            let (_, payload) = mbd.pending.remove(idx).expect("found");
            break lava_xdr::from_bytes(&payload, &LIMITS).expect("decode");
        }
        let (op, payload) = mbd.recv().await.expect("connection open");
        mbd.pending.push_back((op, payload));
    };
    let new_pid = started_pid(&reply);
    assert_eq!(reply.dispatch_seq, 2);
    assert_ne!(new_pid, pid);
    mbd.send(Operation::NewJobReplyAck, &ack(&second)).await;
    let finish: wire::JobFinish = loop {
        let finish: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
        if finish.dispatch_seq == 2 {
            break finish;
        }
    };
    assert_eq!((finish.pid, finish.wait_status), (new_pid, 0));
    mbd.send(Operation::JobFinishAck, &ack(&second)).await;
    assert_eq!(lines(&counter), 2, "the job ran once per dispatch");
    let record_dir = cluster.state_dir(&second);
    wait_until("the second FINISH_ACK recorded", || {
        lava_sbatchd::store::read_newest(&record_dir).ok().flatten().is_some_and(|(_, record)| {
            record.finish_acked && record.dispatch_seq == 2 && record.pid == new_pid
        })
    })
    .await;
}

// Goal: garbage from "mbatchd" costs a connection, never the daemon: an oversized frame, a
// frame whose MAC does not match, and a well-sealed frame of an unknown operation each
// make sbatchd drop the connection and register again; afterwards a job still runs.
// Method: one bad frame per connection; the fake mbatchd waits for each close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_from_mbatchd_cost_only_the_connection() {
    let mut cluster = Cluster::new().await;
    cluster.start_sbatchd().await;

    // Random bytes whose header announces a 4 GiB body.
    let mut mbd = cluster.accept().await;
    let stream = mbd.conn.get_ref();
    stream.writable().await.expect("writable");
    let mut garbage = vec![0u8; 64];
    garbage[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
    for (idx, byte) in garbage.iter_mut().enumerate().skip(16) {
        *byte = (idx * 37) as u8;
    }
    stream.try_write(&garbage).expect("write garbage");
    mbd.expect_closed().await;

    // A sealed NEW_JOB with one payload bit flipped: the MAC no longer matches.
    let mut mbd = cluster.accept().await;
    let spec = job_spec(505, "root", 0, cluster.dir.path(), "true");
    let payload = lava_xdr::to_bytes(&spec).expect("encode");
    let header = mbd.header(Operation::NewJob.code());
    let body = mbd.auth.seal(header, &payload, now_ms(), Nonce::fresh().expect("nonce")).expect("seal");
    let mut tampered = body.to_vec();
    tampered[0] ^= 1;
    mbd.conn.write_frame(header, &tampered).await.expect("write");
    mbd.expect_closed().await;

    // A well-sealed frame of an operation sbatchd does not take.
    let mut mbd = cluster.accept().await;
    mbd.send_payload(99, b"\0\0\0\0").await;
    mbd.expect_closed().await;

    assert!(cluster.sbatchd_running(), "sbatchd survives bad frames");
    let mut mbd = cluster.accept().await;
    mbd.send(Operation::NewJob, &spec).await;
    started_pid(&mbd.expect(Operation::NewJobReply).await);
    mbd.send(Operation::NewJobReplyAck, &ack(&spec)).await;
    let finish: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
    assert_eq!(finish.wait_status, 0);
}

// Goal: a job whose shepherd vanishes (SIGKILL) without recording the end is reported
// lost (killed by SIGKILL, sbatchd's documented status), and its process, still the one
// the shepherd started, is killed so that the report is true.
// Method: kill the shepherd named in the job's pid file while the job sleeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_of_a_vanished_shepherd_is_reported_lost_and_killed() {
    let mut cluster = Cluster::new().await;
    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;

    let spec = job_spec(606, "root", 0, cluster.dir.path(), "sleep 300");
    mbd.send(Operation::NewJob, &spec).await;
    let pid = started_pid(&mbd.expect(Operation::NewJobReply).await);
    mbd.send(Operation::NewJobReplyAck, &ack(&spec)).await;
    let pid_line = fs::read_to_string(cluster.state_dir(&spec).join("pid")).expect("pid file");
    let shepherd: i32 = pid_line
        .split(' ')
        .find_map(|field| field.trim().strip_prefix("shepherd="))
        .and_then(|pid| pid.parse().ok())
        .expect("the shepherd's pid");
    let _ = Command::new("kill").args(["-9", &shepherd.to_string()]).status();

    let finish: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
    assert_eq!((finish.pid, finish.wait_status), (pid, lava_sbatchd::LOST_WAIT_STATUS));
    mbd.send(Operation::JobFinishAck, &ack(&spec)).await;
    wait_until("the lost job is killed", || gone(pid)).await;
}

/// Sends one frame on the credential socket and reads the answer.
async fn credential_exchange(conn: &mut FramedConn<UnixStream>, operation: u32) -> Option<(u32, Bytes)> {
    let header = FrameHeader { sequence: 7, operation, version: BATCH_VERSION, length: 0, status: 0 };
    let audience = wire::CredentialRequest {
        audience_kind: wire::AUDIENCE_MBATCHD,
        audience_cluster: "testcl".to_owned(),
    };
    conn.write_frame(header, &lava_xdr::to_bytes(&audience).expect("encodes")).await.ok()?;
    let frame = tokio::time::timeout(WAIT, conn.read_frame()).await.expect("answer in time").ok()??;
    assert_eq!(frame.header.sequence, 7, "the reply echoes the sequence number");
    Some((frame.header.operation, frame.body))
}

// Goal: the credential socket vouches for the caller's real uid: the token verifies with
// the cluster key (once), names this host and the caller's uid and user; a request of
// another kind is refused without harming the daemon, and it serves the next caller.
// Method: two connections to LAVA_CMD_SOCKET as the test process itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credential_socket_vouches_for_the_callers_uid() {
    let mut cluster = Cluster::new().await;
    cluster.start_sbatchd().await;
    let socket = cluster.socket();
    assert_eq!(fs::metadata(&socket).expect("socket").permissions().mode() & 0o777, 0o666);
    let limits = FrameLimits { body_bytes_max: 4096 };
    let connect = || async {
        let stream = UnixStream::connect(&socket).await.expect("connect");
        FramedConn::new(stream, limits, Timeouts::default())
    };

    let mut conn = connect().await;
    let (operation, body) =
        credential_exchange(&mut conn, Operation::CredentialRequest.code()).await.expect("reply");
    assert_eq!(operation, Operation::CredentialReply.code());
    let reply: wire::CredentialReply = lava_xdr::from_bytes(&body, &LIMITS).expect("decode");
    let credential = Credential::verify(&cluster.auth, &reply.token, now_ms()).expect("a genuine credential");
    let (uid, gid) = (id_number("-u"), id_number("-g"));
    assert_eq!((credential.uid, credential.gid), (uid, gid));
    assert_eq!(credential.hostname, HOST);
    let me = Command::new("id").arg("-un").output().expect("id");
    assert_eq!(credential.username, String::from_utf8_lossy(&me.stdout).trim());
    assert!(Credential::verify(&cluster.auth, &reply.token, now_ms()).is_err(), "a token is good once");

    let mut conn = connect().await;
    let (operation, _) = credential_exchange(&mut conn, Operation::SubmitJob.code()).await.expect("reply");
    assert_eq!(operation, Operation::RequestFailed.code());
    let mut conn = connect().await;
    let (operation, _) =
        credential_exchange(&mut conn, Operation::CredentialRequest.code()).await.expect("reply");
    assert_eq!(operation, Operation::CredentialReply.code());
    assert!(cluster.sbatchd_running());
}

/// This process's uid (`-u`) or gid (`-g`), from id(1).
fn id_number(flag: &str) -> u32 {
    let out = Command::new("id").arg(flag).output().expect("id");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("a number")
}

/// `lsadmin sbdstatus` against the test's sbatchd: its text and its counters by name.
fn sbdstatus(cluster: &Cluster) -> (String, std::collections::BTreeMap<String, u64>) {
    let output = Command::new(env!("CARGO_BIN_EXE_lsadmin"))
        .arg("sbdstatus")
        .env("LSF_ENVDIR", &cluster.envdir)
        .stdin(Stdio::null())
        .output()
        .expect("run lsadmin");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "lsadmin sbdstatus: {}", String::from_utf8_lossy(&output.stderr));
    let counters = out
        .split_once("\nCounters:\n")
        .unwrap_or_else(|| panic!("no Counters: section in\n{out}"))
        .1
        .lines()
        .map(|line| {
            let (name, value) = line.trim().split_once(' ').expect("`name value`");
            (name.to_owned(), value.trim().parse().expect("a number"))
        })
        .collect();
    (out, counters)
}

// Goal: `lsadmin sbdstatus` reports what sbatchd does: the link's state and reconnections,
// a job in each phase it passes (awaiting the reply's ACK while running, then a tombstone),
// the shepherd alive, NEW_JOB_REPLY resent after a reconnection, records persisted with
// their fsyncs, credentials issued and a refused request on the socket.
// Method: fake mbatchd; the job waits for a file the test creates; the first connection is
// dropped before the reply is acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_query_counts_what_happens() {
    let mut cluster = Cluster::new().await;
    cluster.start_sbatchd().await;
    let (text, before) = sbdstatus(&cluster);
    assert!(text.starts_with(&format!("SBD runtime information on host {HOST}\n")), "{text}");
    let mut mbd = cluster.accept().await;

    let release = cluster.path("release");
    let command = format!("while [ ! -e {} ]; do sleep 0.05; done; exit 0", release.display());
    let spec = job_spec(303, "root", 0, cluster.dir.path(), &command);
    mbd.send(Operation::NewJob, &spec).await;
    let pid = started_pid(&mbd.expect(Operation::NewJobReply).await);
    let (text, running) = sbdstatus(&cluster);
    assert!(text.contains("Link to mbatchd:        connected since"), "{text}");
    for (name, value) in [
        ("jobs.running", 1),
        ("jobs.awaiting_reply_ack", 1),
        ("jobs.tombstones", 0),
        ("shepherds.alive", 1),
        ("shepherds.launched", 1),
        ("link.connects", 1),
        ("link.disconnects", 0),
    ] {
        assert_eq!(running[name], value, "{name}:\n{text}");
    }
    // The NEW_JOB record is durable (file and folder fsynced); the pid is only noted.
    assert!(running["store.persists"] >= 1 && running["store.fsyncs"] >= 2, "{text}");
    assert!(running["store.persists"] > before["store.persists"], "{text}");

    // mbatchd goes away before acknowledging; on the next connection the reply is resent.
    drop(mbd);
    let mut mbd = cluster.accept().await;
    let again: wire::NewJobReply = mbd.expect(Operation::NewJobReply).await;
    assert_eq!(started_pid(&again), pid);
    mbd.send(Operation::NewJobReplyAck, &ack(&spec)).await;
    let _: wire::JobExecute = mbd.expect(Operation::JobExecute).await;
    mbd.send(Operation::JobExecuteAck, &ack(&spec)).await;
    fs::write(&release, "").expect("release the job");
    let _: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
    mbd.send(Operation::JobFinishAck, &ack(&spec)).await;

    // A credential and a refused request on the socket.
    let stream = UnixStream::connect(cluster.socket()).await.expect("connect");
    let mut conn = FramedConn::new(stream, FrameLimits { body_bytes_max: 4096 }, Timeouts::default());
    let (operation, _) =
        credential_exchange(&mut conn, Operation::CredentialRequest.code()).await.expect("reply");
    assert_eq!(operation, Operation::CredentialReply.code());
    let (operation, _) = credential_exchange(&mut conn, Operation::SubmitJob.code()).await.expect("reply");
    assert_eq!(operation, Operation::RequestFailed.code());

    let (text, after) = tokio::task::block_in_place(|| {
        let started = Instant::now();
        loop {
            let (text, counters) = sbdstatus(&cluster);
            // The shepherd's end is seen on its own (its pidfd), possibly after the ACK that
            // made the job a tombstone: wait for both.
            if counters["jobs.tombstones"] == 1 && counters["shepherds.alive"] == 0 {
                return (text, counters);
            }
            assert!(
                started.elapsed() < WAIT,
                "the job never became a tombstone with its shepherd gone:\n{text}"
            );
            std::thread::sleep(POLL);
        }
    });
    for (name, value) in [
        ("jobs.running", 0),
        ("jobs.awaiting_reply_ack", 0),
        ("jobs.exited_awaiting_finish_ack", 0),
        ("shepherds.alive", 0),
        ("link.connects", 2),
        ("link.disconnects", 1),
        ("sent.BATCH_JOB_FINISH", 1),
        ("credentials.issued", before["credentials.issued"] + 1),
        ("socket.requests_refused", before["socket.requests_refused"] + 1),
    ] {
        assert_eq!(after[name], value, "{name}:\n{text}");
    }
    assert!(after["resent.BATCH_NEW_JOB_REPLY"] >= 1, "{text}");
    assert!(after["sent.BATCH_NEW_JOB_REPLY"] >= 2, "{text}");
    assert!(after["socket.status_queries"] > running["socket.status_queries"], "{text}");
    assert!(cluster.sbatchd_running());
}

/// A job folder (`1.7`, with its empty `pid` and `exit`) under `top` and the real
/// lava-shepherd run by hand (its program form) on it, with a plan for `sh -c SCRIPT` as
/// this test's own user in `top`, and with `go` as its go pipe when given. Returns the
/// folder, the shepherd, and the read end of its notification pipe.
fn start_shepherd(
    top: &Path,
    script: &str,
    go: Option<std::io::PipeReader>,
) -> (std::path::PathBuf, std::process::Child, std::io::PipeReader) {
    use std::os::fd::{AsFd, AsRawFd};

    use lava_sbatchd::handoff::{LAUNCH_PLAN_VERSION, LaunchPlan};
    use lava_sbatchd::layout;
    use lava_sbatchd::shepherd::{GO_FD_FLAG, LOCK_FD_FLAG, NOTIFY_FD_FLAG, PLAN_FD_FLAG};
    use lava_sbatchd::sys;

    let dir = top.join("1.7");
    fs::create_dir(&dir).expect("mkdir");
    layout::create_shepherd_files(&dir).expect("empty pid and exit");
    let uid = sys::effective_uid();
    let user = sys::lookup_uid(uid).expect("lookup").expect("this test's user");
    let plan = LaunchPlan {
        version: LAUNCH_PLAN_VERSION,
        job_id: 7,
        array_index: 0,
        user: user.name.clone(),
        uid,
        gid: user.gid,
        program: "/bin/sh".into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        search_path: false,
        env: vec!["PATH=/usr/bin:/bin".into()],
        cwd: top.display().to_string(),
        umask: 0o022,
        stdin: "/dev/null".into(),
        stdout: "/dev/null".into(),
        stdout_truncate: false,
        stderr: "/dev/null".into(),
        stderr_truncate: false,
        create_dirs: vec![],
        interactive: 0,
        pre_exec: vec![],
        post_exec: vec![],
        nice: 0,
        limits: wire::ResourceLimits::default(),
    };
    let plan_file =
        sys::memory_file(c"plan", &lava_xdr::to_bytes(&plan).expect("encode")).expect("the plan in memory");
    let lock = fs::File::open(&dir).expect("the lock: the folder");
    let (notify_read, notify_write) = std::io::pipe().expect("pipe");
    let notify = sys::inheritable_copy(notify_write.as_fd()).expect("dup");
    let lock_copy = sys::inheritable_copy(lock.as_fd()).expect("dup");
    let plan_copy = sys::inheritable_copy(plan_file.as_fd()).expect("dup");
    let go_copy = go.as_ref().map(|go| sys::inheritable_copy(go.as_fd()).expect("dup"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_lava-shepherd"));
    command
        .arg(&dir)
        .args([NOTIFY_FD_FLAG, &notify.as_raw_fd().to_string()])
        .args([LOCK_FD_FLAG, &lock_copy.as_raw_fd().to_string()])
        .args([PLAN_FD_FLAG, &plan_copy.as_raw_fd().to_string()])
        .stdin(Stdio::null());
    if let Some(go_copy) = &go_copy {
        command.args([GO_FD_FLAG, &go_copy.as_raw_fd().to_string()]);
    }
    let shepherd = command.spawn().expect("start lava-shepherd");
    drop((notify, lock_copy, plan_copy, go_copy, go, notify_write, plan_file, lock));
    (dir, shepherd, notify_read)
}

// Goal: a restarted sbatchd starts, exactly once each, the new jobs a crash caught between
// their record and their start: a record in a job folder whose shepherd never got its go
// (`pid` and `exit` empty, docs/batch.md "A new job's launch overlaps its record"), and a
// record in a spare-named folder whose rename to the job's name was lost ("Spare state
// folders"), which it renames back; a spare-named folder that is not as made is removed,
// one as made is kept.
// Method: the folders written by hand, as a crash leaves them, with records made by
// lava-sbd's own constructor, then sbatchd started on them; each job appends to a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_starts_new_jobs_a_crash_caught_before_their_start() {
    use lava_batch_ll::JobSpec;
    use lava_sbatchd::layout::{self, FIRST_RECORD_FILE};
    use lava_sbatchd::spares::SPARE_FILES;
    use lava_sbatchd::store::encode_record;
    use lava_sbd::{Effect, Input, Sbd, UserInfo};

    let mut cluster = Cluster::new().await;
    cluster.start_sbatchd().await;
    let _first = cluster.accept().await;
    cluster.kill_sbatchd();
    let counter = cluster.path("counter");
    let state = cluster.host_dir().join("state");
    let root = UserInfo { uid: 0, gid: 0, home: "/root".into(), shell: "/bin/sh".into() };
    let mut specs = Vec::new();
    for (id, folder) in [(401, None), (402, Some(".spare.1007"))] {
        let command = format!("echo {id} >> {}", counter.display());
        let spec = job_spec(id, "root", 0, cluster.dir.path(), &command);
        let job = Box::new(JobSpec::try_from(spec.clone()).expect("a valid spec"));
        let mut effects = Vec::new();
        let input = Input::NewJob { spec: job, user: Ok(root.clone()) };
        Sbd::new(lava_sbd::Config::default()).step(now_ms(), input, &mut effects);
        let Some(Effect::Persist(_, record)) = effects.into_iter().next() else {
            panic!("a new record first")
        };
        let jobfile = layout::jobfile_name(record.run_spec.submit_time_s, record.job);
        let dir = state.join(folder.unwrap_or(&jobfile));
        fs::create_dir(&dir).expect("mkdir");
        for file in SPARE_FILES {
            fs::write(dir.join(file), b"").expect("empty file");
        }
        fs::write(dir.join(FIRST_RECORD_FILE), encode_record(&record, 1)).expect("record");
        specs.push((spec, jobfile));
    }
    let used = state.join(".spare.1008");
    fs::create_dir(&used).expect("mkdir");
    fs::write(used.join("pid"), b"junk").expect("write");
    let kept = state.join(".spare.1009");
    fs::create_dir(&kept).expect("mkdir");
    for file in SPARE_FILES {
        fs::write(kept.join(file), b"").expect("empty file");
    }

    cluster.start_sbatchd().await;
    let mut mbd = cluster.accept().await;
    for (spec, jobfile) in &specs {
        assert!(state.join(jobfile).is_dir(), "{jobfile} is in place");
        let reply: wire::NewJobReply = mbd.expect(Operation::NewJobReply).await;
        let pid = started_pid(&reply);
        assert!(specs.iter().any(|(spec, _)| spec.job == reply.job), "a reply for {:?}", reply.job);
        assert!(pid > 0 && spec.dispatch_seq == reply.dispatch_seq);
    }
    for (spec, _) in &specs {
        mbd.send(Operation::NewJobReplyAck, &ack(spec)).await;
    }
    for _ in &specs {
        let finish: wire::JobFinish = mbd.expect(Operation::JobFinish).await;
        assert_eq!(finish.wait_status, 0);
        let spec = &specs.iter().find(|(spec, _)| spec.job == finish.job).expect("one of ours").0;
        mbd.send(Operation::JobFinishAck, &ack(spec)).await;
    }
    let mut ran: Vec<String> =
        fs::read_to_string(&counter).expect("counter").lines().map(str::to_owned).collect();
    ran.sort();
    assert_eq!(ran, vec!["401", "402"], "each job ran exactly once");
    assert!(!state.join(".spare.1007").exists(), "renamed back");
    assert!(!used.exists(), "a spare not as made is removed");
    assert!(kept.is_dir(), "a spare as made is kept");
}

// Goal: the shepherd's notification pipe says `p` once the pid is durable, then `e` once
// the job has ended and `exit` is written (sbatchd reports the end from that while the
// shepherd flushes), then end-of-file when the shepherd ends; `exit` holds the job's status
// by the time `e` is read.
// Method: the real lava-shepherd run by hand (its program form) with a plan for
// `sh -c 'exit 5'` as this test's own user, and the pipe read here.
#[test]
fn the_shepherd_says_ready_then_ended_on_its_pipe() {
    use std::io::Read;

    use lava_sbatchd::handoff::ExitFile;
    use lava_sbatchd::layout;
    use lava_sbatchd::shepherd::{ENDED_BYTE, READY_BYTE};

    let top = tempfile::tempdir().expect("tempdir");
    let (dir, mut shepherd, mut notify_read) = start_shepherd(top.path(), "exit 5", None);
    let mut byte = [0u8; 1];
    notify_read.read_exact(&mut byte).expect("the first byte");
    assert_eq!(byte[0], READY_BYTE);
    assert!(layout::read_shepherd_file(&dir.join(layout::PID_FILE)).expect("read").is_some(), "pid first");
    notify_read.read_exact(&mut byte).expect("the second byte");
    assert_eq!(byte[0], ENDED_BYTE);
    let exit =
        layout::read_shepherd_file(&dir.join(layout::EXIT_FILE)).expect("read").expect("exit is written");
    let exit = ExitFile::parse(&dir.join(layout::EXIT_FILE), &exit).expect("parse");
    assert!(matches!(exit, ExitFile::Exited { wait_status, .. } if wait_status == 5 << 8), "{exit:?}");
    let mut rest = Vec::new();
    notify_read.read_to_end(&mut rest).expect("end-of-file when the shepherd ends");
    assert!(rest.is_empty(), "nothing after `e`: {rest:?}");
    assert!(shepherd.wait().expect("wait").success());
}

// Goal: a shepherd given a go pipe (a new job whose record is being made durable) lets its
// job run only after `g` on it; when the pipe ends without `g` (sbatchd died, or could not
// make the record durable) the job never runs and the shepherd leaves `pid` and `exit`
// empty, says nothing on its pipe and exits with EXIT_NO_GO, which a restarted sbatchd
// reads as a job never started.
// Method: the real lava-shepherd run by hand twice, with a job that creates a file.
#[test]
fn a_shepherd_runs_its_job_only_after_go() {
    use std::io::{Read, Write};

    use lava_sbatchd::layout;
    use lava_sbatchd::shepherd::{ENDED_BYTE, EXIT_NO_GO, GO_BYTE, READY_BYTE};

    let top = tempfile::tempdir().expect("tempdir");
    let (go_read, go_write) = std::io::pipe().expect("pipe");
    let (dir, mut shepherd, mut notify_read) = start_shepherd(top.path(), "touch ran", Some(go_read));
    // A shepherd that did not wait would run the job: `ran` would exist below.
    drop(go_write);
    let mut said = Vec::new();
    notify_read.read_to_end(&mut said).expect("end-of-file");
    assert!(said.is_empty(), "nothing said: {said:?}");
    assert_eq!(shepherd.wait().expect("wait").code(), Some(i32::from(EXIT_NO_GO)));
    assert!(!top.path().join("ran").exists(), "the job never ran");
    for file in [layout::PID_FILE, layout::EXIT_FILE] {
        assert_eq!(layout::read_shepherd_file(&dir.join(file)).expect("read"), None, "{file} stays empty");
    }

    let second = tempfile::tempdir().expect("tempdir");
    let (go_read, mut go_write) = std::io::pipe().expect("pipe");
    let (_, mut shepherd, mut notify_read) = start_shepherd(second.path(), "touch ran", Some(go_read));
    go_write.write_all(&[GO_BYTE]).expect("go");
    let mut said = Vec::new();
    notify_read.read_to_end(&mut said).expect("end-of-file");
    assert_eq!(said, vec![READY_BYTE, ENDED_BYTE]);
    assert!(shepherd.wait().expect("wait").success());
    assert!(second.path().join("ran").exists(), "the job ran");
}
