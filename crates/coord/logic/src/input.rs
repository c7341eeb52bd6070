//! What the logic is stepped with: a validated request, or the tick.

use lava_coord_ll::{Caller, Request};

/// The shell's number for one outstanding request; echoed in its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u64);

/// One input of [`crate::Coord::step`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A validated request; its answer goes to `client`.
    Request {
        /// Where the answer goes.
        client: ClientId,
        /// Who sent it, as the connection's credential proved.
        caller: Caller,
        /// The request.
        request: Request,
    },
    /// Time passed: revoke expired leases. Also stepped once after replay.
    Tick,
}
