//! What the logic asks the shell to do, in order: append WAL events, then
//! respond. The crate doc states the contract: respond only once every append
//! made so far (this step's and earlier ones') is durable.

use lava_coord_wire::Reply;

use crate::event::Event;
use crate::input::ClientId;

/// One effect of [`crate::Coord::step`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Append this event to the WAL (it is already applied to the state).
    Append(Event),
    /// Answer `client`, once every earlier append is durable.
    Respond {
        /// The request's client.
        client: ClientId,
        /// The answer.
        reply: Reply,
    },
}
