//! `blaunch`: starts tasks of a parallel job on its hosts (docs/commands.md, "blaunch";
//! the protocol: docs/protocols/batch.md, "Parallel tasks").
//!
//! `blaunch [-n] [-u host_file | -z "host_name ..." | host_name] [-use-env file]
//! [-use-login-shell | -no-shell] command [argument ...]`, run inside a job (`LSB_JOBID`).
//! For each task: a grant from the local sbatchd (TASK_GRANT_REQUEST over the credential
//! socket), then TASK_START to the task host's sbatchd on `LSF_RES_PORT`, whose task
//! shepherd relays the task's output here; `blaunch` waits for every task and exits with
//! the first failing task's status (128 + signal for a task killed by a signal), 0 when all
//! succeeded, 255 when a task could not be started. Without `-u` or `-z`, the first of
//! several operands is the host (as for rsh and ssh); a single operand is a command run once
//! per slot of the job (`LSB_MCPU_HOSTS`). The command's words are joined with blanks and run by the
//! task host's `/bin/sh -c`, as rsh and ssh do (MPICH's hydra quotes its proxy's path).
//! The task's environment is blaunch's own (the job's), plus the `-use-env` file's
//! `NAME=value` lines; its standard input is /dev/null. blaunch ends when its job's process
//! (`LSB_JOBPID`) ends, and its tasks with it ([`watch_job`]). When a task ends, its
//! resource usage is reported to the local sbatchd (TASK_USAGE), which adds it to the job's
//! before blaunch goes on.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::time::Duration;

use lava_batch_wire::{self as wire, Operation};
use lava_conf::BaseConfig;

use crate::args::{self, Item, OptSpec, Order, UsageError};
use crate::client::{self, FrameReadError};
use crate::term;

/// The usage line.
pub const USAGE: &str = "Usage: blaunch [-h] [-V] [-n] [-u host_file | -z \"host_name ...\" | host_name] \
[-use-env file] [-use-login-shell | -no-shell] command [argument ...]\n";

/// The options `blaunch` knows (its parser is `args::scan`, stopping at the first operand).
pub const SPECS: &[OptSpec] = &[
    OptSpec::flag("h"),
    OptSpec::flag("V"),
    OptSpec::flag("n"),
    OptSpec::value("u"),
    OptSpec::value("z"),
    OptSpec::value("use-env"),
    OptSpec::flag("use-login-shell"),
    OptSpec::flag("no-shell"),
];

/// Exit status when a task could not be started (LSF's `exit(-1)`).
const EXIT_FAILED: u8 = 255;
/// Longest wait to connect to a task host.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the local sbatchd's grant.
const GRANT_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest frame read from a task host.
const FRAME_BYTES_MAX: u32 = wire::TASK_OUTPUT_BYTES_MAX + 1024;

/// What the command line asks.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Invocation {
    /// `-u`: a file of host names, one task per line.
    pub host_file: Option<String>,
    /// `-z`: these hosts, one task each.
    pub hosts: Vec<String>,
    /// `-use-env`: a file of `NAME=value` lines added to the tasks' environment.
    pub env_file: Option<String>,
    /// The operands: `[host_name] command [argument ...]`.
    pub operands: Vec<String>,
}

/// Parses the arguments (without the program name); `Ok(None)` for `-h` and `-V`.
pub fn parse_args(args: &[String]) -> Result<Option<Invocation>, UsageError> {
    let mut invocation = Invocation::default();
    for item in args::scan(args, SPECS, Order::StopAtFirstOperand)? {
        match item {
            Item::Opt("h" | "V", _) => return Ok(None),
            Item::Opt("u", Some(file)) => invocation.host_file = Some(file),
            Item::Opt("z", Some(hosts)) => {
                invocation.hosts.extend(hosts.split_whitespace().map(str::to_owned))
            }
            Item::Opt("use-env", Some(file)) => invocation.env_file = Some(file),
            // Standard input is always /dev/null; the command always goes through /bin/sh.
            Item::Opt(_, _) => {}
            Item::Operand(word) => invocation.operands.push(word),
        }
    }
    if invocation.host_file.is_some() && !invocation.hosts.is_empty() {
        return Err(UsageError("-u and -z cannot be used together".to_owned()));
    }
    if invocation.operands.is_empty() {
        return Err(UsageError("no command given".to_owned()));
    }
    Ok(Some(invocation))
}

