//! lava-conf: (being written)
