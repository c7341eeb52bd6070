//! The command side of the batch protocol over a blocking socket, as a bench needs it: a
//! connection that sends requests carrying credentials sealed with the cluster key (what
//! the local sbatchd's credential socket would hand a command), one at a time, and reads
//! each answer. Also the workload every bench submits: a `bsub /bin/true` with a
//! representative login environment.
//!
//! Nothing here uses the daemons' code paths beyond the shared wire crates, so a bench
//! measures what any client would see.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::BytesMut;
use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_net::{Audience, Authenticator, Credential, Nonce, system_now_ms};
use lava_xdr::frame::{FrameHeader, FrameLimits, decode_frame};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Largest answer accepted: above anything mbatchd sends.
const ANSWER_BYTES_MAX: u32 = 64 << 20;
/// Longest wait for an answer.
const IO_TIMEOUT: Duration = Duration::from_secs(120);
/// Decoding limits of answers.
const ANSWER_LIMITS: lava_xdr::Limits = lava_xdr::Limits {
    input_bytes_max: ANSWER_BYTES_MAX as usize,
    string_bytes_max: 1 << 20,
    array_elements_max: 1 << 22,
    ..lava_xdr::Limits::DEFAULT
};

/// Who the bench's requests come from.
#[derive(Clone, Debug)]
pub struct User {
    /// The uid the credentials vouch for.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// Its login name.
    pub name: String,
}

