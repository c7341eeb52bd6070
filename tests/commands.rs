//! The user commands (`bsub`, `bjobs`, `bkill`, `bstop`, `bresume`) as
//! processes, against a fake credential socket and a fake mbatchd.
//!
//! Each test writes a one-host configuration into its own temporary folder
//! (`LSF_ENVDIR`), serves the credential socket from a thread (tokens
//! `token-1`, `token-2`, ... in order) and mbatchd from another thread that
//! plays a script: for each connection, in order, close without answering or
//! send a canned reply. What the commands sent is handed back to the test,
//! which checks it together with the command's output and exit status.
//! Tests against the real daemons live elsewhere; these pin the client's
//! retry behaviour, its messages and its exit codes.

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;

use lava_batch_wire::{self as wire, Operation};
use lava_commands::client::{WAITING_MBD, WAITING_SBD, read_frame, write_frame};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What the fake mbatchd does with one connection.
enum Act {
    /// Read the request, then close without answering.
    Hangup,
    /// Read the request and answer with this operation and body.
    Answer(Operation, Vec<u8>),
}

fn answer<T: Serialize>(op: Operation, body: &T) -> Act {
    Act::Answer(op, lava_xdr::to_bytes(body).expect("encodable"))
}

fn refusal(code: u32, message: &str) -> Act {
    answer(Operation::RequestFailed, &wire::ErrorReply { code, message: message.to_owned() })
}

/// One request as the fake mbatchd received it.
struct Received {
    operation: u32,
    body: Vec<u8>,
}

impl Received {
    fn decode<T: DeserializeOwned>(&self) -> wire::ClientRequest<T> {
        lava_xdr::from_bytes(&self.body, &lava_xdr::Limits::default()).expect("a well-formed ClientRequest")
    }
}

/// A configuration folder with its fakes.
struct Fixture {
    _dir: tempfile::TempDir,
    envdir: PathBuf,
    received: mpsc::Receiver<Received>,
}

impl Fixture {
    /// Serves credentials and plays `acts` as mbatchd.
    fn new(acts: Vec<Act>) -> Fixture {
        Fixture::build(acts, true)
    }

    /// Plays `acts` as mbatchd, and serves credentials if `credentials`.
    fn build(acts: Vec<Act>, credentials: bool) -> Fixture {
        let dir = tempfile::tempdir().expect("temporary folder");
        let socket = dir.path().join("lava.sock");
        if credentials {
            serve_credentials(&socket);
        }
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("bound").port();
        let (sender, received) = mpsc::channel();
        thread::spawn(move || play_mbatchd(listener, acts, sender));
        let envdir = write_config(dir.path(), port, &socket);
        Fixture { _dir: dir, envdir, received }
    }

    /// A configuration whose mbatchd port has nobody listening and whose
    /// credential socket may be missing.
    fn without_daemons(credentials: bool) -> (Fixture, u16) {
        let dir = tempfile::tempdir().expect("temporary folder");
        let socket = dir.path().join("lava.sock");
        if credentials {
            serve_credentials(&socket);
        }
        let port =
            TcpListener::bind("127.0.0.1:0").expect("bind loopback").local_addr().expect("bound").port();
        let envdir = write_config(dir.path(), port, &socket);
        let (_sender, received) = mpsc::channel();
        (Fixture { _dir: dir, envdir, received }, port)
    }