/// The hosts of `LSB_MCPU_HOSTS` (`host n host n ...`), one entry per slot.
pub fn slots_of(mcpu_hosts: &str) -> Vec<String> {
    let words: Vec<&str> = mcpu_hosts.split_whitespace().collect();
    words
        .chunks(2)
        .flat_map(|pair| {
            let n = pair.get(1).and_then(|n| n.parse::<usize>().ok()).unwrap_or(1);
            std::iter::repeat_n(pair[0].to_owned(), n)
        })
        .collect()
}

/// `main` of the `blaunch` binary.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let invocation = match parse_args(&args) {
        Ok(Some(invocation)) => invocation,
        Ok(None) => {
            if args.iter().any(|a| a == "-V") {
                eprint!("{}", term::VERSION_LINE);
            } else {
                eprint!("{USAGE}");
            }
            return ExitCode::SUCCESS;
        }
        Err(UsageError(message)) => {
            eprintln!("blaunch: {message}");
            eprint!("{USAGE}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    match run(invocation) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("blaunch: {message}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Where the tasks go and what they run, then the tasks themselves.
fn run(invocation: Invocation) -> Result<u8, String> {
    let job_id: u32 = match std::env::var("LSB_JOBID") {
        Ok(id) => id.parse().map_err(|_| format!("LSB_JOBID <{id}> is not a job id"))?,
        Err(_) => return Err("LSB_JOBID is not set: blaunch can only be used within an LSF job".to_owned()),
    };
    let array_index: u32 = std::env::var("LSB_JOBINDEX").ok().and_then(|i| i.parse().ok()).unwrap_or(0);
    let config = client::load_config().map_err(|err| err.to_string())?;
    let slots = slots_of(&std::env::var("LSB_MCPU_HOSTS").unwrap_or_default());
    let mut operands = invocation.operands;
    let hosts: Vec<String> = if let Some(file) = &invocation.host_file {
        let text = std::fs::read_to_string(file).map_err(|err| format!("host file {file}: {err}"))?;
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
            .collect()
    } else if !invocation.hosts.is_empty() {
        invocation.hosts
    } else if operands.len() > 1 {
        // As rsh and ssh: `blaunch host command ...`.
        vec![operands.remove(0)]
    } else {
        slots
    };
    if hosts.is_empty() {
        return Err("no host to run on: the job's LSB_MCPU_HOSTS is empty".to_owned());
    }
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    if let Some(file) = &invocation.env_file {
        let text = std::fs::read_to_string(file).map_err(|err| format!("environment file {file}: {err}"))?;
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = line.split_once('=').ok_or_else(|| {
                format!("environment file {file}:{}: `{line}` is not NAME=value", number + 1)
            })?;
            env.insert(name.trim().to_owned(), value.trim().to_owned());
        }
    }
    let env: Vec<wire::EnvVar> = env.into_iter().map(|(name, value)| wire::EnvVar { name, value }).collect();
    let cwd = std::env::current_dir().map(|dir| dir.display().to_string()).unwrap_or_default();
    let command = operands.join(" ");
    let job = wire::WireJobRef { job_id, array_index };
    watch_job(job_id);
    let tasks: Vec<_> = hosts
        .into_iter()
        .map(|host| {
            let start = (config.clone(), host, command.clone(), env.clone(), cwd.clone());
            std::thread::spawn(move || {
                let (config, host, command, env, cwd) = start;
                run_task(&config, job, &host, command, env, cwd)
                    .map_err(|message| format!("{host}: {message}"))
            })
        })
        .collect();
    let mut code = 0u8;
    for task in tasks {
        let outcome = task.join().unwrap_or_else(|_| Err("a task's thread failed".to_owned()));
        match outcome {
            Ok(status) => {
                if code == 0 {
                    code = status;
                }
            }
            Err(message) => {
                eprintln!("blaunch: {message}");
                code = EXIT_FAILED;
            }
        }
    }
    Ok(code)
}

/// How often blaunch looks whether its job's process still runs.
const JOB_WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// The start time of process `pid` (field 22 of `/proc/PID/stat`), which tells it from a
/// later process with the same pid.
fn start_time(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19).map(str::to_owned)
}

