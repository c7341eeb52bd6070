//! Scenario tests: each feeds inputs to one or two machines and checks the exact effects.

use std::net::{Ipv4Addr, SocketAddr};

use super::*;

const BEACON_MS: u64 = 1_000;
const REPORT_MS: u64 = 500;

fn addr(idx: u32) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 7000 + idx as u16))
}

fn config(me: u32, initial_seqno: u32) -> Config {
    Config {
        cluster: "lava".into(),
        hosts: (0..3).map(|idx| HostConfig { name: format!("h{idx}"), addr: Some(addr(idx)) }).collect(),
        me,
        beacon_interval_ms: BEACON_MS,
        report_interval_ms: REPORT_MS,
        tcp_port: 7100,
        initial_seqno,
    }
}

fn beacon(seqno: u32) -> Message {
    Message::Beacon(Beacon {
        cluster: "lava".into(),
        master: "h0".into(),
        host_idx: 0,
        seqno,
        tcp_port: 7100,
    })
}

fn report(host_idx: u32, seqno: u32) -> Message {
    Message::LoadReport(LoadReport { host_idx, seqno, status0: 0, load: LoadVector::full([1.0; 11]) })
}

fn from(idx: u32, message: Message) -> Input {
    Input::Datagram { from: addr(idx), message }
}

/// Every datagram sent, `SendToAll` expanded to the master's peers h1 and h2.
fn sends(effects: &[Effect]) -> Vec<(SocketAddr, u32)> {
    effects
        .iter()
        .flat_map(|effect| match effect {
            Effect::Send { to, sequence, .. } => vec![(*to, *sequence)],
            Effect::SendToAll { sequence, .. } => vec![(addr(1), *sequence), (addr(2), *sequence)],
            _ => Vec::new(),
        })
        .collect()
}

/// The effects other than sends.
fn events(effects: Vec<Effect>) -> Vec<Effect> {
    effects
        .into_iter()
        .filter(|effect| !matches!(effect, Effect::Send { .. } | Effect::SendToAll { .. }))
        .collect()
}

fn drops(lim: &Lim, reason: DropReason) -> u64 {
    lim.drop_counts().into_iter().find(|(r, _)| *r == reason).map_or(0, |(_, n)| n)
}

// Goal: the master beacons every interval to every other host, with increasing seqnos.
#[test]
fn master_beacons_on_schedule() {
    let mut master = Lim::new(config(0, 10));
    assert_eq!(sends(&master.step(0, Input::Tick)), vec![(addr(1), 10), (addr(2), 10)]);
    assert_eq!(master.next_deadline_ms(), BEACON_MS);
    assert!(sends(&master.step(999, Input::Tick)).is_empty());
    assert_eq!(sends(&master.step(1_000, Input::Tick)), vec![(addr(1), 11), (addr(2), 11)]);
}

// Goal: a host that misses 3 report intervals becomes unavailable, exactly once, and the
// next report makes it available again.
#[test]
fn missed_reports_mark_host_unavailable() {
    let mut master = Lim::new(config(0, 0));
    master.step(0, Input::Tick);
    assert_eq!(
        master.step(10, from(1, report(1, 5))),
        vec![Effect::HostAvailable(1), Effect::FetchHostInfo(1)]
    );
    assert_eq!(master.hosts()[1].status, HostStatus::Ok);
    assert_eq!(master.next_deadline_ms(), BEACON_MS.min(10 + 3 * REPORT_MS + 1));
    assert_eq!(events(master.step(10 + 3 * REPORT_MS, Input::Tick)), vec![]);
    assert_eq!(events(master.step(11 + 3 * REPORT_MS, Input::Tick)), vec![Effect::HostUnavailable(1)]);
    assert_eq!(events(master.step(12 + 3 * REPORT_MS, Input::Tick)), vec![]);
    assert_eq!(master.hosts()[1].status, HostStatus::Unavailable);
    // After being lost, any seqno is accepted (the slave may have restarted).
    assert_eq!(master.step(2_000, from(1, report(1, 5))), vec![Effect::HostAvailable(1)]);
}

