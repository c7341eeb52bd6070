//! LIM §6's status word (`status0`) end to end on loopback, with the real binaries: three
//! logical hosts h0 (master: lim, mbatchd, sbatchd), h1 and h2 (lim, sbatchd), each with its
//! own ports (lsf.cluster's per-host columns) and short lim intervals. h2 has a `mem`
//! threshold no machine reaches, so its lim reports it busy. `lsadmin limlock` locks h1:
//! `lsload` shows `lockU`, `bhosts` shows h1 `closed` (`closed_Lock` with `-w`) and a job for
//! h1 stays pending; `lsadmin limunlock` lets it run. A timed lock on the master ends by
//! itself. Every daemon runs in the test's own folder and is killed when the test ends.

mod util;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Output;
use std::time::Duration;

use lava_lim_wire as wire;
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use util::lim_output::host_line;
use util::{Cluster, Daemon, IO_TIMEOUT, fixed_port, wait_until};

const REPORT_MS: u64 = 300;
const BEACON_MS: u64 = 300;
/// Longest a state change may take to show (debug build, busy 2-core machine).
const CHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// A `mem` threshold (MB) above any machine's available memory: the host is always busy.
const UNREACHABLE_MEM_MB: u64 = 1_000_000_000;

/// Runs `program` with `args`, as on logical host `host` when given (`LAVA_HOST`).
fn run_on(cluster: &Cluster, host: Option<&str>, program: &str, args: &[&str]) -> Output {
    let bin = util::mbatchd_bin().with_file_name(program);
    let mut command = cluster.command(bin);
    command.args(args).env_remove("LAVA_HOST");
    if let Some(host) = host {
        command.env("LAVA_HOST", host);
    }
    command.output().expect("run a command")
}

fn run(cluster: &Cluster, program: &str, args: &[&str]) -> Output {
    run_on(cluster, None, program, args)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The fields of `host`'s line in the output of `program args`.
fn fields(cluster: &Cluster, program: &str, args: &[&str], host: &str) -> Vec<String> {
    let out = stdout(&run(cluster, program, args));
    host_line(&out, host).map(|line| line.split_whitespace().map(str::to_owned).collect()).unwrap_or_default()
}

/// Waits until the status column (second field) of `host` in `program args` is `want`;
/// returns the line's fields.
fn wait_status(cluster: &Cluster, program: &str, args: &[&str], host: &str, want: &str) -> Vec<String> {
    let mut last = Vec::new();
    wait_until(&format!("{program} {args:?} to show {host} {want} (last: {last:?})"), CHANGE_TIMEOUT, || {
        last = fields(cluster, program, args, host);
        (last.get(1).map(String::as_str) == Some(want)).then(|| last.clone())
    })
}

/// The STAT column of `bjobs -a ID`.
fn job_status(cluster: &Cluster, job: u32) -> String {
    let out = stdout(&run(cluster, "bjobs", &["-a", "-noheader", &job.to_string()]));
    out.split_whitespace().nth(2).unwrap_or_default().to_owned()
}

fn wait_job(cluster: &Cluster, job: u32, want: &[&str]) -> String {
    wait_until(&format!("job {job} to reach {want:?}"), CHANGE_TIMEOUT, || {
        let status = job_status(cluster, job);
        want.contains(&status.as_str()).then_some(status)
    })
}

fn submit(cluster: &Cluster, args: &[&str]) -> u32 {
    let out = run(cluster, "bsub", args);
    assert!(out.status.success(), "bsub failed: {}{}", stdout(&out), stderr(&out));
    util::submitted_job_id(&stdout(&out))
}

/// `lsadmin ARGS` as on `host`: (success, stdout, stderr).
fn lsadmin(cluster: &Cluster, host: &str, args: &[&str]) -> (bool, String, String) {
    let out = run_on(cluster, Some(host), "lsadmin", args);
    (out.status.success(), stdout(&out), stderr(&out))
}

/// A LIM_TCP_LOCK request sent straight to `addr` from an ordinary (unprivileged) port.
fn lock_from_unprivileged_port(addr: SocketAddr) -> wire::LockReply {
    let mut stream = TcpStream::connect(addr).expect("connect to the lim");
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("set a read timeout");
    let body = lava_xdr::to_bytes(&wire::LockRequest { lock: true, duration_s: 0 }).expect("encodes");
    let mut request = Vec::new();
    FrameHeader {
        sequence: 1,
        operation: wire::LIM_TCP_LOCK,
        version: wire::LIM_VERSION,
        length: body.len() as u32,
        status: 0,
    }
    .write(&mut request);
    request.extend_from_slice(&body);
    stream.write_all(&request).expect("send the request");
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).expect("a reply");
    let mut reply = vec![0u8; FrameHeader::parse(&head).expect("a header").length as usize];
    stream.read_exact(&mut reply).expect("the reply's body");
    lava_xdr::from_bytes(&reply, &lava_xdr::Limits::default()).expect("decodes")
}

