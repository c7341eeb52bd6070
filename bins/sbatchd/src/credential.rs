//! The local credential socket: how a user command proves who runs it.
//!
//! A Unix stream socket at `LAVA_CMD_SOCKET` (lsf.conf), mode 0666 so every user can
//! connect. Frames use the batch header (version `BATCH_VERSION`), unsealed: the socket is
//! local and the answer is itself sealed. For each CREDENTIAL_REQUEST frame (`wire::CredentialRequest`: the daemon the token is for)
//! sbatchd reads the caller's uid and gid from the kernel (SO_PEERCRED, never from the
//! request), looks the uid up in the password database, and answers CREDENTIAL_REPLY
//! (same sequence number) whose body is `wire::CredentialReply { token }`: a
//! `lava_net::Credential { uid, gid, username, hostname: this host, issued_at_ms: now,
//! nonce }` sealed with the cluster key. mbatchd verifies it with the same key (window and
//! replay rules: a token is good once, for 30 s). A caller without a password entry, or a
//! request of another kind, gets REQUEST_FAILED (`wire::ErrorReply`); a malformed frame
//! closes the connection. A connection may carry any number of requests.
//!
//! The same socket answers SBD_STATUS_QUERY (ours, `lsadmin sbdstatus`) with
//! SBD_STATUS_REPLY (`wire::SbdStatusReply`), built by the event loop (see
//! [`crate::status`]); anyone who can connect may ask, as anyone may run `bjobs`.
//!
//! One user cannot take the socket from the others (lava-net's gate; docs/operations.md,
//! "Connection limits"): at most [`CONNECTIONS`]'s connections per uid and in all, the
//! oldest that has not sent a whole request yet closed first to make room, a few seconds to
//! send that first request; and credentials are issued at most [`CREDENTIALS_PER_SECOND`]
//! a second per uid (a burst of [`CREDENTIALS_BURST`]): a faster caller waits its turn, so
//! it slows only itself, and no user can mint the credentials to flood mbatchd's replay
//! window.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_net::gate::{AcceptBackoff, Gate, GateConfig, Pass, RateQuota, Source};
use lava_net::{Audience, Authenticator, Credential, FramedConn, Nonce, PeerCred, Timeouts, peer_cred};
use lava_xdr::frame::{FrameHeader, FrameLimits};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::status::{SocketCounters, StatusRequest, bump};
use crate::sys;

/// What the socket's connections share: the key, this host, the way to the event loop for
/// status queries, and the counters.
#[derive(Debug, Clone)]
pub struct Context {
    /// The cluster key, to seal credentials.
    pub auth: Arc<Authenticator>,
    /// This host's name.
    pub host: String,
    /// Status queries go to the event loop.
    pub status: mpsc::Sender<StatusRequest>,
    /// What the socket counts.
    pub counters: Arc<SocketCounters>,
    /// The cluster's name (task grants name it).
    pub cluster: String,
    /// Task grant questions and task usage reports go to the event loop ([`crate::tasks`]).
    pub grants: mpsc::Sender<crate::tasks::TaskQuery>,
}

/// Largest request body accepted (requests are empty).
const REQUEST_BYTES_MAX: u32 = 1024;
/// Time a client has to send a whole request once it started one, or between requests.
const CLIENT_TIMEOUT_MS: u64 = 10_000;
/// Connections at once, in all and per uid, and the time to send a first whole request.
pub const CONNECTIONS: GateConfig =
    GateConfig { total_max: 256, per_source_max: 32, auth_deadline: Duration::from_secs(5) };
/// Credentials issued per second to one uid, sustained.
pub const CREDENTIALS_PER_SECOND: u32 = 200;
/// Credentials one uid may have at once beyond that rate.
pub const CREDENTIALS_BURST: u32 = 1000;

/// Binds the socket: creates its folder, removes a stale socket file, and makes it
/// connectable by everyone. `Ok(None)` when a live daemon already serves that path (several
/// logical hosts on one machine share lsf.conf): this sbatchd then leaves it alone.
pub fn bind(path: &Path) -> io::Result<Option<UnixListener>> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if std::fs::symlink_metadata(path).is_ok() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Ok(None);
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(Some(listener))
}

