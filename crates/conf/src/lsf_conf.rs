//! `lsf.conf` as typed values, [`LsfConf`], and how its folder is found, [`envdir_from`].
//!
//! # Finding lsf.conf
//! As in LSF, the environment variable `LSF_ENVDIR` names the folder holding `lsf.conf`; when it
//! is unset (or empty) the folder is `/etc`. [`envdir_from`] takes the variable's value as an
//! argument so tests never touch the process environment; [`envdir_from_env`] reads it. An
//! `LSF_ENVDIR=` line inside the file (LSF templates have one) changes nothing: the envdir is
//! the folder the file was read from, and the line stays readable with [`LsfConf::get`].
//!
//! # Paths
//! A relative path in `lsf.conf` is taken relative to the envdir (our extension: LSF leaves it to
//! the working directory). This lets a copied configuration folder work wherever it lands. An
//! empty value (`KEY=`) is the same as leaving the key out.
//!
//! # LSF keys read here
//! | key | field | default |
//! |---|---|---|
//! | `LSF_CONFDIR` | [`LsfConf::confdir`]: holds `lsf.shared` and `lsf.cluster.NAME` | the envdir |
//! | `LSB_CONFDIR` | [`LsfConf::lsb_confdir`]: holds `<cluster>/configdir/lsb.*` | `$LSF_CONFDIR/lsbatch` |
//! | `LSB_SHAREDIR` | [`LsfConf::lsb_sharedir`]: daemons' durable state, under `<cluster>/` | `/var/lib/lavacore` |
//! | `LSF_LOGDIR` | [`LsfConf::logdir`] | none: daemons log to the journal or stderr |
//! | `LSF_LOG_MASK` | [`LsfConf::log_mask`] | `LOG_WARNING` |
//! | `LSF_SERVERDIR` | [`LsfConf::serverdir`]: where the daemons are installed | none |
//! | `LSF_BINDIR` | [`LsfConf::bindir`]: where the commands are installed | none |
//! | `LSF_LIM_PORT` | [`LsfConf::lim_port`]: LIM's UDP port | 6879 (Lava 1.0) |
//! | `LSF_RES_PORT` | [`LsfConf::res_port`]: sbatchd's task port, where `blaunch` starts tasks (LSF's RES port; LavaCore has no RES) | 6878 |
//! | `LSB_MBD_PORT` | [`LsfConf::mbd_port`] | 6881 |
//! | `LSB_SBD_PORT` | [`LsfConf::sbd_port`] | 6882 |
//! | `LSF_UNIT_FOR_LIMITS` | [`LsfConf::unit_for_limits`]: unit of MEMLIMIT and `bsub -M`, and of `-R` memory amounts when larger than MB | `KB` |
//! | `LSB_JOB_TMPDIR` | [`LsfConf::job_tmpdir`] | none |
//! | `LSF_MASTER_LIST` | the master candidates, most preferred first (`BaseConfig::master_candidates`, checked when the cluster loads: server hosts of lsf.cluster, each once) | the first server host alone |
//!
//! When a port key is absent LSF looks in `/etc/services`; we use the defaults above instead, so
//! that reading the configuration never depends on another file. Port 0 is refused: every port
//! here is one that peers connect to. (A daemon asked to bind an ephemeral port for a test gets
//! that from its command line, not from here.)
//!
//! # Our own keys (not in LSF)
//! | key | field | default |
//! |---|---|---|
//! | `LAVA_CLUSTER_NAME` | [`LsfConf::cluster_name`]: which cluster of `lsf.shared` this is; needed only when `lsf.shared` lists several or none | none |
//! | `LAVA_CLUSTER_KEY_FILE` | [`LsfConf::cluster_key_file`]: the cluster key authenticating daemon-to-daemon frames (readable by root only) | `$LSF_CONFDIR/lava.cluster.key` |
//! | `LAVA_MXFSD_PORT` | [`LsfConf::mxfsd_port`]: the lock manager's TCP port | 6883 |
//! | `LAVA_COORD_PORT` | [`LsfConf::coord_port`]: the coordinator's TCP port | 6884 |
//! | `LAVA_MBD_REPL_PORT` | [`LsfConf::mbd_repl_port`]: where mbatchd on a master candidate takes the other candidates' replication messages (docs/failover.md) | 6885 |
//! | `LAVA_COORD_REPL_PORT` | [`LsfConf::coord_repl_port`]: the same for the coordinator on a master candidate (docs/failover.md) | 6886 |
//! | `LAVA_LIM_TCP_PORT` | [`LsfConf::lim_tcp_port`]: LIM's TCP port (queries from `lshosts`, `lsload`) | `LSF_LIM_PORT` (LSF uses one number for both) |
//! | `LAVA_CMD_SOCKET` | [`LsfConf::cmd_socket`]: the local Unix socket the user commands talk to; the local daemon learns the caller's uid from the kernel on it | `/run/lavacore/lava.sock` |
//! | `LAVA_STATE_RESERVE_MB` | [`LsfConf::state_reserve_mb`]: space mbatchd and sbatchd each keep in reserve on their state file system, released for their own records when it fills up (0: none, the full disk is still detected) | 16 |
//! | `LAVA_METRICS_ADDR` | [`LsfConf::metrics_addr`]: the address every daemon's metrics port binds (`0.0.0.0` for every address) | 127.0.0.1 |
//! | `LAVA_MBD_METRICS_PORT` | [`MetricsPorts::mbd`]: mbatchd's metrics port (HTTP, `GET /metrics`, the Prometheus text format) | none: no metrics served |
//! | `LAVA_SBD_METRICS_PORT` | [`MetricsPorts::sbd`]: sbatchd's metrics port | none |
//! | `LAVA_LIM_METRICS_PORT` | [`MetricsPorts::lim`]: lim's metrics port | none |
//! | `LAVA_MXFSD_METRICS_PORT` | [`MetricsPorts::mxfsd`]: mxfsd's metrics port | none |
//! | `LAVA_COORD_METRICS_PORT` | [`MetricsPorts::coord`]: the coordinator's metrics port | none |
//!
//! The state folder is not a key of ours: daemons keep their state under
//! [`LsfConf::work_dir`] (`$LSB_SHAREDIR/<cluster>`), as Lava does.
//!
//! Environment variables do not override `lsf.conf` here (LSF lets a few do so); a daemon that
//! wants that applies it itself. Every key, known or not, is readable with [`LsfConf::get`]:
//! the commands read theirs so (`LSB_BSUB_PARSE_SCRIPT`, `LSB_BJOBS_FORMAT`,
//! `LSB_BJOBS_CONSISTENT_EXIT_CODE`, ...; docs/commands.md).

