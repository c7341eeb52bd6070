//! `badmin showconf mbd` and `lsadmin showconf lim`: the configuration in
//! effect, in LSF's layout, one title line then one `    KEY = value` line per
//! parameter:
//!
//! ```text
//! MBD configuration at Thu Nov 26 03:45:00 2026
//!     CLEAN_PERIOD = 3600
//!     LSB_SHAREDIR = /var/lib/lavacore
//!     LSF_CONFDIR = /etc/lavacore
//! ```
//!
//! What is shown: every key of `lsf.conf`, the paths as the daemons resolve
//! them (absolute; `LSF_CONFDIR`, `LSB_CONFDIR`, `LSB_SHAREDIR`, `LSF_ENVDIR`
//! and the other folders with their defaults when the file leaves them out),
//! the ports and `LSF_UNIT_FOR_LIMITS` with their defaults; for `mbd`, also
//! lsb.params' values in effect (defaults included). Keys are sorted. A key
//! whose value is empty is left out: tools split each line at ` = ` and expect
//! a value (Snakemake's LSF executor does), and LSF prints none either.
//!
//! The values are read from the configuration files as the daemons load them
//! (the files a `badmin reconfig` or a restart has made current); LavaCore's
//! mbatchd and lim are not asked, so a file edited without a reconfiguration
//! shows its new value here before the daemons use it.

use std::collections::BTreeMap;
use std::path::Path;

use jiff::tz::TimeZone;
use lava_conf::{LimitUnit, LsbParams, LsfConf};

use crate::format::long_date;

/// Which daemon's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Daemon {
    /// `badmin showconf mbd`: lsf.conf and lsb.params.
    Mbd,
    /// `lsadmin showconf lim`: lsf.conf.
    Lim,
}

fn path_text(path: &Path) -> String {
    path.display().to_string()
}

fn unit_name(unit: LimitUnit) -> &'static str {
    match unit {
        LimitUnit::Kb => "KB",
        LimitUnit::Mb => "MB",
        LimitUnit::Gb => "GB",
        LimitUnit::Tb => "TB",
        LimitUnit::Pb => "PB",
        LimitUnit::Eb => "EB",
    }
}

/// The `KEY = value` pairs of lsf.conf in effect.
pub fn lsf_conf_values(lsf: &LsfConf) -> BTreeMap<String, String> {
    let mut values: BTreeMap<String, String> =
        lsf.file().iter().map(|(key, entry)| (key.to_owned(), entry.value.clone())).collect();
    let mut set = |key: &str, value: String| {
        values.insert(key.to_owned(), value);
    };
    set("LSF_ENVDIR", path_text(&lsf.envdir));
    set("LSF_CONFDIR", path_text(&lsf.confdir));
    set("LSB_CONFDIR", path_text(&lsf.lsb_confdir));
    set("LSB_SHAREDIR", path_text(&lsf.lsb_sharedir));
    for (key, path) in [
        ("LSF_LOGDIR", &lsf.logdir),
        ("LSF_SERVERDIR", &lsf.serverdir),
        ("LSF_BINDIR", &lsf.bindir),
        ("LSB_JOB_TMPDIR", &lsf.job_tmpdir),
    ] {
        if let Some(path) = path {
            set(key, path_text(path));
        }
    }
    set("LSF_LIM_PORT", lsf.lim_port.to_string());
    set("LSF_RES_PORT", lsf.res_port.to_string());
    set("LSB_MBD_PORT", lsf.mbd_port.to_string());
    set("LSB_SBD_PORT", lsf.sbd_port.to_string());
    set("LSF_UNIT_FOR_LIMITS", unit_name(lsf.unit_for_limits).to_owned());
    set("LAVA_CLUSTER_KEY_FILE", path_text(&lsf.cluster_key_file));
    set("LAVA_CMD_SOCKET", path_text(&lsf.cmd_socket));
    set("LAVA_LIM_TCP_PORT", lsf.lim_tcp_port.to_string());
    set("LAVA_MXFSD_PORT", lsf.mxfsd_port.to_string());
    set("LAVA_COORD_PORT", lsf.coord_port.to_string());
    // The mask as written (validated by the loading); LSF's default otherwise.
    values.entry("LSF_LOG_MASK".to_owned()).or_insert_with(|| "LOG_WARNING".to_owned());
    values
}

