//! The `lsb.events` text view: the event log's records in LSF's text format, in
//! `$LSB_SHAREDIR/<cluster>/logdir/lsb.events`, for the tools that read that file
//! (Snakemake's LSF executor looks there for a job `bjobs` no longer shows).
//!
//! # Derived, never the truth
//! The binary event log ([`crate::journal`], files `lsb.events.<segment>`,
//! `lsb.events.snapshot.*`, `lsb.events.lock` in the same folder) is the truth.
//! The loop words each event ([`line`]) as it appends it, from the event it holds
//! ([`EventsView::worded`]), and hands the lines to a writer thread together with how
//! far the log is durable ([`EventsView::durable`]); the writer appends the lines of
//! durable positions only to the text file, `fdatasync`s it, then records how far it
//! got in `lsb.events.state` (the log position, the file's length and inode).
//! Positions it was handed no line for (after a start, or while it was
//! [`FEED_BYTES_MAX`] behind) it reads back from the log and words itself. mbatchd
//! never reads the text view back as state. A record therefore appears one group
//! commit plus one write and fsync after its event, and never for an event the log
//! could lose.
//!
//! # Restart: no duplicate, no gap
//! At start the writer reads `lsb.events.state`: a text file longer than the length
//! recorded there (lines written, then a crash before the state) is cut back to it,
//! and the writer continues from the next log position: every record is written
//! once, in the log's order, whether mbatchd stopped cleanly or was killed. The log
//! prunes its oldest records after a snapshot; the snapshot waits (up to
//! [`SNAPSHOT_WAIT`]) for the view to reach it first, so that no record is pruned
//! before it is worded. Records pruned before the view existed (a log older than
//! this feature), or while it could not be written for that long, are missing from
//! it (logged).
//!
//! # Switching, as LSF does
//! Once the file holds `MAX_JOB_NUM` (lsb.params) job finishes, it becomes
//! `lsb.events.1` (the older ones `.2`, `.3`, ... up to [`textlog::SWITCHED_MAX`])
//! and the new `lsb.events` starts with the records of the jobs still unfinished
//! (a job's records stay together in the current file while it lives). Its first
//! line is LSF's `#<offset>`: the byte offset of the first record that was not
//! carried over.
//!
//! # The records
//! Each line is `"TYPE" "10.1" <event time, s> fields...` in the field order of
//! OpenLava's `lsb.events` (which LSF's readers share for these fields; the strings
//! quoted as in `lsb.acct`, [`lava_batch_ll::lsf_line`]): MBD_START, JOB_NEW,
//! JOB_START, JOB_START_ACCEPT, JOB_EXECUTE, JOB_SIGNAL, JOB_STATUS, JOB_CLEAN,
//! JOB_SWITCH, JOB_MOVE, JOB_REQUEUE, JOB_FORCE (`brun`), QUEUE_CTRL, HOST_CTRL;
//! `bkill -r`'s JOB_FORCE_EXIT is written as the JOB_STATUS EXIT it amounts to. JOB_SIGACT and
//! JOB_MODIFY2 are not written (their LSF fields are the job's state, not the
//! event's). JOB_NEW's job name is its 42nd blank-separated field when no host is
//! asked for (`-m`), where Snakemake's reader looks.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use lava_batch_ll::JobStatus;
use lava_batch_ll::acct::options_of;
use lava_batch_ll::lsf_line::LsfLine;
use lava_batch_wire as wire;
use lava_eventlog::{EventLog, Position};
use lava_mbd::Event;
use lava_mbd::event::QueueCtrlAction;

use crate::codec::EVENT_LIMITS;
use crate::textlog;

/// The text view's name, LSF's (the binary log's files only start with it).
pub const VIEW_NAME: &str = "lsb.events";
/// How far the view got: `<log position> <file length> <file inode>`.
pub const STATE_NAME: &str = "lsb.events.state";
/// The next file of a switch, written whole before it is renamed into place.
const NEXT_NAME: &str = "lsb.events.next";
/// The version field of every record.
pub const VERSION: &str = "10.1";
/// How long a snapshot waits for the view before the log prunes what it covers.
pub const SNAPSHOT_WAIT: Duration = Duration::from_secs(30);
/// Text worded per write when the view catches up on many records.
const CHUNK_BYTES: usize = 1 << 20;

/// LSF's `jStatus` bits of DONE and EXIT.
const FINISHED_BITS: [u32; 2] = [0x40, 0x20];

fn secs(ms: u64) -> i64 {
    i64::try_from(ms / 1000).unwrap_or(i64::MAX)
}

/// LSF's symbol of a signal action, as JOB_SIGNAL carries it.
fn signal_symbol(action: wire::SignalAction, requeue: bool) -> String {
    let name = match action {
        wire::SignalAction::Terminate if requeue => "KILLREQUEUE",
        wire::SignalAction::Terminate => "KILL",
        wire::SignalAction::Stop => "STOP",
        wire::SignalAction::Continue => "CONT",
        wire::SignalAction::Signal(n) => {
            let names = [
                (1, "HUP"),
                (2, "INT"),
                (3, "QUIT"),
                (9, "KILL"),
                (10, "USR1"),
                (12, "USR2"),
                (15, "TERM"),
                (18, "CONT"),
                (19, "STOP"),
                (20, "TSTP"),
            ];
            return names
                .iter()
                .find(|(number, _)| *number == n)
                .map_or_else(|| n.to_string(), |(_, s)| (*s).into());
        }
    };
    name.to_owned()
}

