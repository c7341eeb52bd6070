//! `lsb.acct`'s JOB_FINISH record: one line per finished job in LSF's text format,
//! written by mbatchd and read by `bacct` and by sites' accounting scripts.
//!
//! # The line
//! Fields are separated by one blank. A string is written in double quotes, a quote
//! inside it doubled (`say "hi"` is `"say ""hi"""`), a newline replaced by a blank (one
//! record per line); an unavailable string is `""`. Numbers are bare: integers in
//! decimal, times in seconds since the epoch (0 when unavailable), the host factor as
//! `%3.1f`, the user and system CPU times as `%1.6f` and the other resource usage
//! figures as `%1.0f`, `-1` when unavailable (LSF's rules, `lsb.acct(5)`).
//!
//! The fields, in order (LSF 10.1's documented list; the first 44 are also OpenLava's):
//!
//! | # | field | LavaCore writes |
//! |---|---|---|
//! | 1-3 | `"JOB_FINISH"`, version `"10.1"`, event time | the job's end time |
//! | 4-11 | jobId, userId, options, numProcessors, submitTime, beginTime, termTime, startTime | `options`: LSF's `SUB_*` bits of what was asked ([`options_of`]); termTime 0 |
//! | 12-22 | userName, queue, resReq, dependCond, preExecCmd, fromHost, cwd, inFile, outFile, errFile, jobFile | jobFile `<submit time>.<job id>` |
//! | | numAskedHosts, askedHosts... | `-m` |
//! | | numExHosts, execHosts... | one entry per slot |
//! | | jStatus, hostFactor, jobName, command | 64 DONE / 32 EXIT; 1.0 |
//! | | lsfRusage (19): ru_utime, ru_stime, ru_maxrss, ru_ixrss, ru_ismrss, ru_idrss, ru_isrss, ru_minflt, ru_majflt, ru_nswap, ru_inblock, ru_oublock, ru_ioch, ru_msgsnd, ru_msgrcv, ru_nsignals, ru_nvcsw, ru_nivcsw, ru_exutime | the shepherd's user and system time (s) and max RSS (KB); -1 for the rest, and for all of them when the job never ran |
//! | | mailUser, projectName, exitStatus, maxNumProcessors, loginShell, timeEvent, idx, maxRMem, maxRSwap, inFileSpool, commandSpool | exitStatus: the raw wait status; maxRMem: max RSS (KB); maxRSwap 0 |
//! | | rsvId, sla, exceptMask, additionalInfo, exitInfo, warningAction, warningTimePeriod, chargedSAAP, licenseProject, app, postExecCmd, runtimeEstimation, jgroup, userGroup, options2, requeueEValues, lastResizeTime, jobDescription, notifyCmd | exitInfo: LSF's termination reason of an EXIT ([`TermReason`]: 14 `TERM_OWNER` for a `bkill` by the job's owner, 15 `TERM_ADMIN` by root or an administrator, 8 and 9 for `bkill -r`, 5 and 16 for the run and memory limits), 0 for a job that ended on its own; the others `""`, 0, `-1` as LSF 10.1 writes them for a job that uses none; lastResizeTime: the start time, as LSF writes it |
//! | | submitEXT (count, then key/value pairs), numHostRusage, options3, runLimit, avgMem, effectiveResReq | 0 pairs, 0, 0, `-W` (s, 0 for none), 0, `-R` |
//! | | srcCluster, srcJobId, dstCluster, dstJobId, forwardTime, flow_id, acJobWaitTime, totalProvisionTime, outdir, runTime, subcwd | runTime: end − start (s) |
//! | | num_network, affinity, serial_job_energy, cpi, gips, gbs, gflops, numAllocSlots, allocSlots..., ineligiblePendTime, indexRangeCnt, requeueTime, numGPURusages | 0, `""`, 0.000000, 0.00 ×4, slots and their hosts, -1, 0, 0, 0 |
//!
//! [`AcctRecord::parse`] reads the fields through maxRSwap by position, then LSF's fields
//! through exitInfo when the line has them, and ignores what follows, so it also reads the
//! shorter records of OpenLava and older LSF versions (whose exitInfo is taken as 0).