/// blaunch ends with its job: once the job's process (`LSB_JOBPID`) has ended, it exits,
/// which closes its connections and so ends every task it started (their shepherds kill a
/// task whose connection ends). A job whose leader exits leaves no task behind, even when
/// blaunch was started in the background.
fn watch_job(job_id: u32) {
    let Some(pid) = std::env::var("LSB_JOBPID").ok().filter(|pid| pid.parse::<u32>().is_ok()) else {
        return;
    };
    let Some(started) = start_time(&pid) else { return };
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(JOB_WATCH_INTERVAL);
            if start_time(&pid).as_ref() != Some(&started) {
                eprintln!("blaunch: job <{job_id}> has ended; its tasks are ended with it");
                std::process::exit(i32::from(EXIT_FAILED));
            }
        }
    });
}

/// One task, from its grant to its exit: the task's exit status as a shell gives it.
fn run_task(
    config: &BaseConfig,
    job: wire::WireJobRef,
    host: &str,
    command: String,
    env: Vec<wire::EnvVar>,
    cwd: String,
) -> Result<u8, String> {
    let grant = ask_grant(config, job, host)?;
    let addr = task_addr(config, host)?;
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|err| format!("cannot connect to the sbatchd of host <{host}> at {addr}: {err}"))?;
    let _ = stream.set_nodelay(true);
    let start = wire::TaskStart { grant, command, env, cwd };
    let body = lava_xdr::to_bytes(&start).map_err(|err| err.to_string())?;
    client::write_frame(&mut stream, Operation::TaskStart, 1, &body)
        .map_err(|err| format!("cannot send the task to host <{host}>: {err}"))?;
    let limits = lava_xdr::Limits { input_bytes_max: FRAME_BYTES_MAX as usize, ..lava_xdr::Limits::DEFAULT };
    loop {
        let (header, body) = match client::read_frame(&mut stream, FRAME_BYTES_MAX) {
            Ok(frame) => frame,
            Err(FrameReadError::Io(err)) => return Err(format!("lost the task on host <{host}>: {err}")),
            Err(FrameReadError::Protocol(detail)) => return Err(detail),
        };
        let decode_err = |err: lava_xdr::Error| format!("malformed answer from host <{host}>: {err}");
        match Operation::from_code(header.operation) {
            Some(Operation::TaskStarted) => {}
            Some(Operation::TaskOutput) => {
                let output: wire::TaskOutput = lava_xdr::from_bytes(&body, &limits).map_err(decode_err)?;
                if output.stream == wire::TASK_STDERR {
                    let _ = io::stderr().lock().write_all(&output.data);
                } else {
                    let mut out = io::stdout().lock();
                    let _ = out.write_all(&output.data);
                    let _ = out.flush();
                }
            }
            Some(Operation::TaskExit) => {
                let exit: wire::TaskExit = lava_xdr::from_bytes(&body, &limits).map_err(decode_err)?;
                // The task's usage is the job's (its local sbatchd adds it to the job's record
                // before answering, so the job's finish, later, counts it).
                if let Err(message) = report_usage(config, job, host, exit.rusage) {
                    eprintln!(
                        "blaunch: the resource usage of the task on host <{host}> is not counted: {message}"
                    );
                }
                let status = exit.wait_status;
                let code = if status & 0x7f == 0 { (status >> 8) & 0xff } else { 128 + (status & 0x7f) };
                return Ok(u8::try_from(code).unwrap_or(EXIT_FAILED));
            }
            Some(Operation::RequestFailed) => {
                let error: wire::ErrorReply = lava_xdr::from_bytes(&body, &limits).map_err(decode_err)?;
                return Err(format!("host <{host}> refused the task: {}", error.message));
            }
            _ => return Err(format!("host <{host}> answered with operation {}", header.operation)),
        }
    }
}

/// The sealed grant for a task on `host`, from the local sbatchd.
fn ask_grant(config: &BaseConfig, job: wire::WireJobRef, host: &str) -> Result<Vec<u8>, String> {
    let body = lava_xdr::to_bytes(&wire::TaskGrantRequest { job, host: host.to_owned() })
        .map_err(|err| err.to_string())?;
    let body = ask_local(config, Operation::TaskGrantRequest, &body, Operation::TaskGrantReply)?;
    let reply: wire::TaskGrantReply = lava_xdr::from_bytes(&body, &lava_xdr::Limits::DEFAULT)
        .map_err(|err| format!("malformed grant: {err}"))?;
    Ok(reply.grant)
}

