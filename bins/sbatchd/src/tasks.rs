//! Parallel tasks (`blaunch`; docs/protocols/batch.md, "Parallel tasks"): the grants this
//! sbatchd issues for its jobs, the task port where it starts tasks for the jobs of other
//! hosts, and the task shepherd (`lava-shepherd --task`) that runs each task.
//!
//! # Grants (on the job's first host)
//! `blaunch`, run inside a job, asks its local sbatchd over the credential socket
//! (TASK_GRANT_REQUEST) for a grant to start a task on a host. The caller's uid comes from
//! the kernel (SO_PEERCRED); the event loop decides with `lava_sbd::tasks::may_start_task`
//! (the job runs here, the caller is its user or root, the host is allocated to it) and the
//! socket's task seals a [`wire::TaskGrant`] with the cluster key (lava-net's
//! `seal_bytes`: a 30 s window, accepted once). Only daemons hold the key, so a grant
//! proves that the job's own sbatchd vouched for this user, job and host.
//!
//! # The task port (on every host)
//! sbatchd listens on `LSF_RES_PORT` (LSF's RES port: in LSF the RES starts `blaunch`'s
//! tasks; LavaCore has no RES). A connection's first frame must be TASK_START, within a
//! few seconds, no larger than [`wire::TASK_START_BYTES_MAX`]; its grant must open with
//! the cluster key, name this host and a user who exists here with the grant's uid.
//! Anything else is answered with REQUEST_FAILED and the connection closed. An accepted
//! connection is handed, whole, to a new task shepherd: sbatchd keeps nothing of it.
//!
//! # The task shepherd, and the rule that ties a task to its job
//! `lava-shepherd --task` (the job shepherd's program; standard input: the task plan in an
//! in-memory file, standard output: the connection) makes itself a new session, becomes the
//! job's user, and runs the command with `/bin/sh -c` in a process group of its own, its
//! standard input /dev/null and its output relayed to `blaunch` as TASK_OUTPUT frames.
//! It forwards TASK_SIGNAL to the task's process group, and when the task's process ends
//! it kills what is left of the group and sends TASK_EXIT (wait status and resource usage).
//!
//! **A task lives exactly as long as its `blaunch` connection**: when the connection closes
//! (the `blaunch` process ended or was killed, or the job's host went away) the shepherd
//! kills the task's process group and every process the task started, wherever it moved
//! (the shepherd is their subreaper, so none leaves its tree): SIGTERM, then SIGKILL
//! [`KILL_GRACE`] later. The same happens to what is left once the task's process ends. `blaunch` runs inside the job, in the
//! job's process group, so `bkill`, a run or memory limit and the job's end kill it, and
//! with it every remote task. The shepherd is in a session of its own and owns the
//! connection: an sbatchd restart on the task host neither ends the task nor orphans it
//! (the connection, and so the rule, stay in force).

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lava_batch_ll::JobRef;
use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_net::gate::{AcceptBackoff, Gate, GateConfig, Source};
use lava_net::{Authenticator, Nonce};
use lava_sbd::tasks::{TaskGrantFacts, TaskRefusal};
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

use crate::sys;

/// The flag that makes `lava-shepherd` a task shepherd.
pub const TASK_FLAG: &str = "--task";
/// Connections at once on the task port, in all and per source address, and the time to
/// send TASK_START.
pub const CONNECTIONS: GateConfig =
    GateConfig { total_max: 1024, per_source_max: 256, auth_deadline: Duration::from_secs(10) };
/// Longest task plan a task shepherd reads.
const PLAN_BYTES_MAX: u64 = 4 << 20;
/// Output read from the task at once, and so the largest TASK_OUTPUT.
const OUTPUT_CHUNK: usize = wire::TASK_OUTPUT_BYTES_MAX as usize;
/// Between the SIGTERM and the SIGKILL of a task whose `blaunch` connection ended.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// Largest frame a task shepherd reads from `blaunch` (TASK_SIGNAL).
const CONTROL_BYTES_MAX: u32 = 1024;

