//! `lsb.hosts` as typed values, [`LsbHosts`]: the batch system's view of each host (job slots,
//! per-user limits, load thresholds) and the host groups.
//!
//! Sections (each optional, at most once; the file itself is optional):
//! - `Host`: columns `HOST_NAME` (required; a host of lsf.cluster, a host group, or `default`
//!   for every host not listed), `MXJ` (job slots: a number, `!` for the number of CPUs, `-` or
//!   `()` for unlimited), `JL/U` (job slots per user), and one threshold column per built-in
//!   load index written `sched/stop` (either part may be left out; mbatchd applies `sched`,
//!   and [`crate::ClusterConfig::unimplemented_warnings`] names each `stop` it does not). LSF's `DISPATCH_WINDOW`,
//!   `EXIT_RATE`, `CHKPNT` and `AFFINITY` columns are accepted and handed back unread.
//! - `HostGroup`: columns `GROUP_NAME` and `GROUP_MEMBER` (a list such as `(hostA hostB)`, or
//!   `all`); LSF's `CONDENSE` and `GROUP_ADMIN` columns are accepted and handed back unread.
//! - `HostPartition` (LSF fairshare) is accepted and listed in [`LsbHosts::unimplemented_sections`].
//!
//! Whether the names refer to real hosts is checked by [`crate::load`], which knows lsf.cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::ConfError;
use crate::fields::{
    Columns, Field, GROUP_NAME_BYTES_MAX, HOST_NAME_BYTES_MAX, LOAD_INDICES, Names, check_sections,
    sections_named,
};
use crate::lex::read_text;
use crate::section::{Row, SectionFile};
use crate::value::Value;

/// A host's job slot limit (`MXJ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mxj {
    /// No limit (`-` or `()`).
    Unlimited,
    /// As many slots as the host has CPUs (`!`).
    Cpus,
    /// This many slots.
    Slots(u32),
}

/// A load threshold: above `sched` no job is dispatched, above `stop` jobs are suspended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// The scheduling threshold (loadSched).
    pub sched: Option<f64>,
    /// The suspending threshold (loadStop).
    pub stop: Option<f64>,
}

/// One row of the `Host` section.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchHost {
    /// `HOST_NAME`: a host or a host group (`default` rows are kept apart).
    pub name: String,
    /// `MXJ`.
    pub mxj: Mxj,
    /// `JL/U`: job slots per user on this host.
    pub jl_u: Option<u32>,
    /// Thresholds by load index (lower-case name, e.g. `r1m`), for the columns given.
    pub thresholds: BTreeMap<String, Threshold>,
    /// Values of the LSF columns LavaCore does not implement, by upper-case column name.
    pub unimplemented: BTreeMap<String, Value>,
    /// The row's line.
    pub line: u32,
}

/// One row of the `HostGroup` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostGroup {
    /// `GROUP_NAME`.
    pub name: String,
    /// `GROUP_MEMBER`: hosts and earlier groups; `["all"]` for every host.
    pub members: Vec<String>,
    /// The row's line.
    pub line: u32,
}

/// The contents of `lsb.hosts`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LsbHosts {
    /// The file, if there was one.
    pub path: Option<PathBuf>,
    /// The `default` row, which applies to every host not listed.
    pub default: Option<BatchHost>,
    /// The other rows of `Host`, in file order.
    pub hosts: Vec<BatchHost>,
    /// The `HostGroup` rows, in file order.
    pub groups: Vec<HostGroup>,
    /// Names of LSF sections present but not implemented.
    pub unimplemented_sections: Vec<String>,
}

impl LsbHosts {
    /// Reads the file at `path`; returns `Ok(None)` if it does not exist.
    pub fn read(path: &Path) -> Result<Option<Self>, ConfError> {
        match read_text(path)? {
            Some(text) => Self::parse(path, &text).map(Some),
            None => Ok(None),
        }
    }

