//! What the logic asks the shell to do, in order: append an event, send a
//! message to an sbatchd, reply to a client. The crate doc states the order
//! in which the shell must carry them out.

use lava_batch_ll::HostName;
use lava_batch_wire as wire;

use crate::event::Event;
use crate::input::ClientId;

/// One effect of [`crate::Mbd::step`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Append this event to `lsb.events` (already applied to the state).
    Append(Event),
    /// Send a message to the sbatchd of `host`.
    SendSbd {
        /// The destination.
        host: HostName,
        /// The frame's operation (always `msg.operation()`).
        op: wire::Operation,
        /// The message.
        msg: ToSbd,
    },
    /// Answer a client request.
    Reply {
        /// The client the request came from.
        client: ClientId,
        /// The answer.
        reply: ClientReply,
    },
}

/// A message mbatchd sends to sbatchd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToSbd {
    /// SBD_REGISTER_ACK.
    RegisterAck(wire::SbdRegisterAck),
    /// BATCH_NEW_JOB.
    NewJob(Box<wire::JobSpecs>),
    /// BATCH_NEW_JOB_REPLY_ACK.
    NewJobReplyAck(wire::JobAck),
    /// BATCH_JOB_EXECUTE_ACK.
    JobExecuteAck(wire::JobAck),
    /// BATCH_JOB_FINISH_ACK.
    JobFinishAck(wire::JobAck),
    /// BATCH_JOB_SIGNAL.
    JobSignal(wire::JobSignal),
}

impl ToSbd {
    /// The frame operation of this message.
    pub fn operation(&self) -> wire::Operation {
        match self {
            ToSbd::RegisterAck(_) => wire::Operation::SbdRegisterAck,
            ToSbd::NewJob(_) => wire::Operation::NewJob,
            ToSbd::NewJobReplyAck(_) => wire::Operation::NewJobReplyAck,
            ToSbd::JobExecuteAck(_) => wire::Operation::JobExecuteAck,
            ToSbd::JobFinishAck(_) => wire::Operation::JobFinishAck,
            ToSbd::JobSignal(_) => wire::Operation::JobSignal,
        }
    }
}

/// An answer to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientReply {
    /// SUBMIT_JOB_REPLY.
    Submit(wire::SubmitReply),
    /// JOB_QUERY_REPLY.
    JobQuery(wire::JobQueryReply),
    /// SIGNAL_JOBS_REPLY.
    Signal(wire::SignalReply),
    /// REQUEST_FAILED.
    Error(wire::ErrorReply),
    /// JOB_CONTROL_REPLY.
    JobControl(wire::JobControlReply),
    /// ADMIN_CONTROL_REPLY.
    AdminControl(wire::AdminControlReply),
}

impl ClientReply {
    /// The frame operation of this answer.
    pub fn operation(&self) -> wire::Operation {
        match self {
            ClientReply::Submit(_) => wire::Operation::SubmitJobReply,
            ClientReply::JobQuery(_) => wire::Operation::JobQueryReply,
            ClientReply::Signal(_) => wire::Operation::SignalJobsReply,
            ClientReply::Error(_) => wire::Operation::RequestFailed,
            ClientReply::JobControl(_) => wire::Operation::JobControlReply,
            ClientReply::AdminControl(_) => wire::Operation::AdminControlReply,
        }
    }

    /// A REQUEST_FAILED with `code` (one of `wire::ERR_*`) and LSF's wording.
    pub fn error(code: u32, message: impl Into<String>) -> ClientReply {
        ClientReply::Error(wire::ErrorReply { code, message: message.into() })
    }
}