/// The `KEY = value` pairs of lsb.params in effect (LSF's defaults for what the
/// file leaves out).
pub fn lsb_params_values(params: &LsbParams, default_queues: &[String]) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let mut set = |key: &str, value: String| {
        values.insert(key.to_owned(), value);
    };
    set("DEFAULT_QUEUE", default_queues.join(" "));
    set("MBD_SLEEP_TIME", params.mbd_sleep_time_s.to_string());
    set("SBD_SLEEP_TIME", params.sbd_sleep_time_s.to_string());
    set("JOB_TERMINATE_INTERVAL", params.job_terminate_interval_s.to_string());
    set("CLEAN_PERIOD", params.clean_period_s.to_string());
    set("MAX_JOB_NUM", params.max_job_num.to_string());
    set("MAX_JOBID", params.max_jobid.to_string());
    set("JOB_ACCEPT_INTERVAL", params.job_accept_interval.to_string());
    set("DEFAULT_PROJECT", params.default_project.clone());
    set("MAX_JOB_ARRAY_SIZE", params.max_job_array_size.to_string());
    if let Some(max) = params.max_pend_jobs {
        set("MAX_PEND_JOBS", max.to_string());
    }
    set("LAVA_MAX_JOB_BYTES", params.max_job_bytes.to_string());
    values
}

/// The whole listing: `MBD configuration at <date>` (or `LIM ...`) then the
/// values, sorted by key, blank-valued ones left out.
pub fn format(daemon: Daemon, values: &BTreeMap<String, String>, now_s: i64, tz: &TimeZone) -> String {
    let title = match daemon {
        Daemon::Mbd => "MBD",
        Daemon::Lim => "LIM",
    };
    let mut out = format!("{title} configuration at {}\n", long_date(now_s, tz));
    for (key, value) in values {
        let value = value.trim();
        if !value.is_empty() {
            out.push_str(&format!("    {key} = {value}\n"));
        }
    }
    out
}

/// What `badmin showconf mbd` prints, from the configuration of `envdir`.
pub fn mbd(envdir: &Path, now_s: i64, tz: &TimeZone) -> Result<String, lava_conf::ConfError> {
    let config = lava_conf::ClusterConfig::load(envdir)?;
    let mut values = lsf_conf_values(&config.lsf);
    values.extend(lsb_params_values(&config.params, &config.default_queues));
    Ok(format(Daemon::Mbd, &values, now_s, tz))
}

/// What `lsadmin showconf lim` prints, from the configuration of `envdir`.
pub fn lim(envdir: &Path, now_s: i64, tz: &TimeZone) -> Result<String, lava_conf::ConfError> {
    let config = lava_conf::BaseConfig::load(envdir)?;
    Ok(format(Daemon::Lim, &lsf_conf_values(&config.lsf), now_s, tz))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: LSF's layout, parseable as Snakemake parses it: the title line, then
    // `    KEY = value` lines sorted by key, each splitting at ` = ` into two
    // parts; relative paths resolved, defaults filled, empty values left out.
    #[test]
    fn layout_and_values() {
        let envdir = Path::new("/etc/lava");
        let lsf =
            LsfConf::parse(envdir, "LSB_SHAREDIR=state\nLSF_LOG_MASK=LOG_INFO\nMY_KEY=\"a b\"\nEMPTY=\n")
                .expect("a valid lsf.conf");
        let mut values = lsf_conf_values(&lsf);
        values.extend(lsb_params_values(&LsbParams::default(), &["normal".to_owned()]));
        let text = format(Daemon::Mbd, &values, 1_732_574_641, &TimeZone::UTC);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "MBD configuration at Mon Nov 25 22:44:01 2024");
        for wanted in [
            "    LSB_SHAREDIR = /etc/lava/state",
            "    LSF_CONFDIR = /etc/lava",
            "    LSB_CONFDIR = /etc/lava/lsbatch",
            "    LSF_ENVDIR = /etc/lava",
            "    LSF_LOG_MASK = LOG_INFO",
            "    LSF_UNIT_FOR_LIMITS = KB",
            "    MY_KEY = a b",
            "    DEFAULT_QUEUE = normal",
            "    CLEAN_PERIOD = 3600",
        ] {
            assert!(lines.contains(&wanted), "{wanted} in\n{text}");
        }
        assert!(!text.contains("EMPTY"), "{text}");
        let keys: Vec<&str> =
            lines[1..].iter().map(|line| line.trim().split(" = ").next().unwrap_or("")).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted);
        assert!(
            lines[1..].iter().all(|line| line.starts_with("    ") && line.trim().split(" = ").count() == 2)
        );
        let lim = format(Daemon::Lim, &lsf_conf_values(&lsf), 0, &TimeZone::UTC);
        assert!(lim.starts_with("LIM configuration at Thu Jan  1 00:00:00 1970\n"), "{lim}");
        assert!(!lim.contains("CLEAN_PERIOD"));
    }
}
