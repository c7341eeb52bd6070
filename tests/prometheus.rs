//! The metrics endpoints scraped by the real Prometheus server (Debian's `prometheus`,
//! which `.ci/run` installs), and the example alerting rules of `etc/prometheus/` checked by
//! its `promtool`. Each test says SKIPPED and passes when the program it needs is absent.

mod util;

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use util::{Cluster, STARTUP_TIMEOUT, fixed_port, repo_root, submitted_job_id, wait_until};

/// The example alerting rules.
fn alerts_file() -> PathBuf {
    repo_root().join("etc/prometheus/lavacore-alerts.yml")
}

/// `program`'s path when it is installed.
fn installed(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| candidate.is_file())
}

/// Longest Prometheus may take to scrape what the test waits for (1 s interval).
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(60);

// Goal: the shipped alerting rules are valid for Prometheus (`promtool check rules`).
#[test]
fn alert_rules_pass_promtool() {
    let Some(promtool) = installed("promtool") else {
        eprintln!("SKIPPED: promtool is not installed (apt-get install prometheus)");
        return;
    };
    let out =
        Command::new(promtool).args(["check", "rules"]).arg(alerts_file()).output().expect("run promtool");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool check rules:\n{said}");
    assert!(said.contains("SUCCESS: 4 rules found"), "{said}");
}

/// One answer of Prometheus's HTTP API to an instant query, as text.
fn query(port: u16, promql: &str) -> String {
    let encoded: String = promql
        .bytes()
        .map(|byte| match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => char::from(byte).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to prometheus");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("a read timeout");
    write!(stream, "GET /api/v1/query?query={encoded} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .expect("ask prometheus");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read prometheus's answer");
    answer
}

/// The values of an instant query's vector (`"value":[time,"V"]` of each series).
fn values(answer: &str) -> Vec<String> {
    answer
        .split("\"value\":[")
        .skip(1)
        .filter_map(|rest| rest.split(",\"").nth(1)?.split('"').next().map(str::to_owned))
        .collect()
}

// Goal: with every daemon's metrics port set in lsf.conf, a real Prometheus scraping them
// sees all five `up` (through its HTTP API), and a job run to DONE shows in mbatchd's
// counter of finished jobs and sbatchd's sent BATCH_JOB_FINISH; the alerting rules load in it.
#[test]
fn prometheus_scrapes_every_daemon() {
    let Some(prometheus) = installed("prometheus") else {
        eprintln!("SKIPPED: prometheus is not installed (apt-get install prometheus)");
        return;
    };
    let mut cluster = Cluster::new();
    let (lim_port, mxfsd_port) = (fixed_port(), fixed_port());
    cluster.write_file(
        "etc/lsf.cluster.lavacore",
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT\n\
             localhost  !  !  1  (cs linux)  127.0.0.1  {lim_port}  -  {mxfsd_port}\nEnd Host\n"
        ),
    );
    let daemons = ["mbatchd", "sbatchd", "lim", "mxfsd", "coordinator"];
    let keys = [
        "LAVA_MBD_METRICS_PORT",
        "LAVA_SBD_METRICS_PORT",
        "LAVA_LIM_METRICS_PORT",
        "LAVA_MXFSD_METRICS_PORT",
        "LAVA_COORD_METRICS_PORT",
    ];
    let mut targets = Vec::new();
    for (daemon, key) in daemons.iter().zip(keys) {
        let port = fixed_port();
        cluster.rewrite_lsf_conf(key, &port.to_string());
        targets.push((daemon, port));
    }
    let _lim = cluster.start_lim("localhost");
    let _mbatchd = cluster.start_mbatchd();
    let _sbatchd = cluster.start_sbatchd("localhost");
    let _coordinator = cluster.start_coordinator(0, &[]);
    let socket = cluster.dir().join("run/mxfsd.sock");
    let ready = cluster.dir().join("run/mxfsd.port");
    let mxfsd_args: Vec<&OsStr> = vec![
        "--host".as_ref(),
        "localhost".as_ref(),
        "--socket".as_ref(),
        socket.as_ref(),
        "--ready-file".as_ref(),
        ready.as_ref(),
    ];
    let mut mxfsd = cluster.spawn("mxfsd", Path::new(env!("CARGO_BIN_EXE_mxfsd")), &mxfsd_args);
    mxfsd.wait_for_port_file(&ready, STARTUP_TIMEOUT);

    let web_port = fixed_port();
    let scrape_configs: String = targets
        .iter()
        .map(|(daemon, port)| {
            format!("  - job_name: lavacore-{daemon}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        })
        .collect();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n{scrape_configs}",
        alerts_file().display()
    );
    cluster.write_file("prometheus.yml", &config);
    let config_path = cluster.dir().join("prometheus.yml");
    let data = cluster.dir().join("prometheus-data");
    let listen = format!("--web.listen-address=127.0.0.1:{web_port}");
    let config_arg = format!("--config.file={}", config_path.display());
    let data_arg = format!("--storage.tsdb.path={}", data.display());
    let args: Vec<&OsStr> =
        vec![config_arg.as_ref(), data_arg.as_ref(), listen.as_ref(), "--log.level=warn".as_ref()];
    let mut server = cluster.spawn("prometheus", &prometheus, &args);

    // Every daemon up, as Prometheus's own API says.
    let mut last = String::new();
    wait_until("all five daemons up in prometheus", SCRAPE_TIMEOUT, || {
        assert!(server.is_running(), "prometheus exited:\n{}", server.log());
        last = TcpStream::connect(("127.0.0.1", web_port))
            .ok()
            .map(|_| query(web_port, "up"))
            .unwrap_or_default();
        let up = values(&last);
        (up.len() == daemons.len() && up.iter().all(|value| value == "1")).then_some(())
    });
    for daemon in daemons {
        assert!(last.contains(&format!("\"job\":\"lavacore-{daemon}\"")), "no {daemon} in {last}");
    }

    // A job's completion shows in the job counters.
    let out = cluster.command(env!("CARGO_BIN_EXE_bsub")).args(["true"]).output().expect("run bsub");
    let job = submitted_job_id(&String::from_utf8_lossy(&out.stdout));
    wait_until(&format!("job {job} DONE"), SCRAPE_TIMEOUT, || {
        let out = cluster
            .command(env!("CARGO_BIN_EXE_bjobs"))
            .args(["-a", "-noheader", &job.to_string()])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .nth(2)
            .is_some_and(|stat| stat == "DONE")
            .then_some(())
    });
    for (promql, what) in [
        ("lavacore_mbatchd_jobs_finished_total{status=\"done\"}", "mbatchd's finished jobs"),
        (
            "lavacore_sbatchd_messages_sent_total{operation=\"BATCH_JOB_FINISH\"}",
            "sbatchd's BATCH_JOB_FINISH messages",
        ),
    ] {
        let deadline = std::time::Instant::now() + SCRAPE_TIMEOUT;
        loop {
            let answer = query(web_port, promql);
            if values(&answer) == ["1"] {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what} never counted the job; last answer:\n{answer}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // The rule file loaded and its rules are evaluated.
    let rules = query(web_port, "ALERTS");
    assert!(rules.contains("\"status\":\"success\""), "{rules}");
}