use std::ffi::OsStr;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use crate::error::{ConfError, ErrorKind};
use crate::fields::Field;
use crate::keyvalue::KeyValueFile;
use crate::value::Value;

/// The folder LSF reads `lsf.conf` from when `LSF_ENVDIR` is unset.
pub const ENVDIR_DEFAULT: &str = "/etc";
/// The name of the file in the envdir.
pub const LSF_CONF_FILE_NAME: &str = "lsf.conf";

/// LSF's default LIM port (Lava 1.0).
pub const LIM_PORT_DEFAULT: u16 = 6879;
/// LSF's default RES port (Lava 1.0).
pub const RES_PORT_DEFAULT: u16 = 6878;
/// LSF's default mbatchd port (Lava 1.0).
pub const MBD_PORT_DEFAULT: u16 = 6881;
/// LSF's default sbatchd port (Lava 1.0).
pub const SBD_PORT_DEFAULT: u16 = 6882;
/// Our default mxfsd port, the next free number after Lava's.
pub const MXFSD_PORT_DEFAULT: u16 = 6883;
/// Our default coordinator port.
pub const COORD_PORT_DEFAULT: u16 = 6884;
/// Default `LAVA_MBD_REPL_PORT`: mbatchd's replication port among master candidates.
pub const MBD_REPL_PORT_DEFAULT: u16 = 6885;
/// Default `LAVA_COORD_REPL_PORT`: the coordinator's replication port among master candidates.
pub const COORD_REPL_PORT_DEFAULT: u16 = 6886;
/// Our default state root when `LSB_SHAREDIR` is absent.
pub const LSB_SHAREDIR_DEFAULT: &str = "/var/lib/lavacore";
/// Our default command socket.
pub const CMD_SOCKET_DEFAULT: &str = "/run/lavacore/lava.sock";
/// Default of `LAVA_STATE_RESERVE_MB`: space, in MiB, each stateful daemon keeps in reserve.
pub const STATE_RESERVE_MB_DEFAULT: u64 = 16;
/// Our default cluster key file name, inside `LSF_CONFDIR`.
pub const CLUSTER_KEY_FILE_NAME: &str = "lava.cluster.key";

/// The folder holding `lsf.conf`, given the value of `LSF_ENVDIR` (unset or empty: `/etc`).
pub fn envdir_from(lsf_envdir: Option<&OsStr>) -> PathBuf {
    match lsf_envdir {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(ENVDIR_DEFAULT),
    }
}

/// The folder holding `lsf.conf`, from this process's `LSF_ENVDIR`.
pub fn envdir_from_env() -> PathBuf {
    envdir_from(std::env::var_os("LSF_ENVDIR").as_deref())
}

