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
/// Between two samples of a task's resident memory (when the job has a memory limit).
const MEMORY_SAMPLE: Duration = Duration::from_secs(1);
/// Signal orders waiting for one host at most; more are dropped (and logged).
const ORDERS_QUEUED_MAX: usize = 1024;
/// Tries of one signal order before it is given up (logged).
const ORDER_TRIES: u32 = 3;
/// Time to connect to a task port and to get its answer.
const ORDER_TIMEOUT: Duration = Duration::from_secs(10);

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

/// What the event loop answers for the credential socket's task requests.
#[derive(Debug)]
pub enum TaskQuery {
    /// May this caller have a grant (TASK_GRANT_REQUEST)?
    Grant(GrantQuery),
    /// A task's usage to add to the job (TASK_USAGE).
    Usage(UsageReport),
}

/// A task's resource usage for the event loop to add to its job: answered once durable.
#[derive(Debug)]
pub struct UsageReport {
    /// The job.
    pub job: JobRef,
    /// The caller's uid (SO_PEERCRED).
    pub uid: u32,
    /// The task's usage.
    pub rusage: wire::ResourceUsage,
    /// Where the answer goes: `Err` says why it was refused.
    pub answer: oneshot::Sender<Result<(), String>>,
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
        mem_limit_kb: facts.mem_limit_kb,
    };
    seal(auth, wire::TASK_GRANT_MAGIC, &grant)
}

/// Opens a grant (MAC, window, single use) and reads it; the error says why it is refused.
pub fn open_grant(auth: &Authenticator, sealed: &[u8], now_ms: u64) -> Result<wire::TaskGrant, String> {
    open(auth, wire::TASK_GRANT_MAGIC, sealed, now_ms, "task grant")
}

/// Seals a signal order (TASK_JOB_SIGNAL's body).
pub fn seal_signal_order(auth: &Authenticator, order: &wire::TaskSignalOrder) -> Result<Vec<u8>, String> {
    seal(auth, wire::TASK_SIGNAL_ORDER_MAGIC, order)
}

/// Opens a signal order (MAC, window, single use); the error says why it is refused.
pub fn open_signal_order(
    auth: &Authenticator,
    sealed: &[u8],
    now_ms: u64,
) -> Result<wire::TaskSignalOrder, String> {
    open(auth, wire::TASK_SIGNAL_ORDER_MAGIC, sealed, now_ms, "signal order")
}

/// `magic`, the XDR of `value`, then lava-net's trailer made with the cluster key.
fn seal<T: Serialize>(auth: &Authenticator, magic: [u8; 4], value: &T) -> Result<Vec<u8>, String> {
    let mut sealed = magic.to_vec();
    sealed.extend(lava_xdr::to_bytes(value).map_err(|err| err.to_string())?);
    let nonce = Nonce::fresh().map_err(|err| format!("no randomness for a nonce: {err}"))?;
    let trailer = auth.seal_bytes(&sealed, lava_net::system_now_ms(), nonce);
    sealed.extend_from_slice(&trailer);
    Ok(sealed)
}

/// The value [`seal`] sealed after `magic`, or why it is refused (`what` names it).
fn open<T: serde::de::DeserializeOwned>(
    auth: &Authenticator,
    magic: [u8; 4],
    sealed: &[u8],
    now_ms: u64,
    what: &str,
) -> Result<T, String> {
    let data = auth.open_bytes(sealed, now_ms).map_err(|err| format!("the {what} is not valid: {err}"))?;
    let body = data.strip_prefix(&magic).ok_or_else(|| format!("the {what} is not valid: not a {what}"))?;
    lava_xdr::from_bytes(body, &lava_xdr::Limits::DEFAULT)
        .map_err(|err| format!("the {what} is not valid: {err}"))
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
            match tokio::time::timeout(deadline, serve_connection(stream, &context)).await {
                Ok(Ok(started)) => tracing::info!(%peer, "{started}"),
                Ok(Err(problem)) => tracing::warn!(%peer, "task port request refused: {problem}"),
                Err(_) => tracing::debug!(%peer, "task port: no whole request within {deadline:?}"),
            }
            drop(pass);
        });
    }
}