/// Serves the socket until the task is dropped.
pub async fn serve(listener: UnixListener, context: Context) {
    let gate = Gate::new(CONNECTIONS);
    let quota = Arc::new(RateQuota::new(CREDENTIALS_PER_SECOND, CREDENTIALS_BURST));
    let mut backoff = AcceptBackoff::default();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                let (pause, line) = backoff.failed(&err);
                if let Some(line) = line {
                    tracing::warn!("credential socket: {line}");
                }
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        if let Some(line) = backoff.succeeded() {
            tracing::info!("credential socket: {line}");
        }
        let peer = match peer_cred(&stream) {
            Ok(peer) => peer,
            Err(err) => {
                tracing::debug!("credential socket: SO_PEERCRED: {err}");
                continue;
            }
        };
        let pass = match gate.admit(Source::Uid(peer.uid)) {
            Ok(pass) => pass,
            Err(refusal) => {
                bump(&context.counters.connections_refused);
                tracing::debug!("credential socket: connection refused: {refusal}");
                continue;
            }
        };
        let (context, quota) = (context.clone(), Arc::clone(&quota));
        tokio::spawn(async move {
            if let Err(problem) = serve_one(stream, peer, pass, &quota, &context).await {
                tracing::debug!("credential socket: {problem}");
            }
        });
    }
}

async fn serve_one(
    stream: UnixStream,
    peer: PeerCred,
    mut pass: Pass,
    quota: &RateQuota,
    context: &Context,
) -> Result<(), String> {
    let counters = &*context.counters;
    let limits = FrameLimits { body_bytes_max: REQUEST_BYTES_MAX };
    let timeouts = Timeouts {
        connect_timeout_ms: CLIENT_TIMEOUT_MS,
        read_timeout_ms: CLIENT_TIMEOUT_MS,
        write_timeout_ms: CLIENT_TIMEOUT_MS,
    };
    let mut conn = FramedConn::new(stream, limits, timeouts);
    let first = tokio::select! {
        first = tokio::time::timeout(pass.auth_deadline(), conn.read_frame()) => first,
        () = pass.evicted() => return Err(format!("uid {}: an idle connection closed to make room", peer.uid)),
    };
    let mut next =
        first.map_err(|_| format!("uid {}: no request within {:?}", peer.uid, pass.auth_deadline()))?;
    while let Some(frame) = next.map_err(|err| err.to_string())? {
        pass.authenticated();
        let request = frame.header;
        let reply = |operation: Operation| FrameHeader {
            sequence: request.sequence,
            operation: operation.code(),
            version: BATCH_VERSION,
            length: 0,
            status: 0,
        };
        let failed = |code: u32, message: String| {
            let body = lava_xdr::to_bytes(&wire::ErrorReply { code, message }).expect("encodes");
            (reply(Operation::RequestFailed), body)
        };
        let (header, body) = if request.version != BATCH_VERSION {
            failed(
                wire::ERR_BAD_REQUEST,
                format!("protocol version {:#x} is not {BATCH_VERSION:#x}", request.version),
            )
        } else if request.operation == Operation::SbdStatusQuery.code() {
            let (reply_tx, reply_rx) = oneshot::channel();
            if context.status.send(reply_tx).await.is_err() {
                return Err("the event loop is gone".to_owned());
            }
            let status = reply_rx.await.map_err(|_| "the event loop is gone".to_owned())?;
            bump(&counters.status_queries);
            let body = lava_xdr::to_bytes(&status).expect("encodes");
            (reply(Operation::SbdStatusReply), body)
        } else if request.operation == Operation::TaskGrantRequest.code() {
            match task_grant(&frame.body, peer, context).await {
                Ok(body) => (reply(Operation::TaskGrantReply), body),
                Err(message) => failed(wire::ERR_REJECTED, message),
            }
        } else if request.operation == Operation::TaskUsage.code() {
            match task_usage(&frame.body, peer, context).await {
                Ok(body) => (reply(Operation::TaskUsageReply), body),
                Err(message) => failed(wire::ERR_REJECTED, message),
            }
        } else if request.operation != Operation::CredentialRequest.code() {
            failed(
                wire::ERR_BAD_REQUEST,
                format!(
                    "operation {} is not CREDENTIAL_REQUEST, SBD_STATUS_QUERY, TASK_GRANT_REQUEST or TASK_USAGE",
                    request.operation
                ),
            )
        } else {
            match credential_for(&frame.body, peer, quota, context).await {
                Ok(body) => (reply(Operation::CredentialReply), body),
                Err((code, message)) => failed(code, message),
            }
        };
        conn.write_frame(header, &body).await.map_err(|err| err.to_string())?;
        if header.operation == Operation::RequestFailed.code() {
            if request.version != BATCH_VERSION || request.operation != Operation::CredentialRequest.code() {
                bump(&counters.requests_refused);
            }
            return Err(format!("refused a request from uid {}", peer.uid));
        }
        next = conn.read_frame().await;
    }
    Ok(())
}

