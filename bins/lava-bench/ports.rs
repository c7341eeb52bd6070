//! Fixed ports for the daemons of a throwaway cluster on loopback (the benches' and the
//! integration tests', which include this file): candidates and lims must know each other's
//! ports before they start, so the ports are chosen, not asked of the kernel at bind time.

/// First and last port [`fixed_port`] hands out: below Linux's default ephemeral range
/// (32768–60999), so that no connection's automatic source port can take one between the
/// check and the daemon's bind.
const FIXED_PORTS: std::ops::RangeInclusive<u16> = 20_000..=32_000;

/// A port free right now for both TCP and UDP, for daemons that need fixed, configured
/// ports (the lims of a multi-host cluster must know each other's). Ports are taken from
/// [`FIXED_PORTS`], from a starting point that differs per process and per call, so that
/// test processes running at once seldom try the same one, and never twice in one process.
pub fn fixed_port() -> u16 {
    use std::net::{TcpListener, UdpSocket};
    use std::sync::Mutex;
    /// Ports this process handed out already: never twice.
    static GIVEN: Mutex<std::collections::BTreeSet<u16>> = Mutex::new(std::collections::BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let span = u32::from(FIXED_PORTS.end() - FIXED_PORTS.start()) + 1;
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let seed = std::process::id().wrapping_mul(7919) ^ nanos;
    let port = (0..span)
        .map(|step| {
            FIXED_PORTS.start() + u16::try_from(seed.wrapping_add(step * 613) % span).expect("in range")
        })
        .find(|port| {
            !given.contains(port)
                && TcpListener::bind(("127.0.0.1", *port)).is_ok()
                && UdpSocket::bind(("127.0.0.1", *port)).is_ok()
        })
        .expect("a free port below the ephemeral range");
    given.insert(port);
    port
}