/// Reads the first frame: TASK_START (start a task: [`start_task`]) or TASK_JOB_SIGNAL
/// (signal a job's tasks: [`signal_order`]); anything else is refused.
async fn serve_connection(
    mut stream: tokio::net::TcpStream,
    context: &PortContext,
) -> Result<String, String> {
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).await.map_err(|err| format!("reading TASK_START: {err}"))?;
    let header = FrameHeader::parse(&head).map_err(|err| err.to_string())?;
    if header.version == BATCH_VERSION && header.operation == Operation::TaskJobSignal.code() {
        return signal_order(stream, header, context).await;
    }
    start_task(stream, header, context).await
}

/// Checks a TASK_JOB_SIGNAL and carries it out: answered with TASK_JOB_SIGNAL_REPLY, or
/// REQUEST_FAILED and the error.
async fn signal_order(
    mut stream: tokio::net::TcpStream,
    header: FrameHeader,
    context: &PortContext,
) -> Result<String, String> {
    let body = if header.length > wire::TASK_JOB_SIGNAL_BYTES_MAX {
        Err(format!("TASK_JOB_SIGNAL of {} bytes is over {}", header.length, wire::TASK_JOB_SIGNAL_BYTES_MAX))
    } else {
        let mut body = vec![0u8; header.length as usize];
        stream.read_exact(&mut body).await.map_err(|err| format!("reading TASK_JOB_SIGNAL: {err}"))?;
        Ok(body)
    };
    let checked = body.and_then(|body| {
        let signal: wire::TaskJobSignal = lava_xdr::from_bytes(&body, &lava_xdr::Limits::DEFAULT)
            .map_err(|err| format!("malformed TASK_JOB_SIGNAL: {err}"))?;
        let order = open_signal_order(&context.auth, &signal.order, lava_net::system_now_ms())?;
        if order.to_host != context.host {
            return Err(format!("the signal order is for host <{}>, not <{}>", order.to_host, context.host));
        }
        if order.cluster != context.cluster {
            return Err(format!(
                "the signal order is for cluster <{}>, not <{}>",
                order.cluster, context.cluster
            ));
        }
        if !(1..=64).contains(&order.signal) {
            return Err(format!("signal {} is not a signal number", order.signal));
        }
        Ok(order)
    });
    let order = match checked {
        Ok(order) => order,
        Err(message) => {
            refuse(&mut stream, header.sequence, &message).await;
            return Err(message);
        }
    };
    let (shepherd, host) = (context.shepherd.clone(), context.host.clone());
    let (job, uid, signal) = (order.job, order.uid, order.signal as i32);
    let tasks = tokio::task::spawn_blocking(move || signal_tasks(&shepherd, &host, job, uid, signal))
        .await
        .unwrap_or(0);
    let body = lava_xdr::to_bytes(&wire::TaskJobSignalReply { tasks }).expect("a reply encodes");
    let _ = stream.write_all(&frame(Operation::TaskJobSignalReply, header.sequence, &body)).await;
    let _ = stream.shutdown().await;
    Ok(format!(
        "signal {signal} from <{}> delivered to {tasks} task(s) of job {}",
        order.from_host,
        job_name(job)
    ))
}

/// The job as logs name it: `ID[INDEX]`.
fn job_name(job: wire::WireJobRef) -> String {
    format!("{}[{}]", job.job_id, job.array_index)
}

/// The job as a task shepherd's argument names it: `ID[INDEX]@HOST` (the host tells the
/// shepherds of several logical hosts of one machine apart).
fn job_arg(job: wire::WireJobRef, host: &str) -> String {
    format!("{}@{host}", job_name(job))
}

/// Sends `signal` to every process under each task shepherd of `job` running as `uid` on
/// host `host` (the shepherds themselves are spared); returns how many shepherds there were.
/// They are found in `/proc`: the program `shepherd`, the arguments `--task ID[INDEX]@HOST`,
/// the uid.
pub fn signal_tasks(shepherd: &Path, host: &str, job: wire::WireJobRef, uid: u32, signal: i32) -> u32 {
    let wanted = [TASK_FLAG.to_owned(), job_arg(job, host)];
    let program = std::fs::canonicalize(shepherd).unwrap_or_else(|_| shepherd.to_path_buf());
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut found = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let args: Vec<&[u8]> = cmdline.split(|byte| *byte == 0).collect();
        if args.len() < 3 || args[1] != wanted[0].as_bytes() || args[2] != wanted[1].as_bytes() {
            continue;
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let exe = exe.to_string_lossy();
        if exe.strip_suffix(" (deleted)").unwrap_or(&exe) != program.to_string_lossy() {
            continue;
        }
        if process_uid(pid) != Some(uid) {
            continue;
        }
        found += 1;
        for task in descendants_of(pid) {
            let _ = sys::kill_process(task, signal);
        }
    }
    found
}

