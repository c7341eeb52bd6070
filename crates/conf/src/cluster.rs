//! `lsf.cluster.NAME` as typed values, [`LsfCluster`]: the administrators and the hosts of the
//! cluster, in order.
//!
//! Sections:
//! - `ClusterAdmins` (optional, at most once): `Administrators = user ...`.
//! - `Host` (required, once): a table. **Row order matters**: the first server host is the LIM
//!   master, the next one takes over if it fails (LSF's rule), see [`LsfCluster::master_candidates`].
//!   LSF columns: `HOSTNAME` (required), `model`, `type` (`!` or `-`: detect), `server` (`1` or
//!   `0`, default `1`), `RESOURCES` (a list, e.g. `(cs fs)`), and one threshold column per
//!   built-in load index (`r15s r1m r15m ut pg io ls it tmp swp mem`; `-` or `()`: none), in
//!   the index's own unit (`ut` a fraction of 1, so `0.9` is 90%; `it` minutes; `tmp swp
//!   mem` MB): lim reports its host `busy` beyond one. LSF's `RUNWINDOW`,
//!   `REXPRI` and `ND` columns are accepted and handed back unread in
//!   [`ClusterHost::unimplemented`].
//! - `Parameters` and `ResourceMap` (LSF sections LavaCore does not implement) are accepted and
//!   listed in [`LsfCluster::unimplemented_sections`] so a daemon can warn about them.
//!
//! # Our own columns: several logical hosts on one machine
//! A test cluster runs several "hosts" on one machine, all on 127.0.0.1. Four optional columns
//! of ours, all `-` by default, make that possible:
//!
//! | column | meaning | default |
//! |---|---|---|
//! | `LAVA_ADDR` | the IP address the host's daemons listen on and are reached at | resolve `HOSTNAME` |
//! | `LAVA_LIM_PORT` | this host's LIM port, UDP and TCP | `LSF_LIM_PORT` / `LAVA_LIM_TCP_PORT` |
//! | `LAVA_SBD_PORT` | this host's sbatchd port | `LSB_SBD_PORT` |
//! | `LAVA_MXFSD_PORT` | this host's mxfsd port | `LAVA_MXFSD_PORT` |
//!
//! ```text
//! Begin Host
//! HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT
//! node1     -      -     1       ()         127.0.0.1  17001          17002          17003
//! node2     -      -     1       ()         127.0.0.1  17011          17012          17013
//! End Host
//! ```
//!
//! Host names stay distinct (they are the hosts' identities in every protocol); only the
//! address may be shared. [`crate::load`] refuses two hosts that share an address and a port.
//! A daemon learns which logical host it is from its command line, not from this file.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::error::{ConfError, ErrorKind};
use crate::fields::{
    Columns, Field, GROUP_NAME_BYTES_MAX, HOST_NAME_BYTES_MAX, LOAD_INDICES, Names, check_sections,
    key_values, sections_named,
};
use crate::lex::read_text;
use crate::lsf_conf::LsfConf;
use crate::section::SectionFile;
use crate::value::Value;

/// One row of the `Host` section.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterHost {
    /// `HOSTNAME`.
    pub name: String,
    /// `model`; `None` means "detect".
    pub model: Option<String>,
    /// `type`; `None` means "detect".
    pub host_type: Option<String>,
    /// `server`: whether the host runs daemons and jobs (`1`) or only commands (`0`).
    pub server: bool,
    /// Load thresholds by load index (lower-case name, e.g. `r1m`), for the columns given.
    pub thresholds: BTreeMap<String, f64>,
    /// `RESOURCES`.
    pub resources: Vec<String>,
    /// `LAVA_ADDR` (ours).
    pub addr: Option<IpAddr>,
    /// `LAVA_LIM_PORT` (ours).
    pub lim_port: Option<u16>,
    /// `LAVA_SBD_PORT` (ours).
    pub sbd_port: Option<u16>,
    /// `LAVA_MXFSD_PORT` (ours).
    pub mxfsd_port: Option<u16>,
    /// Values of the LSF columns LavaCore does not implement, by upper-case column name.
    pub unimplemented: BTreeMap<String, Value>,
    /// The row's line.
    pub line: u32,
}

impl ClusterHost {
    /// The UDP port of this host's LIM.
    pub fn lim_udp_port(&self, conf: &LsfConf) -> u16 {
        self.lim_port.unwrap_or(conf.lim_port)
    }