// Goal: a slave reports only after a beacon, every T, stops after 3 missed beacons and
// resumes on the next valid beacon even though the master restarted with a lower seqno.
#[test]
fn slave_follows_beacons_and_master_restart() {
    let mut slave = Lim::new(config(1, 100));
    assert!(sends(&slave.step(0, Input::Tick)).is_empty(), "no master known yet");
    let effects = slave.step(5, from(0, beacon(50_000)));
    assert_eq!(effects[0], Effect::MasterFound { master: "h0".into(), tcp_port: 7100 });
    assert_eq!(sends(&effects), vec![(addr(0), 100)]);
    assert_eq!(sends(&slave.step(505, Input::Tick)), vec![(addr(0), 101)]);
    slave.step(900, from(0, beacon(50_001)));
    assert_eq!(sends(&slave.step(1_005, Input::Tick)), vec![(addr(0), 102)]);
    // No beacon after 900: lost after 900 + 3 s.
    slave.step(3_900, Input::Tick);
    assert!(slave.master_valid());
    let effects = slave.step(3_901, Input::Tick);
    assert_eq!(effects, vec![Effect::MasterLost]);
    assert!(sends(&slave.step(5_000, Input::Tick)).is_empty(), "silent while the master is invalid");
    // The master restarted: its seqno went back to 0, which must still be accepted.
    let effects = slave.step(6_000, from(0, beacon(0)));
    assert!(matches!(effects[0], Effect::MasterFound { .. }));
    assert_eq!(sends(&effects).len(), 1);
}

// Goal: a master that restarts quickly (before the slave declared it lost) numbering from a
// later clock is accepted at once; one whose numbers went backwards is stale until the slave
// declares the master lost, then accepted.
#[test]
fn master_restart_without_loss() {
    let mut slave = Lim::new(config(1, 0));
    slave.step(0, from(0, beacon(u32::MAX - 10)));
    slave.step(100, from(0, beacon(50_000)));
    assert_eq!(drops(&slave, DropReason::Stale), 0, "ahead across the wrap");
    slave.step(200, from(0, beacon(3)));
    assert_eq!(drops(&slave, DropReason::Stale), 1);
    assert_eq!(
        events(slave.step(100 + 3 * BEACON_MS, from(0, beacon(4)))),
        vec![Effect::Dropped(DropReason::Stale)]
    );
    let effects = slave.step(101 + 3 * BEACON_MS, from(0, beacon(5)));
    assert_eq!(effects[0], Effect::MasterLost, "timeouts come before the datagram");
    assert!(matches!(effects[1], Effect::MasterFound { .. }));
    assert_eq!(sends(&effects).len(), 1);
}

// Goal: duplicates and reordered reports are dropped and counted; load keeps the newest.
#[test]
fn duplicate_and_reordered_reports() {
    let mut master = Lim::new(config(0, 0));
    master.step(0, from(1, report(1, 10)));
    master.step(1, from(1, report(1, 12)));
    assert_eq!(master.step(2, from(1, report(1, 12))), vec![Effect::Dropped(DropReason::Duplicate)]);
    assert_eq!(master.step(3, from(1, report(1, 11))), vec![Effect::Dropped(DropReason::Stale)]);
    assert_eq!(master.hosts()[1].last_report_ms, Some(1));
    assert_eq!(drops(&master, DropReason::Duplicate), 1);
    assert_eq!(master.n_accepted(), 2);
}

// Goal: sequence numbers wrapping past u32::MAX keep being accepted, and an old pre-wrap
// number is still recognised as stale.
#[test]
fn sequence_wrap() {
    let mut master = Lim::new(config(0, 0));
    master.step(0, from(1, report(1, u32::MAX - 1)));
    master.step(1, from(1, report(1, u32::MAX)));
    master.step(2, from(1, report(1, 0)));
    master.step(3, from(1, report(1, 1)));
    assert_eq!(master.n_accepted(), 4);
    assert_eq!(master.step(4, from(1, report(1, u32::MAX))), vec![Effect::Dropped(DropReason::Stale)]);
    // The slave side wraps its own counter.
    let mut slave = Lim::new(config(2, u32::MAX));
    assert_eq!(sends(&slave.step(0, from(0, beacon(1)))), vec![(addr(0), u32::MAX)]);
    assert_eq!(sends(&slave.step(REPORT_MS, Input::Tick)), vec![(addr(0), 0)]);
}

