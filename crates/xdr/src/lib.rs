//! lava-xdr: the XDR codec (being written) and the frame codec.
#![deny(missing_docs)]

pub mod frame;
