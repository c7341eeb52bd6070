//! The fields of `bjobs -o`: every field of LSF 10.1's output-format list
//! ("Output fields for bjobs" in IBM's `bjobs -o` reference), in LSF's order
//! (the order of `-o all`), with LSF's names, aliases and recommended widths
//! (what `field:` asks for). Names are case-insensitive, as in LSF. A field's
//! header and `-json` key is its first name in upper case (`JOBID`,
//! `EXIT_REASON`, `%COMPLETE`).
//!
//! LavaCore fills what mbatchd's job description carries; the fields whose
//! data LavaCore does not have (job groups, application profiles, GPUs,
//! `bkill -C`/`bstop -C` reasons, multicluster forwarding, energy, ...) are
//! accepted and empty, which prints `-` in columns and `""` in `-json`, as LSF
//! prints a field without a value. Which fields are filled is listed in
//! docs/commands.md.

use lava_batch_ll::JobStatus;
use lava_batch_wire::JobInfo;

use crate::format::{
    CellContext, cpu_ms, custom_time, cwd_shown, display_name, exit_reason, host_list, is_pending, memory,
    one_line, pend_seconds, run_seconds, status, status_name,
};

/// A field of `-o`: its names (the first is LSF's, then aliases), the width
/// `field:` asks for, and its value.
pub struct FieldDef {
    /// Accepted names, lower case; the first is LSF's field name.
    pub names: &'static [&'static str],
    /// LSF's recommended width; 0 where LSF recommends none (`energy`,
    /// `gpfsio`: `field:` is then as wide as the widest value).
    pub width: usize,
    /// Whether a unit may follow the width (`mem:10:GB`).
    pub memory: bool,
    /// The value; empty when the job has none (`-` in columns, `""` in `-json`).
    pub(crate) value: fn(&JobInfo, &CellContext<'_>) -> String,
}

impl FieldDef {
    /// The column header and `-json` key: the field's name in upper case.
    pub fn header(&self) -> String {
        self.names[0].to_ascii_uppercase()
    }
}

impl std::fmt::Debug for FieldDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.names[0])
    }
}

fn no_value(_: &JobInfo, _: &CellContext<'_>) -> String {
    String::new()
}

/// A size limit of the job in the field's unit, empty for none; 0 is shown (a limit that
/// forbids: `CORELIMIT = 0`).
fn size_limit(limit: Option<u64>, c: &CellContext<'_>) -> String {
    match (limit, c.unit) {
        (None, _) => String::new(),
        (Some(0), Some(unit)) => format!("0 {}", unit.name()),
        (Some(0), None) => "0 Kbytes".to_owned(),
        (Some(kb), unit) => memory(kb, unit),
    }
}

const fn field(
    names: &'static [&'static str],
    width: usize,
    value: fn(&JobInfo, &CellContext<'_>) -> String,
) -> FieldDef {
    FieldDef { names, width, memory: false, value }
}

const fn memory_field(
    names: &'static [&'static str],
    width: usize,
    value: fn(&JobInfo, &CellContext<'_>) -> String,
) -> FieldDef {
    FieldDef { names, width, memory: true, value }
}

/// A field LavaCore accepts and has no data for.
const fn empty(names: &'static [&'static str], width: usize) -> FieldDef {
    field(names, width, no_value)
}

fn is_running(job: &JobInfo) -> bool {
    matches!(status(job), Some(JobStatus::Run | JobStatus::Ususp | JobStatus::Ssusp))
}

fn seconds_text(seconds: i64) -> String {
    format!("{seconds} second(s)")
}

fn cpu_seconds_text(ms: u64) -> String {
    format!("{:.1} second(s)", ms as f64 / 1000.0)
}

/// TIME_LEFT (`bjobs -WL`'s `hours:minutes L`): the run limit minus the run
/// time of a started, unfinished job that has one.
fn time_left(job: &JobInfo, context: &CellContext<'_>) -> String {
    if job.run_limit_s == 0 || !is_running(job) {
        return String::new();
    }
    let limit_s = i64::try_from(job.run_limit_s).unwrap_or(i64::MAX);
    let left_s = (limit_s - run_seconds(job, context.style.now_s)).max(0);
    format!("{}:{:02} L", left_s / 3600, left_s % 3600 / 60)
}