/// The level of detail of the daemons' logs (`LSF_LOG_MASK`), from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogMask {
    /// `LOG_EMERG`
    Emerg,
    /// `LOG_ALERT`
    Alert,
    /// `LOG_CRIT`
    Crit,
    /// `LOG_ERR`
    Err,
    /// `LOG_WARNING`, LSF's default.
    Warning,
    /// `LOG_NOTICE`
    Notice,
    /// `LOG_INFO`
    Info,
    /// `LOG_DEBUG`
    Debug,
    /// `LOG_DEBUG1`
    Debug1,
    /// `LOG_DEBUG2`
    Debug2,
    /// `LOG_DEBUG3`
    Debug3,
}

impl LogMask {
    /// The `tracing` level name this mask maps to (`error`, `warn`, `info`,
    /// `debug`, `trace`): the daemons' default log filter when `RUST_LOG` is unset.
    pub fn level_name(self) -> &'static str {
        match self {
            LogMask::Emerg | LogMask::Alert | LogMask::Crit | LogMask::Err => "error",
            LogMask::Warning => "warn",
            LogMask::Notice | LogMask::Info => "info",
            LogMask::Debug => "debug",
            LogMask::Debug1 | LogMask::Debug2 | LogMask::Debug3 => "trace",
        }
    }

    const NAMES: [(&'static str, LogMask); 11] = [
        ("LOG_EMERG", LogMask::Emerg),
        ("LOG_ALERT", LogMask::Alert),
        ("LOG_CRIT", LogMask::Crit),
        ("LOG_ERR", LogMask::Err),
        ("LOG_WARNING", LogMask::Warning),
        ("LOG_NOTICE", LogMask::Notice),
        ("LOG_INFO", LogMask::Info),
        ("LOG_DEBUG", LogMask::Debug),
        ("LOG_DEBUG1", LogMask::Debug1),
        ("LOG_DEBUG2", LogMask::Debug2),
        ("LOG_DEBUG3", LogMask::Debug3),
    ];

    /// The mask named `name` (`LOG_INFO`...).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMES.iter().find(|(known, _)| *known == name).map(|(_, mask)| *mask)
    }
}

/// The unit of memory limits written without a unit (`LSF_UNIT_FOR_LIMITS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LimitUnit {
    /// Kilobytes (1024 bytes), LSF's default.
    Kb,
    /// Megabytes.
    Mb,
    /// Gigabytes.
    Gb,
    /// Terabytes.
    Tb,
    /// Petabytes.
    Pb,
    /// Exabytes.
    Eb,
}

impl LimitUnit {
    /// The unit written `name` (`KB`, `MB`... in any case; `K`, `M`... too).
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().as_str() {
            "KB" | "K" => Some(LimitUnit::Kb),
            "MB" | "M" => Some(LimitUnit::Mb),
            "GB" | "G" => Some(LimitUnit::Gb),
            "TB" | "T" => Some(LimitUnit::Tb),
            "PB" | "P" => Some(LimitUnit::Pb),
            "EB" | "E" => Some(LimitUnit::Eb),
            _ => None,
        }
    }

    /// How many kilobytes one of this unit is.
    pub fn kb(self) -> u64 {
        match self {
            LimitUnit::Kb => 1,
            LimitUnit::Mb => 1 << 10,
            LimitUnit::Gb => 1 << 20,
            LimitUnit::Tb => 1 << 30,
            LimitUnit::Pb => 1 << 40,
            LimitUnit::Eb => 1 << 50,
        }
    }
}

/// The settings of `lsf.conf` (see the module documentation for every key and default).
#[derive(Debug, Clone, PartialEq)]
pub struct LsfConf {
    /// The folder `lsf.conf` was read from (`LSF_ENVDIR`).
    pub envdir: PathBuf,
    /// `LSF_CONFDIR`.
    pub confdir: PathBuf,
    /// `LSB_CONFDIR`.
    pub lsb_confdir: PathBuf,
    /// `LSB_SHAREDIR`.
    pub lsb_sharedir: PathBuf,
    /// `LSF_LOGDIR`.
    pub logdir: Option<PathBuf>,
    /// `LSF_LOG_MASK`.
    pub log_mask: LogMask,
    /// `LSF_SERVERDIR`.
    pub serverdir: Option<PathBuf>,
    /// `LSF_BINDIR`.
    pub bindir: Option<PathBuf>,
    /// `LSF_LIM_PORT` (UDP).
    pub lim_port: u16,
    /// `LSF_RES_PORT`.
    pub res_port: u16,
    /// `LSB_MBD_PORT`.
    pub mbd_port: u16,
    /// `LSB_SBD_PORT`.
    pub sbd_port: u16,
    /// `LSF_UNIT_FOR_LIMITS`.
    pub unit_for_limits: LimitUnit,
    /// `LSB_JOB_TMPDIR`.
    pub job_tmpdir: Option<PathBuf>,
    /// `LAVA_CLUSTER_NAME` (ours).
    pub cluster_name: Option<String>,
    /// `LAVA_CLUSTER_KEY_FILE` (ours).
    pub cluster_key_file: PathBuf,
    /// `LAVA_MXFSD_PORT` (ours).
    pub mxfsd_port: u16,
    /// `LAVA_COORD_PORT` (ours).
    pub coord_port: u16,
    /// `LAVA_MBD_REPL_PORT` (ours).
    pub mbd_repl_port: u16,
    /// `LAVA_COORD_REPL_PORT` (ours).
    pub coord_repl_port: u16,
    /// `LAVA_LIM_TCP_PORT` (ours).
    pub lim_tcp_port: u16,
    /// `LAVA_CMD_SOCKET` (ours).
    pub cmd_socket: PathBuf,
    /// `LAVA_STATE_RESERVE_MB` (ours).
    pub state_reserve_mb: u64,
    /// `LAVA_METRICS_ADDR` (ours).
    pub metrics_addr: IpAddr,
    /// The daemons' metrics ports (ours); a daemon serves no metrics when its port is unset.
    pub metrics_ports: MetricsPorts,
    file: KeyValueFile,
}

