//! [`CoordConfig`]: what the coordinator decides with.

/// Default lease duration: 30 s.
pub const LEASE_DURATION_MS_DEFAULT: u64 = 30_000;
/// Default advisory bound on valid leases per worker.
pub const LEASES_PER_WORKER_MAX_DEFAULT: u32 = 1024;

/// The coordinator's settings. None of them is durable: changing one between
/// restarts changes future decisions only, never the replay of the WAL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordConfig {
    /// How long a lease (and each extension) lasts, from the grant or heartbeat.
    pub lease_duration_ms: u64,
    /// Largest payload accepted by submission.
    pub payload_bytes_max: u32,
    /// A worker holding this many valid leases gets an empty answer (advisory).
    pub leases_per_worker_max: u32,
    /// The cluster administrators by user name (lsf.cluster ClusterAdmins); uid 0 always is one.
    pub admins: Vec<String>,
}

impl CoordConfig {
    /// Whether `caller` administers the cluster: uid 0, or a name in [`CoordConfig::admins`].
    pub fn is_admin(&self, caller: &lava_coord_ll::Caller) -> bool {
        caller.uid == 0 || self.admins.iter().any(|admin| admin == caller.user.as_str())
    }
}

impl Default for CoordConfig {
    fn default() -> Self {
        CoordConfig {
            lease_duration_ms: LEASE_DURATION_MS_DEFAULT,
            payload_bytes_max: lava_coord_ll::PAYLOAD_BYTES_MAX_DEFAULT,
            leases_per_worker_max: LEASES_PER_WORKER_MAX_DEFAULT,
            admins: Vec::new(),
        }
    }
}