/// %COMPLETE (`bjobs -WP`'s `NN% L`): the run time as a share of the run limit.
fn percent_complete(job: &JobInfo, context: &CellContext<'_>) -> String {
    if job.run_limit_s == 0 || !is_running(job) {
        return String::new();
    }
    let run_s = u64::try_from(run_seconds(job, context.style.now_s)).unwrap_or(0);
    format!("{}% L", (run_s * 100 / job.run_limit_s).min(100))
}

/// PENDSTATE: `EPEND` (eligible) for a pending job, `IPEND` (ineligible) for one
/// held by its owner or an administrator (PSUSP), `NOTPEND` for the others.
fn pend_state(job: &JobInfo) -> &'static str {
    match status(job) {
        Some(JobStatus::Pend) => "EPEND",
        Some(JobStatus::Psusp) => "IPEND",
        _ => "NOTPEND",
    }
}

/// IDLE_FACTOR: CPU time over run time of a finished job.
fn idle_factor(job: &JobInfo, context: &CellContext<'_>) -> String {
    let run_s = run_seconds(job, context.style.now_s);
    match cpu_ms(job) {
        Some(ms) if run_s > 0 => format!("{:.2}", ms as f64 / 1000.0 / run_s as f64),
        _ => String::new(),
    }
}

fn slots(job: &JobInfo) -> String {
    job.n_slots.max(1).to_string()
}

