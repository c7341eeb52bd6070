//! `lsb.users` as typed values, [`LsbUsers`]: user groups and per-user job limits. The file is
//! optional.
//!
//! Sections (each optional, at most once):
//! - `UserGroup`: columns `GROUP_NAME` and `GROUP_MEMBER` (a list such as `(alice bob)`, or
//!   `all`); LSF's `USER_SHARES` and `GROUP_ADMIN` columns are accepted and handed back unread.
//! - `User`: columns `USER_NAME` (a user, a user group, or `default` for every user not listed),
//!   `MAX_JOBS` (job slots the user's running and suspended jobs may hold across the
//!   cluster), `JL/P` (job slots per processor; read, not enforced by mbatchd) and
//!   `MAX_PEND_JOBS` (pending jobs the user may have). A user group's limits apply to
//!   its members' jobs together; `-` is unlimited. LSF's `group@` form (the limits for
//!   each member alone) is not a valid name here and is refused with file and line.
//!
//! User names are not looked up in the password database: this crate reads files, nothing else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::ConfError;
use crate::fields::{
    Columns, GROUP_NAME_BYTES_MAX, HOST_NAME_BYTES_MAX, Names, check_sections, sections_named,
};
use crate::lex::read_text;
use crate::section::SectionFile;
use crate::value::Value;

/// One row of the `UserGroup` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserGroup {
    /// `GROUP_NAME`.
    pub name: String,
    /// `GROUP_MEMBER`: users and groups; `["all"]` for every user.
    pub members: Vec<String>,
    /// Values of the LSF columns LavaCore does not implement, by upper-case column name.
    pub unimplemented: BTreeMap<String, Value>,
    /// The row's line.
    pub line: u32,
}

/// One row of the `User` section.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchUser {
    /// `USER_NAME` (`default` rows are kept apart).
    pub name: String,
    /// `MAX_JOBS`.
    pub max_jobs: Option<u32>,
    /// `JL/P`.
    pub jl_p: Option<f64>,
    /// `MAX_PEND_JOBS`.
    pub max_pend_jobs: Option<u32>,
    /// The row's line.
    pub line: u32,
}

/// The contents of `lsb.users`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LsbUsers {
    /// The file, if there was one.
    pub path: Option<PathBuf>,
    /// The `UserGroup` rows, in file order.
    pub groups: Vec<UserGroup>,
    /// The `default` row of `User`.
    pub default: Option<BatchUser>,
    /// The other rows of `User`, in file order.
    pub users: Vec<BatchUser>,
}

impl LsbUsers {
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

    /// Gives meaning to a parsed `lsb.users`.
    pub fn from_file(file: &SectionFile) -> Result<Self, ConfError> {
        check_sections(file, &["USERGROUP", "USER"], &[], &[])?;
        let path = file.path();
        let mut users = LsbUsers { path: Some(path.to_path_buf()), ..LsbUsers::default() };
        let mut names = Names::default();

        for section in sections_named(file, "UserGroup") {
            let columns = Columns::new(
                path,
                section,
                &["GROUP_NAME", "GROUP_MEMBER"],
                &["GROUP_NAME", "GROUP_MEMBER"],
                &["USER_SHARES", "GROUP_ADMIN"],
            )?;
            for row in columns.rows() {
                let name =
                    columns.required(row, "GROUP_NAME")?.member_name("user group", GROUP_NAME_BYTES_MAX)?;
                names.add(path, "user group", &name, row.line)?;
                let members_field = columns.required(row, "GROUP_MEMBER")?;
                let members = if members_field.value.words().eq(["all"]) {
                    vec!["all".to_string()]
                } else {
                    members_field.names("user or user group", HOST_NAME_BYTES_MAX, true)?
                };
                users.groups.push(UserGroup {
                    name,
                    members,
                    unimplemented: columns.unimplemented(row),
                    line: row.line,
                });
            }
        }
        for section in sections_named(file, "User") {
            let columns = Columns::new(
                path,
                section,
                &["USER_NAME", "MAX_JOBS", "JL/P", "MAX_PEND_JOBS"],
                &["USER_NAME"],
                &[],
            )?;
            for row in columns.rows() {
                let name_field = columns.required(row, "USER_NAME")?;
                let is_default = name_field.text().eq_ignore_ascii_case("default");
                let name = if is_default {
                    "default".to_string()
                } else {
                    name_field.member_name("user", HOST_NAME_BYTES_MAX)?
                };
                names.add(path, "user", &name, row.line)?;
                let max_jobs = match columns.field(row, "MAX_JOBS") {
                    Some(field) => field.optional_integer(0u32, u32::MAX)?,
                    None => None,
                };
                let jl_p = match columns.field(row, "JL/P") {
                    Some(field) if !field.is_default() => Some(field.float(0.0)?),
                    _ => None,
                };
                let max_pend_jobs = match columns.field(row, "MAX_PEND_JOBS") {
                    Some(field) => field.optional_integer(0u32, u32::MAX)?,
                    None => None,
                };
                let user = BatchUser { name, max_jobs, jl_p, max_pend_jobs, line: row.line };
                if is_default {
                    users.default = Some(user);
                } else {
                    users.users.push(user);
                }
            }
        }
        Ok(users)
    }

