//! Bytes on the simulated wire and disks: every message is a real batch frame
//! (`lava_xdr::frame` header + XDR body), every mbd event and sbd record is
//! real XDR, exactly as the daemon shells will write them.
//!
//! Nothing crosses a node boundary as a Rust value: the sender encodes, the
//! receiver decodes with the default limits and, for messages, checks the
//! header's version and operation. Any encode or decode failure is a failure
//! of the run (an encoding bug), never a silently dropped message.

use lava_batch_wire as wire;
use lava_mbd::{ClientReply, ToSbd};
use lava_sbd::ToMbd;
use lava_xdr::frame::{FrameHeader, FrameLimits, decode_exact};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Encodes `body` as one frame of operation `op`.
fn frame<T: Serialize>(op: wire::Operation, body: &T) -> Vec<u8> {
    let body = match lava_xdr::to_bytes(body) {
        Ok(bytes) => bytes,
        Err(error) => panic!("XDR encoding of a {} body failed: {error}", op.name()),
    };
    let length = u32::try_from(body.len()).expect("a simulated frame body is far below 4 GiB");
    let header =
        FrameHeader { sequence: 0, operation: op.code(), version: wire::BATCH_VERSION, length, status: 0 };
    let mut out = Vec::with_capacity(lava_xdr::frame::HEADER_BYTES + body.len());
    header.write(&mut out);
    out.extend_from_slice(&body);
    out
}

/// Splits a frame into its operation and body, checking length and version.
fn unframe(bytes: &[u8]) -> Result<(wire::Operation, Vec<u8>), String> {
    let frame = decode_exact(bytes, &FrameLimits::default()).map_err(|e| e.to_string())?;
    frame.header.check_version(wire::BATCH_VERSION).map_err(|e| e.to_string())?;
    let op = wire::Operation::from_code(frame.header.operation)
        .ok_or_else(|| format!("unknown operation {}", frame.header.operation))?;
    Ok((op, frame.body.to_vec()))
}

fn body<T: DeserializeOwned>(op: wire::Operation, bytes: &[u8]) -> Result<T, String> {
    lava_xdr::from_bytes(bytes, &lava_xdr::Limits::DEFAULT).map_err(|e| format!("{} body: {e}", op.name()))
}

/// XDR bytes of a durable value (an mbd event, an sbd record).
pub fn to_record<T: Serialize + std::fmt::Debug>(value: &T) -> Vec<u8> {
    match lava_xdr::to_bytes(value) {
        Ok(bytes) => bytes,
        Err(error) => panic!("XDR encoding of a durable record failed: {error}: {value:?}"),
    }
}

/// A durable value read back from its XDR bytes.
pub fn from_record<T: DeserializeOwned>(bytes: &[u8]) -> T {
    match lava_xdr::from_bytes(bytes, &lava_xdr::Limits::DEFAULT) {
        Ok(value) => value,
        Err(error) => panic!("a durable record written by the simulation does not decode: {error}"),
    }
}

/// The frame of a message mbatchd sends to sbatchd.
pub fn encode_to_sbd(msg: &ToSbd) -> Vec<u8> {
    let op = msg.operation();
    match msg {
        ToSbd::RegisterAck(body) => frame(op, body),
        ToSbd::NewJob(body) => frame(op, &**body),
        ToSbd::NewJobReplyAck(body) | ToSbd::JobExecuteAck(body) | ToSbd::JobFinishAck(body) => {
            frame(op, body)
        }
        ToSbd::JobSignal(body) => frame(op, body),
    }
}

/// A frame as sbatchd's shell decodes it (wire level, before `lava-batch-ll`).
pub fn decode_to_sbd(bytes: &[u8]) -> Result<ToSbd, String> {
    use wire::Operation as Op;
    let (op, b) = unframe(bytes)?;
    Ok(match op {
        Op::SbdRegisterAck => ToSbd::RegisterAck(body(op, &b)?),
        Op::NewJob => ToSbd::NewJob(Box::new(body(op, &b)?)),
        Op::NewJobReplyAck => ToSbd::NewJobReplyAck(body(op, &b)?),
        Op::JobExecuteAck => ToSbd::JobExecuteAck(body(op, &b)?),
        Op::JobFinishAck => ToSbd::JobFinishAck(body(op, &b)?),
        Op::JobSignal => ToSbd::JobSignal(body(op, &b)?),
        other => return Err(format!("{} is not an mbatchd -> sbatchd operation", other.name())),
    })
}