/// The real uid of process `pid` (`Uid:` of `/proc/PID/status`).
fn process_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("Uid:")?.split_whitespace().next()?.parse().ok())
}

/// Forwards the signals this sbatchd delivers to its jobs to the jobs' other hosts (the
/// module doc's "Signals"): one worker per host, sending its orders in order.
#[derive(Debug)]
pub struct Forwarder {
    context: Arc<ForwardContext>,
    workers: std::collections::HashMap<String, tokio::sync::mpsc::Sender<wire::TaskSignalOrder>>,
}

/// What the forwarding workers share.
#[derive(Debug)]
struct ForwardContext {
    auth: Arc<Authenticator>,
    port: u16,
    /// Each host's `LAVA_ADDR` from lsf.cluster, when it has one.
    addresses: std::collections::HashMap<String, std::net::IpAddr>,
}

impl Forwarder {
    /// A forwarder that seals with `auth` and reaches task ports on `port`.
    pub fn new(
        auth: Arc<Authenticator>,
        port: u16,
        addresses: std::collections::HashMap<String, std::net::IpAddr>,
    ) -> Forwarder {
        Forwarder {
            context: Arc::new(ForwardContext { auth, port, addresses }),
            workers: std::collections::HashMap::new(),
        }
    }

    /// Queues `signal` for the tasks of `job` (its user `uid`) on each host of `hosts` but
    /// `this_host`; never blocks (a full queue drops the order, logged).
    pub fn forward(
        &mut self,
        job: JobRef,
        uid: u32,
        signal: i32,
        this_host: &str,
        hosts: &[&str],
        cluster: &str,
    ) {
        let mut seen = std::collections::BTreeSet::new();
        for host in hosts.iter().copied().filter(|host| *host != this_host) {
            if !seen.insert(host) {
                continue;
            }
            let order = wire::TaskSignalOrder {
                job: wire::WireJobRef { job_id: job.id(), array_index: job.index() },
                uid,
                signal: u32::try_from(signal).unwrap_or(0),
                from_host: this_host.to_owned(),
                to_host: host.to_owned(),
                cluster: cluster.to_owned(),
            };
            let worker = self.workers.entry(host.to_owned()).or_insert_with(|| {
                let (tx, rx) = tokio::sync::mpsc::channel(ORDERS_QUEUED_MAX);
                tokio::spawn(forward_worker(Arc::clone(&self.context), host.to_owned(), rx));
                tx
            });
            if worker.try_send(order).is_err() {
                tracing::warn!(%job, host, signal, "too many signal orders queued for the host; this one is dropped");
            }
        }
    }
}

/// Sends one host's signal orders, in order, each tried [`ORDER_TRIES`] times.
async fn forward_worker(
    context: Arc<ForwardContext>,
    host: String,
    mut orders: tokio::sync::mpsc::Receiver<wire::TaskSignalOrder>,
) {
    while let Some(order) = orders.recv().await {
        let mut problem = String::new();
        for attempt in 1..=ORDER_TRIES {
            match tokio::time::timeout(ORDER_TIMEOUT, send_order(&context, &host, &order)).await {
                Ok(Ok(tasks)) => {
                    tracing::debug!(host, job = %job_name(order.job), signal = order.signal, tasks, "signal forwarded");
                    problem.clear();
                    break;
                }
                Ok(Err(err)) => problem = err,
                Err(_) => problem = format!("no answer within {ORDER_TIMEOUT:?}"),
            }
            if attempt < ORDER_TRIES {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        if !problem.is_empty() {
            tracing::warn!(
                host,
                job = %job_name(order.job),
                signal = order.signal,
                "cannot forward the job's signal to its tasks on the host: {problem}"
            );
        }
    }
}

/// One TASK_JOB_SIGNAL exchange; the number of tasks signalled.
async fn send_order(
    context: &ForwardContext,
    host: &str,
    order: &wire::TaskSignalOrder,
) -> Result<u32, String> {
    let ip = match context.addresses.get(host) {
        Some(ip) => *ip,
        None => tokio::net::lookup_host((host, context.port))
            .await
            .map_err(|err| format!("cannot resolve host <{host}>: {err}"))?
            .next()
            .ok_or_else(|| format!("host <{host}> has no address"))?
            .ip(),
    };
    let mut stream = tokio::net::TcpStream::connect(SocketAddr::new(ip, context.port))
        .await
        .map_err(|err| format!("cannot connect to the task port {ip}:{}: {err}", context.port))?;
    let sealed = seal_signal_order(&context.auth, order)?;
    let body = lava_xdr::to_bytes(&wire::TaskJobSignal { order: sealed }).map_err(|err| err.to_string())?;
    stream.write_all(&frame(Operation::TaskJobSignal, 1, &body)).await.map_err(|err| err.to_string())?;
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).await.map_err(|err| format!("no answer: {err}"))?;
    let header = FrameHeader::parse(&head).map_err(|err| err.to_string())?;
    if header.length > CONTROL_BYTES_MAX {
        return Err(format!("an answer of {} bytes", header.length));
    }
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).await.map_err(|err| format!("a cut answer: {err}"))?;
    if header.operation == Operation::TaskJobSignalReply.code() {
        let reply: wire::TaskJobSignalReply =
            lava_xdr::from_bytes(&body, &lava_xdr::Limits::DEFAULT).map_err(|err| err.to_string())?;
        return Ok(reply.tasks);
    }
    match lava_xdr::from_bytes::<wire::ErrorReply>(&body, &lava_xdr::Limits::DEFAULT) {
        Ok(error) => Err(format!("refused: {}", error.message)),
        Err(_) => Err(format!("the task port answered with operation {}", header.operation)),
    }
}

