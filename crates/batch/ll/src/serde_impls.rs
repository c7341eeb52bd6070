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

/// The first word of a stored submission (mbatchd's JOB_NEW, its snapshots) since mbatchd's
/// record format 3, which added the job's own resource limits (`SubmitRequest::limits`).
/// A submission stored before begins with the length of its queue name, at most
/// [`crate::NAME_BYTES_MAX`], so never with this word: each stored submission says its layout.
pub const SUBMISSION_FORMAT_3: u32 = 0xFFFF_0003;

/// Fields of a stored submission of format 2 or earlier after its queue name (that layout
/// ends with `post_exec`, before `limits`).
const FORMAT_2_FIELDS_AFTER_QUEUE: usize = 24;

impl Serialize for SubmitSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (SUBMISSION_FORMAT_3, self.request()).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SubmitSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SubmitSpec, D::Error> {
        let request = deserializer.deserialize_tuple(2, StoredSubmission)?;
        SubmitSpec::try_from(request).map_err(D::Error::custom)
    }
}

/// A stored submission: [`SUBMISSION_FORMAT_3`] then the request, or a request of format 2
/// or earlier, whose first word (its queue name's length) was read in place of the mark.
struct StoredSubmission;

impl<'de> serde::de::Visitor<'de> for StoredSubmission {
    type Value = wire::SubmitRequest;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a stored submission")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<wire::SubmitRequest, A::Error> {
        let missing = |idx| A::Error::invalid_length(idx, &"a stored submission");
        let head: u32 = seq.next_element()?.ok_or_else(|| missing(0))?;
        let request = if head == SUBMISSION_FORMAT_3 {
            seq.next_element::<wire::SubmitRequest>()?
        } else {
            seq.next_element_seed(SubmissionFormat2 { queue_len: head })?
        };
        request.ok_or_else(|| missing(1))
    }
}

/// The rest of a submission stored in format 2 or earlier, its queue name's length read: the
/// request without limits. Its queue name is read as the words that hold it (XDR pads it to
/// a multiple of four bytes with zeros).
struct SubmissionFormat2 {
    queue_len: u32,
}