    fn run(&self, command: &str, args: &[&str], stdin: Option<&str>) -> Output {
        let program = match command {
            "bsub" => env!("CARGO_BIN_EXE_bsub"),
            "bjobs" => env!("CARGO_BIN_EXE_bjobs"),
            "bkill" => env!("CARGO_BIN_EXE_bkill"),
            "bstop" => env!("CARGO_BIN_EXE_bstop"),
            "bresume" => env!("CARGO_BIN_EXE_bresume"),
            other => panic!("no command {other}"),
        };
        let mut child = Command::new(program)
            .args(args)
            .env("LSF_ENVDIR", &self.envdir)
            .env("LAVA_RETRY_SECS", "1")
            .env("TZ", "UTC0")
            .env("HOME", "/home/tester")
            .env("LAVA_HOST", "submithost")
            .env_remove("LSB_NTRIES")
            .env_remove("BSUB_QUIET")
            .env_remove("BSUB_QUIET2")
            .env_remove("BSUB_STDERR")
            .env_remove("LSB_DEFAULTQUEUE")
            .env_remove("LSB_DEFAULTPROJECT")
            .env_remove("LSB_SHORT_HOSTLIST")
            .env_remove("LSB_BJOBS_CONSISTENT_EXIT_CODE")
            .current_dir(&self.envdir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the command starts");
        let mut input = child.stdin.take().expect("piped");
        input.write_all(stdin.unwrap_or("").as_bytes()).expect("stdin written");
        drop(input);
        child.wait_with_output().expect("the command ends")
    }

    fn requests(&self) -> Vec<Received> {
        self.received.try_iter().collect()
    }
}

fn write_config(dir: &Path, mbd_port: u16, socket: &Path) -> PathBuf {
    let envdir = dir.join("conf");
    std::fs::create_dir(&envdir).expect("conf folder");
    let write = |name: &str, text: String| std::fs::write(envdir.join(name), text).expect("config file");
    write(
        "lsf.conf",
        format!(
            "LSB_MBD_PORT={mbd_port}\nLAVA_CMD_SOCKET={}\nLSB_SHAREDIR={}\nLSF_UNIT_FOR_LIMITS=MB\n",
            socket.display(),
            dir.join("share").display()
        ),
    );
    write("lsf.shared", "Begin Cluster\nClusterName\ntest\nEnd Cluster\n".to_owned());
    write(
        "lsf.cluster.test",
        "Begin Host\nHOSTNAME model type server RESOURCES LAVA_ADDR\n\
         master   !     !    1      ()        127.0.0.1\nEnd Host\n"
            .to_owned(),
    );
    envdir
}

/// Answers every CREDENTIAL_REQUEST with `token-N`, N counting from 1.
fn serve_credentials(path: &Path) {
    let listener = UnixListener::bind(path).expect("bind the credential socket");
    thread::spawn(move || {
        let mut n_issued = 0;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Ok((header, _)) = read_frame(&mut stream, 1024) else { continue };
            assert_eq!(header.operation, Operation::CredentialRequest.code());
            n_issued += 1;
            let reply = wire::CredentialReply { token: format!("token-{n_issued}").into_bytes() };
            let body = lava_xdr::to_bytes(&reply).expect("encodable");
            let _ = write_frame(&mut stream, Operation::CredentialReply, header.sequence, &body);
        }
    });
}