/// The metrics ports of `lsf.conf`, one per daemon (`None`: that daemon serves no metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsPorts {
    /// `LAVA_MBD_METRICS_PORT`.
    pub mbd: Option<u16>,
    /// `LAVA_SBD_METRICS_PORT`.
    pub sbd: Option<u16>,
    /// `LAVA_LIM_METRICS_PORT`.
    pub lim: Option<u16>,
    /// `LAVA_MXFSD_METRICS_PORT`.
    pub mxfsd: Option<u16>,
    /// `LAVA_COORD_METRICS_PORT`.
    pub coord: Option<u16>,
}

/// The default of `LAVA_METRICS_ADDR`: this host only, until the administrator opens it.
pub const METRICS_ADDR_DEFAULT: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

impl LsfConf {
    /// Reads `<envdir>/lsf.conf`.
    pub fn read(envdir: &Path) -> Result<Self, ConfError> {
        let file = KeyValueFile::read(&envdir.join(LSF_CONF_FILE_NAME))?;
        Self::from_file(envdir, file)
    }

    /// Parses `text` as the `lsf.conf` of `envdir` (used to resolve relative paths).
    pub fn parse(envdir: &Path, text: &str) -> Result<Self, ConfError> {
        let file = KeyValueFile::parse(&envdir.join(LSF_CONF_FILE_NAME), text)?;
        Self::from_file(envdir, file)
    }

    /// Gives meaning to an already parsed `lsf.conf` of `envdir`.
    pub fn from_file(envdir: &Path, file: KeyValueFile) -> Result<Self, ConfError> {
        let reader = Reader { envdir, file: &file };
        let confdir = reader.path("LSF_CONFDIR").unwrap_or_else(|| envdir.to_path_buf());
        let lsb_confdir = reader.path("LSB_CONFDIR").unwrap_or_else(|| confdir.join("lsbatch"));
        let lim_port = reader.port("LSF_LIM_PORT", LIM_PORT_DEFAULT)?;
        let cluster_key_file =
            reader.path("LAVA_CLUSTER_KEY_FILE").unwrap_or_else(|| confdir.join(CLUSTER_KEY_FILE_NAME));
        let conf = LsfConf {
            envdir: envdir.to_path_buf(),
            lsb_sharedir: reader.path("LSB_SHAREDIR").unwrap_or_else(|| PathBuf::from(LSB_SHAREDIR_DEFAULT)),
            logdir: reader.path("LSF_LOGDIR"),
            log_mask: reader.parsed(
                "LSF_LOG_MASK",
                LogMask::Warning,
                LogMask::from_name,
                "`LOG_ERR`, `LOG_WARNING`, `LOG_INFO`, `LOG_DEBUG` or another syslog level",
            )?,
            serverdir: reader.path("LSF_SERVERDIR"),
            bindir: reader.path("LSF_BINDIR"),
            lim_port,
            res_port: reader.port("LSF_RES_PORT", RES_PORT_DEFAULT)?,
            mbd_port: reader.port("LSB_MBD_PORT", MBD_PORT_DEFAULT)?,
            sbd_port: reader.port("LSB_SBD_PORT", SBD_PORT_DEFAULT)?,
            unit_for_limits: reader.parsed(
                "LSF_UNIT_FOR_LIMITS",
                LimitUnit::Kb,
                LimitUnit::from_name,
                "`KB`, `MB`, `GB`, `TB`, `PB` or `EB`",
            )?,
            job_tmpdir: reader.path("LSB_JOB_TMPDIR"),
            cluster_name: reader.cluster_name()?,
            cluster_key_file,
            mxfsd_port: reader.port("LAVA_MXFSD_PORT", MXFSD_PORT_DEFAULT)?,
            coord_port: reader.port("LAVA_COORD_PORT", COORD_PORT_DEFAULT)?,
            mbd_repl_port: reader.port("LAVA_MBD_REPL_PORT", MBD_REPL_PORT_DEFAULT)?,
            coord_repl_port: reader.port("LAVA_COORD_REPL_PORT", COORD_REPL_PORT_DEFAULT)?,
            lim_tcp_port: reader.port("LAVA_LIM_TCP_PORT", lim_port)?,
            cmd_socket: reader.path("LAVA_CMD_SOCKET").unwrap_or_else(|| PathBuf::from(CMD_SOCKET_DEFAULT)),
            state_reserve_mb: reader.integer(
                "LAVA_STATE_RESERVE_MB",
                STATE_RESERVE_MB_DEFAULT,
                0,
                1 << 20,
            )?,
            metrics_addr: reader.parsed(
                "LAVA_METRICS_ADDR",
                METRICS_ADDR_DEFAULT,
                |text| text.parse().ok(),
                "an IP address (`0.0.0.0` for every address)",
            )?,
            metrics_ports: MetricsPorts {
                mbd: reader.optional_port("LAVA_MBD_METRICS_PORT")?,
                sbd: reader.optional_port("LAVA_SBD_METRICS_PORT")?,
                lim: reader.optional_port("LAVA_LIM_METRICS_PORT")?,
                mxfsd: reader.optional_port("LAVA_MXFSD_METRICS_PORT")?,
                coord: reader.optional_port("LAVA_COORD_METRICS_PORT")?,
            },
            confdir,
            lsb_confdir,
            file,
        };
        conf.check_ports()?;
        Ok(conf)
    }