// Goal: the status word drives lsload, bhosts and dispatch: a host beyond its threshold is
// `busy` with `*` on the index and `closed_Busy`; `lsadmin limlock` makes h1 `lockU`,
// `closed_Lock`, and a job for it stays PEND until `lsadmin limunlock`, after which it runs;
// a second lock or unlock is refused with LSF's words, a lock from an unprivileged port is
// refused by lim itself, and `limlock -t` on the master ends by itself.
#[test]
fn limlock_closes_a_host_and_limunlock_opens_it() {
    let hosts = ["h0", "h1", "h2"];
    let mut cluster = Cluster::with_hosts(&hosts);
    let lim_ports: Vec<u16> = hosts.iter().map(|_| fixed_port()).collect();
    let rows: String = hosts
        .iter()
        .zip(&lim_ports)
        .map(|(h, lim_port)| {
            let mem = if *h == "h2" { UNREACHABLE_MEM_MB.to_string() } else { "-".to_owned() };
            format!("{h} ! ! 1 (cs linux) 127.0.0.1 {lim_port} {} {} {mem}\n", fixed_port(), fixed_port())
        })
        .collect();
    cluster.write_file(
        "etc/lsf.cluster.lavacore",
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME model type server RESOURCES LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT LAVA_MXFSD_PORT mem\n\
             {rows}End Host\n"
        ),
    );
    cluster.rewrite_lsf_conf("LAVA_LIM_BEACON_INTERVAL_MS", &BEACON_MS.to_string());
    cluster.rewrite_lsf_conf("LAVA_LIM_REPORT_INTERVAL_MS", &REPORT_MS.to_string());
    let _lims: Vec<Daemon> = hosts.iter().map(|host| cluster.start_lim(host)).collect();
    let _mbatchd = cluster.start_mbatchd();
    let envdirs = [cluster.envdir(), cluster.host_envdir("h1"), cluster.host_envdir("h2")];
    let _sbatchds: Vec<Daemon> =
        hosts.iter().zip(&envdirs).map(|(host, envdir)| cluster.start_sbatchd_in(host, envdir)).collect();

    // h2 is beyond its mem threshold: busy, its mem value marked, closed for batch jobs.
    wait_status(&cluster, "lsload", &[], "h0", "ok");
    wait_status(&cluster, "lsload", &[], "h1", "ok");
    let h2 = wait_status(&cluster, "lsload", &[], "h2", "busy");
    assert!(h2.last().is_some_and(|mem| mem.starts_with('*')), "mem is marked: {h2:?}");
    assert!(h2[2..h2.len() - 1].iter().all(|value| !value.starts_with('*')), "only mem: {h2:?}");
    wait_status(&cluster, "bhosts", &[], "h0", "ok");
    wait_status(&cluster, "bhosts", &[], "h1", "ok");
    wait_status(&cluster, "bhosts", &[], "h2", "closed");
    assert_eq!(fields(&cluster, "bhosts", &["-w"], "h2")[1], "closed_Busy");

    // lsadmin limlock on h1.
    let (ok, out, err) = lsadmin(&cluster, "h1", &["limlock"]);
    assert!(ok && out == "Host is locked\n", "{out}{err}");
    let (ok, _, err) = lsadmin(&cluster, "h1", &["limlock"]);
    assert!(!ok && err == "ls_lockhost: Host is already locked\n", "{err}");
    wait_status(&cluster, "lsload", &[], "h1", "lockU");
    wait_status(&cluster, "bhosts", &[], "h1", "closed");
    assert_eq!(fields(&cluster, "bhosts", &["-w"], "h1")[1], "closed_Lock");
    assert_eq!(fields(&cluster, "bhosts", &[], "h0")[1], "ok", "only h1 is locked");

    let job = submit(&cluster, &["-m", "h1", "sleep", "1"]);
    let busy_job = submit(&cluster, &["-m", "h2", "sleep", "1"]);
    // Several lim polls and dispatch turns (MBD_SLEEP_TIME 1 s) later, both still wait.
    std::thread::sleep(Duration::from_millis(10 * REPORT_MS));
    assert_eq!(job_status(&cluster, job), "PEND");
    assert_eq!(job_status(&cluster, busy_job), "PEND");
    let reasons = stdout(&run(&cluster, "bjobs", &["-p"]));
    assert!(
        reasons.contains("Host is locked") && reasons.contains("Load threshold reached"),
        "pending reasons:\n{reasons}"
    );

    // Only root may lock, and only from the host itself: lim refuses a plain port.
    let refused = lock_from_unprivileged_port(SocketAddr::from(([127, 0, 0, 1], lim_ports[0])));
    assert!(!refused.done && refused.message.contains("Permission denied"), "{refused:?}");

    // lsadmin limunlock: the job runs.
    let (ok, out, err) = lsadmin(&cluster, "h1", &["limunlock"]);
    assert!(ok && out == "Host is unlocked\n", "{out}{err}");
    let (ok, _, err) = lsadmin(&cluster, "h1", &["limunlock"]);
    assert!(!ok && err == "ls_unlockhost: Host is not locked\n", "{err}");
    wait_status(&cluster, "lsload", &[], "h1", "ok");
    wait_job(&cluster, job, &["RUN", "DONE"]);
    wait_job(&cluster, job, &["DONE"]);
    assert_eq!(fields(&cluster, "bhosts", &[], "h1")[1], "ok");
    assert_eq!(job_status(&cluster, busy_job), "PEND", "h2 stays busy");

    // A timed lock on the master ends by itself.
    let (ok, out, err) = lsadmin(&cluster, "h0", &["limlock", "-t", "2"]);
    assert!(ok && out == "Host is locked for 2 seconds\n", "{out}{err}");
    wait_status(&cluster, "lsload", &[], "h0", "lockU");
    wait_status(&cluster, "lsload", &[], "h0", "ok");
    wait_status(&cluster, "bhosts", &[], "h0", "ok");
}