fn play_mbatchd(listener: TcpListener, acts: Vec<Act>, received: mpsc::Sender<Received>) {
    for act in acts {
        let Ok((mut stream, _)) = listener.accept() else { return };
        let Ok((header, body)) = read_frame(&mut stream, 4 << 20) else { continue };
        let _ = received.send(Received { operation: header.operation, body });
        if let Act::Answer(op, reply) = act {
            let _ = write_frame(&mut stream, op, header.sequence, &reply);
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn submitted(job_id: u32, queue: &str, default_queue: bool) -> Act {
    answer(Operation::SubmitJobReply, &wire::SubmitReply { job_id, queue: queue.to_owned(), default_queue })
}

// Goal: a submission whose first connection breaks before the answer is
// retried with the same request id and a fresh credential, prints LSF's
// waiting line once, and succeeds with LSF's message.
// Method: the fake mbatchd hangs up on the first connection and answers the second.
#[test]
fn bsub_retries_with_the_same_request_id() {
    let fixture = Fixture::new(vec![Act::Hangup, submitted(42, "normal", true)]);
    let output = fixture.run("bsub", &["-J", "nap", "-M", "2", "-W", "1:30", "sleep", "30"], None);
    assert_eq!(text(&output.stdout), "Job <42> is submitted to default queue <normal>.\n");
    assert_eq!(text(&output.stderr), WAITING_MBD);
    assert_eq!(output.status.code(), Some(0));

    let requests = fixture.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.operation == Operation::SubmitJob.code()));
    let first: wire::ClientRequest<wire::SubmitRequest> = requests[0].decode();
    let second: wire::ClientRequest<wire::SubmitRequest> = requests[1].decode();
    assert_eq!(first.request_id, second.request_id, "a retry reuses the request id");
    assert_eq!((first.credential, second.credential), (b"token-1".to_vec(), b"token-2".to_vec()));
    assert_eq!(first.body, second.body);
    let body = second.body;
    assert_eq!((body.command.as_str(), body.job_name.as_str(), body.queue.as_str()), ("sleep 30", "nap", ""));
    assert_eq!((body.mem_limit_kb, body.run_limit_s), (2 * 1024, 5400), "-M in MB per LSF_UNIT_FOR_LIMITS");
    assert_eq!((body.home_dir.as_str(), body.from_host.as_str()), ("/home/tester", "submithost"));
    assert!(body.cwd.ends_with("/conf"), "{}", body.cwd);
    assert!(body.env.iter().any(|v| v.name == "LAVA_HOST" && v.value == "submithost"));
}

// Goal: ERR_TRY_AGAIN (mbatchd restarting) is waited through like an outage.
#[test]
fn bsub_waits_while_mbatchd_is_not_ready() {
    let fixture = Fixture::new(vec![
        refusal(wire::ERR_TRY_AGAIN, "replaying the event log"),
        submitted(7, "night", false),
    ]);
    let output = fixture.run("bsub", &["-q", "night", "true"], None);
    assert_eq!(text(&output.stdout), "Job <7> is submitted to queue <night>.\n");
    assert_eq!(text(&output.stderr), WAITING_MBD);
    assert_eq!(output.status.code(), Some(0));
    let requests = fixture.requests();
    let ids: Vec<wire::RequestId> =
        requests.iter().map(|r| r.decode::<wire::SubmitRequest>().request_id).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1]);
}

// Goal: a refusal is final: one attempt, LSF's wording, exit 255.
#[test]
fn bsub_reports_a_refusal_once() {
    let fixture = Fixture::new(vec![refusal(wire::ERR_NO_QUEUE, "nosuch: No such queue")]);
    let output = fixture.run("bsub", &["-q", "nosuch", "true"], None);
    assert_eq!(text(&output.stdout), "");
    assert_eq!(text(&output.stderr), "nosuch: No such queue. Job not submitted.\n");
    assert_eq!(output.status.code(), Some(255));
    assert_eq!(fixture.requests().len(), 1);
}