    /// The value of any key of the file, known here or not (case-sensitive, as in LSF).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.file.get(key)
    }

    /// The parsed file, with the line of every key.
    pub fn file(&self) -> &KeyValueFile {
        &self.file
    }

    /// The path of `lsf.conf`.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// `$LSF_CONFDIR/lsf.shared`.
    pub fn shared_path(&self) -> PathBuf {
        self.confdir.join("lsf.shared")
    }

    /// `$LSF_CONFDIR/lsf.cluster.<cluster>`.
    pub fn cluster_path(&self, cluster: &str) -> PathBuf {
        self.confdir.join(format!("lsf.cluster.{cluster}"))
    }

    /// `$LSB_CONFDIR/<cluster>/configdir`, the folder of the `lsb.*` files (Lava's layout).
    pub fn lsb_configdir(&self, cluster: &str) -> PathBuf {
        self.lsb_confdir.join(cluster).join("configdir")
    }

    /// `$LSB_SHAREDIR/<cluster>`, under which daemons keep their durable state.
    pub fn work_dir(&self, cluster: &str) -> PathBuf {
        self.lsb_sharedir.join(cluster)
    }

    /// Where a daemon whose metrics port is `port` (one of [`LsfConf::metrics_ports`])
    /// serves its metrics: `None` when it serves none.
    pub fn metrics_listen(&self, port: Option<u16>) -> Option<SocketAddr> {
        port.map(|port| SocketAddr::new(self.metrics_addr, port))
    }

    /// The TCP ports one host may listen on at once must differ (LIM's UDP port may equal any).
    fn check_ports(&self) -> Result<(), ConfError> {
        let metrics = self.metrics_ports;
        let metrics_ports = [
            ("LAVA_MBD_METRICS_PORT", metrics.mbd),
            ("LAVA_SBD_METRICS_PORT", metrics.sbd),
            ("LAVA_LIM_METRICS_PORT", metrics.lim),
            ("LAVA_MXFSD_METRICS_PORT", metrics.mxfsd),
            ("LAVA_COORD_METRICS_PORT", metrics.coord),
        ];
        let tcp_ports: Vec<(&str, u16)> = [
            ("LAVA_LIM_TCP_PORT", self.lim_tcp_port),
            ("LSB_MBD_PORT", self.mbd_port),
            ("LSB_SBD_PORT", self.sbd_port),
            ("LAVA_MXFSD_PORT", self.mxfsd_port),
            ("LAVA_COORD_PORT", self.coord_port),
            ("LAVA_MBD_REPL_PORT", self.mbd_repl_port),
            ("LAVA_COORD_REPL_PORT", self.coord_repl_port),
        ]
        .into_iter()
        .chain(metrics_ports.into_iter().filter_map(|(key, port)| Some((key, port?))))
        .collect();
        for (idx, (key, port)) in tcp_ports.iter().enumerate() {
            if let Some((other_key, _)) = tcp_ports[..idx].iter().find(|(_, other)| other == port) {
                // Point at whichever of the two keys the file sets, so the message has a line.
                let line =
                    self.file.entry(key).or_else(|| self.file.entry(other_key)).map(|entry| entry.line);
                let kind = ErrorKind::Conflict(format!(
                    "`{key}` and `{other_key}` are both TCP port {port}; the daemons of one host need distinct ports"
                ));
                return Err(match line {
                    Some(line) => ConfError::at(self.file.path(), line, kind),
                    None => ConfError::file(self.file.path(), kind),
                });
            }
        }
        Ok(())
    }
}