    /// Parses `text`; `path` names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfError> {
        Self::from_file(&SectionFile::parse(path, text)?)
    }

    /// Gives meaning to a parsed `lsb.hosts`.
    pub fn from_file(file: &SectionFile) -> Result<Self, ConfError> {
        let unimplemented_sections = check_sections(file, &["HOST", "HOSTGROUP"], &[], &["HOSTPARTITION"])?;
        let path = file.path();
        let mut hosts =
            LsbHosts { path: Some(path.to_path_buf()), unimplemented_sections, ..LsbHosts::default() };
        let mut names = Names::default();

        for section in sections_named(file, "Host") {
            let known: Vec<String> = ["HOST_NAME", "MXJ", "JL/U"]
                .iter()
                .map(|column| (*column).to_string())
                .chain(LOAD_INDICES.iter().map(|index| index.to_ascii_uppercase()))
                .collect();
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            let columns = Columns::new(
                path,
                section,
                &known,
                &["HOST_NAME"],
                &["DISPATCH_WINDOW", "EXIT_RATE", "CHKPNT", "AFFINITY"],
            )?;
            for row in columns.rows() {
                let name_field = columns.required(row, "HOST_NAME")?;
                let is_default = name_field.text().eq_ignore_ascii_case("default");
                let name = if is_default {
                    "default".to_string()
                } else {
                    name_field.member_name("host", HOST_NAME_BYTES_MAX)?
                };
                names.add(path, "host", &name.to_ascii_lowercase(), row.line)?;
                let host = batch_host(&columns, row, name)?;
                if is_default {
                    hosts.default = Some(host);
                } else {
                    hosts.hosts.push(host);
                }
            }
        }
        for section in sections_named(file, "HostGroup") {
            let columns = Columns::new(
                path,
                section,
                &["GROUP_NAME", "GROUP_MEMBER"],
                &["GROUP_NAME", "GROUP_MEMBER"],
                &["CONDENSE", "GROUP_ADMIN"],
            )?;
            for row in columns.rows() {
                let name =
                    columns.required(row, "GROUP_NAME")?.member_name("host group", GROUP_NAME_BYTES_MAX)?;
                names.add(path, "host group", &name, row.line)?;
                let members_field = columns.required(row, "GROUP_MEMBER")?;
                let members = if members_field.value.words().eq(["all"]) {
                    vec!["all".to_string()]
                } else {
                    members_field.names("host or host group", HOST_NAME_BYTES_MAX, true)?
                };
                hosts.groups.push(HostGroup { name, members, line: row.line });
            }
        }
        Ok(hosts)
    }

    /// The row for host `name`, or the `default` row.
    pub fn host_or_default(&self, name: &str) -> Option<&BatchHost> {
        self.hosts.iter().find(|host| host.name.eq_ignore_ascii_case(name)).or(self.default.as_ref())
    }

    /// The host group called `name`.
    pub fn group(&self, name: &str) -> Option<&HostGroup> {
        self.groups.iter().find(|group| group.name == name)
    }
}

fn batch_host(columns: &Columns<'_>, row: &Row, name: String) -> Result<BatchHost, ConfError> {
    let mxj = match columns.field(row, "MXJ") {
        Some(field) if field.text() == "!" => Mxj::Cpus,
        Some(field) if !field.is_default() => Mxj::Slots(field.integer(0u32, u32::MAX)?),
        _ => Mxj::Unlimited,
    };
    let jl_u = match columns.field(row, "JL/U") {
        Some(field) => field.optional_integer(0u32, u32::MAX)?,
        None => None,
    };
    let mut thresholds = BTreeMap::new();
    for index in LOAD_INDICES {
        match columns.field(row, &index.to_ascii_uppercase()) {
            Some(field) if !field.is_default() => {
                thresholds.insert(index.to_string(), threshold(field)?);
            }
            _ => {}
        }
    }
    Ok(BatchHost { name, mxj, jl_u, thresholds, unimplemented: columns.unimplemented(row), line: row.line })
}

