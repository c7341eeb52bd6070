//! Validated job specifications: what `bsub` asked for ([`SubmitSpec`]) and
//! what mbatchd dispatched ([`JobSpec`]).
//!
//! Both keep the validated wire structure inside and expose typed accessors for
//! the fields the logic decides on; the rest travels unchanged (a dispatch
//! snapshot is immutable input, docs/protocols/sbd-job-record.md).

use lava_batch_wire as wire;

use crate::{
    COMMAND_BYTES_MAX, ENV_VARS_MAX, HostName, JobRef, LlError, NAME_BYTES_MAX, PATH_BYTES_MAX, QueueName,
    SLOTS_MAX, UserName, check_text, job_ref, text_problem,
};

// The field names of list elements (`submit.env[3].name`) are formatted only for the
// element that fails: a submission carries its whole environment, and mbatchd checks it
// again for every JOB_NEW it replays, so a name formatted per variable was a tenth of a
// restart's time.
fn check_env(field: &str, env: &[wire::EnvVar]) -> Result<(), LlError> {
    if env.len() > ENV_VARS_MAX {
        return Err(LlError::new(field, format!("{} variables, at most {ENV_VARS_MAX} allowed", env.len())));
    }
    for (idx, var) in env.iter().enumerate() {
        let name_field = || format!("{field}[{idx}].name");
        if var.name.is_empty() || var.name.contains('=') {
            return Err(LlError::new(name_field(), "is not a variable name"));
        }
        text_problem(&var.name, NAME_BYTES_MAX).map_err(|problem| LlError::new(name_field(), problem))?;
        text_problem(&var.value, COMMAND_BYTES_MAX)
            .map_err(|problem| LlError::new(format!("{field}[{idx}].value"), problem))?;
    }
    Ok(())
}

fn check_slots(field: &str, n_slots: u32) -> Result<u32, LlError> {
    match n_slots {
        0 => Ok(1),
        n if n > SLOTS_MAX => Err(LlError::new(field, format!("{n} slots, at most {SLOTS_MAX} allowed"))),
        n => Ok(n),
    }
}

fn check_paths(prefix: &str, paths: &[(&str, &str)]) -> Result<(), LlError> {
    for (name, value) in paths {
        text_problem(value, PATH_BYTES_MAX)
            .map_err(|problem| LlError::new(format!("{prefix}.{name}"), problem))?;
    }
    Ok(())
}

/// A submission that passed structural validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubmitSpec {
    queue: Option<QueueName>,
    hosts: Vec<HostName>,
    n_slots: u32,
    request: wire::SubmitRequest,
}

impl SubmitSpec {
    /// The queue asked for with `-q`, `None` for the default queue.
    pub fn queue(&self) -> Option<&QueueName> {
        self.queue.as_ref()
    }

    /// Candidate hosts (`-m`), empty for any.
    pub fn hosts(&self) -> &[HostName] {
        &self.hosts
    }

    /// Slots asked for, at least 1.
    pub fn n_slots(&self) -> u32 {
        self.n_slots
    }

    /// The validated request as it arrived (without its environment once
    /// [`SubmitSpec::take_environment`] was called).
    pub fn request(&self) -> &wire::SubmitRequest {
        &self.request
    }

    /// A stand-in for this submission without its large parts (command or
    /// script, name, environment, pre-exec command, resource requirement,
    /// dependency): what mbatchd encodes in place of a submission that it keeps
    /// elsewhere, shared (the elements of a job array).
    pub fn stub(&self) -> SubmitSpec {
        let request = wire::SubmitRequest {
            // The shortest command a valid submission may have.
            command: "-".to_owned(),
            job_name: String::new(),
            env: Vec::new(),
            pre_exec: String::new(),
            post_exec: String::new(),
            res_req: String::new(),
            dependency: String::new(),
            ..self.request.clone()
        };
        SubmitSpec { request, ..self.clone() }
    }

