//! lava-sbatchd: the execution daemon's I/O shell (being written) and its
//! system-call layer.
#![deny(missing_docs)]

pub mod sys;
