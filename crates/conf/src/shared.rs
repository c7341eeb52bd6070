//! `lsf.shared` as typed values, [`LsfShared`]: the cluster names, host types, host models and
//! resources shared by every host.
//!
//! Sections (each at most once, all optional here; [`crate::load`] decides what it needs):
//! - `Cluster`: column `ClusterName` (required); LSF's `Servers` column is accepted and ignored.
//! - `HostType`: column `TYPENAME`.
//! - `HostModel`: columns `MODELNAME`, `CPUFACTOR` (required) and `ARCHITECTURE`.
//! - `Resource`: columns `RESOURCENAME` (required), `TYPE` (`Boolean`, `Numeric` or `String`;
//!   default `Boolean`), `INTERVAL` (seconds), `INCREASING` (`Y`/`N`) and `DESCRIPTION`; LSF's
//!   `RELEASE` column is accepted and ignored. A resource may not be named after a built-in load
//!   index.
//!
//! Any other section or column is an error. Names are checked and must be unique per section.

use std::path::{Path, PathBuf};

use crate::error::ConfError;
use crate::fields::{Columns, GROUP_NAME_BYTES_MAX, LOAD_INDICES, Names, check_sections, sections_named};
use crate::lex::read_text;
use crate::section::SectionFile;

/// A host model: a name for a kind of CPU and its speed relative to the others.
#[derive(Debug, Clone, PartialEq)]
pub struct HostModel {
    /// `MODELNAME`.
    pub name: String,
    /// `CPUFACTOR`: relative CPU speed, positive.
    pub cpu_factor: f64,
    /// `ARCHITECTURE`: the architecture strings that map to this model.
    pub architectures: Vec<String>,
    /// The row's line.
    pub line: u32,
}

/// The kind of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceKind {
    /// A host has it or not (`Boolean`).
    Boolean,
    /// A number (`Numeric`).
    Numeric,
    /// A string (`String`).
    String,
}

/// A resource a host can offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// `RESOURCENAME`.
    pub name: String,
    /// `TYPE`.
    pub kind: ResourceKind,
    /// `INTERVAL`: how often a dynamic resource is sampled, in seconds; `None` for a static one.
    pub interval_s: Option<u32>,
    /// `INCREASING`: whether a larger value means a busier host (numeric resources).
    pub increasing: Option<bool>,
    /// `DESCRIPTION`.
    pub description: String,
    /// The row's line.
    pub line: u32,
}

/// The contents of `lsf.shared`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LsfShared {
    /// The file.
    pub path: PathBuf,
    /// `Cluster` section: cluster names, in file order.
    pub clusters: Vec<String>,
    /// `HostType` section: host type names.
    pub host_types: Vec<String>,
    /// `HostModel` section.
    pub host_models: Vec<HostModel>,
    /// `Resource` section.
    pub resources: Vec<Resource>,
}

impl LsfShared {
    /// Reads the file at `path`; a missing file is [`ConfError::Missing`].
    pub fn read(path: &Path) -> Result<Self, ConfError> {
        match read_text(path)? {
            Some(text) => Self::parse(path, &text),
            None => Err(ConfError::Missing {
                path: path.to_path_buf(),
                what: "the lsf.shared file",
                hint: String::new(),
            }),
        }
    }