/// A grant question for the event loop: the job, the caller's uid, the task's host.
#[derive(Debug)]
pub struct GrantQuery {
    /// The job.
    pub job: JobRef,
    /// The caller's uid (SO_PEERCRED).
    pub uid: u32,
    /// The host the task is for.
    pub host: String,
    /// Where the answer goes.
    pub answer: oneshot::Sender<Result<TaskGrantFacts, TaskRefusal>>,
}

/// What the task port's connections share.
#[derive(Debug, Clone)]
pub struct PortContext {
    /// The cluster key.
    pub auth: Arc<Authenticator>,
    /// This host.
    pub host: String,
    /// The cluster.
    pub cluster: String,
    /// `lava-shepherd`.
    pub shepherd: PathBuf,
}

/// Seals a grant for `facts`' user to start one task of `job` on `to_host`.
pub fn issue_grant(
    auth: &Authenticator,
    facts: &TaskGrantFacts,
    job: JobRef,
    from_host: &str,
    to_host: &str,
    cluster: &str,
) -> Result<Vec<u8>, String> {
    let grant = wire::TaskGrant {
        job: wire::WireJobRef { job_id: job.id(), array_index: job.index() },
        user: facts.user.clone(),
        uid: facts.uid,
        gid: facts.gid,
        from_host: from_host.to_owned(),
        to_host: to_host.to_owned(),
        cluster: cluster.to_owned(),
    };
    let mut sealed = wire::TASK_GRANT_MAGIC.to_vec();
    sealed.extend(lava_xdr::to_bytes(&grant).map_err(|err| err.to_string())?);
    let nonce = Nonce::random().map_err(|err| format!("no randomness for a nonce: {err}"))?;
    let trailer = auth.seal_bytes(&sealed, lava_net::system_now_ms(), nonce);
    sealed.extend_from_slice(&trailer);
    Ok(sealed)
}

/// Opens a grant (MAC, window, single use) and reads it; the error says why it is refused.
pub fn open_grant(auth: &Authenticator, sealed: &[u8], now_ms: u64) -> Result<wire::TaskGrant, String> {
    let data =
        auth.open_bytes(sealed, now_ms).map_err(|err| format!("the task grant is not valid: {err}"))?;
    let body = data
        .strip_prefix(&wire::TASK_GRANT_MAGIC)
        .ok_or_else(|| "the task grant is not valid: not a grant".to_owned())?;
    lava_xdr::from_bytes(body, &lava_xdr::Limits::DEFAULT)
        .map_err(|err| format!("the task grant is not valid: {err}"))
}

/// The task port's listener on `LSF_RES_PORT`; `None` (logged) when it cannot be bound:
/// this host then starts no task for `blaunch`, and runs its jobs as before.
pub fn bind(port: u16) -> Option<tokio::net::TcpListener> {
    let addr = SocketAddr::from(([0, 0, 0, 0], port));
    match lava_shell::startup::listen(addr) {
        Ok((listener, _)) => {
            tracing::info!(%addr, "task port listening (blaunch)");
            Some(listener)
        }
        Err(err) => {
            let err = err.error;
            tracing::warn!(%addr, "cannot listen on the task port (LSF_RES_PORT): {err}; blaunch cannot start tasks here");
            None
        }
    }
}

/// Serves the task port until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, context: PortContext) {
    let gate = Gate::new(CONNECTIONS);
    let mut backoff = AcceptBackoff::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                let (pause, line) = backoff.failed(&err);
                if let Some(line) = line {
                    tracing::warn!("task port: {line}");
                }
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        let pass = match gate.admit(Source::Ip(peer.ip())) {
            Ok(pass) => pass,
            Err(refusal) => {
                tracing::debug!(%peer, "task port: connection refused: {refusal}");
                continue;
            }
        };
        let context = context.clone();
        tokio::spawn(async move {
            let deadline = pass.auth_deadline();
            match tokio::time::timeout(deadline, start_task(stream, &context)).await {
                Ok(Ok(started)) => tracing::info!(%peer, "{started}"),
                Ok(Err(problem)) => tracing::warn!(%peer, "task refused: {problem}"),
                Err(_) => tracing::debug!(%peer, "task port: no TASK_START within {deadline:?}"),
            }
            drop(pass);
        });
    }
}