use crate::lsf_line::{LsfFields, LsfLine};

/// The version string LavaCore writes: the LSF release whose layout the record follows.
pub const ACCT_VERSION: &str = "10.1";
/// The record type of a finished job.
pub const JOB_FINISH: &str = "JOB_FINISH";

/// LSF's `SUB_*` option bits that [`options_of`] sets.
pub mod sub {
    /// `-J`.
    pub const JOB_NAME: u32 = 0x01;
    /// `-q`.
    pub const QUEUE: u32 = 0x02;
    /// `-m`.
    pub const HOST: u32 = 0x04;
    /// `-i`.
    pub const IN_FILE: u32 = 0x08;
    /// `-o`.
    pub const OUT_FILE: u32 = 0x10;
    /// `-e`.
    pub const ERR_FILE: u32 = 0x20;
    /// `-x`.
    pub const EXCLUSIVE: u32 = 0x40;
    /// `-w`.
    pub const DEPEND_COND: u32 = 0x2_0000;
    /// `-R`.
    pub const RES_REQ: u32 = 0x4_0000;
    /// `-E`.
    pub const PRE_EXEC: u32 = 0x10_0000;
    /// `-L`.
    pub const LOGIN_SHELL: u32 = 0x20_0000;
    /// A project is recorded (LSF sets it for every job: the default project too).
    pub const PROJECT_NAME: u32 = 0x200_0000;
}

/// The LSF `SUB_*` bits of a submission.
pub fn options_of(request: &lava_batch_wire::SubmitRequest) -> u32 {
    let bits = [
        (!request.job_name.is_empty(), sub::JOB_NAME),
        (!request.queue.is_empty(), sub::QUEUE),
        (!request.hosts.is_empty(), sub::HOST),
        (!request.input_file.is_empty(), sub::IN_FILE),
        (!request.output_file.is_empty(), sub::OUT_FILE),
        (!request.error_file.is_empty(), sub::ERR_FILE),
        (request.exclusive, sub::EXCLUSIVE),
        (!request.dependency.is_empty(), sub::DEPEND_COND),
        (!request.res_req.is_empty(), sub::RES_REQ),
        (!request.pre_exec.is_empty(), sub::PRE_EXEC),
        (!request.login_shell.is_empty(), sub::LOGIN_SHELL),
        (true, sub::PROJECT_NAME),
    ];
    bits.iter().filter(|(set, _)| *set).fold(0, |acc, (_, bit)| acc | bit)
}

/// The resource usage of a record: what LavaCore's shepherd measures; the other 16 of
/// LSF's 19 figures are always written as unavailable (-1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AcctRusage {
    /// ru_utime, seconds; negative when unavailable.
    pub utime_s: f64,
    /// ru_stime, seconds; negative when unavailable.
    pub stime_s: f64,
    /// ru_maxrss, KB; negative when unavailable.
    pub maxrss_kb: f64,
}

impl AcctRusage {
    /// Everything unavailable (a job that never ran).
    pub const UNAVAILABLE: AcctRusage = AcctRusage { utime_s: -1.0, stime_s: -1.0, maxrss_kb: -1.0 };

    /// CPU time (user + system), 0 when unavailable, as `bacct` counts it.
    pub fn cpu_s(&self) -> f64 {
        (self.utime_s.max(0.0) + self.stime_s.max(0.0)).max(0.0)
    }
}

