//! [`CoordConfig`]: what the coordinator decides with.

/// Default lease duration: 30 s.
pub const LEASE_DURATION_MS_DEFAULT: u64 = 30_000;
/// Default advisory bound on valid leases per worker.
pub const LEASES_PER_WORKER_MAX_DEFAULT: u32 = 1024;
/// Default submission window: a submission id is recognised for at least 10 minutes.
pub const SUBMISSION_WINDOW_MS_DEFAULT: u64 = 600_000;
/// Default bound on the submission ids held per owner (the owner's oldest go first).
pub const SUBMISSIONS_PER_OWNER_MAX_DEFAULT: u32 = 100_000;
/// Default bound on the submission ids held for all owners together (past it, refused).
pub const SUBMISSIONS_MAX_DEFAULT: u32 = 1_000_000;

/// The coordinator's settings. None of them is durable: changing one between
/// restarts changes future decisions only, never whether the WAL replays (the
/// submission window's bounds apply, from the restart on, to the ids replayed too).
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
    /// How long a submission id is held after its task was created, at least (the
    /// window's age rule, applied as each later `TaskCreatedOnce` is).
    pub submission_window_ms: u64,
    /// Submission ids held per owner uid; the owner's oldest is forgotten past it.
    pub submissions_per_owner_max: u32,
    /// Submission ids held for all owners; a new one past it is refused `ERR_TRY_AGAIN`.
    pub submissions_max: u32,
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
            submission_window_ms: SUBMISSION_WINDOW_MS_DEFAULT,
            submissions_per_owner_max: SUBMISSIONS_PER_OWNER_MAX_DEFAULT,
            submissions_max: SUBMISSIONS_MAX_DEFAULT,
        }
    }
}
