//! Validated names: jobs, hosts, queues and users.
//!
//! A name is non-empty, at most [`crate::NAME_BYTES_MAX`] bytes, and made of
//! printable characters without blanks, so that it can appear in a column of
//! `bjobs` output, in a configuration file and in a path component.

use std::fmt;
use std::sync::Arc;

use crate::{LlError, NAME_BYTES_MAX};

/// A job as LSF names it: `ID` or `ID[INDEX]` for an array element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobRef {
    id: u32,
    index: u32,
}

impl JobRef {
    /// The first reference in the order of references (id, then index).
    pub const MIN: JobRef = JobRef { id: 1, index: 0 };
    /// The last reference in the order of references.
    pub const MAX: JobRef = JobRef { id: u32::MAX, index: u32::MAX };

    /// A job reference; `None` for job id 0, which LSF reserves (`bkill 0`).
    pub fn new(id: u32, index: u32) -> Option<JobRef> {
        (id != 0).then_some(JobRef { id, index })
    }

    /// The job id.
    pub fn id(self) -> u32 {
        self.id
    }

    /// The array index, 0 when the job is not an array element.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The wire form.
    pub fn to_wire(self) -> lava_batch_wire::WireJobRef {
        lava_batch_wire::WireJobRef { job_id: self.id, array_index: self.index }
    }
}

impl fmt::Display for JobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.index == 0 { write!(f, "{}", self.id) } else { write!(f, "{}[{}]", self.id, self.index) }
    }
}

fn check_name(field: &str, value: &str) -> Result<(), LlError> {
    if value.is_empty() {
        return Err(LlError::new(field, "is empty"));
    }
    if value.len() > NAME_BYTES_MAX {
        return Err(LlError::new(field, format!("{} bytes, at most {NAME_BYTES_MAX} allowed", value.len())));
    }
    if let Some(bad) = value.chars().find(|c| c.is_whitespace() || c.is_control() || *c == '/') {
        return Err(LlError::new(field, format!("contains the character {bad:?}")));
    }
    Ok(())
}

// A name is shared text (`Arc<str>`, 16 bytes inline): a copy is a reference count, not
// an allocation. mbatchd holds a user, a queue and a submitting host per job, and the
// same names again in its indexes; a million pending jobs of one user share one copy of
// each (docs/benchmarks.md, "A million pending jobs").
macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Validates `value` as this kind of name; `field` names it in the error.
            pub fn parse(field: &str, value: &str) -> Result<$name, LlError> {
                check_name(field, value)?;
                Ok($name(Arc::from(value)))
            }

            /// Whether `self` and `other` are one shared copy (not only equal).
            pub fn shares(&self, other: &$name) -> bool {
                Arc::ptr_eq(&self.0, &other.0)
            }

            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// A host name as `lsf.cluster.NAME` lists it.
    HostName
);
name_type!(
    /// A queue name as `lsb.queues` defines it.
    QueueName
);
name_type!(
    /// A user name (login name).
    UserName
);

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: job references print as LSF prints them, and id 0 is not a job.
    #[test]
    fn job_refs_print_like_lsf() {
        assert_eq!(JobRef::new(12, 0).map(|j| j.to_string()), Some("12".to_owned()));
        assert_eq!(JobRef::new(12, 3).map(|j| j.to_string()), Some("12[3]".to_owned()));
        assert_eq!(JobRef::new(0, 0), None);
    }

    // Goal: each way a name can be malformed is refused with the field named.
    #[test]
    fn bad_names_are_refused_with_the_field() {
        for bad in ["", "a b", "a\tb", "a/b", "x\0y", &"h".repeat(NAME_BYTES_MAX + 1)] {
            let err = HostName::parse("spec.host", bad).expect_err(bad);
            assert_eq!(err.field, "spec.host");
        }
        assert_eq!(QueueName::parse("q", "normal").map(|q| q.to_string()), Ok("normal".to_owned()));
    }
}