/// Answers a CREDENTIAL_REQUEST of `peer` (body: the audience): the sealed CREDENTIAL_REPLY,
/// after the caller's turn under its uid's rate, or the error code and message.
async fn credential_for(
    request: &[u8],
    peer: PeerCred,
    quota: &RateQuota,
    context: &Context,
) -> Result<Vec<u8>, (u32, String)> {
    let counters = &*context.counters;
    let audience = audience_of(request).map_err(|message| {
        bump(&counters.requests_refused);
        (wire::ERR_BAD_REQUEST, message)
    })?;
    // Beyond its rate, the caller waits its turn (it slows only itself).
    let wait = quota.delay(Source::Uid(peer.uid), std::time::Instant::now());
    if !wait.is_zero() {
        bump(&counters.credentials_delayed);
        tokio::time::sleep(wait).await;
    }
    // The account lookup may ask a directory service: off the thread that runs the job loop
    // (crate::daemon, "One thread for the loop and the sockets").
    let (auth, host) = (Arc::clone(&context.auth), context.host.clone());
    let issued = tokio::task::spawn_blocking(move || issue(&auth, &host, peer.uid, peer.gid, audience))
        .await
        .unwrap_or_else(|_| Err("the credential lookup failed".to_owned()));
    match issued {
        Ok(token) => {
            bump(&counters.credentials_issued);
            Ok(lava_xdr::to_bytes(&wire::CredentialReply { token }).expect("encodes"))
        }
        Err(message) => {
            bump(&counters.credentials_refused);
            Err((wire::ERR_AUTH, message))
        }
    }
}

/// Answers a TASK_GRANT_REQUEST of `peer` (`blaunch`; [`crate::tasks`]): the event loop
/// decides from the job's record, then the grant is sealed here.
async fn task_grant(body: &[u8], peer: PeerCred, context: &Context) -> Result<Vec<u8>, String> {
    let limits =
        lava_xdr::Limits { input_bytes_max: REQUEST_BYTES_MAX as usize, ..lava_xdr::Limits::default() };
    let request: wire::TaskGrantRequest =
        lava_xdr::from_bytes(body, &limits).map_err(|err| format!("malformed TASK_GRANT_REQUEST: {err}"))?;
    let job = lava_batch_ll::JobRef::new(request.job.job_id, request.job.array_index)
        .ok_or_else(|| format!("TASK_GRANT_REQUEST: job id {} is not valid", request.job.job_id))?;
    let (answer, answered) = oneshot::channel();
    let query = crate::tasks::GrantQuery { job, uid: peer.uid, host: request.host.clone(), answer };
    if context.grants.send(crate::tasks::TaskQuery::Grant(query)).await.is_err() {
        return Err("the event loop is gone".to_owned());
    }
    let facts = answered
        .await
        .map_err(|_| "the event loop is gone".to_owned())?
        .map_err(|refusal| refusal.to_string())?;
    let grant = crate::tasks::issue_grant(
        &context.auth,
        &facts,
        job,
        &context.host,
        &request.host,
        &context.cluster,
    )?;
    Ok(lava_xdr::to_bytes(&wire::TaskGrantReply { grant }).expect("encodes"))
}