impl User {
    /// The user running the bench (its jobs must be runnable by the local sbatchd).
    pub fn current() -> anyhow::Result<User> {
        let status = std::fs::read_to_string("/proc/self/status").context("read /proc/self/status")?;
        let id = |key: &str| -> Option<u32> {
            status.lines().find_map(|line| line.strip_prefix(key))?.split_whitespace().next()?.parse().ok()
        };
        let (uid, gid) = (id("Uid:").context("no Uid")?, id("Gid:").context("no Gid")?);
        let passwd = std::fs::read_to_string("/etc/passwd").context("read /etc/passwd")?;
        let name = passwd
            .lines()
            .find_map(|line| {
                let mut fields = line.split(':');
                let name = fields.next()?;
                (fields.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
            })
            .with_context(|| format!("uid {uid} has no entry in /etc/passwd"))?;
        Ok(User { uid, gid, name })
    }
}

/// A representative login environment, as `bsub` copies it into every submission: the
/// variables of a Debian login shell (with `ls` colours, the largest of them), about 2 KiB.
pub fn login_environment() -> Vec<wire::EnvVar> {
    let colours: Vec<String> = [
        "rs=0",
        "di=01;34",
        "ln=01;36",
        "mh=00",
        "pi=40;33",
        "so=01;35",
        "do=01;35",
        "bd=40;33;01",
        "cd=40;33;01",
        "or=40;31;01",
        "mi=00",
        "su=37;41",
        "sg=30;43",
        "ca=00",
        "tw=30;42",
        "ow=34;42",
        "st=37;44",
        "ex=01;32",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(
        [
            "tar", "tgz", "arc", "arj", "taz", "lha", "lz4", "lzh", "lzma", "tlz", "txz", "tzo", "t7z",
            "zip", "z", "dz", "gz", "lrz", "lz", "lzo", "xz", "zst", "tzst", "bz2", "bz", "tbz", "tbz2",
            "tz", "deb", "rpm", "jar", "war", "ear", "sar", "rar", "alz", "ace", "zoo", "cpio", "7z", "rz",
            "cab", "wim", "swm", "dwm", "esd", "avif", "jpg", "jpeg", "mjpg", "mjpeg", "gif", "bmp", "pbm",
            "pgm", "ppm", "tga", "xbm", "xpm", "tif", "tiff", "png", "svg", "svgz", "mng", "pcx", "mov",
            "mpg", "mpeg", "m2v", "mkv", "webm", "webp", "ogm", "mp4", "m4v", "mp4v", "vob", "qt", "nuv",
            "wmv", "asf", "rm", "rmvb", "flc", "avi", "fli", "flv", "gl", "dl", "xcf", "xwd", "yuv", "cgm",
            "emf", "ogv", "ogx", "aac", "au", "flac", "m4a", "mid", "midi", "mka", "mp3", "mpc", "ogg", "ra",
            "wav", "oga", "opus", "spx", "xspf",
        ]
        .into_iter()
        .map(|ext| format!("*.{ext}=01;31")),
    )
    .collect();
    let pairs = [
        ("SHELL", "/bin/bash".to_owned()),
        ("PWD", "/home/alice/projects/sim".to_owned()),
        ("LOGNAME", "alice".to_owned()),
        ("XDG_SESSION_TYPE", "tty".to_owned()),
        ("HOME", "/home/alice".to_owned()),
        ("LANG", "en_US.UTF-8".to_owned()),
        ("LS_COLORS", colours.join(":")),
        ("SSH_CONNECTION", "10.0.0.17 52814 10.0.0.2 22".to_owned()),
        ("XDG_SESSION_CLASS", "user".to_owned()),
        ("TERM", "xterm-256color".to_owned()),
        ("USER", "alice".to_owned()),
        ("SHLVL", "1".to_owned()),
        ("XDG_SESSION_ID", "42".to_owned()),
        ("XDG_RUNTIME_DIR", "/run/user/1000".to_owned()),
        ("SSH_CLIENT", "10.0.0.17 52814 22".to_owned()),
        ("LSF_ENVDIR", "/etc/lavacore".to_owned()),
        ("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games".to_owned()),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus".to_owned()),
        ("MAIL", "/var/mail/alice".to_owned()),
        ("SSH_TTY", "/dev/pts/0".to_owned()),
        ("OLDPWD", "/home/alice".to_owned()),
        ("EDITOR", "vim".to_owned()),
        ("_", "/usr/local/bin/bsub".to_owned()),
    ];
    pairs.into_iter().map(|(name, value)| wire::EnvVar { name: name.to_owned(), value }).collect()
}

/// `bsub -o /dev/null /bin/true` as a command sends it (output to /dev/null, so that tens of
/// thousands of jobs leave no spool files in the user's home).
pub fn true_job() -> wire::SubmitRequest {
    wire::SubmitRequest {
        command: "/bin/true".to_owned(),
        cwd: "/tmp".to_owned(),
        home_dir: "/tmp".to_owned(),
        output_file: "/dev/null".to_owned(),
        n_slots: 1,
        from_host: crate::cluster::HOST.to_owned(),
        umask: 0o022,
        env: login_environment(),
        ..wire::SubmitRequest::default()
    }
}

/// `bjobs` of the named jobs, whatever their state or owner.
pub fn query_jobs(jobs: Vec<wire::WireJobRef>) -> wire::JobQuery {
    wire::JobQuery {
        jobs,
        user: "all".to_owned(),
        state_filter: wire::state_filter::ALL,
        queue: String::new(),
        host: String::new(),
        job_name: String::new(),
        after_job: 0,
        after_index: 0,
    }
}

/// `bjobs -u all` (unfinished jobs), or with `all_states` `bjobs -u all -a`.
pub fn query_all_users(all_states: bool) -> wire::JobQuery {
    let state_filter = if all_states { wire::state_filter::ALL } else { wire::state_filter::UNFINISHED };
    wire::JobQuery { state_filter, ..query_jobs(Vec::new()) }
}

/// The words of mbatchd's refusal of a user beyond its share of the credential memory.
const USER_SHARE_REFUSAL: &str = "the most one user may";
/// How long [`Connection::call`] waits out such refusals for one request.
const QUOTA_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(60);

/// One command connection to mbatchd.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    auth: Arc<Authenticator>,
    user: User,
    sequence: u32,
    /// Bytes read and not yet a whole frame.
    read_buf: BytesMut,
    /// What one read fills, reused: zeroing a fresh window of `read_buf` for every read
    /// cost the bench a third of its CPU, taken from the daemons it measures.
    scratch: Box<[u8]>,
    /// The request being written, reused.
    write_buf: Vec<u8>,
}

impl Connection {
    /// Connects to mbatchd at `addr`; requests will come from `user`.
    pub fn connect(addr: SocketAddr, auth: Arc<Authenticator>, user: User) -> anyhow::Result<Connection> {
        let stream =
            TcpStream::connect_timeout(&addr, IO_TIMEOUT).with_context(|| format!("connect to {addr}"))?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            auth,
            user,
            sequence: 0,
            read_buf: BytesMut::new(),
            scratch: vec![0; 64 * 1024].into_boxed_slice(),
            write_buf: Vec::new(),
        })
    }

    /// A fresh credential (each is good once).
    fn credential(&self) -> anyhow::Result<Vec<u8>> {
        let credential = Credential {
            uid: self.user.uid,
            gid: self.user.gid,
            username: self.user.name.clone(),
            hostname: crate::cluster::HOST.to_owned(),
            issued_at_ms: system_now_ms(),
            nonce: Nonce::fresh().map_err(|error| anyhow::anyhow!("no nonce: {error}"))?,
            audience: Audience::new(Audience::MBATCHD, crate::cluster::CLUSTER_NAME),
        };
        Ok(credential.seal(&self.auth)?)
    }

    /// Sends `body` as `op` with a fresh credential and decodes the answer as `expected`;
    /// REQUEST_FAILED is an error carrying mbatchd's message. A refusal for the user's share
    /// of mbatchd's credential memory (one user submitting faster than about 17,000
    /// requests a second for 30 s, which only a bench that seals its own credentials can)
    /// is waited out and the same request sent again, as a command retries: the bench's
    /// submitters all act as one user.
    pub fn call<T: Serialize, R: DeserializeOwned>(
        &mut self,
        op: Operation,
        expected: Operation,
        request_id: wire::RequestId,
        body: &T,
    ) -> anyhow::Result<R> {
        let deadline = std::time::Instant::now() + QUOTA_WAIT_MAX;
        loop {
            match self.call_once(op, expected, request_id, body) {
                Err(error)
                    if error.to_string().contains(USER_SHARE_REFUSAL)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(250));
                    let addr = self.stream.peer_addr()?;
                    *self = Connection::connect(addr, Arc::clone(&self.auth), self.user.clone())?;
                }
                result => return result,
            }
        }
    }

    fn call_once<T: Serialize, R: DeserializeOwned>(
        &mut self,
        op: Operation,
        expected: Operation,
        request_id: wire::RequestId,
        body: &T,
    ) -> anyhow::Result<R> {
        self.sequence = self.sequence.wrapping_add(1);
        let request = wire::ClientRequest { credential: self.credential()?, request_id, body };
        self.write_buf.clear();
        FrameHeader {
            sequence: self.sequence,
            operation: op.code(),
            version: BATCH_VERSION,
            length: 0,
            status: 0,
        }
        .write(&mut self.write_buf);
        lava_xdr::serialize_into(&request, &mut self.write_buf)?;
        let length = u32::try_from(self.write_buf.len() - lava_xdr::frame::HEADER_BYTES)?;
        self.write_buf[12..16].copy_from_slice(&length.to_be_bytes());
        self.stream.write_all(&self.write_buf).context("send a request")?;
        let frame = self.recv()?;
        if frame.header.sequence != self.sequence {
            bail!("answer to sequence {} for request {}", frame.header.sequence, self.sequence);
        }
        match Operation::from_code(frame.header.operation) {
            Some(got) if got == expected => Ok(lava_xdr::from_bytes(&frame.body, &ANSWER_LIMITS)?),
            Some(Operation::RequestFailed) => {
                let error: wire::ErrorReply = lava_xdr::from_bytes(&frame.body, &ANSWER_LIMITS)?;
                bail!("{} refused (code {}): {}", op.name(), error.code, error.message)
            }
            other => bail!("{} answered with {other:?}", op.name()),
        }
    }

    /// SUBMIT_JOB.
    pub fn submit(
        &mut self,
        request_id: wire::RequestId,
        request: &wire::SubmitRequest,
    ) -> anyhow::Result<u32> {
        let reply: wire::SubmitReply =
            self.call(Operation::SubmitJob, Operation::SubmitJobReply, request_id, request)?;
        Ok(reply.job_id)
    }

    /// JOB_QUERY.
    pub fn query(&mut self, query: &wire::JobQuery) -> anyhow::Result<wire::JobQueryReply> {
        let request_id = wire::RequestId { high: 0, low: 0 };
        self.call(Operation::JobQuery, Operation::JobQueryReply, request_id, query)
    }

    fn recv(&mut self) -> anyhow::Result<lava_xdr::frame::Frame> {
        let limits = FrameLimits { body_bytes_max: ANSWER_BYTES_MAX };
        loop {
            if let Some(frame) = decode_frame(&mut self.read_buf, &limits)? {
                return Ok(frame);
            }
            match self.stream.read(&mut self.scratch) {
                Ok(0) => bail!("mbatchd closed the connection"),
                Ok(n) => self.read_buf.extend_from_slice(&self.scratch[..n]),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error).context("receive an answer"),
            }
        }
    }
}

/// A request id unique within a bench run: the connection in the high half, the request
/// in the low half.
pub fn request_id(connection_idx: usize, request_idx: usize) -> wire::RequestId {
    wire::RequestId { high: 0x6265_6e63_0000_0000 | connection_idx as u64, low: request_idx as u64 }
}

/// The `q`-quantile of sorted `values` (nearest rank).
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> T {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}
