//! `bugroup [-h] [-V] [-r] [-w] [group_name ...]` and `bmgroup [-h] [-V] [-r]
//! [-w] [group_name ...]`: the user groups of lsb.users and the host groups of
//! lsb.hosts, in OpenLava's layout (`bmgroup.c`, shared by both commands):
//!
//! ```text
//! GROUP_NAME    USERS
//! biology      alice bob chem/
//! everyone     all users
//! ```
//!
//! The header is `%-12.12s  %s`; each row is the group's name as `%-12.12s `
//! (`-w`: `%-12s `, never cut), then each member followed by one blank (a
//! member named twice once). A member that is itself a group ends in `/`, as
//! LSF shows a subgroup; `-r` lists its members instead, recursively. A group
//! of `all` is `all users` (`all hosts used by the batch system` for hosts).
//! Groups come in file order; named groups in the order named.
//!
//! Read from the files as mbatchd loads them (mbatchd is not asked, as for
//! `bparams`). Errors, on standard error with exit 255 (LSF's `lsb_perror`
//! words): no group at all, `user group: No user group defined in the system`
//! (`host group: No host group defined in the system`); an unknown name, `NAME:
//! No such user/host group`. `bugroup -l` (fairshare shares) is not supported.

use std::process::ExitCode;

use crate::term::{self, Term};

/// Which command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `bugroup`: lsb.users' `UserGroup`.
    User,
    /// `bmgroup`: lsb.hosts' `HostGroup`.
    Host,
}

impl Kind {
    fn command(self) -> &'static str {
        match self {
            Kind::User => "bugroup",
            Kind::Host => "bmgroup",
        }
    }

    fn usage(self) -> String {
        format!("Usage: {} [-h] [-V] [-r] [-w] [group_name ...]\n", self.command())
    }
}

/// A group: its name and members as configured.
pub type Group = (String, Vec<String>);

/// The listing of `groups` (already selected); `recursive` expands subgroups
/// (`-r`), `wide` cuts no name (`-w`).
pub fn format(kind: Kind, all_groups: &[Group], shown: &[&Group], recursive: bool, wide: bool) -> String {
    let mut out = format!(
        "{:<12.12}  {}\n",
        "GROUP_NAME",
        match kind {
            Kind::User => "USERS",
            Kind::Host => "HOSTS",
        }
    );
    for (name, members) in shown {
        if wide {
            out.push_str(&format!("{name:<12} "));
        } else {
            out.push_str(&format!("{name:<12.12} "));
        }
        if members.iter().any(|m| m == "all") {
            out.push_str(match kind {
                Kind::User => "all users\n",
                Kind::Host => "all hosts used by the batch system\n",
            });
            continue;
        }
        let mut words: Vec<String> = Vec::new();
        expand(all_groups, members, recursive, &mut vec![name.as_str()], &mut words);
        for word in words {
            out.push_str(&word);
            out.push(' ');
        }
        out.push('\n');
    }
    out
}

/// The words of `members`: a subgroup as `name/`, or its members with `recursive`
/// (a group already being expanded is not expanded again).
fn expand<'a>(
    all_groups: &'a [Group],
    members: &'a [String],
    recursive: bool,
    path: &mut Vec<&'a str>,
    out: &mut Vec<String>,
) {
    for member in members {
        let word = match all_groups.iter().find(|(name, _)| name == member) {
            Some((name, inner)) if recursive && !path.contains(&name.as_str()) => {
                path.push(name);
                expand(all_groups, inner, recursive, path, out);
                path.pop();
                continue;
            }
            // A group that contains itself, through others: nothing more to list.
            Some(_) if recursive => continue,
            Some(_) => format!("{member}/"),
            None => member.clone(),
        };
        if !out.contains(&word) {
            out.push(word);
        }
    }
}

/// Runs `bugroup` with this process's arguments.
pub fn bugroup_main() -> ExitCode {
    term::main_with("bugroup", |term, args| run(term, args, Kind::User))
}

/// Runs `bmgroup` with this process's arguments.
pub fn bmgroup_main() -> ExitCode {
    term::main_with("bmgroup", |term, args| run(term, args, Kind::Host))
}

fn run(term: &mut Term, args: Vec<String>, kind: Kind) -> bool {
    let (mut recursive, mut wide) = (false, false);
    let mut names: Vec<String> = Vec::new();
    for arg in &args {
        match arg.strip_prefix('-') {
            Some(letters) if !letters.is_empty() => {
                for letter in letters.chars() {
                    match letter {
                        'h' => {
                            term.err(&kind.usage());
                            return true;
                        }
                        'V' => {
                            term.err(term::VERSION_LINE);
                            return true;
                        }
                        'r' => recursive = true,
                        'w' => wide = true,
                        other => {
                            term.err(&format!(
                                "{}: illegal option -- {other}\n{}",
                                kind.command(),
                                kind.usage()
                            ));
                            return false;
                        }
                    }
                }
            }
            _ => names.push(arg.clone()),
        }
    }
    let config = match lava_conf::ClusterConfig::load(&lava_conf::envdir_from_env()) {
        Ok(config) => config,
        Err(error) => {
            term.err(&format!("{}: {error}\n", kind.command()));
            return false;
        }
    };
    let groups: Vec<Group> = match kind {
        Kind::User => config.users.groups.iter().map(|g| (g.name.clone(), g.members.clone())).collect(),
        Kind::Host => config.hosts.groups.iter().map(|g| (g.name.clone(), g.members.clone())).collect(),
    };
    if groups.is_empty() {
        let what = match kind {
            Kind::User => "user group: No user group defined in the system",
            Kind::Host => "host group: No host group defined in the system",
        };
        term.err(&format!("{what}\n"));
        return false;
    }
    let mut shown: Vec<&Group> = Vec::new();
    if names.is_empty() {
        shown.extend(groups.iter());
    } else {
        for name in &names {
            match groups.iter().find(|(group, _)| group == name) {
                Some(group) => shown.push(group),
                None => {
                    term.err(&format!("{name}: No such user/host group\n"));
                    return false;
                }
            }
        }
    }
    term.out(&format(kind, &groups, &shown, recursive, wide));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, members: &[&str]) -> Group {
        (name.to_owned(), members.iter().map(|m| (*m).to_owned()).collect())
    }

    // Goal: OpenLava's layout: the 12-column name (cut unless -w), members each
    // followed by a blank, subgroups with `/` or expanded with -r, `all` in words.
    #[test]
    fn layouts() {
        let groups = vec![
            group("biology", &["alice", "bob", "chem", "alice"]),
            group("chem", &["carol", "biology"]),
            group("everyone", &["all"]),
            group("a_very_long_group_name", &["dave"]),
        ];
        let all: Vec<&Group> = groups.iter().collect();
        assert_eq!(
            format(Kind::User, &groups, &all, false, false),
            "GROUP_NAME    USERS\n\
             biology      alice bob chem/ \n\
             chem         carol biology/ \n\
             everyone     all users\n\
             a_very_long_ dave \n"
        );
        assert_eq!(
            format(Kind::User, &groups, &all[..2], true, false),
            "GROUP_NAME    USERS\nbiology      alice bob carol \nchem         carol alice bob \n"
        );
        assert_eq!(
            format(Kind::Host, &groups, &all[2..], false, true),
            "GROUP_NAME    HOSTS\neveryone     all hosts used by the batch system\na_very_long_group_name dave \n"
        );
    }
}