/// Reads TASK_START, checks it, and hands the connection to a task shepherd; a refusal is
/// answered with REQUEST_FAILED before the error is returned.
async fn start_task(mut stream: tokio::net::TcpStream, context: &PortContext) -> Result<String, String> {
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).await.map_err(|err| format!("reading TASK_START: {err}"))?;
    let header = FrameHeader::parse(&head).map_err(|err| err.to_string())?;
    let checked = if header.version != BATCH_VERSION {
        Err(format!("protocol version {:#x} is not {BATCH_VERSION:#x}", header.version))
    } else if header.operation != Operation::TaskStart.code() {
        Err(format!("operation {} is not TASK_START", header.operation))
    } else if header.length > wire::TASK_START_BYTES_MAX {
        Err(format!("TASK_START of {} bytes is over {}", header.length, wire::TASK_START_BYTES_MAX))
    } else {
        Ok(())
    };
    if let Err(message) = checked {
        refuse(&mut stream, header.sequence, &message).await;
        return Err(message);
    }
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).await.map_err(|err| format!("reading TASK_START: {err}"))?;
    let limits = lava_xdr::Limits {
        input_bytes_max: wire::TASK_START_BYTES_MAX as usize,
        ..lava_xdr::Limits::DEFAULT
    };
    let checked = lava_xdr::from_bytes::<wire::TaskStart>(&body, &limits)
        .map_err(|err| format!("malformed TASK_START: {err}"))
        .and_then(|start| plan_for(start, context));
    let plan = match checked {
        Ok(plan) => plan,
        Err(message) => {
            refuse(&mut stream, header.sequence, &message).await;
            return Err(message);
        }
    };
    let said = format!(
        "task of job {}[{}] for {} started: {}",
        plan.job_id, plan.array_index, plan.user, plan.command
    );
    let connection = stream.into_std().map_err(|err| err.to_string())?;
    spawn_shepherd(&context.shepherd, &plan, connection)?;
    Ok(said)
}

/// The task plan of an accepted TASK_START, or why it is refused.
fn plan_for(start: wire::TaskStart, context: &PortContext) -> Result<TaskPlan, String> {
    let grant = open_grant(&context.auth, &start.grant, lava_net::system_now_ms())?;
    if grant.to_host != context.host {
        return Err(format!("the task grant is for host <{}>, not <{}>", grant.to_host, context.host));
    }
    if grant.cluster != context.cluster {
        return Err(format!("the task grant is for cluster <{}>, not <{}>", grant.cluster, context.cluster));
    }
    let account = sys::lookup_user(&grant.user)
        .map_err(|err| format!("cannot look up user <{}>: {err}", grant.user))?
        .ok_or_else(|| format!("user <{}> has no account on host <{}>", grant.user, context.host))?;
    if account.uid != grant.uid {
        return Err(format!(
            "user <{}> is uid {} on host <{}> but uid {} on <{}>",
            grant.user, account.uid, context.host, grant.uid, grant.from_host
        ));
    }
    if sys::effective_uid() != 0 && sys::effective_uid() != account.uid {
        return Err(format!("this sbatchd does not run as root and cannot run tasks of <{}>", grant.user));
    }
    let env = start.env.into_iter().map(|var| format!("{}={}", var.name, var.value)).collect();
    Ok(TaskPlan {
        job_id: grant.job.job_id,
        array_index: grant.job.array_index,
        user: grant.user,
        uid: account.uid,
        gid: account.gid,
        home: account.home,
        command: start.command,
        env,
        cwd: start.cwd,
        host: context.host.clone(),
    })
}

async fn refuse(stream: &mut tokio::net::TcpStream, sequence: u32, message: &str) {
    let body =
        lava_xdr::to_bytes(&wire::ErrorReply { code: wire::ERR_REJECTED, message: message.to_owned() })
            .expect("an error reply encodes");
    let frame = frame(Operation::RequestFailed, sequence, &body);
    let _ = stream.write_all(&frame).await;
    let _ = stream.shutdown().await;
}

