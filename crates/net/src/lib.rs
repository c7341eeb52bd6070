//! lava-net: (being written)