/// Has the local sbatchd add an ended task's usage to the job's (TASK_USAGE).
fn report_usage(
    config: &BaseConfig,
    job: wire::WireJobRef,
    host: &str,
    rusage: wire::ResourceUsage,
) -> Result<(), String> {
    let body = lava_xdr::to_bytes(&wire::TaskUsage { job, host: host.to_owned(), rusage })
        .map_err(|err| err.to_string())?;
    ask_local(config, Operation::TaskUsage, &body, Operation::TaskUsageReply).map(|_| ())
}

/// One request to the local sbatchd over the credential socket: the body of its `answer`,
/// or the refusal's message.
fn ask_local(
    config: &BaseConfig,
    operation: Operation,
    body: &[u8],
    answer: Operation,
) -> Result<Vec<u8>, String> {
    let path = &config.lsf.cmd_socket;
    let mut socket = UnixStream::connect(path)
        .map_err(|err| format!("cannot connect to the local sbatchd at {}: {err}", path.display()))?;
    let _ = socket.set_read_timeout(Some(GRANT_TIMEOUT));
    let _ = socket.set_write_timeout(Some(GRANT_TIMEOUT));
    client::write_frame(&mut socket, operation, 1, body)
        .map_err(|err| format!("cannot ask the local sbatchd: {err}"))?;
    let (header, body) = client::read_frame(&mut socket, 64 * 1024).map_err(|err| match err {
        FrameReadError::Io(err) => format!("no answer from the local sbatchd: {err}"),
        FrameReadError::Protocol(detail) => detail,
    })?;
    let limits = lava_xdr::Limits::DEFAULT;
    match Operation::from_code(header.operation) {
        Some(op) if op == answer => Ok(body),
        Some(Operation::RequestFailed) => {
            let error: wire::ErrorReply =
                lava_xdr::from_bytes(&body, &limits).map_err(|err| format!("malformed refusal: {err}"))?;
            Err(error.message)
        }
        _ => Err(format!("the local sbatchd answered with operation {}", header.operation)),
    }
}

/// The task port of `host`: its `LAVA_ADDR` in lsf.cluster, else its name resolved, and
/// `LSF_RES_PORT`.
fn task_addr(config: &BaseConfig, host: &str) -> Result<SocketAddr, String> {
    let port = config.lsf.res_port;
    if let Some(ip) = config.cluster.host(host).and_then(|h| h.addr) {
        return Ok(SocketAddr::new(ip, port));
    }
    (host, port)
        .to_socket_addrs()
        .map_err(|err| format!("cannot resolve host <{host}>: {err}"))?
        .next()
        .ok_or_else(|| format!("host <{host}> has no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    // Goal: hydra's command line (`-n host "proxy" --flags`) keeps the proxy's own options as
    // operands; -z splits its hosts; -u with -z and a missing command are usage errors.
    #[test]
    fn parses_lsf_and_hydra_command_lines() {
        let parsed =
            parse_args(&args(&["-n", "hA", "\"/usr/bin/hydra_pmi_proxy\"", "--control-port", "vm:1"]))
                .expect("parses")
                .expect("runs");
        assert_eq!(parsed.operands, args(&["hA", "\"/usr/bin/hydra_pmi_proxy\"", "--control-port", "vm:1"]));
        let parsed = parse_args(&args(&["-z", "h1 h2", "hostname"])).expect("parses").expect("runs");
        assert_eq!((parsed.hosts, parsed.operands), (args(&["h1", "h2"]), args(&["hostname"])));
        assert!(parse_args(&args(&["-u", "f", "-z", "h", "x"])).is_err());
        assert_eq!(parse_args(&args(&["-n"])), Err(UsageError("no command given".to_owned())));
        assert_eq!(parse_args(&args(&["-h"])), Ok(None));
    }

    // Goal: LSB_MCPU_HOSTS gives one task per slot.
    #[test]
    fn one_slot_per_host_count() {
        assert_eq!(slots_of("h0 2 h1 1"), args(&["h0", "h0", "h1"]));
        assert!(slots_of("").is_empty());
    }
}