/// A whole frame: header, then `body`.
fn frame(operation: Operation, sequence: u32, body: &[u8]) -> Vec<u8> {
    let header = FrameHeader {
        sequence,
        operation: operation.code(),
        version: BATCH_VERSION,
        length: u32::try_from(body.len()).unwrap_or(u32::MAX),
        status: 0,
    };
    let mut bytes = Vec::with_capacity(HEADER_BYTES + body.len());
    header.write(&mut bytes);
    bytes.extend_from_slice(body);
    bytes
}

/// What a task shepherd runs, handed to it in an in-memory file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskPlan {
    /// The job.
    pub job_id: u32,
    /// Its array index.
    pub array_index: u32,
    /// The user.
    pub user: String,
    /// Their uid here.
    pub uid: u32,
    /// Their primary gid here.
    pub gid: u32,
    /// Their home here (the working directory when `cwd` does not exist).
    pub home: String,
    /// The command line, run with `/bin/sh -c`.
    pub command: String,
    /// The environment, `NAME=value`.
    pub env: Vec<String>,
    /// The working directory asked for.
    pub cwd: String,
    /// This host.
    pub host: String,
}

/// Starts `lava-shepherd --task` with the plan on its standard input and the connection on
/// its standard output, and has it reaped when it ends.
fn spawn_shepherd(shepherd: &Path, plan: &TaskPlan, connection: std::net::TcpStream) -> Result<(), String> {
    connection.set_nonblocking(false).map_err(|err| err.to_string())?;
    let bytes = lava_xdr::to_bytes(plan).map_err(|err| err.to_string())?;
    let plan_file = sys::memory_file(c"lava-task-plan", &bytes)
        .map_err(|err| format!("cannot hold the task plan: {err}"))?;
    let mut command = tokio::process::Command::new(shepherd);
    command
        .arg(TASK_FLAG)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::from(plan_file))
        .stdout(Stdio::from(OwnedFd::from(connection)))
        .stderr(Stdio::null())
        .kill_on_drop(false);
    let mut child = command.spawn().map_err(|err| format!("cannot start {}: {err}", shepherd.display()))?;
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(())
}

/// `lava-shepherd --task`: see the module doc. Its exit status is 0 once TASK_EXIT is sent,
/// 1 when the plan or the connection is unusable.
pub fn shepherd_main(_args: impl Iterator<Item = OsString>) -> ExitCode {
    let plan = match read_plan() {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("lava-shepherd --task: {message}; only sbatchd starts task shepherds");
            return ExitCode::FAILURE;
        }
    };
    let connection = match io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => TcpStream::from(fd),
        Err(err) => {
            eprintln!("lava-shepherd --task: no connection on standard output: {err}");
            return ExitCode::FAILURE;
        }
    };
    let _ = sys::new_session();
    // Every process the task starts stays in this tree (see `end_tree`).
    let _ = sys::set_child_subreaper();
    let mut out = Relay { stream: Arc::new(Mutex::new(connection)) };
    match run_task(&plan, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // The task could not be started: said on its standard error, as the shell would.
            out.send(
                Operation::TaskOutput,
                &wire::TaskOutput {
                    stream: wire::TASK_STDERR,
                    data: format!("blaunch: {message}\n").into_bytes(),
                },
            );
            out.send(
                Operation::TaskExit,
                &wire::TaskExit { wait_status: 127 << 8, rusage: wire::ResourceUsage::default() },
            );
            out.close();
            ExitCode::SUCCESS
        }
    }
}

fn read_plan() -> Result<TaskPlan, String> {
    let mut bytes = Vec::new();
    io::stdin().lock().take(PLAN_BYTES_MAX).read_to_end(&mut bytes).map_err(|err| err.to_string())?;
    lava_xdr::from_bytes(
        &bytes,
        &lava_xdr::Limits { input_bytes_max: PLAN_BYTES_MAX as usize, ..lava_xdr::Limits::DEFAULT },
    )
    .map_err(|err| format!("unreadable task plan: {err}"))
}