/// Answers a TASK_USAGE of `peer` (`blaunch`, a task of its job ended; [`crate::tasks`]):
/// the event loop adds the usage to the job's record, durably, or says why not.
async fn task_usage(body: &[u8], peer: PeerCred, context: &Context) -> Result<Vec<u8>, String> {
    let limits =
        lava_xdr::Limits { input_bytes_max: REQUEST_BYTES_MAX as usize, ..lava_xdr::Limits::default() };
    let request: wire::TaskUsage =
        lava_xdr::from_bytes(body, &limits).map_err(|err| format!("malformed TASK_USAGE: {err}"))?;
    let job = lava_batch_ll::JobRef::new(request.job.job_id, request.job.array_index)
        .ok_or_else(|| format!("TASK_USAGE: job id {} is not valid", request.job.job_id))?;
    let (answer, answered) = oneshot::channel();
    let report = crate::tasks::UsageReport { job, uid: peer.uid, rusage: request.rusage, answer };
    if context.grants.send(crate::tasks::TaskQuery::Usage(report)).await.is_err() {
        return Err("the event loop is gone".to_owned());
    }
    answered.await.map_err(|_| "the event loop is gone".to_owned())??;
    Ok(lava_xdr::to_bytes(&wire::TaskUsageReply {}).expect("encodes"))
}

/// The daemon a CREDENTIAL_REQUEST asks a credential for (its body, `wire::CredentialRequest`).
fn audience_of(body: &[u8]) -> Result<Audience, String> {
    let limits =
        lava_xdr::Limits { input_bytes_max: REQUEST_BYTES_MAX as usize, ..lava_xdr::Limits::default() };
    let request: wire::CredentialRequest = lava_xdr::from_bytes(body, &limits)
        .map_err(|err| format!("CREDENTIAL_REQUEST must name the daemon the credential is for: {err}"))?;
    Ok(Audience { kind: request.audience_kind, cluster: request.audience_cluster })
}

/// Seals a credential for `uid` issued now by this host, for `audience`.
fn issue(
    auth: &Authenticator,
    host: &str,
    uid: u32,
    gid: u32,
    audience: Audience,
) -> Result<Vec<u8>, String> {
    let account = sys::lookup_uid(uid)
        .map_err(|err| format!("cannot look up uid {uid} on {host}: {err}"))?
        .ok_or_else(|| format!("uid {uid} has no account on {host}"))?;
    let nonce = Nonce::fresh().map_err(|err| format!("no randomness for a nonce: {err}"))?;
    let credential = Credential {
        uid,
        gid,
        username: account.name,
        hostname: host.to_owned(),
        issued_at_ms: lava_net::system_now_ms(),
        nonce,
        audience,
    };
    credential.seal(auth).map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the audience numbers of the wire (what commands ask for) are lava-net's (what the
    // daemons check), and a request naming one is read back as that audience.
    #[test]
    fn the_wire_names_the_audiences_lava_net_checks() {
        assert_eq!(wire::AUDIENCE_MBATCHD, Audience::MBATCHD);
        assert_eq!(wire::AUDIENCE_COORDINATOR, Audience::COORDINATOR);
        let body = lava_xdr::to_bytes(&wire::CredentialRequest {
            audience_kind: wire::AUDIENCE_COORDINATOR,
            audience_cluster: "lava".to_owned(),
        })
        .expect("encodes");
        assert_eq!(audience_of(&body), Ok(Audience::new(Audience::COORDINATOR, "lava")));
        assert!(audience_of(&[]).expect_err("no audience").contains("must name the daemon"));
    }
}