// Goal: with mbatchd down for the whole bound, bsub says so and exits 255.
#[test]
fn bsub_gives_up_when_mbatchd_stays_down() {
    let (fixture, port) = Fixture::without_daemons(true);
    let output = fixture.run("bsub", &["true"], None);
    let stderr = text(&output.stderr);
    assert!(stderr.starts_with(WAITING_MBD), "{stderr}");
    assert_eq!(stderr.matches(WAITING_MBD).count(), 1, "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    // LSF's words first (openlava's lsb_perror), then which mbatchd and how long.
    let expected =
        format!("Connection refused by server: cannot connect to mbatchd at 127.0.0.1:{port} (gave up after");
    assert!(last.starts_with(&expected), "{last}");
    assert!(last.ends_with(" s). Job not submitted."), "{last}");
    assert_eq!(output.status.code(), Some(255));
}

// Goal: without the local sbatchd's socket (mbatchd being up), the command
// waits, then names the socket.
#[test]
fn commands_name_a_missing_credential_socket() {
    let fixture = Fixture::build((0..100).map(|_| Act::Hangup).collect(), false);
    let output = fixture.run("bjobs", &[], None);
    let stderr = text(&output.stderr);
    assert!(stderr.starts_with(WAITING_SBD), "{stderr}");
    assert_eq!(stderr.matches(WAITING_SBD).count(), 1, "{stderr}");
    assert!(fixture.requests().is_empty(), "nothing reaches mbatchd without a credential");
    assert!(stderr.contains("Cannot connect to the local sbatchd at "), "{stderr}");
    assert!(stderr.contains("lava.sock: No such file or directory (gave up after"), "{stderr}");
    assert_eq!(output.status.code(), Some(255));
}

// Goal: a job script on standard input: #BSUB options, overridden by the
// command line (-R travels as typed); the whole script is the command.
#[test]
fn bsub_reads_a_job_script() {
    let fixture = Fixture::new(vec![submitted(8, "night", false)]);
    let script = "#!/bin/sh\n#BSUB -q night\n#BSUB -J from_script\n#BSUB -oo out.%J\n#BSUB -R \"span[hosts=1]\"\necho hi\n";
    let output = fixture.run("bsub", &["-J", "from_cli"], Some(script));
    assert_eq!(text(&output.stdout), "Job <8> is submitted to queue <night>.\n");
    assert_eq!(text(&output.stderr), "");
    assert_eq!(output.status.code(), Some(0));
    let request: wire::ClientRequest<wire::SubmitRequest> = fixture.requests()[0].decode();
    let body = request.body;
    assert_eq!((body.queue.as_str(), body.job_name.as_str()), ("night", "from_cli"));
    assert_eq!(body.res_req, "span[hosts=1]");
    assert_eq!((body.output_file.as_str(), body.file_flags), ("out.%J", 1));
    assert_eq!(body.command, script);
}

// Goal: a script without a command is refused before anything is sent.
#[test]
fn bsub_refuses_an_empty_script() {
    let (fixture, _) = Fixture::without_daemons(false);
    let output = fixture.run("bsub", &[], Some("#BSUB -q night\n\n# nothing\n"));
    assert_eq!(text(&output.stderr), "No command is specified in the script file. Job not submitted.\n");
    assert_eq!(output.status.code(), Some(255));
}

fn job_info(id: u32, status: u32, hosts: &[&str]) -> wire::JobInfo {
    wire::JobInfo {
        job: wire::WireJobRef { job_id: id, array_index: 0 },
        user_name: "tester".to_owned(),
        status,
        queue: "normal".to_owned(),
        from_host: "submithost".to_owned(),
        exec_hosts: hosts.iter().map(|h| h.to_string()).collect(),
        job_name: "sleep 30".to_owned(),
        command: "sleep 30".to_owned(),
        project: "default".to_owned(),
        n_slots: hosts.len().max(1) as u32,
        submit_time: 1_732_574_641,
        ..wire::JobInfo::default()
    }
}

// Goal: bjobs prints LSF's columns in the TZ's local time and sends the
// query its options describe.
#[test]
fn bjobs_prints_lsf_columns() {
    let reply = wire::JobQueryReply {
        jobs: vec![job_info(1, 0x04, &["hostA", "hostB"]), job_info(2, 0x01, &[])],
        not_found: vec![],
        next_after: 0,
        next_after_index: 0,
    };
    let fixture = Fixture::new(vec![answer(Operation::JobQueryReply, &reply)]);
    let output = fixture.run("bjobs", &["-u", "all", "-q", "normal"], None);
    assert_eq!(
        text(&output.stdout),
        format!(
            "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME\n\
             1       tester  RUN   normal     submithost  hostA       sleep 30   Nov 25 22:44\n\
             {:45}hostB\n\
             2       tester  PEND  normal     submithost              sleep 30   Nov 25 22:44\n",
            ""
        )
    );
    assert_eq!(text(&output.stderr), "");
    assert_eq!(output.status.code(), Some(0));
    let requests = fixture.requests();
    assert_eq!(requests[0].operation, Operation::JobQuery.code());
    let query: wire::ClientRequest<wire::JobQuery> = requests[0].decode();
    assert_eq!(
        query.body,
        wire::JobQuery {
            jobs: vec![],
            user: "all".to_owned(),
            state_filter: wire::state_filter::UNFINISHED,
            queue: "normal".to_owned(),
            host: String::new(),
            job_name: String::new(),
            after_job: 0,
            after_index: 0,
        }
    );
}

// Goal: bjobs asks for the next page of a long answer until mbatchd says it is the
// last (next_after 0), and prints the jobs of every page once, in order.
#[test]
fn bjobs_reads_every_page() {
    let first = wire::JobQueryReply {
        jobs: vec![job_info(1, 0x04, &["hostA"])],
        not_found: vec![],
        next_after: 1,
        next_after_index: 0,
    };
    let last = wire::JobQueryReply {
        jobs: vec![job_info(2, 0x01, &[])],
        not_found: vec![],
        next_after: 0,
        next_after_index: 0,
    };
    let fixture =
        Fixture::new(vec![answer(Operation::JobQueryReply, &first), answer(Operation::JobQueryReply, &last)]);
    let output = fixture.run("bjobs", &["-u", "all", "-noheader"], None);
    assert_eq!(text(&output.stderr), "");
    assert_eq!(output.status.code(), Some(0));
    let ids: Vec<String> = text(&output.stdout)
        .lines()
        .map(|line| line.split_whitespace().next().unwrap_or("").to_owned())
        .collect();
    assert_eq!(ids, vec!["1", "2"]);
    let requests = fixture.requests();
    assert_eq!(requests.len(), 2);
    let after: Vec<u32> =
        requests.iter().map(|request| request.decode::<wire::JobQuery>().body.after_job).collect();
    assert_eq!(after, vec![0, 1]);
}

// Goal: a listing of several pages, printed page by page as they come, has LSF's header
// once, before the first job (a page left empty changes nothing); a page that fails ends
// the listing with mbatchd's words and a failure, after the lines already printed.
#[test]
fn bjobs_prints_pages_as_they_come_with_one_header() {
    let page = |ids: &[u32], next_after: u32| wire::JobQueryReply {
        jobs: ids.iter().map(|id| job_info(*id, 0x01, &[])).collect(),
        not_found: vec![],
        next_after,
        next_after_index: 0,
    };
    let fixture = Fixture::new(vec![
        answer(Operation::JobQueryReply, &page(&[], 3)),
        answer(Operation::JobQueryReply, &page(&[4, 5], 5)),
        answer(Operation::JobQueryReply, &page(&[6], 0)),
    ]);
    let output = fixture.run("bjobs", &["-u", "all"], None);
    assert_eq!(text(&output.stderr), "");
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines[0].starts_with("JOBID   USER    STAT  QUEUE"), "{stdout}");
    let ids: Vec<&str> = lines[1..].iter().map(|line| line.split_whitespace().next().unwrap_or("")).collect();
    assert_eq!(ids, vec!["4", "5", "6"]);

    let fixture = Fixture::new(vec![
        answer(Operation::JobQueryReply, &page(&[1], 1)),
        refusal(wire::ERR_UNSUPPORTED, "the page went missing"),
    ]);
    let output = fixture.run("bjobs", &["-u", "all", "-noheader"], None);
    assert_ne!(output.status.code(), Some(0));
    assert_eq!(text(&output.stdout).lines().count(), 1, "{}", text(&output.stdout));
    assert!(text(&output.stderr).contains("the page went missing"), "{}", text(&output.stderr));
}