/// `sched/stop`, `sched`, `sched/` or `/stop`.
fn threshold(field: Field<'_>) -> Result<Threshold, ConfError> {
    let expected = "`sched/stop` thresholds: numbers of at least 0, either one may be left out";
    let part = |text: &str| -> Result<Option<f64>, ConfError> {
        if text.is_empty() {
            return Ok(None);
        }
        match text.parse::<f64>() {
            Ok(number) if number.is_finite() && number >= 0.0 => Ok(Some(number)),
            _ => Err(field.bad_number(expected)),
        }
    };
    let (sched, stop) = field.text().split_once('/').unwrap_or((field.text(), ""));
    Ok(Threshold { sched: part(sched)?, stop: part(stop)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LsbHosts, String> {
        LsbHosts::parse(Path::new("lsb.hosts"), text).map_err(|error| error.to_string())
    }

    #[test]
    fn lava_template_in_full() {
        // Goal: the Lava lsb.hosts columns give typed rows, the `default` row is kept apart,
        // and host groups keep their members.
        // Method: the research notes' template with thresholds and a JL/U value added.
        let hosts = parse(
            "Begin Host\nHOST_NAME  MXJ  JL/U  r1m      DISPATCH_WINDOW\n\
             default    !    ()    ()       ()\nworker1    6    2     3.5/4.5  ()\nworker2    -    -     /8       ()\n\
             End Host\nBegin HostGroup\nGROUP_NAME  GROUP_MEMBER\ngroup-xy    (hostx hosty)\neverything  all\n\
             End HostGroup\n",
        )
        .expect("valid");
        let default = hosts.default.as_ref().expect("a default row");
        assert_eq!((default.mxj, default.jl_u), (Mxj::Cpus, None));
        assert_eq!(hosts.hosts.len(), 2);
        let worker1 = hosts.host_or_default("worker1").expect("listed");
        assert_eq!((worker1.mxj, worker1.jl_u), (Mxj::Slots(6), Some(2)));
        assert_eq!(worker1.thresholds.get("r1m"), Some(&Threshold { sched: Some(3.5), stop: Some(4.5) }));
        let worker2 = hosts.host_or_default("worker2").expect("listed");
        assert_eq!(worker2.mxj, Mxj::Unlimited);
        assert_eq!(worker2.thresholds.get("r1m"), Some(&Threshold { sched: None, stop: Some(8.0) }));
        assert_eq!(hosts.host_or_default("other").map(|host| host.name.as_str()), Some("default"));
        assert_eq!(
            hosts.group("group-xy").map(|group| group.members.clone()),
            Some(vec!["hostx".into(), "hosty".into()])
        );
        assert_eq!(hosts.group("everything").map(|group| group.members.clone()), Some(vec!["all".into()]));
    }

    #[test]
    fn errors_name_file_line_and_column() {
        // Goal: bad slot counts, thresholds, names and duplicates are refused with file, line
        // and column.
        // Method: one small bad file per mistake.
        let host = |row: &str| parse(&format!("Begin Host\nHOST_NAME MXJ r1m\n{row}\nEnd Host\n"));
        assert_eq!(
            host("h many -").expect_err("mxj"),
            "lsb.hosts:3: `MXJ`: bad number `many`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            host("h 1 a/b").expect_err("threshold"),
            "lsb.hosts:3: `r1m`: bad number `a/b`, expected `sched/stop` thresholds: numbers of at least 0, either one may be left out"
        );
        assert_eq!(
            parse("Begin Host\nHOST_NAME\nh\nDefault\ndefault\nEnd Host\n").expect_err("two defaults"),
            "lsb.hosts:5: host `default` is already defined at line 4"
        );
        assert_eq!(
            parse("Begin HostGroup\nGROUP_NAME GROUP_MEMBER\ng (a b/c)\nEnd HostGroup\n")
                .expect_err("member"),
            "lsb.hosts:3: `GROUP_MEMBER`: bad value `b/c`, expected a host or host group name of at most 255 \
             letters, digits, `_`, `-` or `.`, starting with a letter, digit or `_`"
        );
        assert_eq!(
            parse("Begin HostGroup\nGROUP_NAME\ng\nEnd HostGroup\n").expect_err("column"),
            "lsb.hosts:2: section `HostGroup` needs a `GROUP_MEMBER` column"
        );
    }
}