    /// The TCP port of this host's LIM.
    pub fn lim_tcp_port(&self, conf: &LsfConf) -> u16 {
        self.lim_port.unwrap_or(conf.lim_tcp_port)
    }

    /// The TCP port of this host's sbatchd.
    pub fn sbd_tcp_port(&self, conf: &LsfConf) -> u16 {
        self.sbd_port.unwrap_or(conf.sbd_port)
    }

    /// The TCP port of this host's mxfsd.
    pub fn mxfsd_tcp_port(&self, conf: &LsfConf) -> u16 {
        self.mxfsd_port.unwrap_or(conf.mxfsd_port)
    }
}

/// The contents of `lsf.cluster.NAME`.
#[derive(Debug, Clone, PartialEq)]
pub struct LsfCluster {
    /// The file.
    pub path: PathBuf,
    /// `ClusterAdmins` / `Administrators`; the first is the primary administrator.
    pub admins: Vec<String>,
    /// The `Host` rows, in file order (the order decides the LIM master).
    pub hosts: Vec<ClusterHost>,
    /// Names of LSF sections present but not implemented (`Parameters`, `ResourceMap`).
    pub unimplemented_sections: Vec<String>,
}

const HOST_COLUMNS: [&str; 9] = [
    "HOSTNAME",
    "MODEL",
    "TYPE",
    "SERVER",
    "RESOURCES",
    "LAVA_ADDR",
    "LAVA_LIM_PORT",
    "LAVA_SBD_PORT",
    "LAVA_MXFSD_PORT",
];

impl LsfCluster {
    /// Reads the file at `path`; a missing file is [`ConfError::Missing`].
    pub fn read(path: &Path) -> Result<Self, ConfError> {
        match read_text(path)? {
            Some(text) => Self::parse(path, &text),
            None => Err(ConfError::Missing {
                path: path.to_path_buf(),
                what: "the lsf.cluster file of this cluster",
                hint: String::new(),
            }),
        }
    }