/// Every field of LSF 10.1's list, in LSF's order.
pub const FIELDS: &[FieldDef] = &[
    field(&["jobid", "id"], 7, |j, _| j.job.job_id.to_string()),
    field(&["jobindex"], 8, |j, _| j.job.array_index.to_string()),
    field(&["stat"], 5, |j, _| status_name(j.status).to_owned()),
    field(&["user"], 7, |j, _| j.user_name.clone()),
    empty(&["user_group", "ugroup"], 15),
    field(&["queue"], 10, |j, _| j.queue.clone()),
    field(&["job_name", "name"], 10, |j, _| display_name(j).into_owned()),
    empty(&["job_description", "description"], 17),
    field(&["proj_name", "proj", "project"], 11, |j, _| j.project.clone()),
    empty(&["application", "app"], 13),
    empty(&["service_class", "sla"], 13),
    empty(&["job_group", "group"], 10),
    empty(&["job_priority", "priority"], 12),
    empty(&["rsvid"], 40),
    empty(&["esub"], 20),
    empty(&["kill_reason"], 50),
    empty(&["suspend_reason"], 50),
    empty(&["resume_reason"], 50),
    empty(&["kill_issue_host"], 50),
    empty(&["suspend_issue_host"], 50),
    empty(&["resume_issue_host"], 50),
    field(&["dependency"], 15, |j, _| j.dependency.clone()),
    field(&["pend_reason"], 11, |j, _| {
        if is_pending(j) { j.reason.trim().trim_end_matches(';').to_owned() } else { String::new() }
    }),
    empty(&["charged_saap", "saap"], 50),
    field(&["command", "cmd"], 15, |j, _| one_line(&j.command).into_owned()),
    field(&["pre_exec_command", "pre_cmd"], 16, |j, _| one_line(&j.pre_exec).into_owned()),
    field(&["post_exec_command", "post_cmd"], 17, |j, _| one_line(&j.post_exec).into_owned()),
    empty(&["resize_notification_command", "resize_cmd"], 27),
    field(&["pids"], 20, |j, _| if j.pid > 0 { j.pid.to_string() } else { String::new() }),
    // LSF prints no exit code for a DONE job.
    field(&["exit_code"], 10, |j, _| match status(j) {
        Some(JobStatus::Exit) => j.exit_code.to_string(),
        _ => String::new(),
    }),
    field(&["exit_reason"], 50, |j, _| exit_reason(j).to_owned()),
    empty(&["interactive"], 11),
    field(&["from_host"], 11, |j, _| j.from_host.clone()),
    field(&["first_host"], 11, |j, _| j.exec_hosts.first().cloned().unwrap_or_default()),
    field(&["exec_host"], 11, |j, c| host_list(&j.exec_hosts, c.style.short_hostlist).join(":")),
    field(&["nexec_host"], 10, |j, _| host_list(&j.exec_hosts, true).len().to_string()),
    empty(&["ask_hosts"], 30),
    field(&["alloc_slot"], 20, |j, _| j.exec_hosts.join(":")),
    field(&["nalloc_slot"], 10, |j, _| j.exec_hosts.len().to_string()),
    empty(&["host_file"], 10),
    empty(&["exclusive"], 13),
    field(&["nreq_slot"], 10, |j, _| slots(j)),
    field(&["submit_time"], 15, |j, c| custom_time(j.submit_time, c.tz)),
    field(&["start_time"], 15, |j, c| custom_time(j.start_time, c.tz)),
    empty(&["estimated_start_time", "estart_time"], 20),
    empty(&["specified_start_time", "sstart_time"], 20),
    empty(&["specified_terminate_time", "sterminate_time"], 24),
    field(&["time_left"], 11, time_left),
    // LSF marks an actual finish time with ` L` (an estimated one would be ` E`).
    field(&["finish_time"], 16, |j, c| match custom_time(j.end_time, c.tz) {
        time if time.is_empty() => time,
        time => format!("{time} L"),
    }),
    empty(&["estimated_run_time", "ertime"], 20),
    field(&["ru_utime"], 12, |j, _| {
        cpu_ms(j).map_or(String::new(), |_| cpu_seconds_text(j.rusage.user_time_ms))
    }),
    field(&["ru_stime"], 12, |j, _| {
        cpu_ms(j).map_or(String::new(), |_| cpu_seconds_text(j.rusage.system_time_ms))
    }),
    field(&["%complete"], 11, percent_complete),
    empty(&["warning_action", "warn_act"], 15),
    empty(&["action_warning_time", "warn_time"], 19),
    field(&["pendstate"], 9, |j, _| pend_state(j).to_owned()),
    field(&["pend_time"], 12, |j, c| pend_seconds(j, c.style.now_s).to_string()),
    field(&["ependtime"], 12, |j, c| match pend_state(j) {
        "EPEND" => pend_seconds(j, c.style.now_s).to_string(),
        "IPEND" => "0".to_owned(),
        _ => String::new(),
    }),
    field(&["ipendtime"], 12, |j, c| match pend_state(j) {
        "IPEND" => pend_seconds(j, c.style.now_s).to_string(),
        "EPEND" => "0".to_owned(),
        _ => String::new(),
    }),
    empty(&["estimated_sim_start_time", "esstart_time"], 24),
    empty(&["effective_plimit"], 18),
    empty(&["plimit_remain"], 15),
    empty(&["effective_eplimit"], 19),
    empty(&["eplimit_remain"], 16),
    field(&["cpu_used"], 10, |j, _| cpu_ms(j).map_or(String::new(), cpu_seconds_text)),
    field(&["run_time"], 15, |j, c| seconds_text(run_seconds(j, c.style.now_s))),
    field(&["idle_factor"], 11, idle_factor),
    empty(&["exception_status", "except_stat"], 16),
    field(&["slots"], 5, |j, _| slots(j)),
    memory_field(&["mem"], 10, |j, c| memory(j.rusage.max_rss_kb, c.unit)),
    memory_field(&["max_mem"], 10, |j, c| memory(j.rusage.max_rss_kb, c.unit)),
    memory_field(&["avg_mem"], 10, no_value),
    memory_field(&["memlimit"], 10, |j, c| memory(j.mem_limit_kb, c.unit)),
    memory_field(&["swap"], 10, no_value),
    memory_field(&["swaplimit"], 10, |j, c| size_limit(j.limits.swap_kb, c)),
    empty(&["gpu_num", "gnum"], 10),
    empty(&["gpu_mode", "gmode"], 20),
    empty(&["j_exclusive", "j_excl"], 15),
    empty(&["gpu_alloc", "galloc"], 30),
    empty(&["nthreads"], 10),
    memory_field(&["hrusage"], 50, no_value),
    field(&["min_req_proc"], 12, |j, _| slots(j)),
    field(&["max_req_proc"], 12, |j, _| slots(j)),
    field(&["effective_resreq", "eresreq"], 17, |j, _| j.res_req.clone()),
    field(&["combined_resreq", "cresreq"], 20, |j, _| j.res_req.clone()),
    empty(&["network_req"], 15),
    field(&["filelimit"], 10, |j, _| j.limits.file_kb.map(crate::format::limit_memory).unwrap_or_default()),
    memory_field(&["corelimit"], 10, |j, c| size_limit(j.limits.core_kb, c)),
    memory_field(&["stacklimit"], 10, |j, c| size_limit(j.limits.stack_kb, c)),
    field(&["processlimit"], 12, |j, _| j.limits.processes.map(|n| n.to_string()).unwrap_or_default()),
    field(&["runtimelimit"], 12, |j, _| {
        if j.run_limit_s == 0 { String::new() } else { format!("{:.1}", j.run_limit_s as f64 / 60.0) }
    }),
    empty(&["plimit"], 10),
    empty(&["eplimit"], 10),
    empty(&["input_file"], 10),
    field(&["output_file"], 11, |j, _| j.output_file.clone()),
    field(&["error_file"], 10, |j, _| j.error_file.clone()),
    empty(&["output_dir"], 15),
    // `cwd` is LavaCore's alias, kept for the scripts that used it.
    field(&["sub_cwd", "cwd"], 10, |j, _| cwd_shown(&j.cwd)),
    empty(&["exec_home"], 10),
    field(&["exec_cwd"], 10, |j, _| j.exec_cwd.clone()),
    empty(&["licproject"], 20),
    empty(&["forward_cluster", "fwd_cluster"], 15),
    empty(&["forward_time", "fwd_time"], 15),
    empty(&["srcjobid"], 8),
    empty(&["dstjobid"], 8),
    empty(&["source_cluster", "srcluster"], 15),
    empty(&["energy"], 0),
    empty(&["gpfsio"], 0),
    empty(&["cpu_peak"], 10),
    // `cpu_efficiency` is the name of Fix Pack 13, `cpu_peak_efficiency` of Fix Pack 14.
    empty(&["cpu_peak_efficiency", "cpu_efficiency"], 10),
    empty(&["mem_efficiency"], 10),
    empty(&["average_cpu_efficiency"], 10),
    empty(&["cpu_peak_reached_duration"], 10),
];