/// One JOB_FINISH record: the fields LavaCore fills (the others are written as LSF
/// writes them for a job that does not use them; see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct AcctRecord {
    /// Event time: when the job ended.
    pub event_time: i64,
    /// jobId.
    pub job_id: u32,
    /// userId.
    pub user_id: u32,
    /// options (`SUB_*` bits).
    pub options: u32,
    /// numProcessors.
    pub num_processors: u32,
    /// submitTime.
    pub submit_time: i64,
    /// beginTime (`-b`), 0 for none.
    pub begin_time: i64,
    /// termTime (`-t`), 0 for none.
    pub term_time: i64,
    /// startTime, 0 for a job that never started.
    pub start_time: i64,
    /// userName.
    pub user_name: String,
    /// queue.
    pub queue: String,
    /// resReq.
    pub res_req: String,
    /// dependCond.
    pub depend_cond: String,
    /// preExecCmd.
    pub pre_exec_cmd: String,
    /// fromHost.
    pub from_host: String,
    /// cwd.
    pub cwd: String,
    /// inFile.
    pub in_file: String,
    /// outFile.
    pub out_file: String,
    /// errFile.
    pub err_file: String,
    /// jobFile.
    pub job_file: String,
    /// askedHosts.
    pub asked_hosts: Vec<String>,
    /// execHosts, one per slot.
    pub exec_hosts: Vec<String>,
    /// jStatus: 64 DONE, 32 EXIT.
    pub j_status: u32,
    /// hostFactor.
    pub host_factor: f64,
    /// jobName.
    pub job_name: String,
    /// command.
    pub command: String,
    /// lsfRusage.
    pub rusage: AcctRusage,
    /// mailUser.
    pub mail_user: String,
    /// projectName.
    pub project_name: String,
    /// exitStatus: the raw wait status.
    pub exit_status: i32,
    /// maxNumProcessors.
    pub max_num_processors: u32,
    /// loginShell.
    pub login_shell: String,
    /// idx: the array index, 0 for a job that is no element.
    pub idx: u32,
    /// maxRMem, KB.
    pub max_rmem_kb: i64,
    /// maxRSwap, KB.
    pub max_rswap_kb: i64,
    /// runLimit, seconds (0 for none); not read back by [`AcctRecord::parse`].
    pub run_limit_s: i64,
    /// exitInfo: LSF's termination reason ([`TermReason::value`]), 0 (`TERM_UNKNOWN`) for
    /// a job that ended on its own.
    pub exit_info: u32,
}

/// exitInfo, read after maxRSwap through LSF's fields before it; 0 when the line ends
/// before it (OpenLava's ends at maxRSwap, older writers' after the spool files).
fn exit_info(fields: &mut LsfFields<'_>) -> Result<u32, String> {
    for name in ["inFileSpool", "commandSpool", "rsvId", "sla"] {
        if fields.at_end() {
            return Ok(0);
        }
        fields.string(name)?;
    }
    if fields.at_end() {
        return Ok(0);
    }
    fields.int("exceptMask")?;
    fields.string("additionalInfo")?;
    u32::try_from(fields.int("exitInfo")?).map_err(|_| "exitInfo: out of range".to_owned())
}

/// Why LSF ended a job, as `bacct`, `bhist` and `bjobs` name it and `lsb.acct` logs it
/// (exitInfo): LSF's keyword and value for each reason LavaCore ends a job for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TermReason {
    /// The value logged to JOB_FINISH's exitInfo.
    pub value: u32,
    /// The keyword and its text, as the commands print it (`TERM_OWNER: job killed by owner`).
    pub text: &'static str,
}

/// A job killed at its run limit (`bsub -W`).
pub const TERM_RUNLIMIT: TermReason =
    TermReason { value: 5, text: "TERM_RUNLIMIT: job killed after reaching LSF run time limit" };
/// A job its owner ended with `bkill -r`.
pub const TERM_FORCE_OWNER: TermReason =
    TermReason { value: 8, text: "TERM_FORCE_OWNER: job killed by owner without time for cleanup" };