    /// The size of the submission as `bsub` sent it, in bytes: every text it
    /// carries (the command or script, the pre-execution command, names, paths,
    /// hosts, the resource requirement and the dependency) and each environment
    /// variable as `NAME=value` plus one byte for its end, as a process's
    /// environment holds it. mbatchd bounds it (`LAVA_MAX_JOB_BYTES`): it is what a
    /// pending job costs in memory and in the event log. Counts the environment
    /// only before [`SubmitSpec::take_environment`].
    pub fn submitted_bytes(&self) -> u64 {
        let r = &self.request;
        let texts = [
            &r.queue,
            &r.job_name,
            &r.command,
            &r.cwd,
            &r.home_dir,
            &r.input_file,
            &r.output_file,
            &r.error_file,
            &r.project,
            &r.res_req,
            &r.dependency,
            &r.login_shell,
            &r.pre_exec,
            &r.post_exec,
            &r.from_host,
        ];
        let texts: usize = texts.iter().map(|text| text.len()).sum::<usize>()
            + r.hosts.iter().map(String::len).sum::<usize>();
        let env: usize = r.env.iter().map(|var| var.name.len() + 1 + var.value.len() + 1).sum();
        u64::try_from(texts + env).unwrap_or(u64::MAX)
    }

    /// Takes the environment variables out. What is left is the same request without
    /// variables, which is still a valid submission. mbatchd keeps the two apart: the
    /// environment is the largest part of a submission, and it is dropped when the job
    /// finishes, while the rest stays for display.
    pub fn take_environment(&mut self) -> Vec<wire::EnvVar> {
        std::mem::take(&mut self.request.env)
    }

    /// Names `project` as the job's project when it was submitted without one (`-P`):
    /// mbatchd's default project (lsb.params `DEFAULT_PROJECT`), fixed at submission. The
    /// name is the configuration's, which checked it as a project name.
    pub fn default_project(&mut self, project: &str) {
        if self.request.project.is_empty() {
            self.request.project = project.to_owned();
        }
    }
}

/// A job's own resource limits: a CPU time, process or thread limit of 0 cannot be meant
/// (LSF refuses them); sizes may be 0 (`-C 0`: no core files).
fn check_limits(field: &str, limits: &wire::ResourceLimits) -> Result<(), LlError> {
    let zero = [
        ("cpu_s", limits.cpu_s == Some(0)),
        ("processes", limits.processes == Some(0)),
        ("threads", limits.threads == Some(0)),
    ];
    match zero.iter().find(|(_, is_zero)| *is_zero) {
        Some((name, _)) => Err(LlError::new(format!("{field}.{name}"), "is 0")),
        None => Ok(()),
    }
}

impl TryFrom<wire::SubmitRequest> for SubmitSpec {
    type Error = LlError;

    fn try_from(request: wire::SubmitRequest) -> Result<SubmitSpec, LlError> {
        let queue = match request.queue.as_str() {
            "" => None,
            name => Some(QueueName::parse("submit.queue", name)?),
        };
        let hosts = request
            .hosts
            .iter()
            .enumerate()
            .map(|(idx, h)| {
                HostName::parse("submit.hosts", h)
                    .map_err(|error| LlError { field: format!("submit.hosts[{idx}]"), ..error })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if request.command.trim().is_empty() {
            return Err(LlError::new("submit.command", "is empty"));
        }
        check_text("submit.command", &request.command, COMMAND_BYTES_MAX)?;
        check_text("submit.job_name", &request.job_name, NAME_BYTES_MAX)?;
        check_text("submit.project", &request.project, NAME_BYTES_MAX)?;
        check_text("submit.res_req", &request.res_req, PATH_BYTES_MAX)?;
        check_text("submit.dependency", &request.dependency, PATH_BYTES_MAX)?;
        check_text("submit.pre_exec", &request.pre_exec, COMMAND_BYTES_MAX)?;
        check_text("submit.post_exec", &request.post_exec, COMMAND_BYTES_MAX)?;
        if request.begin_time < 0 {
            return Err(LlError::new("submit.begin_time", "is before the epoch"));
        }
        HostName::parse("submit.from_host", &request.from_host)?;
        check_paths(
            "submit",
            &[
                ("cwd", &request.cwd),
                ("home_dir", &request.home_dir),
                ("input_file", &request.input_file),
                ("output_file", &request.output_file),
                ("error_file", &request.error_file),
                ("login_shell", &request.login_shell),
            ],
        )?;
        check_file_flags("submit.file_flags", request.file_flags)?;
        if request.umask > 0o777 {
            return Err(LlError::new(
                "submit.umask",
                format!("{:#o} is not a file mode mask", request.umask),
            ));
        }
        check_env("submit.env", &request.env)?;
        if let Some(limits) = &request.limits {
            check_limits("submit.limits", limits)?;
        }
        let n_slots = check_slots("submit.n_slots", request.n_slots)?;
        Ok(SubmitSpec { queue, hosts, n_slots, request })
    }
}

/// `file_flags`: only the bits of [`wire::submit_flags`], a pseudo-terminal only for an
/// interactive job, shell mode only with a pseudo-terminal.
fn check_file_flags(field: &str, flags: u32) -> Result<(), LlError> {
    use wire::submit_flags::{ALL, INTERACTIVE, PTY, PTY_SHELL};
    if flags & !ALL != 0 {
        return Err(LlError::new(field, format!("unknown bits {flags:#x}")));
    }
    if (flags & PTY != 0 && flags & INTERACTIVE == 0) || (flags & PTY_SHELL != 0 && flags & PTY == 0) {
        return Err(LlError::new(
            field,
            format!("{flags:#x}: a pseudo-terminal needs an interactive job, shell mode a pseudo-terminal"),
        ));
    }
    Ok(())
}

/// A dispatch snapshot (BATCH_NEW_JOB) that passed structural validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpec {
    job: JobRef,
    user: UserName,
    queue: QueueName,
    exec_hosts: Vec<HostName>,
    specs: wire::JobSpecs,
}

impl JobSpec {
    /// The job.
    pub fn job(&self) -> JobRef {
        self.job
    }