/// The text record of `event`, ending with `\n`; `None` for the types the view
/// does not write (see the module doc).
pub fn line(event: &Event) -> Option<String> {
    let mut text = String::with_capacity(256);
    let mut w = LsfLine(&mut text);
    let head = |w: &mut LsfLine<'_>, time_ms: u64| {
        w.s(event.name());
        w.s(VERSION);
        w.i(secs(time_ms));
    };
    match event {
        Event::MbdStart(r) => {
            head(&mut w, r.time_ms);
            w.s(&r.master_host.to_string());
            w.s(&r.cluster_name);
            w.raw("0 0"); // numHosts, numQueues: not in the event
        }
        Event::JobNew(r) => {
            let request = r.spec.request();
            let submit = secs(r.submit_time_ms);
            head(&mut w, r.submit_time_ms);
            w.i(i64::from(r.job.id()));
            w.i(i64::from(r.user_id));
            w.i(i64::from(options_of(request)));
            w.i(i64::from(r.spec.n_slots()));
            w.i(submit);
            w.i(request.begin_time);
            w.raw("0 0 0 0"); // termTime, sigValue, chkpntPeriod, restartPid
            w.s(&r.user.to_string());
            // rLimits (LSF's 11, KB and seconds), as submitted: CPU at 0, FSIZE 1, DATA 2,
            // STACK 3, CORE 4, RSS 5, SWAP 8, RUN 9, PROCESS 10 (-1 for none; no thread slot).
            let mut limits = [-1_i64; 11];
            let at = |limits: &mut [i64; 11], slot: usize, value: Option<u64>| {
                if let Some(value) = value {
                    limits[slot] = i64::try_from(value).unwrap_or(i64::MAX);
                }
            };
            at(&mut limits, 5, Some(request.mem_limit_kb).filter(|kb| *kb > 0));
            at(&mut limits, 9, Some(request.run_limit_s).filter(|s| *s > 0));
            if let Some(own) = request.limits.as_deref() {
                at(&mut limits, 0, own.cpu_s);
                at(&mut limits, 1, own.file_kb);
                at(&mut limits, 2, own.data_kb);
                at(&mut limits, 3, own.stack_kb);
                at(&mut limits, 4, own.core_kb);
                at(&mut limits, 8, own.swap_kb);
                at(&mut limits, 10, own.processes.map(u64::from));
            }
            for limit in limits {
                w.i(limit);
            }
            w.s(""); // hostSpec
            w.raw("1.00"); // hostFactor
            w.i(i64::from(request.umask));
            w.s(&r.queue.to_string());
            w.s(&request.res_req);
            w.s(&r.from_host.to_string());
            w.s(&request.cwd);
            w.s(""); // chkpntDir
            w.s(&request.input_file);
            w.s(&request.output_file);
            w.s(&request.error_file);
            w.s(&request.home_dir);
            w.s(&format!("{submit}.{}", r.job.id()));
            w.list(&request.hosts);
            w.s(&request.dependency);
            w.s(&request.pre_exec);
            w.s(&request.job_name);
            w.s(&request.command);
            w.i(0); // nxf
            w.s(""); // mailUser
            w.s(if request.project.is_empty() { "default" } else { &request.project });
            w.i(i64::from(r.spec.n_slots())); // maxNumProcessors
            w.s(""); // schedHostType
            w.s(&request.login_shell);
            w.i(0); // options2
            w.i(i64::from(r.job.index()));
            w.raw(r#""" "" "" -1"#); // inFileSpool, commandSpool, jobSpoolDir, userPriority
        }
        Event::JobStart(r) => {
            head(&mut w, r.time_ms);
            w.i(i64::from(r.job.id()));
            w.i(i64::from(JobStatus::Run.bits()));
            w.raw("0 0 1.0"); // jobPid, jobPGid (JOB_START_ACCEPT has them), hostFactor
            w.list(&r.exec_hosts.iter().map(ToString::to_string).collect::<Vec<_>>());
            w.raw(r#""" "" 0"#); // queuePreCmd, queuePostCmd, jFlags
            w.i(i64::from(r.job.index()));
        }
        Event::JobStartAccept(r) => {
            head(&mut w, r.time_ms);
            for n in [i64::from(r.job.id()), i64::from(r.pid), i64::from(r.pgid), i64::from(r.job.index())] {
                w.i(n);
            }
        }
        Event::JobExecute(r) => {
            head(&mut w, r.time_ms);
            w.i(i64::from(r.job.id()));
            w.i(i64::from(r.exec.exec_uid));
            w.i(i64::from(r.exec.pgid));
            w.s(&r.exec.exec_cwd);
            w.s(&r.exec.exec_home);
            w.s(&r.exec.exec_user);
            w.i(i64::from(r.exec.pid));
            w.i(i64::from(r.job.index()));
        }
        Event::JobSignal(r) => {
            head(&mut w, r.time_ms);
            w.i(i64::from(r.job.id()));
            w.i(i64::from(r.requester_uid));
            w.i(0); // runCount
            w.s(&signal_symbol(r.action, r.requeue_hold.is_some()));
            w.i(i64::from(r.job.index()));
            w.s(&r.requester.to_string());
        }
        Event::JobStatus(r) => {
            head(&mut w, r.time_ms);
            w.i(i64::from(r.job.id()));
            w.i(i64::from(r.status.bits()));
            w.raw("0 0"); // reason, subreasons
            match &r.finish {
                Some(finish) => {
                    let ru = &finish.rusage;
                    let (utime, stime) = (ru.user_time_ms as f64 / 1000.0, ru.system_time_ms as f64 / 1000.0);
                    w.raw(&format!("{:.4}", utime + stime));
                    w.i(secs(finish.end_time_ms));
                    w.i(1); // ru: the usage follows
                    w.raw(&format!("{utime:.6} {stime:.6} {:.0}", ru.max_rss_kb as f64));
                    for _ in 0..16 {
                        w.raw("-1");
                    }
                    w.i(i64::from(finish.wait_status));
                }
                None => w.raw("0.0000 0 0 0"), // cpuTime, endTime, ru, exitStatus
            }
            w.i(i64::from(r.job.index()));
        }
        Event::JobClean(r) => {
            head(&mut w, r.time_ms);
            w.i(i64::from(r.job.id()));
            w.i(i64::from(r.job.index()));
        }
        Event::JobSwitch(r) => {
            head(&mut w, r.time_ms);
            w.raw("-1"); // userId: the event names the user only
            w.i(i64::from(r.job.id()));
            w.s(&r.queue.to_string());
            w.i(i64::from(r.job.index()));
            w.s(&r.requester.to_string());
        }
        Event::JobMove(r) => {
            head(&mut w, r.time_ms);
            w.raw("-1");
            w.i(i64::from(r.job.id()));
            w.i(i64::from(r.position));
            w.i(if r.to_top { 1 } else { 2 }); // LSF's TO_TOP, TO_BOTTOM
            w.i(i64::from(r.job.index()));
            w.s(&r.requester.to_string());
        }
        Event::JobRequeue(r) => {
            head(&mut w, r.time_ms);
            w.i(i64::from(r.job.id()));
            w.i(i64::from(r.job.index()));
        }
        Event::QueueCtrl(r) => {
            head(&mut w, r.time_ms);
            w.i(match r.action {
                QueueCtrlAction::Open => 1,
                QueueCtrlAction::Close => 2,
                QueueCtrlAction::Activate => 3,
                QueueCtrlAction::Inactivate => 4,
            });
            w.s(&r.queue.to_string());
            w.raw("-1");
            w.s(&r.requester.to_string());
        }
        Event::HostCtrl(r) => {
            head(&mut w, r.time_ms);
            w.i(if r.open { 1 } else { 2 }); // LSF's HOST_OPEN, HOST_CLOSE
            w.s(&r.host.to_string());
            w.raw("-1");
            w.s(&r.requester.to_string());
        }
        Event::JobForce(r) => {
            // OpenLava's jobForceRequestLog: jobId, the execution hosts, options,
            // userId (the event names the user only), idx, userName.
            head(&mut w, r.time_ms);
            w.i(i64::from(r.job.id()));
            w.list(&r.exec_hosts.iter().map(ToString::to_string).collect::<Vec<_>>());
            w.raw("0 -1"); // options (RUNJOB_OPT_NORMAL), userId
            w.i(i64::from(r.job.index()));
            w.s(&r.requester.to_string());
        }
        // LSF's readers know a forced exit as the job's JOB_STATUS EXIT.
        Event::JobForceExit(r) => {
            return line(&Event::JobStatus(lava_mbd::event::JobStatusRecord {
                job: r.job,
                status: JobStatus::Exit,
                reason: String::new(),
                time_ms: r.time_ms,
                finish: Some(r.finish.clone()),
            }));
        }
        Event::JobSigact(_) | Event::JobModify(_) => return None,
    }
    text.push('\n');
    Some(text)
}

/// What a record line means for the records carried over at a switch.
#[derive(Debug, PartialEq, Eq)]
enum Fate {
    /// The line is about job `.0`, which still lives.
    Lives(u32),
    /// The line ends job `.0` (its finish, or its clean): its lines are not carried.
    Ends(u32),
    /// The line is about no job.
    NoJob,
}

/// The fate of a record line (see [`Fate`]), read from its first blank-separated
/// fields (none of which is a string with a blank in the types it reads).
fn fate(line: &str) -> Fate {
    let mut fields = line.split_whitespace();
    let kind = fields.next().map(|k| k.trim_matches('"')).unwrap_or_default();
    let job_at = match kind {
        "JOB_SWITCH" | "JOB_MOVE" => 4,
        "MBD_START" | "QUEUE_CTRL" | "HOST_CTRL" | "" => return Fate::NoJob,
        _ => 3,
    };
    let Some(job) = fields.nth(job_at - 1).and_then(|id| id.parse().ok()) else { return Fate::NoJob };
    let finished = kind == "JOB_STATUS"
        && fields.next().and_then(|s| s.parse::<u32>().ok()).is_some_and(|s| FINISHED_BITS.contains(&s))
        && fields.next_back() == Some("0");
    if finished || kind == "JOB_CLEAN" { Fate::Ends(job) } else { Fate::Lives(job) }
}

fn is_finish(line: &str) -> bool {
    let mut fields = line.split_whitespace();
    fields.next() == Some("\"JOB_STATUS\"")
        && fields.nth(3).and_then(|s| s.parse::<u32>().ok()).is_some_and(|s| FINISHED_BITS.contains(&s))
}

/// How far the view got, shared with the snapshot that waits for it.
#[derive(Debug, Default)]
pub struct Progress {
    reached: Mutex<u64>,
    moved: Condvar,
}

impl Progress {
    fn set(&self, position: u64) {
        let mut reached = self.reached.lock().unwrap_or_else(|poison| poison.into_inner());
        *reached = position;
        self.moved.notify_all();
    }

    /// The last log position the view holds.
    pub fn reached(&self) -> u64 {
        *self.reached.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    /// Waits until the view holds position `position`, at most `timeout`; whether it does.
    pub fn wait_for(&self, position: u64, timeout: Duration) -> bool {
        let reached = self.reached.lock().unwrap_or_else(|poison| poison.into_inner());
        let (reached, _) = self
            .moved
            .wait_timeout_while(reached, timeout, |reached| *reached < position)
            .unwrap_or_else(|poison| poison.into_inner());
        *reached >= position
    }
}

/// The line of the event at a log position, worded by the loop (`None`: a type the view
/// does not write).
type Worded = (u64, Option<String>);

/// What the loop tells the writer: the log is durable through `durable`, and the lines it
/// worded of positions up to there.
#[derive(Debug)]
struct Told {
    durable: u64,
    lines: Vec<Worded>,
}

/// Worded lines handed to the writer and not yet written, in bytes, beyond which the loop
/// stops wording (the writer is behind, the disk refusing it): the writer reads those
/// events back from the log instead, and the memory stays bounded.
pub const FEED_BYTES_MAX: usize = 8 << 20;

fn bytes_of(lines: &[Worded]) -> usize {
    lines.iter().map(|(_, line)| line.as_ref().map_or(0, String::len)).sum()
}

/// The loop's end of the view's writer thread.
#[derive(Debug)]
pub struct EventsView {
    told_to: Option<mpsc::Sender<Told>>,
    told: u64,
    /// Lines worded of positions not yet durable, in position order.
    worded: Vec<Worded>,
    worded_bytes: usize,
    /// Bytes of lines handed to the writer and not yet taken out of its queue.
    handed: Arc<AtomicUsize>,
    progress: Arc<Progress>,
    thread: Option<JoinHandle<()>>,
}

impl EventsView {
    /// Opens the view in `dir` (cutting back what its state does not cover, see the
    /// module doc) and starts its writer on `log`; it switches after `max_job_num`
    /// finishes.
    pub fn start(dir: PathBuf, log: Arc<EventLog>, max_job_num: u32) -> io::Result<EventsView> {
        let progress = Arc::new(Progress::default());
        let handed = Arc::new(AtomicUsize::new(0));
        let mut writer = Writer::open(dir, log, max_job_num, Arc::clone(&progress), Arc::clone(&handed))?;
        let (told_to, receiver) = mpsc::channel();
        let thread = std::thread::Builder::new().name("lsb.events view".into()).spawn(move || {
            textlog::serve("the lsb.events text view", &receiver, |told| writer.catch_up(told))
        })?;
        Ok(EventsView {
            told_to: Some(told_to),
            told: 0,
            worded: Vec::new(),
            worded_bytes: 0,
            handed,
            progress,
            thread: Some(thread),
        })
    }

    /// How far the view got, for the snapshot to wait on.
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// Whether the loop should word the events it appends now ([`EventsView::worded`]):
    /// not while [`FEED_BYTES_MAX`] of lines wait for the writer.
    pub fn wants_lines(&self) -> bool {
        self.told_to.is_some() && self.worded_bytes + self.handed.load(Ordering::Relaxed) < FEED_BYTES_MAX
    }

    /// The event appended at log position `position` words as `line` ([`line`]): the
    /// writer takes the line instead of reading the event back. Positions come in order;
    /// one not given is read back.
    pub fn worded(&mut self, position: u64, line: Option<String>) {
        if self.worded.last().is_some_and(|(last, _)| *last >= position) {
            // Not after the last one (a log that started again): those are read back.
            self.worded_bytes = 0;
            self.worded.clear();
        }
        self.worded_bytes += line.as_ref().map_or(0, String::len);
        self.worded.push((position, line));
    }

    /// Every log position up to `position` is durable: the writer may word them.
    pub fn durable(&mut self, position: u64) {
        if position <= self.told {
            return;
        }
        self.told = position;
        let ready = self.worded.partition_point(|(at, _)| *at <= position);
        let lines: Vec<Worded> = self.worded.drain(..ready).collect();
        let bytes = bytes_of(&lines);
        self.worded_bytes -= bytes;
        self.handed.fetch_add(bytes, Ordering::Relaxed);
        if let Some(told_to) = &self.told_to
            && told_to.send(Told { durable: position, lines }).is_err()
        {
            tracing::error!("the lsb.events view writer is gone: records are left to the next start");
        }
    }

    /// Lets the writer word what it was told and waits for it (a clean stop).
    pub fn close(mut self) {
        drop(self.told_to.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the lsb.events view writer panicked");
        }
    }
}

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    log: Arc<EventLog>,
    max_job_num: u32,
    progress: Arc<Progress>,
    /// The last log position worded into the view (0: none).
    reached: u64,
    /// The current file's length and inode.
    length: u64,
    inode: u64,
    /// Where the current file's lines of jobs still alive are, carried over at a
    /// switch: (job id, byte offset in the file) → the line's length, newline included.
    /// Only where they are: the switch reads them back from the file. Holding the lines
    /// themselves cost mbatchd a JOB_NEW line per pending job (a third of its memory
    /// with a million pending jobs, docs/benchmarks.md).
    carry: BTreeMap<(u32, u64), u32>,
    /// Job finishes in the current file.
    finishes: u32,
    /// Where the last catch-up stopped reading the log: the next one reads on from
    /// there, not from the start of the segment (lava-eventlog's `replay_after`).
    resume: Option<lava_eventlog::ResumePoint>,
    /// The log is durable through this position.
    durable: u64,
    /// Lines the loop worded, in position order, not yet written.
    fed: VecDeque<Worded>,
    /// The loop's count of the bytes in `fed` (and on their way).
    handed: Arc<AtomicUsize>,
}

fn other(error: impl std::fmt::Display) -> io::Error {
    io::Error::other(error.to_string())
}

/// `#<offset>` for a file whose carried-over records take `carried` bytes.
fn header(carried: usize) -> String {
    let mut offset = carried + 3;
    loop {
        let line = format!("#{offset}\n");
        if line.len() + carried == offset {
            return line;
        }
        offset = line.len() + carried;
    }
}

impl Writer {
    fn open(
        dir: PathBuf,
        log: Arc<EventLog>,
        max_job_num: u32,
        progress: Arc<Progress>,
        handed: Arc<AtomicUsize>,
    ) -> io::Result<Writer> {
        let view = textlog::path(&dir, VIEW_NAME, 0);
        let next = dir.join(NEXT_NAME);
        let state = read_state(&dir.join(STATE_NAME))?;
        let mut reached = 0;
        let log_end = log.stats().next_position.0.saturating_sub(1);
        let state = match state {
            Some((position, ..)) if position > log_end => {
                tracing::warn!(
                    position,
                    log_end,
                    "lsb.events.state is ahead of the event log (another log?): the view starts anew"
                );
                fs::remove_file(dir.join(STATE_NAME))?;
                None
            }
            state => state,
        };
        match (state, fs::metadata(&view)) {
            (Some((position, length, inode)), Ok(meta)) => {
                reached = position;
                if meta.ino() == inode && meta.len() > length {
                    tracing::info!(
                        cut = meta.len() - length,
                        "the lsb.events view held bytes beyond its state (a stop before the state): cut back"
                    );
                    OpenOptions::new().write(true).open(&view)?.set_len(length)?;
                }
                if next.exists() {
                    fs::remove_file(&next)?;
                }
            }
            (Some((position, ..)), Err(_)) => {
                reached = position;
                if next.exists() {
                    // A switch stopped between its two renames: finish it.
                    fs::rename(&next, &view)?;
                }
            }
            (None, Ok(_)) => {
                tracing::warn!(
                    "lsb.events is there without lsb.events.state: switched aside, the view starts anew"
                );
                textlog::switch(&dir, VIEW_NAME, None)?;
            }
            (None, Err(_)) => {}
        }
        let mut writer = Writer {
            dir,
            log,
            max_job_num: max_job_num.max(1),
            progress,
            reached,
            length: 0,
            inode: 0,
            carry: BTreeMap::new(),
            finishes: 0,
            resume: None,
            durable: 0,
            fed: VecDeque::new(),
            handed,
        };
        match File::open(&view) {
            Ok(file) => {
                // Read line by line: the file holds every living job's records, and
                // reading it whole would leave that much freed memory behind.
                let mut reader = io::BufReader::with_capacity(CHUNK_BYTES, file);
                let (mut bytes, mut offset) = (Vec::new(), 0u64);
                loop {
                    bytes.clear();
                    let n = reader.read_until(b'\n', &mut bytes)?;
                    if n == 0 {
                        break;
                    }
                    let line = String::from_utf8_lossy(&bytes);
                    // A last line without its newline (a file not written here) is not
                    // carried over.
                    if !line.starts_with('#') && !line.trim().is_empty() && line.ends_with('\n') {
                        writer.note(&line, offset, n);
                    }
                    offset += n as u64;
                }
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                textlog::append_durably(&view, &header(0))?;
                File::open(&writer.dir)?.sync_all()?;
            }
            Err(error) => return Err(error),
        }
        let meta = fs::metadata(&view)?;
        (writer.length, writer.inode) = (meta.len(), meta.ino());
        writer.save_state()?;
        writer.progress.set(writer.reached);
        Ok(writer)
    }

    /// Counts `line`, `length` bytes at byte `offset` of the current file: carried
    /// while its job lives, a finish.
    fn note(&mut self, line: &str, offset: u64, length: usize) {
        if is_finish(line) {
            self.finishes += 1;
        }
        match fate(line) {
            Fate::Lives(job) => {
                let length = u32::try_from(length).expect("a record line is shorter than 4 GiB");
                self.carry.insert((job, offset), length);
            }
            Fate::Ends(job) => {
                let lines: Vec<(u32, u64)> =
                    self.carry.range((job, 0)..=(job, u64::MAX)).map(|(key, _)| *key).collect();
                for key in lines {
                    self.carry.remove(&key);
                }
            }
            Fate::NoJob => {}
        }
    }

    fn save_state(&self) -> io::Result<()> {
        let mut text = format!("{} {} {}", self.reached, self.length, self.inode);
        text.extend(std::iter::repeat_n(' ', 63usize.saturating_sub(text.len())));
        text.push('\n');
        let file =
            OpenOptions::new().write(true).create(true).truncate(false).open(self.dir.join(STATE_NAME))?;
        file.write_all_at(text.as_bytes(), 0)?;
        file.sync_data()
    }

    /// Words every record up to the newest durable position the loop told into the view:
    /// the lines it handed over where they follow on, the others read back from the log.
    /// The lines are taken out of `told` at once, so a failed write keeps them here.
    fn catch_up(&mut self, told: &mut Vec<Told>) -> io::Result<()> {
        for Told { durable, lines } in told.drain(..) {
            self.durable = self.durable.max(durable);
            self.fed.extend(lines);
        }
        while self.reached < self.durable {
            while self.fed.front().is_some_and(|(at, _)| *at <= self.reached) {
                self.take_fed();
            }
            let next = self.reached + 1;
            let before = self.reached;
            match self.fed.front() {
                Some((at, _)) if *at == next => self.write_fed()?,
                front => {
                    let until = front.map_or(self.durable, |(at, _)| (at - 1).min(self.durable));
                    self.read_back(until)?;
                }
            }
            if self.reached == before {
                // The log holds nothing more through `durable` (nothing to word).
                break;
            }
        }
        Ok(())
    }

    /// Takes the first line of `fed` out of the loop's count.
    fn take_fed(&mut self) -> Option<Worded> {
        let worded = self.fed.pop_front()?;
        self.handed.fetch_sub(worded.1.as_ref().map_or(0, String::len), Ordering::Relaxed);
        Some(worded)
    }

    /// Writes the handed lines that follow on from `reached`, through `durable`.
    fn write_fed(&mut self) -> io::Result<()> {
        let mut chunk = String::new();
        let mut last = self.reached;
        while self.fed.front().is_some_and(|(at, _)| *at == last + 1 && *at <= self.durable) {
            let (at, line) = self.take_fed().expect("checked just above");
            if let Some(line) = line {
                chunk.push_str(&line);
            }
            last = at;
            if chunk.len() >= CHUNK_BYTES {
                self.write(&chunk, last)?;
                chunk.clear();
            }
        }
        self.write(&chunk, last)
    }

    /// Reads the records after `reached` back from the log and words them, through `until`.
    fn read_back(&mut self, until: u64) -> io::Result<()> {
        let from = Position(self.reached + 1);
        let read = match self.resume.take().filter(|point| point.position == from) {
            Some(point) => self.log.replay_after(point),
            None => self.log.replay_from(from),
        };
        let mut records = match read {
            Err(lava_eventlog::Error::Pruned { first_available, .. }) => {
                tracing::error!(
                    from = from.0,
                    first_available = first_available.0,
                    "the lsb.events view misses records the event log pruned before it could word them"
                );
                self.log.replay_from(first_available)
            }
            other => other,
        }
        .map_err(other)?;
        let mut chunk = String::new();
        let mut last = self.reached;
        let resume;
        loop {
            let before = records.resume_point();
            let Some(record) = records.next() else {
                resume = records.resume_point();
                break;
            };
            let (position, payload) = record.map_err(other)?;
            if position.0 > until {
                // Not durable yet, or handed over: the next catch-up starts with it.
                resume = before;
                break;
            }
            let event: Event = lava_xdr::from_bytes(&payload, &EVENT_LIMITS).map_err(|error| {
                other(format!("event log record {} does not decode: {error}", position.0))
            })?;
            if let Some(line) = line(&event) {
                chunk.push_str(&line);
            }
            last = position.0;
            if chunk.len() >= CHUNK_BYTES {
                self.write(&chunk, last)?;
                chunk.clear();
            }
        }
        self.write(&chunk, last)?;
        self.resume = resume;
        Ok(())
    }

    /// Appends `chunk` (the records through position `last`), records the state,
    /// and switches if the file holds `MAX_JOB_NUM` finishes.
    fn write(&mut self, chunk: &str, last: u64) -> io::Result<()> {
        if last <= self.reached {
            return Ok(());
        }
        let mut offset = self.length;
        if !chunk.is_empty() {
            self.length = textlog::append_durably(&textlog::path(&self.dir, VIEW_NAME, 0), chunk)?;
        }
        self.reached = last;
        self.save_state()?;
        for line in chunk.split_inclusive('\n') {
            self.note(line, offset, line.len());
            offset += line.len() as u64;
        }
        self.progress.set(self.reached);
        if self.finishes >= self.max_job_num {
            self.switch()?;
        }
        Ok(())
    }

    /// `lsb.events` → `lsb.events.1`; the new file holds the living jobs' records.
    fn switch(&mut self) -> io::Result<()> {
        let view = textlog::path(&self.dir, VIEW_NAME, 0);
        let next = self.dir.join(NEXT_NAME);
        let _ = fs::remove_file(&next);
        // The carried lines are copied from the current file into the next one, job by
        // job, and their new places noted.
        let carried_bytes: u64 = self.carry.values().map(|length| u64::from(*length)).sum();
        let head = header(usize::try_from(carried_bytes).map_err(other)?);
        let moved = {
            let current = File::open(&view)?;
            let file = OpenOptions::new().write(true).create_new(true).open(&next)?;
            let mut out = io::BufWriter::with_capacity(CHUNK_BYTES, &file);
            out.write_all(head.as_bytes())?;
            let mut offset = head.len() as u64;
            let mut line = Vec::new();
            let mut moved = BTreeMap::new();
            for (&(job, at), &length) in &self.carry {
                line.resize(length as usize, 0);
                current.read_exact_at(&mut line, at)?;
                out.write_all(&line)?;
                moved.insert((job, offset), length);
                offset += u64::from(length);
            }
            out.flush()?;
            drop(out);
            file.sync_data()?;
            moved
        };
        textlog::switch(&self.dir, VIEW_NAME, None)?;
        fs::rename(&next, &view)?;
        self.carry = moved;
        File::open(&self.dir)?.sync_all()?;
        let meta = fs::metadata(&view)?;
        (self.length, self.inode) = (meta.len(), meta.ino());
        self.save_state()?;
        self.finishes = 0;
        tracing::info!(dir = %self.dir.display(), carried_lines = self.carry.len(), "lsb.events view switched to lsb.events.1");
        Ok(())
    }
}

/// `lsb.events.state`: `None` when missing.
fn read_state(path: &Path) -> io::Result<Option<(u64, u64, u64)>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let numbers: Vec<u64> = text.split_whitespace().filter_map(|word| word.parse().ok()).collect();
    match numbers[..] {
        [position, length, inode] => Ok(Some((position, length, inode))),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not `<position> <length> <inode>`: {text:?}", path.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use lava_batch_ll::{HostName, JobRef, QueueName, SubmitSpec, UserName};
    use lava_mbd::event::{FinishRecord, JobNewRecord, JobStatusRecord};

    /// Fields as Snakemake's awk program takes them: quoted strings whole.
    fn fields(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = line.trim_end_matches('\n');
        while !rest.is_empty() {
            rest = rest.trim_start_matches(' ');
            let end = match rest.strip_prefix('"').and_then(|body| body.find('"')) {
                Some(close) => close + 2,
                None => rest.find(' ').unwrap_or(rest.len()),
            };
            out.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
        out
    }

    fn job_new() -> Event {
        let request = wire::SubmitRequest {
            command: "echo hi".into(),
            job_name: "Snakemake_rule_a___(uuid-1)".into(),
            cwd: "/home/alice/a b".into(),
            home_dir: "/home/alice".into(),
            output_file: "out.%J".into(),
            res_req: "rusage[mem=100] span[hosts=1]".into(),
            run_limit_s: 600,
            n_slots: 2,
            umask: 0o22,
            from_host: "h1".into(),
            ..wire::SubmitRequest::default()
        };
        Event::JobNew(Box::new(JobNewRecord {
            job: JobRef::new(7, 0).expect("a job"),
            request_id: wire::RequestId { high: 1, low: 2 },
            user_id: 1000,
            group_id: 100,
            user: UserName::parse("user", "alice").expect("user"),
            from_host: HostName::parse("host", "h1").expect("host"),
            queue: QueueName::parse("queue", "normal").expect("queue"),
            submit_time_ms: 1_700_000_000_500,
            hold: false,
            spec: SubmitSpec::try_from(request).expect("a valid submission"),
        }))
    }

    #[test]
    fn job_new_in_openlavas_field_order() {
        // Goal: JOB_NEW's fields where LSF's readers take them: job id 4th, user id 5th,
        // options (-J, -o, -R, project), the 11 limits (run limit at 10th of them), queue, resReq, cwd, and the job name
        // 42nd (Snakemake's awk program), the command after it.
        let text = line(&job_new()).expect("written");
        let f = fields(&text);
        assert_eq!(
            &f[..8],
            ["\"JOB_NEW\"", "\"10.1\"", "1700000000", "7", "1000", "33816593", "2", "1700000000"]
        );
        assert_eq!(f[13], "\"alice\"");
        assert_eq!(f[14..25].iter().filter(|l| *l == "-1").count(), 10);
        assert_eq!(f[23], "600", "RUN limit, seconds");
        assert_eq!((f[26].as_str(), f[27].as_str(), f[28].as_str()), ("1.00", "18", "\"normal\""));
        assert_eq!(f[29], "\"rusage[mem=100] span[hosts=1]\"");
        assert_eq!(f[31], "\"/home/alice/a b\"");
        assert_eq!(f[34], "\"out.%J\"");
        assert_eq!(f[37], "\"1700000000.7\"", "jobFile");
        assert_eq!(f[41], "\"Snakemake_rule_a___(uuid-1)\"", "jobName, $42");
        assert_eq!(f[42], "\"echo hi\"");
        assert_eq!(f.len(), 55, "{text}");
        assert!(text.ends_with(" 0 0 \"\" \"\" \"\" -1\n"), "{text}");
        // The job's own limits in LSF's slots: CPU 0, FSIZE 1, DATA 2, STACK 3, CORE 4, SWAP 8,
        // PROCESS 10 (a thread limit has none).
        let Event::JobNew(mut record) = job_new() else { unreachable!("a JOB_NEW") };
        let mut request = record.spec.request().clone();
        request.limits = Some(Box::new(wire::ResourceLimits {
            cpu_s: Some(60),
            file_kb: Some(1),
            data_kb: Some(2),
            stack_kb: Some(3),
            core_kb: Some(0),
            swap_kb: Some(5),
            processes: Some(6),
            threads: Some(7),
        }));
        record.spec = SubmitSpec::try_from(request).expect("valid");
        let text = line(&Event::JobNew(record)).expect("written");
        assert_eq!(
            fields(&text)[14..25],
            ["60", "1", "2", "3", "0", "-1", "-1", "-1", "5", "600", "6"],
            "{text}"
        );
    }

    #[test]
    fn brun_and_bkill_r_records() {
        // Goal: brun's JOB_FORCE in OpenLava's field order (job, hosts, options, user
        // id, index, user); bkill -r's JOB_FORCE_EXIT as the JOB_STATUS EXIT that ends
        // the job for a switch.
        let job = JobRef::new(9, 0).expect("a job");
        let force = lava_mbd::event::JobForceRecord {
            job,
            exec_hosts: vec![lava_batch_ll::HostName::parse("host", "h1").expect("a host")],
            request_id: wire::RequestId { high: 1, low: 2 },
            requester: lava_batch_ll::UserName::parse("user", "root").expect("a user"),
            time_ms: 1_700_000_099_000,
        };
        assert_eq!(
            line(&Event::JobForce(force)).expect("written"),
            "\"JOB_FORCE\" \"10.1\" 1700000099 9 1 \"h1\" 0 -1 0 \"root\"\n"
        );
        let finish = FinishRecord {
            wait_status: 9,
            finish_reason: wire::FINISH_FORCE_ADMIN,
            end_time_ms: 1_700_000_099_000,
            rusage: wire::ResourceUsage::default(),
            pid: 42,
        };
        let exit = lava_mbd::event::JobForceExitRecord {
            job,
            signal_seq: 1,
            requester_uid: 0,
            requester: lava_batch_ll::UserName::parse("user", "root").expect("a user"),
            request_id: wire::RequestId { high: 1, low: 3 },
            finish,
            time_ms: 1_700_000_099_000,
        };
        let text = line(&Event::JobForceExit(exit)).expect("written");
        assert!(text.starts_with("\"JOB_STATUS\" \"10.1\" 1700000099 9 32 "), "{text}");
        assert_eq!(fate(&text), Fate::Ends(9));
    }

    #[test]
    fn job_status_of_a_finish_carries_the_usage() {
        // Goal: a finish's JOB_STATUS: status 32, cpu time, end time, ru 1 and LSF's 19
        // usage figures, the wait status, the index; a RUN status carries none.
        let job = JobRef::new(9, 3).expect("an element");
        let finish = FinishRecord {
            wait_status: 3 << 8,
            finish_reason: 0,
            end_time_ms: 1_700_000_100_000,
            rusage: wire::ResourceUsage { user_time_ms: 1500, system_time_ms: 250, max_rss_kb: 2048 },
            pid: 42,
        };
        let status = |status, finish| {
            line(&Event::JobStatus(JobStatusRecord {
                job,
                status,
                reason: String::new(),
                time_ms: 1_700_000_099_000,
                finish,
            }))
            .expect("written")
        };
        assert_eq!(
            status(JobStatus::Exit, Some(finish.clone())),
            "\"JOB_STATUS\" \"10.1\" 1700000099 9 32 0 0 1.7500 1700000100 1 1.500000 0.250000 2048 \
             -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 768 3\n"
        );
        assert_eq!(
            status(JobStatus::Run, None),
            "\"JOB_STATUS\" \"10.1\" 1700000099 9 4 0 0 0.0000 0 0 0 3\n"
        );
        assert_eq!(
            fate(&status(JobStatus::Exit, Some(finish.clone()))),
            Fate::Lives(9),
            "an element's finish"
        );
        assert_eq!(fate(&status(JobStatus::Run, None)), Fate::Lives(9));
        assert!(is_finish(&status(JobStatus::Exit, Some(finish))));
    }

    /// The view `EventsView` writes of `events` (each appended to a fresh log at positions
    /// 1, 2, ...) when the loop hands it the lines `hand` gives (position → line), made
    /// durable in two steps.
    fn view_of(events: &[Event], hand: impl Fn(u64, &Event) -> Option<Option<String>>) -> String {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = crate::journal::open(dir.path()).expect("a log");
        for event in events {
            log.append(&crate::codec::encode(event)).expect("appends");
        }
        log.sync().expect("durable");
        let mut view = EventsView::start(dir.path().to_owned(), Arc::clone(&log), 1000).expect("starts");
        for (at, event) in (1..).zip(events) {
            if let Some(line) = hand(at, event) {
                assert!(view.wants_lines());
                view.worded(at, line);
            }
        }
        view.durable(2);
        assert!(view.progress().wait_for(2, Duration::from_secs(10)), "the writer words what is durable");
        view.durable(events.len() as u64);
        view.close();
        fs::read_to_string(dir.path().join(VIEW_NAME)).expect("the view")
    }

    #[test]
    fn handed_lines_and_lines_read_back_make_one_view() {
        // Goal: the lines the loop hands over are written at their positions, positions
        // without one (gaps, at the start, in the middle, at the end) are read back from
        // the log, and the file is the one a view that read every record back writes.
        // Method: the same log with every pattern of hand-overs; one handed line differs
        // from its event's, to see that it, and not a read-back, is what was written.
        let clean = Event::JobClean(lava_mbd::event::JobCleanRecord {
            job: JobRef::new(7, 0).expect("a job"),
            time_ms: 1_700_000_002_000,
        });
        let run = Event::JobStatus(JobStatusRecord {
            job: JobRef::new(7, 0).expect("a job"),
            status: JobStatus::Run,
            reason: String::new(),
            time_ms: 1_700_000_001_000,
            finish: None,
        });
        let events = [job_new(), run.clone(), job_new(), clean, run];
        let read_back = view_of(&events, |_, _| None);
        assert_eq!(read_back.lines().count(), 1 + events.len(), "{read_back}");
        for handed in [&[1, 2, 3, 4, 5][..], &[1, 2, 4, 5], &[2, 5], &[3], &[1]] {
            let view = view_of(&events, |at, event| handed.contains(&at).then(|| line(event)));
            assert_eq!(view, read_back, "lines handed at {handed:?}");
        }
        let marked = view_of(&events, |at, event| match at {
            4 => Some(Some("\"JOB_CLEAN\" \"10.1\" 1 99 0\n".to_owned())),
            3 => None,
            _ => Some(line(event)),
        });
        let mut want: Vec<&str> = read_back.split_inclusive('\n').collect();
        want[4] = "\"JOB_CLEAN\" \"10.1\" 1 99 0\n";
        assert_eq!(marked, want.concat(), "the handed line is the one written");
    }

    #[test]
    fn the_lines_waiting_for_the_writer_are_bounded() {
        // Goal: the loop stops wording once FEED_BYTES_MAX of lines wait for the writer (it
        // reads those events back instead), and words again once the writer took them.
        let dir = tempfile::tempdir().expect("tempdir");
        let log = crate::journal::open(dir.path()).expect("a log");
        for event in [job_new(), job_new()] {
            log.append(&crate::codec::encode(&event)).expect("appends");
        }
        log.sync().expect("durable");
        let mut view = EventsView::start(dir.path().to_owned(), Arc::clone(&log), 1000).expect("starts");
        let half = format!("{}\n", "x".repeat(FEED_BYTES_MAX / 2));
        assert!(view.wants_lines());
        view.worded(1, Some(half.clone()));
        assert!(view.wants_lines(), "half the bound waits");
        view.worded(2, Some(half));
        assert!(!view.wants_lines(), "the bound waits: not worded, read back");
        view.durable(2);
        assert!(view.progress().wait_for(2, Duration::from_secs(10)), "the writer takes them");
        assert!(view.wants_lines(), "taken: worded again");
        view.close();
        let text = fs::read_to_string(dir.path().join(VIEW_NAME)).expect("the view");
        assert_eq!(text.len(), "#3\n".len() + FEED_BYTES_MAX + 2, "the handed lines, written");
    }

    #[test]
    fn fates_and_headers() {
        // Goal: the carried-over bookkeeping reads each type's job id where it is, a
        // finish or a clean ends the job; the header names its own end plus the carried bytes.
        assert_eq!(fate("\"JOB_STATUS\" \"10.1\" 1 5 64 0 0 0.0 1 0 0 0"), Fate::Ends(5));
        assert_eq!(fate("\"JOB_CLEAN\" \"10.1\" 1 5 2"), Fate::Ends(5));
        assert_eq!(fate("\"JOB_SWITCH\" \"10.1\" 1 -1 6 \"q\" 0 \"u\""), Fate::Lives(6));
        assert_eq!(fate("\"MBD_START\" \"10.1\" 1 \"h\" \"c\" 0 0"), Fate::NoJob);
        assert_eq!(header(0), "#3\n");
        assert_eq!(header(100), "#105\n");
        assert_eq!(header(996), "#1002\n");
    }
}