    /// Parses `text`; `path` names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfError> {
        Self::from_file(&SectionFile::parse(path, text)?)
    }

    /// Gives meaning to a parsed `lsf.cluster.NAME`.
    pub fn from_file(file: &SectionFile) -> Result<Self, ConfError> {
        let unimplemented_sections =
            check_sections(file, &["CLUSTERADMINS", "HOST"], &[], &["PARAMETERS", "RESOURCEMAP"])?;
        let path = file.path();

        let mut admins = Vec::new();
        for section in sections_named(file, "ClusterAdmins") {
            let (entries, _) = key_values(path, section, &["ADMINISTRATORS"], &[])?;
            if let Some(entry) = entries.get("ADMINISTRATORS") {
                admins = Field::of_entry(path, entry).names("user", HOST_NAME_BYTES_MAX, true)?;
            }
        }

        let host_section = sections_named(file, "Host").next().ok_or_else(|| {
            ConfError::file(path, ErrorKind::MissingSection { section: "Host".to_string() })
        })?;
        let known: Vec<String> = HOST_COLUMNS
            .iter()
            .map(|column| (*column).to_string())
            .chain(LOAD_INDICES.iter().map(|index| index.to_ascii_uppercase()))
            .collect();
        let known: Vec<&str> = known.iter().map(String::as_str).collect();
        let columns =
            Columns::new(path, host_section, &known, &["HOSTNAME"], &["RUNWINDOW", "REXPRI", "ND"])?;

        let mut names = Names::default();
        let mut hosts = Vec::new();
        for row in columns.rows() {
            let name = columns.required(row, "HOSTNAME")?.member_name("host", HOST_NAME_BYTES_MAX)?;
            // Host names are DNS names, which ignore case.
            names.add(path, "host", &name.to_ascii_lowercase(), row.line)?;
            let detected = |column| -> Result<Option<String>, ConfError> {
                match columns.field(row, column) {
                    Some(field) if !field.is_default() && field.text() != "!" => {
                        field.name("host model or type", GROUP_NAME_BYTES_MAX).map(Some)
                    }
                    _ => Ok(None),
                }
            };
            let server = match columns.field(row, "SERVER") {
                Some(field) if !field.is_default() => match field.text() {
                    "1" => true,
                    "0" => false,
                    _ => return Err(field.bad_value("`1` (a server host) or `0` (a client)")),
                },
                _ => true,
            };
            let mut thresholds = BTreeMap::new();
            for index in LOAD_INDICES {
                let column = index.to_ascii_uppercase();
                match columns.field(row, &column) {
                    Some(field) if !field.is_default() => {
                        let value = field.float(0.0)?;
                        // lim's ut is a fraction of 1: a threshold above it could never be reached.
                        if index == "ut" && value > 1.0 {
                            return Err(field.bad_number("a fraction from 0 to 1 (0.9 is 90%)"));
                        }
                        thresholds.insert(index.to_string(), value);
                    }
                    _ => {}
                }
            }
            let resources = match columns.field(row, "RESOURCES") {
                Some(field) => field.names("resource", GROUP_NAME_BYTES_MAX, false)?,
                None => Vec::new(),
            };
            let addr = match columns.field(row, "LAVA_ADDR") {
                Some(field) if !field.is_default() => Some(
                    field.text().parse::<IpAddr>().map_err(|_| field.bad_value("an IPv4 or IPv6 address"))?,
                ),
                _ => None,
            };
            let port = |column| -> Result<Option<u16>, ConfError> {
                match columns.field(row, column) {
                    Some(field) if !field.is_default() => field.port().map(Some),
                    _ => Ok(None),
                }
            };
            hosts.push(ClusterHost {
                model: detected("MODEL")?,
                host_type: detected("TYPE")?,
                server,
                thresholds,
                resources,
                addr,
                lim_port: port("LAVA_LIM_PORT")?,
                sbd_port: port("LAVA_SBD_PORT")?,
                mxfsd_port: port("LAVA_MXFSD_PORT")?,
                unimplemented: columns.unimplemented(row),
                line: row.line,
                name,
            });
        }
        if !hosts.iter().any(|host| host.server) {
            let kind = ErrorKind::Conflict(
                "the `Host` section lists no server host (`server` 1), so the cluster has no master"
                    .to_string(),
            );
            return Err(ConfError::at(path, host_section.line, kind));
        }
        Ok(LsfCluster { path: path.to_path_buf(), admins, hosts, unimplemented_sections })
    }

    /// The server hosts in the order they take the LIM master role: the first is the master
    /// while it is up, the next takes over when it fails.
    pub fn master_candidates(&self) -> impl Iterator<Item = &ClusterHost> {
        self.hosts.iter().filter(|host| host.server)
    }

    /// The host called `name` (ignoring case, as DNS does).
    pub fn host(&self, name: &str) -> Option<&ClusterHost> {
        self.hosts.iter().find(|host| host.name.eq_ignore_ascii_case(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LsfCluster, String> {
        LsfCluster::parse(Path::new("lsf.cluster.lava"), text).map_err(|error| error.to_string())
    }

    #[test]
    fn lsf_template_in_full() {
        // Goal: the LSF columns give the typed host list, in file order, with the master first.
        // Method: the 0.1.2 template with a client host and thresholds added.
        let cluster = parse(
            "Begin ClusterAdmins\nAdministrators = lsfadmin alice\nEnd ClusterAdmins\n\
             Begin Host\nHOSTNAME  model        type          server r1m  mem  RESOURCES REXPRI\n\
             client0   !            !             0      -    -    ()        0\n\
             master    x86_default  x86_64_linux  1      3.5  ()   (cs fs)   0\n\
             worker1   -            -             -      ()   100  (cs)      0\n\
             End Host\nBegin Parameters\nEXINTERVAL = 15\nEnd Parameters\n",
        )
        .expect("valid");
        assert_eq!(cluster.admins, ["lsfadmin", "alice"]);
        let names: Vec<&str> = cluster.hosts.iter().map(|host| host.name.as_str()).collect();
        assert_eq!(names, ["client0", "master", "worker1"]);
        let masters: Vec<&str> = cluster.master_candidates().map(|host| host.name.as_str()).collect();
        assert_eq!(masters, ["master", "worker1"]);
        let master = cluster.host("MASTER").expect("case-insensitive lookup");
        assert_eq!(master.model.as_deref(), Some("x86_default"));
        assert_eq!(master.host_type.as_deref(), Some("x86_64_linux"));
        assert_eq!(master.resources, ["cs", "fs"]);
        assert_eq!(master.thresholds, BTreeMap::from([("r1m".to_string(), 3.5)]));
        assert_eq!(master.line, 7);
        assert_eq!(master.unimplemented.get("REXPRI").map(Value::text), Some("0"));
        let client = &cluster.hosts[0];
        assert!(!client.server);
        assert_eq!((client.model.as_deref(), client.host_type.as_deref()), (None, None));
        let worker = &cluster.hosts[2];
        assert!(worker.server);
        assert_eq!(worker.thresholds, BTreeMap::from([("mem".to_string(), 100.0)]));
        assert_eq!(cluster.unimplemented_sections, ["Parameters"]);
    }

    #[test]
    fn our_columns_put_several_hosts_on_loopback() {
        // Goal: LAVA_ADDR and the per-host port columns give each logical host its own ports,
        // and `-` falls back to lsf.conf's ports.
        // Method: two hosts on 127.0.0.1, the second without its own mxfsd port, read
        // against lsf.conf defaults.
        let cluster = parse(
            "Begin Host\nHOSTNAME server LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT LAVA_MXFSD_PORT\n\
             node1 1 127.0.0.1 17001 17002 17003\nnode2 1 127.0.0.1 17011 17012 -\nEnd Host\n",
        )
        .expect("valid");
        let conf =
            LsfConf::parse(Path::new("/etc/lava"), "LAVA_LIM_TCP_PORT=7000\n").expect("valid lsf.conf");
        let node2 = &cluster.hosts[1];
        assert_eq!(node2.addr, Some(IpAddr::from([127, 0, 0, 1])));
        assert_eq!((node2.lim_udp_port(&conf), node2.lim_tcp_port(&conf)), (17011, 17011));
        assert_eq!((node2.sbd_tcp_port(&conf), node2.mxfsd_tcp_port(&conf)), (17012, conf.mxfsd_port));
        let plain = parse("Begin Host\nHOSTNAME\nh\nEnd Host\n").expect("valid");
        assert_eq!((plain.hosts[0].lim_udp_port(&conf), plain.hosts[0].lim_tcp_port(&conf)), (6879, 7000));
    }

    #[test]
    fn errors_name_file_line_and_column() {
        // Goal: each bad host row is refused with file, line and column.
        // Method: one small bad file per mistake.
        let host = |header: &str, row: &str| parse(&format!("Begin Host\n{header}\n{row}\nEnd Host\n"));
        assert_eq!(
            host("HOSTNAME server", "h 2").expect_err("server"),
            "lsf.cluster.lava:3: `server`: bad value `2`, expected `1` (a server host) or `0` (a client)"
        );
        assert_eq!(
            host("HOSTNAME LAVA_ADDR", "h localhost").expect_err("addr"),
            "lsf.cluster.lava:3: `LAVA_ADDR`: bad value `localhost`, expected an IPv4 or IPv6 address"
        );
        assert_eq!(
            host("HOSTNAME LAVA_SBD_PORT", "h 0").expect_err("port"),
            "lsf.cluster.lava:3: `LAVA_SBD_PORT`: bad number `0`, expected a port from 1 to 65535"
        );
        assert_eq!(
            host("HOSTNAME r1m", "h high").expect_err("threshold"),
            "lsf.cluster.lava:3: `r1m`: bad number `high`, expected a number of at least 0"
        );
        assert_eq!(
            host("HOSTNAME ut", "h 90").expect_err("ut threshold"),
            "lsf.cluster.lava:3: `ut`: bad number `90`, expected a fraction from 0 to 1 (0.9 is 90%)"
        );
        assert_eq!(
            host("HOSTNAME colour", "h red").expect_err("column"),
            "lsf.cluster.lava:2: unknown column `colour` in section `Host`"
        );
        assert_eq!(
            host("NAME", "h").expect_err("no HOSTNAME"),
            "lsf.cluster.lava:2: unknown column `NAME` in section `Host`"
        );
        assert_eq!(
            host("HOSTNAME server", "h 0").expect_err("no server"),
            "lsf.cluster.lava:1: the `Host` section lists no server host (`server` 1), so the cluster has no master"
        );
        assert_eq!(
            parse("Begin Host\nHOSTNAME\nh1\nH1\nEnd Host\n").expect_err("duplicate"),
            "lsf.cluster.lava:4: host `h1` is already defined at line 3"
        );
        assert_eq!(
            parse("Begin ClusterAdmins\nEnd ClusterAdmins\n").expect_err("no Host"),
            "lsf.cluster.lava: the file has no `Host` section"
        );
        assert_eq!(
            parse("Begin ClusterAdmins\nAdmins = root\nEnd ClusterAdmins\n").expect_err("key"),
            "lsf.cluster.lava:2: unknown key `Admins` in section `ClusterAdmins`"
        );
    }
}