    /// The submitting user.
    pub fn user(&self) -> &UserName {
        &self.user
    }

    /// The queue.
    pub fn queue(&self) -> &QueueName {
        &self.queue
    }

    /// The execution hosts, at least one.
    pub fn exec_hosts(&self) -> &[HostName] {
        &self.exec_hosts
    }

    /// The validated snapshot as it arrived; never mutated.
    pub fn specs(&self) -> &wire::JobSpecs {
        &self.specs
    }
}

impl TryFrom<wire::JobSpecs> for JobSpec {
    type Error = LlError;

    fn try_from(specs: wire::JobSpecs) -> Result<JobSpec, LlError> {
        let job = job_ref("spec.job", specs.job)?;
        let user = UserName::parse("spec.user_name", &specs.user_name)?;
        let queue = QueueName::parse("spec.queue", &specs.queue)?;
        HostName::parse("spec.from_host", &specs.from_host)?;
        if specs.dispatch_seq == 0 {
            return Err(LlError::new("spec.dispatch_seq", "is 0 (dispatches are numbered from 1)"));
        }
        if specs.exec_hosts.is_empty() {
            return Err(LlError::new("spec.exec_hosts", "is empty"));
        }
        let exec_hosts = specs
            .exec_hosts
            .iter()
            .enumerate()
            .map(|(idx, h)| {
                HostName::parse("spec.exec_hosts", h)
                    .map_err(|error| LlError { field: format!("spec.exec_hosts[{idx}]"), ..error })
            })
            .collect::<Result<Vec<_>, _>>()?;
        check_text("spec.command", &specs.command, COMMAND_BYTES_MAX)?;
        if specs.command.trim().is_empty() {
            return Err(LlError::new("spec.command", "is empty"));
        }
        check_text("spec.job_name", &specs.job_name, NAME_BYTES_MAX)?;
        check_text("spec.project", &specs.project, NAME_BYTES_MAX)?;
        check_text("spec.pre_exec", &specs.pre_exec, COMMAND_BYTES_MAX)?;
        check_text("spec.post_exec", &specs.post_exec, COMMAND_BYTES_MAX)?;
        check_text("spec.queue_pre_exec", &specs.queue_pre_exec, COMMAND_BYTES_MAX)?;
        check_text("spec.queue_post_exec", &specs.queue_post_exec, COMMAND_BYTES_MAX)?;
        check_paths(
            "spec",
            &[
                ("cwd", &specs.cwd),
                ("sub_home_dir", &specs.sub_home_dir),
                ("input_file", &specs.input_file),
                ("output_file", &specs.output_file),
                ("error_file", &specs.error_file),
                ("login_shell", &specs.login_shell),
            ],
        )?;
        if !specs.sub_home_dir.starts_with('/') {
            return Err(LlError::new("spec.sub_home_dir", "is not an absolute path"));
        }
        check_file_flags("spec.file_flags", specs.file_flags)?;
        if specs.umask > 0o777 {
            return Err(LlError::new("spec.umask", format!("{:#o} is not a file mode mask", specs.umask)));
        }
        check_env("spec.env", &specs.env)?;
        check_slots("spec.n_slots", specs.n_slots)?;
        Ok(JobSpec { job, user, queue, exec_hosts, specs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> wire::JobSpecs {
        wire::JobSpecs {
            job: wire::WireJobRef { job_id: 7, array_index: 0 },
            submit_time: 1,
            dispatch_time: 2,
            dispatch_seq: 1,
            user_id: 1000,
            group_id: 1000,
            user_name: "alice".into(),
            queue: "normal".into(),
            job_name: "sleeper".into(),
            command: "sleep 1".into(),
            from_host: "vm".into(),
            cwd: "work".into(),
            sub_home_dir: "/home/alice".into(),
            input_file: String::new(),
            output_file: String::new(),
            error_file: String::new(),
            file_flags: 0,
            n_slots: 1,
            exec_hosts: vec!["vm".into()],
            umask: 0o022,
            run_limit_s: 0,
            mem_limit_kb: 0,
            terminate_interval_s: 10,
            project: "default".into(),
            login_shell: String::new(),
            pre_exec: String::new(),
            env: vec![wire::EnvVar { name: "PATH".into(), value: "/bin".into() }],
            post_exec: String::new(),
            queue_pre_exec: String::new(),
            queue_post_exec: String::new(),
            nice: 0,
            limits: wire::ResourceLimits::default(),
            job_starter: String::new(),
        }
    }

    // Goal: a well-formed snapshot passes and keeps every field.
    #[test]
    fn good_spec_passes_unchanged() {
        let spec = JobSpec::try_from(specs()).expect("valid");
        assert_eq!(spec.job().to_string(), "7");
        assert_eq!(spec.specs(), &specs());
    }

    // Goal: each structural defect is refused and the error names its field.
    #[test]
    fn each_defect_names_its_field() {
        type Mutation = fn(&mut wire::JobSpecs);
        let cases: [(&str, Mutation); 9] = [
            ("spec.job", |s| s.job.job_id = 0),
            ("spec.dispatch_seq", |s| s.dispatch_seq = 0),
            ("spec.user_name", |s| s.user_name = "a b".into()),
            ("spec.exec_hosts", |s| s.exec_hosts.clear()),
            ("spec.command", |s| s.command = "  ".into()),
            ("spec.sub_home_dir", |s| s.sub_home_dir = "home".into()),
            ("spec.umask", |s| s.umask = 0o1000),
            ("spec.env[0].name", |s| s.env[0].name = "A=B".into()),
            ("spec.n_slots", |s| s.n_slots = SLOTS_MAX + 1),
        ];
        for (field, mutate) in cases {
            let mut bad = specs();
            mutate(&mut bad);
            assert_eq!(JobSpec::try_from(bad).expect_err(field).field, field);
        }
    }

    // Goal: the interactive bits pass in their combinations (-I, -Ip, -Is), and a
    // pseudo-terminal without an interactive job, shell mode without a pseudo-terminal or an
    // unknown bit is refused, naming the field.
    #[test]
    fn interactive_flags() {
        use wire::submit_flags::{INTERACTIVE, PTY, PTY_SHELL, TRUNCATE_OUTPUT};
        for good in
            [INTERACTIVE, INTERACTIVE | PTY, INTERACTIVE | PTY | PTY_SHELL, TRUNCATE_OUTPUT | INTERACTIVE]
        {
            assert!(JobSpec::try_from(wire::JobSpecs { file_flags: good, ..specs() }).is_ok(), "{good:#x}");
        }
        for bad in [PTY, INTERACTIVE | PTY_SHELL, PTY | PTY_SHELL, 0b10_0000] {
            let error =
                JobSpec::try_from(wire::JobSpecs { file_flags: bad, ..specs() }).expect_err("refused");
            assert_eq!(error.field, "spec.file_flags", "{bad:#x}");
        }
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    // Goal: a submission's size counts the command, the other texts and each
    // environment variable as `NAME=value` with its end, and not what was taken out.
    #[test]
    fn submitted_bytes_counts_texts_and_environment() {
        let request = wire::SubmitRequest {
            command: "echo hi".into(),
            cwd: "/tmp".into(),
            home_dir: "/home/a".into(),
            hosts: vec!["h1".into()],
            from_host: "h2".into(),
            env: vec![wire::EnvVar { name: "A".into(), value: "xyz".into() }],
            ..wire::SubmitRequest::default()
        };
        let mut spec = SubmitSpec::try_from(request).expect("valid");
        assert_eq!(spec.submitted_bytes(), 7 + 4 + 7 + 2 + 2 + (1 + 1 + 3 + 1));
        spec.take_environment();
        assert_eq!(spec.submitted_bytes(), 7 + 4 + 7 + 2 + 2);
    }
}