/// Reads typed values out of the generic file.
struct Reader<'a> {
    envdir: &'a Path,
    file: &'a KeyValueFile,
}

impl Reader<'_> {
    /// The non-empty text of `key`, with its line.
    fn text(&self, key: &str) -> Option<(&str, u32)> {
        let entry = self.file.entry(key)?;
        (!entry.value.is_empty()).then_some((entry.value.as_str(), entry.line))
    }

    fn path(&self, key: &str) -> Option<PathBuf> {
        let (text, _) = self.text(key)?;
        Some(self.envdir.join(text))
    }

    fn with_field<T>(&self, key: &str, line: u32, text: &str, f: impl FnOnce(Field<'_>) -> T) -> T {
        let value = Value::bare(text);
        f(Field { path: self.file.path(), line, key, value: &value })
    }

    fn integer(&self, key: &str, default: u64, min: u64, max: u64) -> Result<u64, ConfError> {
        match self.text(key) {
            None => Ok(default),
            Some((text, line)) => self.with_field(key, line, text, |field| field.integer(min, max)),
        }
    }

    fn optional_port(&self, key: &str) -> Result<Option<u16>, ConfError> {
        match self.text(key) {
            None => Ok(None),
            Some((text, line)) => self.with_field(key, line, text, |field| field.port()).map(Some),
        }
    }

    fn port(&self, key: &str, default: u16) -> Result<u16, ConfError> {
        match self.text(key) {
            None => Ok(default),
            Some((text, line)) => self.with_field(key, line, text, |field| field.port()),
        }
    }

    fn parsed<T>(
        &self,
        key: &str,
        default: T,
        from_name: impl Fn(&str) -> Option<T>,
        expected: &str,
    ) -> Result<T, ConfError> {
        match self.text(key) {
            None => Ok(default),
            Some((text, line)) => from_name(text)
                .ok_or_else(|| self.with_field(key, line, text, |field| field.bad_value(expected))),
        }
    }

    fn cluster_name(&self) -> Result<Option<String>, ConfError> {
        const KEY: &str = "LAVA_CLUSTER_NAME";
        match self.text(KEY) {
            None => Ok(None),
            Some((text, line)) => self
                .with_field(KEY, line, text, |field| {
                    field.name("cluster", crate::fields::GROUP_NAME_BYTES_MAX)
                })
                .map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every LSF_LOG_MASK maps to the tracing level the daemons log at.
    #[test]
    fn log_masks_map_to_tracing_levels() {
        assert_eq!(LogMask::Err.level_name(), "error");
        assert_eq!(LogMask::Warning.level_name(), "warn");
        assert_eq!(LogMask::Info.level_name(), "info");
        assert_eq!(LogMask::Debug.level_name(), "debug");
        assert_eq!(LogMask::Debug3.level_name(), "trace");
    }

    fn conf(text: &str) -> LsfConf {
        LsfConf::parse(Path::new("/etc/lava"), text).expect("valid lsf.conf")
    }

    fn error(text: &str) -> String {
        LsfConf::parse(Path::new("/etc/lava"), text).expect_err("invalid lsf.conf").to_string()
    }

    #[test]
    fn envdir_lookup() {
        // Goal: LSF_ENVDIR names the folder; unset or empty falls back to /etc.
        // Method: call the injectable lookup with each case.
        assert_eq!(envdir_from(Some(OsStr::new("/opt/lava/etc"))), PathBuf::from("/opt/lava/etc"));
        assert_eq!(envdir_from(None), PathBuf::from("/etc"));
        assert_eq!(envdir_from(Some(OsStr::new(""))), PathBuf::from("/etc"));
    }

    #[test]
    fn defaults_of_an_empty_file() {
        // Goal: every key has the documented default when lsf.conf sets nothing.
        // Method: parse an empty file and compare every field.
        let conf = conf("");
        assert_eq!(conf.confdir, PathBuf::from("/etc/lava"));
        assert_eq!(conf.lsb_confdir, PathBuf::from("/etc/lava/lsbatch"));
        assert_eq!(conf.lsb_sharedir, PathBuf::from(LSB_SHAREDIR_DEFAULT));
        assert_eq!(conf.logdir, None);
        assert_eq!(conf.log_mask, LogMask::Warning);
        assert_eq!((conf.lim_port, conf.res_port, conf.mbd_port, conf.sbd_port), (6879, 6878, 6881, 6882));
        assert_eq!((conf.mxfsd_port, conf.coord_port, conf.lim_tcp_port), (6883, 6884, 6879));
        assert_eq!(conf.unit_for_limits, LimitUnit::Kb);
        assert_eq!(conf.cluster_key_file, PathBuf::from("/etc/lava/lava.cluster.key"));
        assert_eq!(conf.cmd_socket, PathBuf::from(CMD_SOCKET_DEFAULT));
        assert_eq!(conf.cluster_name, None);
        assert_eq!(conf.lsb_configdir("c1"), PathBuf::from("/etc/lava/lsbatch/c1/configdir"));
        assert_eq!(conf.cluster_path("c1"), PathBuf::from("/etc/lava/lsf.cluster.c1"));
        assert_eq!(conf.work_dir("c1"), PathBuf::from("/var/lib/lavacore/c1"));
    }

    #[test]
    fn every_key_is_read_and_relative_paths_follow_the_envdir() {
        // Goal: each LSF key and each of our keys lands in its field; relative paths are
        // resolved against the envdir, absolute ones are kept; unknown keys stay readable.
        // Method: a file setting every key, then compare fields.
        let conf = conf(
            "LSF_CONFDIR=conf\nLSB_CONFDIR=/srv/lsb\nLSB_SHAREDIR=/srv/work\nLSF_LOGDIR=log\nLSF_LOG_MASK=LOG_DEBUG\n\
             LSF_SERVERDIR=/usr/sbin\nLSF_BINDIR=/usr/bin\nLSF_LIM_PORT=7000\nLSF_RES_PORT=7001\nLSB_MBD_PORT=7002\n\
             LSB_SBD_PORT=7003\nLSF_UNIT_FOR_LIMITS=MB\nLSB_JOB_TMPDIR=/tmp/jobs\nLAVA_CLUSTER_NAME=blue\n\
             LAVA_CLUSTER_KEY_FILE=/root/key\nLAVA_MXFSD_PORT=7004\nLAVA_COORD_PORT=7005\nLAVA_LIM_TCP_PORT=7006\n\
             LAVA_CMD_SOCKET=/tmp/lava.sock\nLSB_MAILTO=admin\n",
        );
        assert_eq!(conf.confdir, PathBuf::from("/etc/lava/conf"));
        assert_eq!(conf.lsb_confdir, PathBuf::from("/srv/lsb"));
        assert_eq!(conf.lsb_sharedir, PathBuf::from("/srv/work"));
        assert_eq!(conf.logdir, Some(PathBuf::from("/etc/lava/log")));
        assert_eq!(conf.log_mask, LogMask::Debug);
        assert_eq!(conf.serverdir, Some(PathBuf::from("/usr/sbin")));
        assert_eq!(conf.bindir, Some(PathBuf::from("/usr/bin")));
        assert_eq!((conf.lim_port, conf.res_port, conf.mbd_port, conf.sbd_port), (7000, 7001, 7002, 7003));
        assert_eq!(conf.unit_for_limits, LimitUnit::Mb);
        assert_eq!(conf.job_tmpdir, Some(PathBuf::from("/tmp/jobs")));
        assert_eq!(conf.cluster_name.as_deref(), Some("blue"));
        assert_eq!(conf.cluster_key_file, PathBuf::from("/root/key"));
        assert_eq!((conf.mxfsd_port, conf.coord_port, conf.lim_tcp_port), (7004, 7005, 7006));
        assert_eq!(conf.cmd_socket, PathBuf::from("/tmp/lava.sock"));
        assert_eq!(conf.get("LSB_MAILTO"), Some("admin"));
        assert_eq!(conf.get("NOT_SET"), None);
    }

    #[test]
    fn empty_value_means_default() {
        // Goal: `KEY=` is the same as leaving the key out.
        // Method: empty port and path keys.
        let conf = conf("LSB_MBD_PORT=\nLSF_LOGDIR=\n");
        assert_eq!(conf.mbd_port, MBD_PORT_DEFAULT);
        assert_eq!(conf.logdir, None);
    }

    #[test]
    fn bad_values_name_file_line_and_key() {
        // Goal: a bad port, log mask, unit or cluster name is an error naming file, line, key.
        // Method: one bad key per file, checked against the full message.
        assert_eq!(
            error("A=1\nLSB_MBD_PORT=abc\n"),
            "/etc/lava/lsf.conf:2: `LSB_MBD_PORT`: bad number `abc`, expected a port from 1 to 65535"
        );
        assert_eq!(
            error("LSB_MBD_PORT=0\n"),
            "/etc/lava/lsf.conf:1: `LSB_MBD_PORT`: bad number `0`, expected a port from 1 to 65535"
        );
        assert_eq!(
            error("LSB_SBD_PORT=70000\n"),
            "/etc/lava/lsf.conf:1: `LSB_SBD_PORT`: bad number `70000`, expected a port from 1 to 65535"
        );
        assert!(
            error("LSF_LOG_MASK=LOUD\n")
                .starts_with("/etc/lava/lsf.conf:1: `LSF_LOG_MASK`: bad value `LOUD`")
        );
        assert!(
            error("LSF_UNIT_FOR_LIMITS=QB\n")
                .starts_with("/etc/lava/lsf.conf:1: `LSF_UNIT_FOR_LIMITS`: bad value `QB`")
        );
        assert!(
            error("LAVA_CLUSTER_NAME=a/b\n")
                .starts_with("/etc/lava/lsf.conf:1: `LAVA_CLUSTER_NAME`: bad value `a/b`")
        );
    }

    #[test]
    fn clashing_tcp_ports_are_refused() {
        // Goal: two daemons of one host set to the same TCP port is an error at the line of
        // the key that clashes; LIM's UDP port may share a number with TCP ports.
        // Method: set LSB_SBD_PORT to LSB_MBD_PORT's default, then set the LIM UDP port to it.
        assert_eq!(
            error("X=1\nLSB_SBD_PORT=6881\n"),
            "/etc/lava/lsf.conf:2: `LSB_SBD_PORT` and `LSB_MBD_PORT` are both TCP port 6881; \
             the daemons of one host need distinct ports"
        );
        assert_eq!(
            error("LAVA_COORD_REPL_PORT=6885\n"),
            "/etc/lava/lsf.conf:1: `LAVA_COORD_REPL_PORT` and `LAVA_MBD_REPL_PORT` are both TCP port 6885; \
             the daemons of one host need distinct ports"
        );
        let conf = conf("LSF_LIM_PORT=7000\nLAVA_LIM_TCP_PORT=7001\nLAVA_COORD_PORT=7000\n");
        assert_eq!(conf.lim_port, conf.coord_port);
    }

    #[test]
    fn metrics_ports_are_off_unless_set() {
        // Goal: no metrics port is the default; a set one listens on LAVA_METRICS_ADDR
        // (127.0.0.1 unless set); a metrics port clashing with another TCP port, port 0 or a
        // bad address is refused at its line.
        let quiet = conf("X=1\n");
        assert_eq!(quiet.metrics_ports, MetricsPorts::default());
        assert_eq!(quiet.metrics_listen(quiet.metrics_ports.mbd), None);
        let on = conf("LAVA_MBD_METRICS_PORT=9101\nLAVA_LIM_METRICS_PORT=9102\n");
        assert_eq!(on.metrics_listen(on.metrics_ports.mbd), Some("127.0.0.1:9101".parse().expect("addr")));
        assert_eq!(on.metrics_ports.lim, Some(9102));
        let open = conf("LAVA_METRICS_ADDR=0.0.0.0\nLAVA_COORD_METRICS_PORT=9105\n");
        assert_eq!(
            open.metrics_listen(open.metrics_ports.coord),
            Some("0.0.0.0:9105".parse().expect("addr"))
        );
        assert!(
            error("LAVA_SBD_METRICS_PORT=6881\n")
                .starts_with("/etc/lava/lsf.conf:1: `LAVA_SBD_METRICS_PORT` and `LSB_MBD_PORT`"),
            "{}",
            error("LAVA_SBD_METRICS_PORT=6881\n")
        );
        assert!(
            error("LAVA_MXFSD_METRICS_PORT=0\n")
                .starts_with("/etc/lava/lsf.conf:1: `LAVA_MXFSD_METRICS_PORT`")
        );
        assert!(error("LAVA_METRICS_ADDR=here\n").starts_with("/etc/lava/lsf.conf:1: `LAVA_METRICS_ADDR`"));
    }

    #[test]
    fn reading_from_a_folder() {
        // Goal: `read` finds lsf.conf in the envdir, and reports a missing one clearly.
        // Method: a temporary folder, first empty, then with a file.
        let dir = tempfile::tempdir().expect("a temporary folder");
        let missing = LsfConf::read(dir.path()).expect_err("no file yet").to_string();
        assert!(missing.ends_with("lsf.conf: the lsf.conf file does not exist"), "{missing}");
        std::fs::write(dir.path().join("lsf.conf"), "LSB_MBD_PORT=9000\n").expect("write lsf.conf");
        let conf = LsfConf::read(dir.path()).expect("valid lsf.conf");
        assert_eq!(conf.mbd_port, 9000);
        assert_eq!(conf.path(), dir.path().join("lsf.conf"));
    }
}