/// The connection to `blaunch`, shared by the threads that write to it.
#[derive(Clone)]
struct Relay {
    stream: Arc<Mutex<TcpStream>>,
}

impl Relay {
    /// Sends one frame; a broken connection is left to the control thread to notice.
    fn send<T: Serialize>(&self, operation: Operation, body: &T) {
        let body = lava_xdr::to_bytes(body).expect("task messages encode");
        let bytes = frame(operation, 0, &body);
        let mut stream = self.stream.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = stream.write_all(&bytes);
    }

    fn close(&self) {
        let stream = self.stream.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = stream.shutdown(Shutdown::Write);
    }
}

/// Becomes the user, starts the task, relays it until it ends and sends TASK_EXIT. An
/// error means the task did not start.
fn run_task(plan: &TaskPlan, out: &mut Relay) -> Result<(), String> {
    if sys::effective_uid() != plan.uid {
        let groups = sys::group_list(&plan.user, plan.gid)
            .map_err(|err| format!("cannot list the groups of {}: {err}", plan.user))?;
        sys::become_user(plan.uid, plan.gid, &groups)
            .map_err(|err| format!("cannot become {}: {err}", plan.user))?;
    }
    let cwd = [plan.cwd.as_str(), plan.home.as_str(), "/tmp"]
        .into_iter()
        .find(|dir| !dir.is_empty() && Path::new(dir).is_dir())
        .unwrap_or("/");
    let mut command = std::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(&plan.command)
        .env_clear()
        .envs(plan.env.iter().filter_map(|entry| entry.split_once('=')))
        .current_dir(cwd)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|err| format!("cannot run /bin/sh: {err}"))?;
    let pid = i32::try_from(child.id()).map_err(|_| "pid out of range".to_owned())?;
    out.send(Operation::TaskStarted, &wire::TaskStarted { pid, host: plan.host.clone() });
    let mut pumps = Vec::new();
    for (pipe, stream) in [
        (child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>), wire::TASK_STDOUT),
        (child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>), wire::TASK_STDERR),
    ] {
        let Some(mut pipe) = pipe else { continue };
        let out = out.clone();
        pumps.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; OUTPUT_CHUNK];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        out.send(Operation::TaskOutput, &wire::TaskOutput { stream, data: buf[..n].to_vec() })
                    }
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }));
    }
    let control = out.stream.lock().unwrap_or_else(std::sync::PoisonError::into_inner).try_clone();
    if let Ok(control) = control {
        std::thread::spawn(move || control_loop(control, pid));
    } else {
        let _ = sys::kill_group(pid, libc::SIGKILL);
    }
    let reaped = sys::wait4(pid).map_err(|err| format!("cannot wait for the task: {err}"));
    // What the task left behind goes with it (the module doc's rule).
    end_tree(pid, libc::SIGKILL);
    for pump in pumps {
        let _ = pump.join();
    }
    let exit = match reaped {
        Ok(reaped) => wire::TaskExit {
            wait_status: reaped.wait_status,
            rusage: wire::ResourceUsage {
                user_time_ms: reaped.user_time_ms,
                system_time_ms: reaped.system_time_ms,
                max_rss_kb: reaped.max_rss_kb,
            },
        },
        Err(_) => wire::TaskExit { wait_status: libc::SIGKILL, rusage: wire::ResourceUsage::default() },
    };
    out.send(Operation::TaskExit, &exit);
    out.close();
    Ok(())
}