/// A job root or an administrator ended with `bkill -r`.
pub const TERM_FORCE_ADMIN: TermReason = TermReason {
    value: 9,
    text: "TERM_FORCE_ADMIN: job killed by root or LSF administrator without time for cleanup",
};
/// A job killed with `bkill` by its owner.
pub const TERM_OWNER: TermReason = TermReason { value: 14, text: "TERM_OWNER: job killed by owner" };
/// A job killed with `bkill` by root or an administrator.
pub const TERM_ADMIN: TermReason =
    TermReason { value: 15, text: "TERM_ADMIN: job killed by root or LSF administrator" };
/// A job killed over its memory limit (`bsub -M`).
pub const TERM_MEMLIMIT: TermReason =
    TermReason { value: 16, text: "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit" };

/// A job killed over its process limit (`bsub -p`, `PROCESSLIMIT`).
pub const TERM_PROCESSLIMIT: TermReason =
    TermReason { value: 7, text: "TERM_PROCESSLIMIT: job killed after reaching LSF process limit" };
/// A job killed over its CPU time limit (`bsub -c`, `CPULIMIT`).
pub const TERM_CPULIMIT: TermReason =
    TermReason { value: 12, text: "TERM_CPULIMIT: job killed after reaching LSF CPU usage limit" };
/// A job killed over its virtual memory limit (`bsub -v`, `SWAPLIMIT`).
pub const TERM_SWAP: TermReason =
    TermReason { value: 20, text: "TERM_SWAP: job killed after reaching LSF swap usage limit" };
/// A job killed over its thread limit (`bsub -T`, `THREADLIMIT`).
pub const TERM_THREADLIMIT: TermReason =
    TermReason { value: 21, text: "TERM_THREADLIMIT: job killed after reaching LSF thread limit" };

/// The termination reasons LavaCore gives.
const TERM_REASONS: [TermReason; 10] = [
    TERM_RUNLIMIT,
    TERM_PROCESSLIMIT,
    TERM_FORCE_OWNER,
    TERM_FORCE_ADMIN,
    TERM_CPULIMIT,
    TERM_OWNER,
    TERM_ADMIN,
    TERM_MEMLIMIT,
    TERM_SWAP,
    TERM_THREADLIMIT,
];

impl TermReason {
    /// The reason of a job that ended EXIT with sbatchd's finish reason `finish_reason`
    /// (`lava_batch_wire::FINISH_*`); `None` for a job that ended on its own.
    pub fn of_finish(finish_reason: u32) -> Option<TermReason> {
        Some(match finish_reason {
            lava_batch_wire::FINISH_RUN_LIMIT => TERM_RUNLIMIT,
            lava_batch_wire::FINISH_FORCE_OWNER => TERM_FORCE_OWNER,
            lava_batch_wire::FINISH_FORCE_ADMIN => TERM_FORCE_ADMIN,
            lava_batch_wire::FINISH_KILLED => TERM_OWNER,
            lava_batch_wire::FINISH_KILLED_ADMIN => TERM_ADMIN,
            lava_batch_wire::FINISH_MEM_LIMIT => TERM_MEMLIMIT,
            lava_batch_wire::FINISH_CPU_LIMIT => TERM_CPULIMIT,
            lava_batch_wire::FINISH_PROCESS_LIMIT => TERM_PROCESSLIMIT,
            lava_batch_wire::FINISH_SWAP_LIMIT => TERM_SWAP,
            lava_batch_wire::FINISH_THREAD_LIMIT => TERM_THREADLIMIT,
            _ => return None,
        })
    }

    /// The reason an exitInfo value names, if LavaCore knows it.
    pub fn of_value(value: u32) -> Option<TermReason> {
        TERM_REASONS.iter().copied().find(|reason| reason.value == value)
    }
}

impl AcctRecord {
    /// The job's status word is DONE's.
    pub fn is_done(&self) -> bool {
        self.j_status == 0x40
    }

    /// Run time: end − start, 0 for a job that never started.
    pub fn run_time_s(&self) -> i64 {
        if self.start_time > 0 { (self.event_time - self.start_time).max(0) } else { 0 }
    }

