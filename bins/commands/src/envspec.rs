//! `bsub -env`: which variables of the submission environment the job gets.
//!
//! ```text
//! -env "none" | "all[, ~NAME ...][, NAME=value ...]" | "NAME[=value][, NAME[=value] ...]"
//! ```
//!
//! - `none`: no submission variable (the job still gets LSF's own variables).
//! - `all`: every variable (the default without `-env`), minus each `~NAME`,
//!   with each `NAME=value` set or replaced.
//! - A list without `all`: only the variables named, with their current
//!   value, or with the value given.
//!
//! Items are separated by commas; a value holding a comma is written in single
//! quotes (`TEST='A, B'`). In a value, `$NAME` and `${NAME}` are replaced by the
//! variable's value in the submission environment (empty when unset), so
//! `PATH=/opt/bin:$PATH` prepends. A name is letters, digits and `_`, not
//! starting with a digit, and neither `all` nor `none`.

use lava_batch_wire::EnvVar;

/// A parsed `-env` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvSpec {
    /// `none`.
    None,
    /// `all`, without the `~` names, with the assignments.
    All {
        /// `~NAME`.
        removed: Vec<String>,
        /// `NAME=value`, value not yet expanded.
        set: Vec<(String, String)>,
    },
    /// Only these names, each with its current value or the value given.
    Only(Vec<(String, Option<String>)>),
}

/// The message for a bad `-env` value.
fn bad(text: &str, why: &str) -> String {
    format!("{text}: Bad -env specification ({why})")
}

/// Splits on commas outside single quotes, dropping the quotes, trimming blanks.
fn items(text: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '\'' => quoted = !quoted,
            ',' if !quoted => items.push(std::mem::take(&mut current).trim().to_owned()),
            c => current.push(c),
        }
    }
    if quoted {
        return Err(bad(text, "unbalanced quote"));
    }
    items.push(current.trim().to_owned());
    Ok(items)
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.eq_ignore_ascii_case("all")
        && !name.eq_ignore_ascii_case("none")
}

/// Parses a `-env` value.
pub fn parse_env(text: &str) -> Result<EnvSpec, String> {
    let items = items(text)?;
    let first = items.first().map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    if first == "none" {
        return if items.len() == 1 { Ok(EnvSpec::None) } else { Err(bad(text, "none stands alone")) };
    }
    let all = first == "all";
    let rest = if all { &items[1..] } else { &items[..] };
    let mut removed = Vec::new();
    let mut assigned = Vec::new();
    for item in rest {
        let name_of = |name: &str| {
            if valid_name(name) { Ok(name.to_owned()) } else { Err(bad(text, &format!("bad name `{name}`"))) }
        };
        if let Some(name) = item.strip_prefix('~') {
            if !all {
                return Err(bad(text, "~NAME needs all"));
            }
            removed.push(name_of(name.trim())?);
        } else if let Some((name, value)) = item.split_once('=') {
            assigned.push((name_of(name.trim())?, Some(value.to_owned())));
        } else {
            assigned.push((name_of(item)?, None));
        }
    }
    if all {
        let set = assigned.into_iter().filter_map(|(name, value)| Some((name, value?))).collect();
        Ok(EnvSpec::All { removed, set })
    } else {
        Ok(EnvSpec::Only(assigned))
    }
}

/// `$NAME` and `${NAME}` in `value` replaced from `env`.
pub fn expand(value: &str, env: &[EnvVar]) -> String {
    let lookup = |name: &str| env.iter().find(|var| var.name == name).map_or("", |var| var.value.as_str());
    let mut out = String::new();
    let mut rest = value;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(braced) = after.strip_prefix('{')
            && let Some(close) = braced.find('}')
        {
            out.push_str(lookup(&braced[..close]));
            rest = &braced[close + 1..];
            continue;
        }
        let len = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
        if len == 0 {
            out.push('$');
        } else {
            out.push_str(lookup(&after[..len]));
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

impl EnvSpec {
    /// The environment the job is sent, from the submission environment `env`.
    pub fn select(&self, env: &[EnvVar]) -> Vec<EnvVar> {
        let var = |name: &str, value: String| EnvVar { name: name.to_owned(), value };
        match self {
            EnvSpec::None => Vec::new(),
            EnvSpec::All { removed, set } => {
                let mut out: Vec<EnvVar> = env
                    .iter()
                    .filter(|v| !removed.contains(&v.name) && !set.iter().any(|(name, _)| *name == v.name))
                    .cloned()
                    .collect();
                out.extend(set.iter().map(|(name, value)| var(name, expand(value, env))));
                out
            }
            EnvSpec::Only(names) => names
                .iter()
                .filter_map(|(name, value)| match value {
                    Some(value) => Some(var(name, expand(value, env))),
                    None => env.iter().find(|v| v.name == *name).cloned(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Vec<EnvVar> {
        [("PATH", "/bin"), ("HOME", "/h"), ("SECRET", "x")]
            .iter()
            .map(|(n, v)| EnvVar { name: (*n).to_owned(), value: (*v).to_owned() })
            .collect()
    }

    fn names(vars: &[EnvVar]) -> Vec<String> {
        vars.iter().map(|v| format!("{}={}", v.name, v.value)).collect()
    }

    // Goal: none, all with removals and assignments, and a plain list select what
    // LSF's -env selects; values expand variables and may quote commas.
    #[test]
    fn selections() {
        assert!(parse_env("none").expect("valid").select(&env()).is_empty());
        let all = parse_env("all, ~SECRET, PATH=/opt:$PATH, T='A, B'").expect("valid");
        assert_eq!(names(&all.select(&env())), ["HOME=/h", "PATH=/opt:/bin", "T=A, B"]);
        let only = parse_env("HOME, X=${HOME}/x, UNSET").expect("valid");
        assert_eq!(names(&only.select(&env())), ["HOME=/h", "X=/h/x"]);
        assert_eq!(parse_env("ALL").expect("valid").select(&env()), env());
        assert_eq!(expand("$ $1 a$", &env()), "$  a$");
    }

    // Goal: malformed values are refused with the value named.
    #[test]
    fn bad_values() {
        for bad in ["none, A", "~A", "A, ~B", "1A=x", "A B", "all, none", "T='x", "", "all,"] {
            let error = parse_env(bad).expect_err(bad);
            assert!(error.starts_with(&format!("{bad}: Bad -env specification")), "{error}");
        }
    }
}