impl SubmissionFormat2 {
    fn queue_words(&self) -> usize {
        (self.queue_len as usize).div_ceil(4)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for SubmissionFormat2 {
    type Value = wire::SubmitRequest;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<wire::SubmitRequest, D::Error> {
        if self.queue_len as usize > crate::NAME_BYTES_MAX {
            return Err(D::Error::custom(format!(
                "stored submission: begins with {:#x}, neither the format 3 mark nor a queue name's length",
                self.queue_len
            )));
        }
        let len = self.queue_words() + FORMAT_2_FIELDS_AFTER_QUEUE;
        deserializer.deserialize_tuple(len, self)
    }
}

impl<'de> serde::de::Visitor<'de> for SubmissionFormat2 {
    type Value = wire::SubmitRequest;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a submission stored in format 2")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<wire::SubmitRequest, A::Error> {
        let mut idx = 0;
        let mut next = || {
            idx += 1;
            idx
        };
        macro_rules! field {
            () => {{
                let at = next();
                seq.next_element()?
                    .ok_or_else(|| A::Error::invalid_length(at, &"a submission stored in format 2"))?
            }};
        }
        let mut queue = Vec::with_capacity(self.queue_words() * 4);
        for _ in 0..self.queue_words() {
            let word: u32 = field!();
            queue.extend_from_slice(&word.to_be_bytes());
        }
        let padding = queue.split_off(self.queue_len as usize);
        if padding.iter().any(|byte| *byte != 0) {
            return Err(A::Error::custom("stored submission: the queue name's padding is not zero"));
        }
        let queue = String::from_utf8(queue)
            .map_err(|_| A::Error::custom("stored submission: the queue name is not UTF-8"))?;
        Ok(wire::SubmitRequest {
            queue,
            job_name: field!(),
            command: field!(),
            cwd: field!(),
            home_dir: field!(),
            input_file: field!(),
            output_file: field!(),
            error_file: field!(),
            file_flags: field!(),
            n_slots: field!(),
            hosts: field!(),
            project: field!(),
            run_limit_s: field!(),
            mem_limit_kb: field!(),
            hold: field!(),
            res_req: field!(),
            dependency: field!(),
            exclusive: field!(),
            login_shell: field!(),
            pre_exec: field!(),
            begin_time: field!(),
            from_host: field!(),
            umask: field!(),
            env: field!(),
            post_exec: field!(),
            limits: None,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(limits: Option<Box<wire::ResourceLimits>>) -> wire::SubmitRequest {
        wire::SubmitRequest {
            queue: "night".into(),
            job_name: "sim".into(),
            command: "sleep 1".into(),
            cwd: "/tmp".into(),
            home_dir: "/home/a".into(),
            hosts: vec!["h1".into()],
            run_limit_s: 60,
            from_host: "h2".into(),
            env: vec![wire::EnvVar { name: "A".into(), value: "xyz".into() }],
            post_exec: "post".into(),
            limits,
            ..wire::SubmitRequest::default()
        }
    }

    // Goal: a stored submission says its layout: today's begins with the format 3 mark and
    // keeps the job's limits; one stored before (no mark, no limits: it begins with its queue
    // name's length) still reads, as a submission without limits; a first word that is
    // neither is refused, not misread.
    // Method: encode with limits; cut today's encoding of one without limits down to the
    // format 2 layout (no mark, no trailing absent-limits word) and decode it.
    #[test]
    fn stored_submissions_of_format_2_still_read() {
        let limits = wire::ResourceLimits { cpu_s: Some(60), core_kb: Some(0), ..Default::default() };
        let limited = SubmitSpec::try_from(request(Some(Box::new(limits)))).expect("valid");
        let bytes = lava_xdr::to_bytes(&limited).expect("encodes");
        assert_eq!(bytes[..4], SUBMISSION_FORMAT_3.to_be_bytes());
        let back: SubmitSpec = lava_xdr::from_bytes(&bytes, &lava_xdr::Limits::DEFAULT).expect("decodes");
        assert_eq!(back, limited);
        for queue in ["night", "", "q"] {
            let plain = SubmitSpec::try_from(wire::SubmitRequest { queue: queue.into(), ..request(None) })
                .expect("valid");
            let today = lava_xdr::to_bytes(&plain).expect("encodes");
            let format_2 = &today[4..today.len() - 4];
            let back: SubmitSpec =
                lava_xdr::from_bytes(format_2, &lava_xdr::Limits::DEFAULT).expect("format 2 decodes");
            assert_eq!(back, plain, "queue {queue:?}");
        }
        // A format 2 submission whose queue name's padding is not zero is damage, not a name.
        let plain =
            SubmitSpec::try_from(wire::SubmitRequest { queue: "q".into(), ..request(None) }).expect("valid");
        let today = lava_xdr::to_bytes(&plain).expect("encodes");
        let mut damaged = today[4..today.len() - 4].to_vec();
        damaged[5] = 1;
        let error =
            lava_xdr::from_bytes::<SubmitSpec>(&damaged, &lava_xdr::Limits::DEFAULT).expect_err("refused");
        assert!(error.to_string().contains("padding is not zero"), "{error}");
        // A CPU time, process or thread limit of 0 cannot be meant; a core limit of 0 can.
        for (zero, field) in [
            (wire::ResourceLimits { cpu_s: Some(0), ..Default::default() }, "submit.limits.cpu_s"),
            (wire::ResourceLimits { processes: Some(0), ..Default::default() }, "submit.limits.processes"),
            (wire::ResourceLimits { threads: Some(0), ..Default::default() }, "submit.limits.threads"),
        ] {
            let error = SubmitSpec::try_from(request(Some(Box::new(zero)))).expect_err("refused");
            assert_eq!(error.field, field);
        }
        let mut garbage = lava_xdr::to_bytes(&limited).expect("encodes");
        garbage[..4].copy_from_slice(&0x1000u32.to_be_bytes());
        let error =
            lava_xdr::from_bytes::<SubmitSpec>(&garbage, &lava_xdr::Limits::DEFAULT).expect_err("refused");
        assert!(error.to_string().contains("neither the format 3 mark"), "{error}");
    }
}