// Goal: admission control — unknown source, wrong hostNo, beacon from a non-master, report
// to a slave, and shell-side rejects are dropped and counted, and change no state.
#[test]
fn admission_drops() {
    let mut master = Lim::new(config(0, 0));
    let stranger = SocketAddr::from((Ipv4Addr::LOCALHOST, 9999));
    master.step(0, Input::Datagram { from: stranger, message: report(1, 1) });
    master.step(0, from(2, report(1, 1)));
    master.step(0, from(1, beacon(1)));
    master.step(0, Input::Rejected(DropReason::Short));
    assert_eq!(drops(&master, DropReason::UnknownSource), 1);
    assert_eq!(drops(&master, DropReason::WrongHostNo), 1);
    assert_eq!(drops(&master, DropReason::NotMaster), 1);
    assert_eq!(drops(&master, DropReason::Short), 1);
    assert!(master.hosts()[1..].iter().all(|host| host.status == HostStatus::Unavailable));
    let mut slave = Lim::new(config(1, 0));
    slave.step(0, from(2, beacon(1)));
    slave.step(0, from(0, report(0, 1)));
    assert_eq!(drops(&slave, DropReason::NotMaster), 2);
    assert!(!slave.master_valid());
}

// Goal: a two-lim simulation over a lossy "network" (every 3rd datagram dropped, each
// delivered one twice) converges: the slave is reported ok and never flaps.
#[test]
fn lossy_pair_converges() {
    let mut master = Lim::new(config(0, 0));
    let mut slave = Lim::new(config(1, 7));
    let mut n_sent = 0u32;
    let mut unavailable = 0;
    for now in (0..20_000).step_by(100) {
        let mut to_slave = Vec::new();
        for effect in master.step(now, Input::Tick) {
            match effect {
                Effect::SendToAll { message: Outgoing::Beacon(b), .. } => to_slave.push(b),
                Effect::HostUnavailable(_) => unavailable += 1,
                _ => {}
            }
        }
        let mut effects = slave.step(now, Input::Tick);
        for b in to_slave {
            effects.extend(slave.step(now, from(0, Message::Beacon(b))));
        }
        for effect in effects {
            if let Effect::Send { message: Outgoing::LoadReport(r), .. } = effect {
                n_sent += 1;
                if !n_sent.is_multiple_of(3) {
                    for _ in 0..2 {
                        let out = master.step(now, from(1, Message::LoadReport(r)));
                        unavailable += out.iter().filter(|e| matches!(e, Effect::HostUnavailable(_))).count();
                    }
                }
            }
        }
    }
    assert_eq!(master.hosts()[1].status, HostStatus::Ok);
    assert_eq!(unavailable, 0);
    assert!(drops(&master, DropReason::Duplicate) > 0);
}

// Goal: the master asks a host for its static facts when it becomes available, not again
// while the question is out, again HOST_INFO_RETRY_MS after a failure (with the next report)
// or at once when the host comes back, and keeps the answer.
#[test]
fn host_info_is_fetched_and_retried() {
    let mut master = Lim::new(config(0, 0));
    let facts = HostInfo { ncpus: 4, maxmem_mb: 8000, maxswp_mb: 0 };
    master.step(0, Input::HostInfo { host: 0, info: Some(facts) });
    assert_eq!(master.hosts()[0].info, Some(facts));
    assert_eq!(
        events(master.step(10, from(1, report(1, 1)))),
        vec![Effect::HostAvailable(1), Effect::FetchHostInfo(1)]
    );
    assert_eq!(events(master.step(20, from(1, report(1, 2)))), vec![], "the question is out");
    master.step(30, Input::HostInfo { host: 1, info: None });
    assert_eq!(events(master.step(40, from(1, report(1, 3)))), vec![]);
    let retry = 30 + HOST_INFO_RETRY_MS;
    for (seqno, at) in (4..).zip((40..retry).step_by(400)) {
        let effects = events(master.step(at, from(1, report(1, seqno))));
        assert!(!effects.contains(&Effect::FetchHostInfo(1)), "asked again at {at}");
    }
    let seqno = 10_000;
    assert_eq!(events(master.step(retry, from(1, report(1, seqno)))), vec![Effect::FetchHostInfo(1)]);
    master.step(retry + 1, Input::HostInfo { host: 1, info: None });
    // Lost, then back: asked at once.
    master.step(retry + 2 + 3 * REPORT_MS, Input::Tick);
    assert_eq!(master.hosts()[1].status, HostStatus::Unavailable);
    let effects = events(master.step(retry + 3 + 3 * REPORT_MS, from(1, report(1, seqno + 1))));
    assert_eq!(effects, vec![Effect::HostAvailable(1), Effect::FetchHostInfo(1)]);
    master.step(retry + 4 + 3 * REPORT_MS, Input::HostInfo { host: 1, info: Some(facts) });
    assert_eq!(master.hosts()[1].info, Some(facts));
    let later = retry + 5 + 3 * REPORT_MS;
    assert_eq!(events(master.step(later, from(1, report(1, seqno + 2)))), vec![], "known: not asked again");
}