/// Reads `blaunch`'s frames: TASK_SIGNAL goes to the task's process group; the end of the
/// connection (or anything unreadable) kills the group.
fn control_loop(mut control: TcpStream, pgid: i32) {
    loop {
        let mut head = [0u8; HEADER_BYTES];
        if control.read_exact(&mut head).is_err() {
            break;
        }
        let Ok(header) = FrameHeader::parse(&head) else { break };
        if header.length > CONTROL_BYTES_MAX {
            break;
        }
        let mut body = vec![0u8; header.length as usize];
        if control.read_exact(&mut body).is_err() {
            break;
        }
        if header.operation != Operation::TaskSignal.code() {
            break;
        }
        let Ok(signal) = lava_xdr::from_bytes::<wire::TaskSignal>(&body, &lava_xdr::Limits::DEFAULT) else {
            break;
        };
        if (1..=64).contains(&signal.signal) {
            let _ = sys::kill_group(pgid, signal.signal as i32);
        }
    }
    // SIGTERM first, so that the task may clean up (an MPI proxy ends its ranks); whatever
    // is left after the grace is killed. Should the task end meanwhile, the main thread
    // kills the rest of the group and the process exits, this thread with it.
    end_tree(pgid, libc::SIGTERM);
    std::thread::sleep(KILL_GRACE);
    end_tree(pgid, libc::SIGKILL);
}

/// Most rounds of [`end_tree`] (a tree that keeps forking faster than it is killed).
const END_TREE_ROUNDS: usize = 100;

/// Sends `signal` to the task's process group and to every descendant of this shepherd,
/// however it left the group (MPICH's proxies and ranks each make a session of their own);
/// with SIGKILL, again until none is left, reaping them (the shepherd is their subreaper).
fn end_tree(pgid: i32, signal: i32) {
    let _ = sys::kill_group(pgid, signal);
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    for _ in 0..END_TREE_ROUNDS {
        let descendants = descendants_of(me);
        for pid in &descendants {
            let _ = sys::kill_process(*pid, signal);
        }
        if signal != libc::SIGKILL || descendants.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
        sys::reap_ended_children();
    }
}

/// The live descendants of process `root`, from the parent links in `/proc/*/stat`.
fn descendants_of(root: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut parent_of = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(after_name) = stat.rfind(')').map(|at| &stat[at + 1..]) else { continue };
        let mut fields = after_name.split_whitespace();
        let (state, ppid) = (fields.next(), fields.next().and_then(|ppid| ppid.parse::<i32>().ok()));
        if let (Some(state), Some(ppid)) = (state, ppid)
            && state != "Z"
        {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut idx = 0;
    while idx < found.len() {
        let parent = found[idx];
        found.extend(parent_of.iter().filter(|(_, ppid)| *ppid == parent).map(|(pid, _)| *pid));
        idx += 1;
    }
    found.remove(0);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_net::{AuthConfig, ClusterKey, KeyRing};

    // Goal: a grant opens with the key that sealed it, once, and names what was granted; a
    // grant of another key, a replayed one and a changed one are refused.
    #[test]
    fn grants_open_once_with_their_key() {
        let dir = tempfile::tempdir().expect("a folder");
        let key_path = dir.path().join("key");
        ClusterKey::generate_file(&key_path).expect("a key");
        let auth = Authenticator::new(
            KeyRing::new(&ClusterKey::load(&key_path).expect("loads")),
            AuthConfig::default(),
        );
        let facts = TaskGrantFacts { user: "ann".into(), uid: 1000, gid: 100 };
        let job = JobRef::new(7, 0).expect("a job");
        let sealed = issue_grant(&auth, &facts, job, "h0", "h1", "c").expect("sealed");
        let now = lava_net::system_now_ms();
        let grant = open_grant(&auth, &sealed, now).expect("opens");
        assert_eq!((grant.user.as_str(), grant.uid, grant.to_host.as_str()), ("ann", 1000, "h1"));
        assert!(open_grant(&auth, &sealed, now).expect_err("a replay").contains("not valid"));
        let mut changed = issue_grant(&auth, &facts, job, "h0", "h1", "c").expect("sealed");
        changed[10] ^= 1;
        assert!(open_grant(&auth, &changed, now).is_err());
        let other_path = dir.path().join("other");
        ClusterKey::generate_file(&other_path).expect("a key");
        let other = Authenticator::new(
            KeyRing::new(&ClusterKey::load(&other_path).expect("loads")),
            AuthConfig::default(),
        );
        let foreign = issue_grant(&other, &facts, job, "h0", "h1", "c").expect("sealed");
        assert!(open_grant(&auth, &foreign, now).is_err());
    }
}