    /// Parses `text`; `path` names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfError> {
        Self::from_file(&SectionFile::parse(path, text)?)
    }

    /// Gives meaning to a parsed `lsf.shared`.
    pub fn from_file(file: &SectionFile) -> Result<Self, ConfError> {
        check_sections(file, &["CLUSTER", "HOSTTYPE", "HOSTMODEL", "RESOURCE"], &[], &[])?;
        let path = file.path();
        let mut shared = LsfShared { path: path.to_path_buf(), ..LsfShared::default() };
        let mut seen = Names::default();

        for section in sections_named(file, "Cluster") {
            let columns = Columns::new(path, section, &["CLUSTERNAME"], &["CLUSTERNAME"], &["SERVERS"])?;
            for row in columns.rows() {
                let name = columns.required(row, "CLUSTERNAME")?.name("cluster", GROUP_NAME_BYTES_MAX)?;
                seen.add(path, "cluster", &name, row.line)?;
                shared.clusters.push(name);
            }
        }
        for section in sections_named(file, "HostType") {
            let columns = Columns::new(path, section, &["TYPENAME"], &["TYPENAME"], &[])?;
            for row in columns.rows() {
                let name = columns.required(row, "TYPENAME")?.name("host type", GROUP_NAME_BYTES_MAX)?;
                seen.add(path, "host type", &name, row.line)?;
                shared.host_types.push(name);
            }
        }
        for section in sections_named(file, "HostModel") {
            let columns = Columns::new(
                path,
                section,
                &["MODELNAME", "CPUFACTOR", "ARCHITECTURE"],
                &["MODELNAME", "CPUFACTOR"],
                &[],
            )?;
            for row in columns.rows() {
                let name = columns.required(row, "MODELNAME")?.name("host model", GROUP_NAME_BYTES_MAX)?;
                seen.add(path, "host model", &name, row.line)?;
                let factor = columns.required(row, "CPUFACTOR")?;
                let cpu_factor = factor.float(0.0).and_then(|factor_value| {
                    if factor_value > 0.0 {
                        Ok(factor_value)
                    } else {
                        Err(factor.bad_number("a positive number"))
                    }
                })?;
                let architectures = match columns.field(row, "ARCHITECTURE") {
                    Some(field) => field.value.words().map(str::to_string).collect(),
                    None => Vec::new(),
                };
                shared.host_models.push(HostModel { name, cpu_factor, architectures, line: row.line });
            }
        }
        for section in sections_named(file, "Resource") {
            let columns = Columns::new(
                path,
                section,
                &["RESOURCENAME", "TYPE", "INTERVAL", "INCREASING", "DESCRIPTION"],
                &["RESOURCENAME"],
                &["RELEASE"],
            )?;
            for row in columns.rows() {
                let name_field = columns.required(row, "RESOURCENAME")?;
                let name = name_field.name("resource", GROUP_NAME_BYTES_MAX)?;
                if LOAD_INDICES.iter().any(|index| index.eq_ignore_ascii_case(&name)) {
                    return Err(name_field.bad_value("a resource name other than a built-in load index"));
                }
                seen.add(path, "resource", &name, row.line)?;
                let kind = match columns.field(row, "TYPE") {
                    Some(field) if !field.is_default() => match field.text().to_ascii_lowercase().as_str() {
                        "boolean" => ResourceKind::Boolean,
                        "numeric" => ResourceKind::Numeric,
                        "string" => ResourceKind::String,
                        _ => return Err(field.bad_value("`Boolean`, `Numeric` or `String`")),
                    },
                    _ => ResourceKind::Boolean,
                };
                let interval_s = match columns.field(row, "INTERVAL") {
                    Some(field) => field.optional_integer(1u32, u32::MAX)?,
                    None => None,
                };
                let increasing = match columns.field(row, "INCREASING") {
                    Some(field) if !field.is_default() => Some(field.yes_no()?),
                    _ => None,
                };
                let description = columns
                    .field(row, "DESCRIPTION")
                    .map(|field| field.text().to_string())
                    .unwrap_or_default();
                shared.resources.push(Resource {
                    name,
                    kind,
                    interval_s,
                    increasing,
                    description,
                    line: row.line,
                });
            }
        }
        Ok(shared)
    }

    /// The host model called `name`.
    pub fn host_model(&self, name: &str) -> Option<&HostModel> {
        self.host_models.iter().find(|model| model.name == name)
    }

    /// The resource called `name`.
    pub fn resource(&self, name: &str) -> Option<&Resource> {
        self.resources.iter().find(|resource| resource.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LsfShared, String> {
        LsfShared::parse(Path::new("lsf.shared"), text).map_err(|error| error.to_string())
    }

    const SAMPLE: &str = "\
Begin Cluster
ClusterName
lava
End Cluster
Begin HostType
TYPENAME
x86_64_linux
End HostType
Begin HostModel
MODELNAME    CPUFACTOR  ARCHITECTURE
x86_default  100        (x86_64_linux)
slow         0.5        ()
End HostModel
Begin Resource
RESOURCENAME TYPE    INTERVAL INCREASING DESCRIPTION
cs           Boolean ()       ()         (Compute server)
scratch      Numeric 30       N          \"Scratch space\"
End Resource
";

    #[test]
    fn sample_file_in_full() {
        // Goal: every section of lsf.shared gives the documented typed values.
        // Method: the 0.1.2 template shape with one more model and one numeric resource.
        let shared = parse(SAMPLE).expect("valid");
        assert_eq!(shared.clusters, ["lava"]);
        assert_eq!(shared.host_types, ["x86_64_linux"]);
        assert_eq!(
            shared.host_models,
            vec![
                HostModel {
                    name: "x86_default".into(),
                    cpu_factor: 100.0,
                    architectures: vec!["x86_64_linux".into()],
                    line: 11
                },
                HostModel { name: "slow".into(), cpu_factor: 0.5, architectures: vec![], line: 12 },
            ]
        );
        let cs = shared.resource("cs").expect("cs is defined");
        assert_eq!((cs.kind, cs.interval_s, cs.increasing), (ResourceKind::Boolean, None, None));
        assert_eq!(cs.description, "Compute server");
        let scratch = shared.resource("scratch").expect("scratch is defined");
        assert_eq!(
            (scratch.kind, scratch.interval_s, scratch.increasing),
            (ResourceKind::Numeric, Some(30), Some(false))
        );
        assert_eq!(scratch.description, "Scratch space");
    }

    #[test]
    fn errors_name_file_line_and_column() {
        // Goal: bad values, unknown columns and sections, and duplicates are refused with
        // file, line and column.
        // Method: small bad files.
        assert_eq!(
            parse("Begin HostModel\nMODELNAME CPUFACTOR\nm fast\nEnd HostModel\n").expect_err("bad factor"),
            "lsf.shared:3: `CPUFACTOR`: bad number `fast`, expected a number of at least 0"
        );
        assert_eq!(
            parse("Begin HostModel\nMODELNAME CPUFACTOR\nm 0\nEnd HostModel\n").expect_err("zero factor"),
            "lsf.shared:3: `CPUFACTOR`: bad number `0`, expected a positive number"
        );
        assert_eq!(
            parse("Begin Cluster\nClusterName Colour\na red\nEnd Cluster\n").expect_err("unknown column"),
            "lsf.shared:2: unknown column `Colour` in section `Cluster`"
        );
        assert_eq!(
            parse("Begin Clusters\nEnd Clusters\n").expect_err("unknown section"),
            "lsf.shared:1: unknown section `Clusters`"
        );
        assert_eq!(
            parse("Begin Cluster\nClusterName\na\nEnd Cluster\nBegin cluster\nClusterName\nb\nEnd cluster\n")
                .expect_err("twice"),
            "lsf.shared:5: section `cluster` is already defined at line 1"
        );
        assert_eq!(
            parse("Begin HostType\nTYPENAME\nt\nt\nEnd HostType\n").expect_err("duplicate"),
            "lsf.shared:4: host type `t` is already defined at line 3"
        );
        assert_eq!(
            parse("Begin Resource\nRESOURCENAME TYPE\nr Float\nEnd Resource\n").expect_err("bad type"),
            "lsf.shared:3: `TYPE`: bad value `Float`, expected `Boolean`, `Numeric` or `String`"
        );
        assert_eq!(
            parse("Begin Resource\nRESOURCENAME\nmem\nEnd Resource\n").expect_err("load index"),
            "lsf.shared:3: `RESOURCENAME`: bad value `mem`, expected a resource name other than a built-in load index"
        );
        assert_eq!(
            parse("Begin HostType\nTYPE = x\nEnd HostType\n").expect_err("key-value"),
            "lsf.shared:2: section `HostType` must be a table"
        );
        assert_eq!(
            parse("Begin HostModel\nMODELNAME\nEnd HostModel\n").expect_err("missing column"),
            "lsf.shared:2: section `HostModel` needs a `CPUFACTOR` column"
        );
    }
}