    /// The row for user (or user group) `name`, or the `default` row.
    pub fn user_or_default(&self, name: &str) -> Option<&BatchUser> {
        self.users.iter().find(|user| user.name == name).or(self.default.as_ref())
    }

    /// The user group called `name`.
    pub fn group(&self, name: &str) -> Option<&UserGroup> {
        self.groups.iter().find(|group| group.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LsbUsers, String> {
        LsbUsers::parse(Path::new("lsb.users"), text).map_err(|error| error.to_string())
    }

    #[test]
    fn groups_and_limits() {
        // Goal: user groups keep their members, and the User table gives per-user limits
        // with a `default` row.
        // Method: both sections with a default row and a per-user row.
        let users = parse(
            "Begin UserGroup\nGROUP_NAME GROUP_MEMBER USER_SHARES\nstaff (alice bob) ()\nEnd UserGroup\n\
             Begin User\nUSER_NAME MAX_JOBS JL/P\ndefault 10 -\nalice - 0.5\nEnd User\n",
        )
        .expect("valid");
        assert_eq!(
            users.group("staff").map(|group| group.members.clone()),
            Some(vec!["alice".into(), "bob".into()])
        );
        assert_eq!(
            users.user_or_default("alice").map(|user| (user.max_jobs, user.jl_p)),
            Some((None, Some(0.5)))
        );
        assert_eq!(
            users.user_or_default("carol").map(|user| (user.max_jobs, user.jl_p)),
            Some((Some(10), None))
        );
    }

    #[test]
    fn pending_job_limits_per_user_group_and_default() {
        // Goal: LSF's MAX_PEND_JOBS column beside MAX_JOBS, per user, per group and
        // `default`; `-` is unlimited; a file without the column has no pending limit.
        // Method: LSF's documented example layout, then the old three columns.
        let users = parse(
            "Begin UserGroup\nGROUP_NAME GROUP_MEMBER\nstaff (alice bob)\nEnd UserGroup\n\
             Begin User\nUSER_NAME MAX_JOBS JL/P MAX_PEND_JOBS\nalice 10 - 1000\nstaff 4 - 50\n\
             carol - - -\ndefault 6 1 10\nEnd User\n",
        )
        .expect("valid");
        let limits = |name: &str| users.user_or_default(name).map(|user| (user.max_jobs, user.max_pend_jobs));
        assert_eq!(limits("alice"), Some((Some(10), Some(1000))));
        assert_eq!(limits("staff"), Some((Some(4), Some(50))));
        assert_eq!(limits("carol"), Some((None, None)));
        assert_eq!(limits("dave"), Some((Some(6), Some(10))));
        assert_eq!(users.users.iter().map(|user| user.line).collect::<Vec<_>>(), vec![7, 8, 9]);
        let old = parse("Begin User\nUSER_NAME MAX_JOBS JL/P\ndefault 2 -\nEnd User\n").expect("valid");
        assert_eq!(old.default.map(|user| (user.max_jobs, user.max_pend_jobs)), Some((Some(2), None)));
    }

    #[test]
    fn errors_name_file_line_and_column() {
        // Goal: a bad limit and an unknown column are refused with file, line and column.
        // Method: two small bad files.
        assert_eq!(
            parse("Begin User\nUSER_NAME MAX_JOBS\nalice lots\nEnd User\n").expect_err("number"),
            "lsb.users:3: `MAX_JOBS`: bad number `lots`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            parse("Begin User\nUSER_NAME PRIORITY\nEnd User\n").expect_err("column"),
            "lsb.users:2: unknown column `PRIORITY` in section `User`"
        );
        assert_eq!(
            parse("Begin User\nUSER_NAME MAX_JOBS MAX_PEND_JOBS\nalice 1 -3\nEnd User\n").expect_err("pend"),
            "lsb.users:3: `MAX_PEND_JOBS`: bad number `-3`, expected a whole number from 0 to 4294967295"
        );
        assert!(
            parse("Begin User\nUSER_NAME MAX_PEND_JOBS\nstaff@ 5\nEnd User\n")
                .expect_err("group@")
                .starts_with("lsb.users:3: ")
        );
    }
}
