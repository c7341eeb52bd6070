//! serde support for the domain values, so that logic crates can put them in
//! durable records (mbatchd's lsb.events, sbatchd's job record) and snapshots.
//!
//! Every value serializes as its wire form (a name as its text, a status as
//! its LavaLite bit value, a specification as the wire structure it came
//! from) and deserializes through the same validation as a fresh message, so
//! that data read back from disk is checked exactly as data read off the
//! network: a corrupt record is an error naming the type, never a value that
//! skipped validation.

use lava_batch_wire as wire;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{HostName, JobRef, JobSpec, JobStatus, QueueName, SubmitSpec, UserName, job_ref};

macro_rules! name_serde {
    ($name:ident) => {
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<$name, D::Error> {
                let text = String::deserialize(deserializer)?;
                $name::parse(stringify!($name), &text).map_err(D::Error::custom)
            }
        }
    };
}

name_serde!(HostName);
name_serde!(QueueName);
name_serde!(UserName);

impl Serialize for JobRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JobRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JobRef, D::Error> {
        job_ref("JobRef", wire::WireJobRef::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

impl Serialize for JobStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u32(self.bits())
    }
}

impl<'de> Deserialize<'de> for JobStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JobStatus, D::Error> {
        let bits = u32::deserialize(deserializer)?;
        JobStatus::from_bits(bits)
            .ok_or_else(|| D::Error::custom(format!("JobStatus: {bits:#x} is not a job status")))
    }
}

impl Serialize for SubmitSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.request().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SubmitSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SubmitSpec, D::Error> {
        SubmitSpec::try_from(wire::SubmitRequest::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

impl Serialize for JobSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.specs().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JobSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JobSpec, D::Error> {
        JobSpec::try_from(wire::JobSpecs::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}
