//! lava-eventlog: (being written)