/// Checks TASK_START (its header read already) and hands the connection to a task
/// shepherd; a refusal is answered with REQUEST_FAILED before the error is returned.
async fn start_task(
    mut stream: tokio::net::TcpStream,
    header: FrameHeader,
    context: &PortContext,
) -> Result<String, String> {
    let checked = if header.version != BATCH_VERSION {
        Err(format!("protocol version {:#x} is not {BATCH_VERSION:#x}", header.version))
    } else if header.operation != Operation::TaskStart.code() {
        Err(format!("operation {} is not TASK_START or TASK_JOB_SIGNAL", header.operation))
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
        mem_limit_kb: grant.mem_limit_kb,
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
    /// The job's memory limit, KiB, 0 for none (the module doc's "Limits").
    pub mem_limit_kb: u64,
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
        .arg(job_arg(wire::WireJobRef { job_id: plan.job_id, array_index: plan.array_index }, &plan.host))
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
    let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if plan.mem_limit_kb > 0 {
        let (ended, out, plan) = (Arc::clone(&ended), out.clone(), plan.clone());
        std::thread::spawn(move || watch_memory(&plan, pid, &ended, &out));
    }
    let reaped = sys::wait4(pid).map_err(|err| format!("cannot wait for the task: {err}"));
    ended.store(true, std::sync::atomic::Ordering::Relaxed);
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

/// Holds the task to the job's memory limit (the module doc's "Limits"): every
/// [`MEMORY_SAMPLE`], the resident memory of every process under this shepherd; over the
/// limit, the task is told on its standard error and its processes are ended.
fn watch_memory(plan: &TaskPlan, pgid: i32, ended: &std::sync::atomic::AtomicBool, out: &Relay) {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    while !ended.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(MEMORY_SAMPLE);
        let rss_kb: u64 = descendants_of(me).into_iter().filter_map(crate::procfs::rss_kb_of).sum();
        if rss_kb > plan.mem_limit_kb && !ended.load(std::sync::atomic::Ordering::Relaxed) {
            let said = format!(
                "blaunch: the task of job {}[{}] on host <{}> uses {rss_kb} KB, over the job's memory \
                 limit of {} KB; it is killed\n",
                plan.job_id, plan.array_index, plan.host, plan.mem_limit_kb
            );
            out.send(
                Operation::TaskOutput,
                &wire::TaskOutput { stream: wire::TASK_STDERR, data: said.into_bytes() },
            );
            // Signalled, never reaped here: the main thread's wait gets the task's status and
            // usage, then ends what is left.
            signal_tree(pgid, libc::SIGTERM);
            std::thread::sleep(KILL_GRACE);
            signal_tree(pgid, libc::SIGKILL);
            return;
        }
    }
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

/// Sends `signal` once to the task's process group and every descendant of this shepherd.
fn signal_tree(pgid: i32, signal: i32) {
    let _ = sys::kill_group(pgid, signal);
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    for pid in descendants_of(me) {
        let _ = sys::kill_process(pid, signal);
    }
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
        let facts = TaskGrantFacts { user: "ann".into(), uid: 1000, gid: 100, mem_limit_kb: 0 };
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