// Goal: an unknown job id is named on standard error and fails (255); an
// empty listing is LSF's line and succeeds (0).
#[test]
fn bjobs_empty_and_unknown() {
    let unknown = wire::JobQueryReply {
        jobs: vec![],
        not_found: vec![wire::WireJobRef { job_id: 7, array_index: 0 }],
        next_after: 0,
        next_after_index: 0,
    };
    let fixture = Fixture::new(vec![
        answer(Operation::JobQueryReply, &unknown),
        answer(
            Operation::JobQueryReply,
            &wire::JobQueryReply { jobs: vec![], not_found: vec![], next_after: 0, next_after_index: 0 },
        ),
    ]);
    let output = fixture.run("bjobs", &["7"], None);
    assert_eq!(
        (text(&output.stdout), text(&output.stderr)),
        (String::new(), "Job <7> is not found\n".to_owned())
    );
    assert_eq!(output.status.code(), Some(255));
    let output = fixture.run("bjobs", &["-noheader"], None);
    assert_eq!(
        (text(&output.stdout), text(&output.stderr)),
        (String::new(), "No unfinished job found\n".to_owned())
    );
    assert_eq!(output.status.code(), Some(0));
}

fn signal_reply(results: &[(u32, wire::SignalRequestOutcome)]) -> Act {
    let results = results
        .iter()
        .map(|(id, outcome)| wire::SignalResult {
            job: wire::WireJobRef { job_id: *id, array_index: 0 },
            outcome: *outcome,
        })
        .collect();
    answer(Operation::SignalJobsReply, &wire::SignalReply { results })
}