/// The field named `name` (any case, a name or an alias).
pub fn find(name: &str) -> Option<&'static FieldDef> {
    let name = name.to_ascii_lowercase();
    FIELDS.iter().find(|field| field.names.contains(&name.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{self, Style};
    use jiff::tz::TimeZone;
    use lava_batch_wire::WireJobRef;

    /// LSF 10.1's table ("Output fields for bjobs"): name, recommended width
    /// (0: none), aliases.
    const LSF_TABLE: &[(&str, usize, &[&str])] = &[
        ("jobid", 7, &["id"]),
        ("jobindex", 8, &[]),
        ("stat", 5, &[]),
        ("user", 7, &[]),
        ("user_group", 15, &["ugroup"]),
        ("queue", 10, &[]),
        ("job_name", 10, &["name"]),
        ("job_description", 17, &["description"]),
        ("proj_name", 11, &["proj", "project"]),
        ("application", 13, &["app"]),
        ("service_class", 13, &["sla"]),
        ("job_group", 10, &["group"]),
        ("job_priority", 12, &["priority"]),
        ("rsvid", 40, &[]),
        ("esub", 20, &[]),
        ("kill_reason", 50, &[]),
        ("suspend_reason", 50, &[]),
        ("resume_reason", 50, &[]),
        ("kill_issue_host", 50, &[]),
        ("suspend_issue_host", 50, &[]),
        ("resume_issue_host", 50, &[]),
        ("dependency", 15, &[]),
        ("pend_reason", 11, &[]),
        ("charged_saap", 50, &["saap"]),
        ("command", 15, &["cmd"]),
        ("pre_exec_command", 16, &["pre_cmd"]),
        ("post_exec_command", 17, &["post_cmd"]),
        ("resize_notification_command", 27, &["resize_cmd"]),
        ("pids", 20, &[]),
        ("exit_code", 10, &[]),
        ("exit_reason", 50, &[]),
        ("interactive", 11, &[]),
        ("from_host", 11, &[]),
        ("first_host", 11, &[]),
        ("exec_host", 11, &[]),
        ("nexec_host", 10, &[]),
        ("ask_hosts", 30, &[]),
        ("alloc_slot", 20, &[]),
        ("nalloc_slot", 10, &[]),
        ("host_file", 10, &[]),
        ("exclusive", 13, &[]),
        ("nreq_slot", 10, &[]),
        ("submit_time", 15, &[]),
        ("start_time", 15, &[]),
        ("estimated_start_time", 20, &["estart_time"]),
        ("specified_start_time", 20, &["sstart_time"]),
        ("specified_terminate_time", 24, &["sterminate_time"]),
        ("time_left", 11, &[]),
        ("finish_time", 16, &[]),
        ("estimated_run_time", 20, &["ertime"]),
        ("ru_utime", 12, &[]),
        ("ru_stime", 12, &[]),
        ("%complete", 11, &[]),
        ("warning_action", 15, &["warn_act"]),
        ("action_warning_time", 19, &["warn_time"]),
        ("pendstate", 9, &[]),
        ("pend_time", 12, &[]),
        ("ependtime", 12, &[]),
        ("ipendtime", 12, &[]),
        ("estimated_sim_start_time", 24, &["esstart_time"]),
        ("effective_plimit", 18, &[]),
        ("plimit_remain", 15, &[]),
        ("effective_eplimit", 19, &[]),
        ("eplimit_remain", 16, &[]),
        ("cpu_used", 10, &[]),
        ("run_time", 15, &[]),
        ("idle_factor", 11, &[]),
        ("exception_status", 16, &["except_stat"]),
        ("slots", 5, &[]),
        ("mem", 10, &[]),
        ("max_mem", 10, &[]),
        ("avg_mem", 10, &[]),
        ("memlimit", 10, &[]),
        ("swap", 10, &[]),
        ("swaplimit", 10, &[]),
        ("gpu_num", 10, &["gnum"]),
        ("gpu_mode", 20, &["gmode"]),
        ("j_exclusive", 15, &["j_excl"]),
        ("gpu_alloc", 30, &["galloc"]),
        ("nthreads", 10, &[]),
        ("hrusage", 50, &[]),
        ("min_req_proc", 12, &[]),
        ("max_req_proc", 12, &[]),
        ("effective_resreq", 17, &["eresreq"]),
        ("combined_resreq", 20, &["cresreq"]),
        ("network_req", 15, &[]),
        ("filelimit", 10, &[]),
        ("corelimit", 10, &[]),
        ("stacklimit", 10, &[]),
        ("processlimit", 12, &[]),
        ("runtimelimit", 12, &[]),
        ("plimit", 10, &[]),
        ("eplimit", 10, &[]),
        ("input_file", 10, &[]),
        ("output_file", 11, &[]),
        ("error_file", 10, &[]),
        ("output_dir", 15, &[]),
        // `cwd` is LavaCore's alias, not LSF's.
        ("sub_cwd", 10, &["cwd"]),
        ("exec_home", 10, &[]),
        ("exec_cwd", 10, &[]),
        ("licproject", 20, &[]),
        ("forward_cluster", 15, &["fwd_cluster"]),
        ("forward_time", 15, &["fwd_time"]),
        ("srcjobid", 8, &[]),
        ("dstjobid", 8, &[]),
        ("source_cluster", 15, &["srcluster"]),
        ("energy", 0, &[]),
        ("gpfsio", 0, &[]),
        ("cpu_peak", 10, &[]),
        ("cpu_peak_efficiency", 10, &["cpu_efficiency"]),
        ("mem_efficiency", 10, &[]),
        ("average_cpu_efficiency", 10, &[]),
        ("cpu_peak_reached_duration", 10, &[]),
    ];

    /// The memory fields, which take a unit (`mem:10:GB`), as LSF lists them.
    const MEMORY_FIELDS: &[&str] =
        &["mem", "max_mem", "avg_mem", "memlimit", "swap", "swaplimit", "corelimit", "stacklimit", "hrusage"];

    // Goal: the table is LSF's, field by field: every name and alias, in LSF's
    // order, with its recommended width, found in any case; units only on
    // LSF's memory fields.
    #[test]
    fn every_field_of_lsf_10_1() {
        assert_eq!(FIELDS.len(), LSF_TABLE.len());
        for (field, (name, width, aliases)) in FIELDS.iter().zip(LSF_TABLE) {
            assert_eq!(field.names[0], *name);
            assert_eq!(&field.names[1..], *aliases, "{name}");
            assert_eq!(field.width, *width, "{name}");
            assert_eq!(field.memory, MEMORY_FIELDS.contains(name), "{name}");
            for alias in field.names {
                assert_eq!(find(alias).map(|found| found.names[0]), Some(*name));
                assert_eq!(find(&alias.to_ascii_uppercase()).map(|found| found.names[0]), Some(*name));
            }
        }
        assert_eq!(find("%COMPLETE").map(FieldDef::header), Some("%COMPLETE".to_owned()));
        assert_eq!(find("id").map(FieldDef::header), Some("JOBID".to_owned()));
        assert!(find("bogus").is_none());
    }

    fn job(status: JobStatus) -> JobInfo {
        JobInfo {
            job: WireJobRef { job_id: 7, array_index: 0 },
            user_name: "u".to_owned(),
            status: status.bits(),
            queue: "normal".to_owned(),
            from_host: "h1".to_owned(),
            exec_hosts: if status.is_pending() { vec![] } else { vec!["h1".to_owned(), "h1".to_owned()] },
            job_name: "j".to_owned(),
            command: "sleep 600".to_owned(),
            n_slots: 2,
            submit_time: 1000,
            start_time: if status.is_pending() { 0 } else { 1100 },
            run_limit_s: 3600,
            ..JobInfo::default()
        }
    }

    fn value(name: &str, job: &JobInfo, now_s: i64) -> String {
        let style = Style { now_s, ..Style::default() };
        let field = find(name).expect("a field");
        (field.value)(job, &CellContext { style: &style, tz: &TimeZone::UTC, unit: None })
    }

    // Goal: the fields LavaCore computes beyond the job's own facts: the run
    // limit's remains as `-WL` and `-WP` print them, the pending state and its
    // times, the slots, the idle factor of a finished job.
    #[test]
    fn computed_fields() {
        let running = job(JobStatus::Run);
        assert_eq!(value("time_left", &running, 1100 + 600), "0:50 L");
        assert_eq!(value("%complete", &running, 1100 + 900), "25% L");
        assert_eq!(value("pendstate", &running, 0), "NOTPEND");
        assert_eq!(value("alloc_slot", &running, 0), "h1:h1");
        assert_eq!(value("nexec_host", &running, 0), "1");
        assert_eq!(value("min_req_proc", &running, 0), "2");
        let pending = job(JobStatus::Pend);
        assert_eq!(value("time_left", &pending, 1500), "");
        assert_eq!(value("pendstate", &pending, 0), "EPEND");
        assert_eq!(
            (value("ependtime", &pending, 1500), value("ipendtime", &pending, 1500)),
            ("500".into(), "0".into())
        );
        let held = job(JobStatus::Psusp);
        assert_eq!(value("pendstate", &held, 0), "IPEND");
        assert_eq!(value("ipendtime", &held, 1500), "500");
        let mut done = job(JobStatus::Done);
        done.end_time = 1200;
        done.rusage.user_time_ms = 40_000;
        done.rusage.system_time_ms = 10_000;
        assert_eq!(value("ru_utime", &done, 0), "40.0 second(s)");
        assert_eq!(value("ru_stime", &done, 0), "10.0 second(s)");
        assert_eq!(value("idle_factor", &done, 0), "0.50");
        assert_eq!(value("time_left", &done, 0), "");
    }

    // Goal: a field LavaCore has no data for is accepted and prints LSF's `-`
    // in columns and `""` in -json: PSI/J's poll works.
    #[test]
    fn fields_without_data_are_empty() {
        let spec =
            format::parse_custom("JOBID STAT EXIT_REASON KILL_REASON SUSPEND_REASON").expect("LSF's fields");
        let jobs = [job(JobStatus::Run)];
        let columns = format::custom(&jobs, &spec, &Style::default(), &TimeZone::UTC);
        assert_eq!(
            columns,
            "JOBID STAT EXIT_REASON KILL_REASON SUSPEND_REASON\n7     RUN  -           -           -\n"
        );
        let json = format::custom_json(&jobs, &[], &spec, &Style::default(), &TimeZone::UTC);
        assert!(json.contains("      \"KILL_REASON\":\"\",\n      \"SUSPEND_REASON\":\"\"\n"), "{json}");
        let all = format::parse_custom("all:").expect("every field");
        let line = format::custom(&jobs, &all, &Style { header: false, ..Style::default() }, &TimeZone::UTC);
        assert_eq!(line.lines().count(), 1);
    }
}