/// What sbatchd sends mbatchd: the channel registration or a pipeline message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FromSbd {
    /// SBD_REGISTER, the first frame of a connection.
    Register(wire::SbdRegister),
    /// A protocol message of the logic.
    Message(ToMbd),
}

/// The frame of a message sbatchd sends to mbatchd.
pub fn encode_to_mbd(msg: &FromSbd) -> Vec<u8> {
    match msg {
        FromSbd::Register(body) => frame(wire::Operation::SbdRegister, body),
        FromSbd::Message(message) => {
            let op = message.operation();
            match message {
                ToMbd::NewJobReply(body) => frame(op, body),
                ToMbd::JobExecute(body) => frame(op, body),
                ToMbd::JobFinish(body) => frame(op, body),
                ToMbd::JobSignalReply(body) => frame(op, body),
            }
        }
    }
}

/// A frame as mbatchd's shell decodes it.
pub fn decode_to_mbd(bytes: &[u8]) -> Result<FromSbd, String> {
    use wire::Operation as Op;
    let (op, b) = unframe(bytes)?;
    Ok(match op {
        Op::SbdRegister => FromSbd::Register(body(op, &b)?),
        Op::NewJobReply => FromSbd::Message(ToMbd::NewJobReply(body(op, &b)?)),
        Op::JobExecute => FromSbd::Message(ToMbd::JobExecute(body(op, &b)?)),
        Op::JobFinish => FromSbd::Message(ToMbd::JobFinish(body(op, &b)?)),
        Op::JobSignalReply => FromSbd::Message(ToMbd::JobSignalReply(body(op, &b)?)),
        other => return Err(format!("{} is not an sbatchd -> mbatchd operation", other.name())),
    })
}

/// A command's request to mbatchd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientRequest {
    /// `bsub`.
    Submit(Box<wire::ClientRequest<wire::SubmitRequest>>),
    /// `bkill`, `bstop`, `bresume`.
    Signal(wire::ClientRequest<wire::SignalRequest>),
    /// `bjobs`.
    Query(wire::ClientRequest<wire::JobQuery>),
    /// `brequeue -r` (JOB_CONTROL).
    Requeue(wire::ClientRequest<wire::JobControlRequest>),
}

/// The frame of a command's request.
pub fn encode_client_request(request: &ClientRequest) -> Vec<u8> {
    match request {
        ClientRequest::Submit(body) => frame(wire::Operation::SubmitJob, body),
        ClientRequest::Signal(body) => frame(wire::Operation::SignalJobs, body),
        ClientRequest::Query(body) => frame(wire::Operation::JobQuery, body),
        ClientRequest::Requeue(body) => frame(wire::Operation::JobControl, body),
    }
}

/// A command's request as mbatchd's shell decodes it.
pub fn decode_client_request(bytes: &[u8]) -> Result<ClientRequest, String> {
    use wire::Operation as Op;
    let (op, b) = unframe(bytes)?;
    Ok(match op {
        Op::SubmitJob => ClientRequest::Submit(body(op, &b)?),
        Op::SignalJobs => ClientRequest::Signal(body(op, &b)?),
        Op::JobQuery => ClientRequest::Query(body(op, &b)?),
        Op::JobControl => ClientRequest::Requeue(body(op, &b)?),
        other => return Err(format!("{} is not a simulated command request", other.name())),
    })
}

/// The frame of mbatchd's answer to a command.
pub fn encode_client_reply(reply: &ClientReply) -> Vec<u8> {
    let op = reply.operation();
    match reply {
        ClientReply::Submit(body) => frame(op, body),
        ClientReply::JobQuery(body) => frame(op, body),
        ClientReply::Signal(body) => frame(op, body),
        ClientReply::Error(body) => frame(op, body),
        ClientReply::JobControl(body) => frame(op, body),
        ClientReply::AdminControl(body) => frame(op, body),
    }
}

/// mbatchd's answer as the command decodes it.
pub fn decode_client_reply(bytes: &[u8]) -> Result<ClientReply, String> {
    use wire::Operation as Op;
    let (op, b) = unframe(bytes)?;
    Ok(match op {
        Op::SubmitJobReply => ClientReply::Submit(body(op, &b)?),
        Op::JobQueryReply => ClientReply::JobQuery(body(op, &b)?),
        Op::SignalJobsReply => ClientReply::Signal(body(op, &b)?),
        Op::JobControlReply => ClientReply::JobControl(body(op, &b)?),
        Op::RequestFailed => ClientReply::Error(body(op, &b)?),
        other => return Err(format!("{} is not an answer to a command", other.name())),
    })
}