// Goal: bkill prints one line per job (successes on stdout, failures on
// stderr) and fails if any job failed; bstop and bresume use their verbs.
#[test]
fn bkill_bstop_bresume_print_each_outcome() {
    use wire::SignalRequestOutcome::*;
    let fixture = Fixture::new(vec![
        signal_reply(&[
            (5, Accepted),
            (6, NotFound),
            (7, PermissionDenied),
            (8, AlreadyFinished),
            (9, NotStarted),
        ]),
        signal_reply(&[(5, Accepted)]),
        signal_reply(&[(5, Accepted)]),
        signal_reply(&[]),
    ]);
    let output = fixture.run("bkill", &["5", "6", "7", "8", "9"], None);
    assert_eq!(text(&output.stdout), "Job <5> is being terminated\n");
    assert_eq!(
        text(&output.stderr),
        "Job <6>: No matching job found\nJob <7>: User permission denied\n\
         Job <8>: Job has already finished\nJob <9>: Job has not started yet\n"
    );
    assert_eq!(output.status.code(), Some(255));

    let output = fixture.run("bstop", &["5"], None);
    assert_eq!(
        (text(&output.stdout), output.status.code()),
        ("Job <5> is being stopped\n".to_owned(), Some(0))
    );
    let output = fixture.run("bresume", &["5"], None);
    assert_eq!(
        (text(&output.stdout), output.status.code()),
        ("Job <5> is being resumed\n".to_owned(), Some(0))
    );
    let output = fixture.run("bkill", &["-s", "USR1", "0"], None);
    assert_eq!(
        (text(&output.stderr), output.status.code()),
        ("No unfinished job found\n".to_owned(), Some(255))
    );

    let actions: Vec<(Vec<u32>, bool, wire::SignalAction)> = fixture
        .requests()
        .iter()
        .map(|r| {
            let request: wire::ClientRequest<wire::SignalRequest> = r.decode();
            (request.body.jobs.iter().map(|j| j.job_id).collect(), request.body.all_jobs, request.body.action)
        })
        .collect();
    assert_eq!(
        actions,
        vec![
            (vec![5, 6, 7, 8, 9], false, wire::SignalAction::Terminate),
            (vec![5], false, wire::SignalAction::Stop),
            (vec![5], false, wire::SignalAction::Continue),
            (vec![], true, wire::SignalAction::Signal(10)),
        ]
    );
}

// Goal: syntax errors print the message and the usage and exit 255 before
// any daemon is contacted; -h and -V exit 0.
#[test]
fn usage_errors_and_help() {
    let (fixture, _) = Fixture::without_daemons(false);
    let check = |command: &str, args: &[&str], code: i32, stderr_has: &str| {
        let output = fixture.run(command, args, None);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{command} {args:?}: {stderr}");
        assert!(stderr.contains(stderr_has), "{command} {args:?}: {stderr}");
    };
    check("bsub", &["-Z", "true"], 255, "bsub: illegal option -- Z\nUsage: bsub");
    check("bsub", &["-W", "soon", "true"], 255, "soon: Bad RUNLIMIT specification. Job not submitted.");
    check("bsub", &["-h"], 0, "Usage: bsub");
    check("bsub", &["-V"], 0, "LavaCore ");
    check("bjobs", &["-l", "-w"], 255, "Usage: bjobs");
    check("bjobs", &["12x"], 255, "12x: Illegal job ID.");
    check("bkill", &[], 255, "bkill: Job ID or 0 must be specified\nUsage: bkill");
    check("bkill", &["-s", "NOPE", "1"], 255, "NOPE: Illegal signal value");
    check("bstop", &["-s", "9", "1"], 255, "bstop: illegal option -- s");
    check("bresume", &["-h"], 0, "Usage: bresume");
}