    /// The record as one line of `lsb.acct`, ending with `\n`.
    pub fn to_line(&self) -> String {
        let mut line = String::with_capacity(512);
        let mut w = LsfLine(&mut line);
        w.s(JOB_FINISH);
        w.s(ACCT_VERSION);
        w.i(self.event_time);
        for n in [self.job_id, self.user_id, self.options, self.num_processors] {
            w.i(i64::from(n));
        }
        for t in [self.submit_time, self.begin_time, self.term_time, self.start_time] {
            w.i(t);
        }
        for s in [
            &self.user_name,
            &self.queue,
            &self.res_req,
            &self.depend_cond,
            &self.pre_exec_cmd,
            &self.from_host,
            &self.cwd,
            &self.in_file,
            &self.out_file,
            &self.err_file,
            &self.job_file,
        ] {
            w.s(s);
        }
        w.list(&self.asked_hosts);
        w.list(&self.exec_hosts);
        w.i(i64::from(self.j_status));
        w.raw(&format!("{:.1}", self.host_factor));
        w.s(&self.job_name);
        w.s(&self.command);
        let ru = &self.rusage;
        w.raw(&format!("{:.6} {:.6} {:.0}", ru.utime_s, ru.stime_s, ru.maxrss_kb));
        for _ in 0..16 {
            w.raw("-1");
        }
        w.s(&self.mail_user);
        w.s(&self.project_name);
        w.i(i64::from(self.exit_status));
        w.i(i64::from(self.max_num_processors));
        w.s(&self.login_shell);
        w.s(""); // timeEvent
        w.i(i64::from(self.idx));
        w.i(self.max_rmem_kb);
        w.i(self.max_rswap_kb);
        w.s(""); // inFileSpool
        w.s(""); // commandSpool
        // LSF 10.1's additions, as it writes them for a job that uses none of them.
        w.raw(r#""" "" 0 """#); // rsvId, sla, exceptMask, additionalInfo
        w.i(i64::from(self.exit_info));
        w.raw(r#""" -1 "" "" "" "" -1 "" "" 0 """#); // warningAction .. options2, requeueEValues
        w.i(self.start_time); // lastResizeTime
        w.raw(r#""" "" 0 0 0"#); // jobDescription, notifyCmd, submitEXT (none), numHostRusage, options3
        w.i(self.run_limit_s);
        w.i(0); // avgMem
        w.s(&self.res_req); // effectiveResReq
        w.raw(r#""" -1 "" -1 0 "" 0 0 """#); // srcCluster .. outdir
        w.i(self.run_time_s());
        w.raw(r#""" 0 "" 0.000000 0.00 0.00 0.00 0.00"#); // subcwd .. gflops
        w.list(&self.exec_hosts); // numAllocSlots, allocSlots
        w.raw("-1 0 0 0"); // ineligiblePendTime, indexRangeCnt, requeueTime, numGPURusages
        line.push('\n');
        line
    }

    /// Reads a record line (without its newline); `Ok(None)` for a line of another type.
    /// Errors name the field that could not be read.
    pub fn parse(line: &str) -> Result<Option<AcctRecord>, String> {
        let mut fields = LsfFields::new(line);
        let kind = fields.string("event type")?;
        if kind != JOB_FINISH {
            return Ok(None);
        }
        let _version = fields.string("version")?;
        let event_time = fields.int("event time")?;
        let job_id = fields.uint("jobId")?;
        let user_id = fields.int("userId")? as u32;
        let options = fields.int("options")? as u32;
        let num_processors = fields.uint("numProcessors")?;
        let submit_time = fields.int("submitTime")?;
        let begin_time = fields.int("beginTime")?;
        let term_time = fields.int("termTime")?;
        let start_time = fields.int("startTime")?;
        let mut strings = Vec::with_capacity(11);
        for name in [
            "userName",
            "queue",
            "resReq",
            "dependCond",
            "preExecCmd",
            "fromHost",
            "cwd",
            "inFile",
            "outFile",
            "errFile",
            "jobFile",
        ] {
            strings.push(fields.string(name)?);
        }
        let asked_hosts = fields.list("numAskedHosts")?;
        let exec_hosts = fields.list("numExHosts")?;
        let j_status = fields.uint("jStatus")?;
        let host_factor = fields.float("hostFactor")?;
        let job_name = fields.string("jobName")?;
        let command = fields.string("command")?;
        let utime_s = fields.float("ru_utime")?;
        let stime_s = fields.float("ru_stime")?;
        let maxrss_kb = fields.float("ru_maxrss")?;
        for _ in 0..16 {
            fields.float("lsfRusage")?;
        }
        let mail_user = fields.string("mailUser")?;
        let project_name = fields.string("projectName")?;
        let exit_status = fields.int("exitStatus")? as i32;
        let max_num_processors = fields.uint("maxNumProcessors")?;
        let login_shell = fields.string("loginShell")?;
        // LSF writes timeEvent here; OpenLava does not: an integer next means no timeEvent.
        if fields.next_is_string() {
            fields.string("timeEvent")?;
        }
        let idx = fields.uint("idx")?;
        let max_rmem_kb = fields.int("maxRMem")?;
        let max_rswap_kb = fields.int("maxRSwap")?;
        let exit_info = exit_info(&mut fields)?;
        let mut strings = strings.into_iter();
        let mut next = || strings.next().unwrap_or_default();
        Ok(Some(AcctRecord {
            event_time,
            job_id,
            user_id,
            options,
            num_processors,
            submit_time,
            begin_time,
            term_time,
            start_time,
            user_name: next(),
            queue: next(),
            res_req: next(),
            depend_cond: next(),
            pre_exec_cmd: next(),
            from_host: next(),
            cwd: next(),
            in_file: next(),
            out_file: next(),
            err_file: next(),
            job_file: next(),
            asked_hosts,
            exec_hosts,
            j_status,
            host_factor,
            job_name,
            command,
            rusage: AcctRusage { utime_s, stime_s, maxrss_kb },
            mail_user,
            project_name,
            exit_status,
            max_num_processors,
            login_shell,
            idx,
            max_rmem_kb,
            max_rswap_kb,
            run_limit_s: 0,
            exit_info,
        }))
    }

    /// What identifies one run's record: the job, its index and its end time (a job
    /// requeued and finished again has a second record with a later end).
    pub fn key(&self) -> (u32, u32, i64) {
        (self.job_id, self.idx, self.event_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job of two slots on `hostA` that exited with status 3.
    fn record() -> AcctRecord {
        AcctRecord {
            event_time: 1_700_000_100,
            job_id: 42,
            user_id: 1000,
            options: sub::QUEUE | sub::OUT_FILE | sub::PROJECT_NAME,
            num_processors: 2,
            submit_time: 1_700_000_000,
            begin_time: 0,
            term_time: 0,
            start_time: 1_700_000_010,
            user_name: "alice".into(),
            queue: "normal".into(),
            res_req: String::new(),
            depend_cond: String::new(),
            pre_exec_cmd: String::new(),
            from_host: "hostS".into(),
            cwd: "/home/alice".into(),
            in_file: String::new(),
            out_file: "out.%J".into(),
            err_file: String::new(),
            job_file: "1700000000.42".into(),
            asked_hosts: vec![],
            exec_hosts: vec!["hostA".into(), "hostA".into()],
            j_status: 32,
            host_factor: 1.0,
            job_name: "say".into(),
            command: "echo \"hi\"; exit 3".into(),
            rusage: AcctRusage { utime_s: 0.25, stime_s: 0.125, maxrss_kb: 2048.0 },
            mail_user: String::new(),
            project_name: "default".into(),
            exit_status: 3 << 8,
            max_num_processors: 2,
            login_shell: String::new(),
            idx: 0,
            max_rmem_kb: 2048,
            max_rswap_kb: 0,
            run_limit_s: 0,
            exit_info: 0,
        }
    }

    /// The line of [`record`], field by field (module doc's table).
    const GOLDEN: &str = concat!(
        r#""JOB_FINISH" "10.1" 1700000100"#,
        r#" 42 1000 33554450 2 1700000000 0 0 1700000010"#,
        r#" "alice" "normal" "" "" "" "hostS" "/home/alice" "" "out.%J" "" "1700000000.42""#,
        r#" 0 2 "hostA" "hostA" 32 1.0 "say" "echo ""hi""; exit 3""#,
        r#" 0.250000 0.125000 2048 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1"#,
        r#" "" "default" 768 2 "" "" 0 2048 0 "" """#,
        r#" "" "" 0 "" 0 "" -1 "" "" "" "" -1 "" "" 0 "" 1700000010 "" "" 0 0 0 0 0 """#,
        r#" "" -1 "" -1 0 "" 0 0 "" 90 "" 0 "" 0.000000 0.00 0.00 0.00 0.00 2 "hostA" "hostA""#,
        " -1 0 0 0\n",
    );

    #[test]
    fn golden_line() {
        // Goal: the JOB_FINISH line is LSF 10.1's, field for field (order, quoting, number formats).
        // Method: a record with every kind of field set, against the line written out by hand.
        assert_eq!(record().to_line(), GOLDEN);
    }

    #[test]
    fn golden_line_of_a_job_that_never_ran() {
        // Goal: a job killed while pending has no start, no hosts and unavailable rusage
        // (-1.000000 for the times, -1 for the rest), as LSF writes it.
        let mut never = record();
        never.start_time = 0;
        never.exec_hosts.clear();
        never.rusage = AcctRusage::UNAVAILABLE;
        never.max_rmem_kb = 0;
        never.exit_status = 9;
        let line = never.to_line();
        assert!(line.contains(r#" 0 0 32 1.0 "say""#), "{line}");
        assert!(line.contains(" -1.000000 -1.000000 -1 -1 "), "{line}");
        assert!(line.contains(r#" "" 0 "" 0.000000 0.00 0.00 0.00 0.00 0 -1 0 0 0"#), "{line}");
    }

    #[test]
    fn parse_reads_back_what_is_written() {
        // Goal: bacct reads LavaCore's lines: every field it shows comes back.
        let line = record().to_line();
        let parsed = AcctRecord::parse(line.trim_end()).expect("valid").expect("a JOB_FINISH");
        assert_eq!(parsed, record());
        assert!(!parsed.is_done());
        assert_eq!(parsed.run_time_s(), 90);
        assert_eq!(parsed.key(), (42, 0, 1_700_000_100));
    }

    #[test]
    fn a_killed_job_logs_lsfs_termination_reason() {
        // Goal: a job LavaCore ended logs LSF's exitInfo value for the reason (TERM_OWNER
        // is 14 after a bkill), in exitInfo's place, and reads it back; a job that ended on
        // its own logs 0. Method: the record killed by its owner, written and parsed.
        let mut killed = record();
        killed.exit_info = TermReason::of_finish(lava_batch_wire::FINISH_KILLED).expect("a reason").value;
        assert_eq!(killed.exit_info, 14);
        let line = killed.to_line();
        assert!(line.contains(r#" 2048 0 "" "" "" "" 0 "" 14 "" -1 "#), "{line}");
        let parsed = AcctRecord::parse(line.trim_end()).expect("valid").expect("a JOB_FINISH");
        assert_eq!(parsed, killed);
        assert_eq!(
            TermReason::of_value(parsed.exit_info).map(|r| r.text),
            Some("TERM_OWNER: job killed by owner")
        );
        for (finish, value) in [
            (lava_batch_wire::FINISH_RUN_LIMIT, 5),
            (lava_batch_wire::FINISH_FORCE_OWNER, 8),
            (lava_batch_wire::FINISH_FORCE_ADMIN, 9),
            (lava_batch_wire::FINISH_KILLED_ADMIN, 15),
            (lava_batch_wire::FINISH_MEM_LIMIT, 16),
            (lava_batch_wire::FINISH_CPU_LIMIT, 12),
            (lava_batch_wire::FINISH_PROCESS_LIMIT, 7),
            (lava_batch_wire::FINISH_SWAP_LIMIT, 20),
            (lava_batch_wire::FINISH_THREAD_LIMIT, 21),
        ] {
            assert_eq!(TermReason::of_finish(finish).map(|r| r.value), Some(value), "finish reason {finish}");
        }
        assert_eq!(TermReason::of_finish(lava_batch_wire::FINISH_NORMAL), None);
        assert_eq!(TermReason::of_value(0), None);
    }

    #[test]
    fn exit_info_is_read_only_where_the_line_has_it() {
        // Goal: a line that ends after the spool files (before LSF's later fields) reads
        // exitInfo 0, and an exitInfo that is no reason value (negative) is an error naming
        // the field. Method: the golden line cut after commandSpool, and with exitInfo -1.
        let line = record().to_line();
        let spools =
            line.find(r#" 2048 0 "" """#).expect("maxRMem .. commandSpool") + r#" 2048 0 "" """#.len();
        let short = AcctRecord::parse(&line[..spools]).expect("valid").expect("a JOB_FINISH");
        assert_eq!(short.exit_info, 0);
        let negative = line.replacen(r#" "" "" 0 "" 0 "" -1 "#, r#" "" "" 0 "" -1 "" -1 "#, 1);
        assert_ne!(negative, line, "the exitInfo field was found");
        let err = AcctRecord::parse(negative.trim_end()).expect_err("a negative exitInfo");
        assert!(err.contains("exitInfo"), "{err}");
    }

    #[test]
    fn parse_reads_openlava_records() {
        // Goal: a record without LSF's timeEvent and 10.1 tail (OpenLava's layout) is read.
        let line = concat!(
            r#""JOB_FINISH" "2.0" 1700000100 7 0 2 1 1700000000 0 0 1700000010 "root" "normal" "" "" """#,
            r#" "h" "/" "" "" "" "1700000000.7" 0 1 "h" 64 1.0 "" "sleep 1""#,
            r#" 0.001000 0.002000 900 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1"#,
            r#" "" "default" 0 1 "" 0 900 0 "" """#
        );
        let parsed = AcctRecord::parse(line).expect("valid").expect("a JOB_FINISH");
        assert!(parsed.is_done());
        assert_eq!((parsed.job_id, parsed.idx, parsed.max_rmem_kb), (7, 0, 900));
        assert_eq!(parsed.command, "sleep 1");
    }

    #[test]
    fn parse_errors_name_the_field() {
        // Goal: a damaged line is an error naming the field, never a panic.
        let line = record().to_line();
        for cut in (0..line.len()).step_by(7) {
            if let Some(prefix) = line.get(..cut) {
                let _ = AcctRecord::parse(prefix);
            }
        }
        let err = AcctRecord::parse(r#""JOB_FINISH" "10.1" x"#).expect_err("bad time");
        assert!(err.contains("event time"), "{err}");
        assert_eq!(AcctRecord::parse(r#""EVENT_ADRSV_FINISH" "10.1" 1"#), Ok(None));
    }

    #[test]
    fn options_bits() {
        // Goal: the SUB_* bits follow what was asked.
        let mut request = lava_batch_wire::SubmitRequest::default();
        assert_eq!(options_of(&request), sub::PROJECT_NAME);
        request.queue = "q".into();
        request.hosts = vec!["h".into()];
        assert_eq!(options_of(&request), 0x200_0006);
    }
}
