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
        candidates: vec![0],
        me,
        beacon_interval_ms: BEACON_MS,
        report_interval_ms: REPORT_MS,
        tcp_port: 7100,
        initial_seqno,
        thresholds: Thresholds::NONE,
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

/// The load reports among `effects`, as (seqno, status0).
fn reports_sent(effects: &[Effect]) -> Vec<(u32, u32)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Send { message: Outgoing::LoadReport(r), .. } => Some((r.seqno, r.status0)),
            _ => None,
        })
        .collect()
}

/// A slave (h1) that heard a beacon at 0 and sent its first report.
fn reporting_slave(config: Config) -> Lim {
    let mut slave = Lim::new(config);
    assert_eq!(reports_sent(&slave.step(0, from(0, beacon(1)))), vec![(0, LIM_OK)]);
    slave
}

// Goal: `lsadmin limlock` sets LIM_LOCKEDU in the slave's word and sends a report at once; the
// master keeps the word and says it changed; a second lock and an unlock of an unlocked host
// are refused and change nothing; the unlock clears the bit, again with a report at once.
#[test]
fn lock_and_unlock_travel_in_reports() {
    let mut master = Lim::new(config(0, 0));
    let mut slave = reporting_slave(config(1, 0));
    master.step(0, from(1, report(1, 0)));
    let effects = slave.step(100, Input::Lock { duration_ms: None });
    assert_eq!(events(effects.clone()), vec![Effect::StatusChanged { status0: LIM_LOCKEDU }]);
    assert_eq!(reports_sent(&effects), vec![(1, LIM_LOCKEDU)], "at once, not at the next interval");
    assert_eq!((slave.status0(), slave.locked_until()), (LIM_LOCKEDU, Some(u64::MAX)));
    let Some(Effect::Send { message: Outgoing::LoadReport(locked), .. }) = effects.last().cloned() else {
        panic!("a report: {effects:?}")
    };
    assert_eq!(
        events(master.step(110, from(1, Message::LoadReport(locked)))),
        vec![Effect::HostStatus { host: 1, status0: LIM_LOCKEDU }]
    );
    assert_eq!((master.hosts()[1].status0, master.hosts()[1].status_word()), (LIM_LOCKEDU, LIM_LOCKEDU));
    // Every later report carries the lock; the master says nothing while it stays.
    let effects = slave.step(100 + REPORT_MS, Input::Tick);
    assert_eq!(reports_sent(&effects), vec![(2, LIM_LOCKEDU)]);
    let Some(Effect::Send { message: Outgoing::LoadReport(again), .. }) = effects.last().cloned() else {
        panic!("a report: {effects:?}")
    };
    assert_eq!(events(master.step(100 + REPORT_MS, from(1, Message::LoadReport(again)))), vec![]);
    // Refusals change nothing and send nothing.
    let effects = slave.step(700, Input::Lock { duration_ms: Some(5_000) });
    assert_eq!(effects, vec![Effect::LockRefused(LockRefusal::AlreadyLocked)]);
    assert_eq!(slave.locked_until(), Some(u64::MAX), "a refused lock does not shorten the lock");
    let effects = slave.step(800, Input::Unlock);
    assert_eq!(events(effects.clone()), vec![Effect::StatusChanged { status0: LIM_OK }]);
    assert_eq!(reports_sent(&effects), vec![(3, LIM_OK)]);
    let Some(Effect::Send { message: Outgoing::LoadReport(unlocked), .. }) = effects.last().cloned() else {
        panic!("a report: {effects:?}")
    };
    assert_eq!(
        events(master.step(810, from(1, Message::LoadReport(unlocked)))),
        vec![Effect::HostStatus { host: 1, status0: LIM_OK }]
    );
    assert_eq!(master.hosts()[1].status_word(), LIM_OK);
    assert_eq!(slave.step(900, Input::Unlock), vec![Effect::LockRefused(LockRefusal::NotLocked)]);
    assert_eq!(LockRefusal::NotLocked.text(), "Host is not locked");
    assert_eq!(LockRefusal::AlreadyLocked.text(), "Host is already locked");
}

// Goal: `limlock -t` ends by itself: the deadline includes the lock's end, the host is locked
// up to the millisecond before it and unlocked at it, with a report at once; the master's own
// lock is its host 0's word directly.
#[test]
fn lock_with_timeout_expires() {
    let mut slave = reporting_slave(config(1, 0));
    slave.step(10, Input::Lock { duration_ms: Some(2_000) });
    assert_eq!(slave.locked_until(), Some(2_010));
    // Keep the master valid across the lock's time.
    for at in [1_000, 1_900] {
        slave.step(at, from(0, beacon(at as u32)));
    }
    assert!(slave.next_deadline_ms() <= 2_010);
    assert!(events(slave.step(2_009, Input::Tick)).is_empty());
    assert_eq!(slave.status0(), LIM_LOCKEDU);
    let effects = slave.step(2_010, Input::Tick);
    assert_eq!(events(effects.clone()), vec![Effect::StatusChanged { status0: LIM_OK }]);
    assert_eq!(reports_sent(&effects).last().map(|(_, word)| *word), Some(LIM_OK));
    assert_eq!(slave.locked_until(), None);

    let mut master = Lim::new(config(0, 0));
    master.step(0, Input::Sampled(LoadVector::full([1.0; 11])));
    assert_eq!(master.hosts()[0].status_word(), LIM_OK);
    let effects = master.step(5, Input::Lock { duration_ms: Some(100) });
    assert_eq!(effects, vec![Effect::StatusChanged { status0: LIM_LOCKEDU }], "a master sends no report");
    assert_eq!(master.hosts()[0].status_word(), LIM_LOCKEDU);
    assert_eq!(master.next_deadline_ms(), 105);
    assert_eq!(events(master.step(105, Input::Tick)), vec![Effect::StatusChanged { status0: LIM_OK }]);
    assert_eq!(master.hosts()[0].status0, LIM_OK);
}

// Goal: a sample beyond a threshold sets LIM_BUSY and the index's bit (above it for r1m, below
// it for mem, equal is not beyond, an index not sampled is never busy); going back clears
// them; a crossing waits for the next scheduled report; a lock and busy bits combine.
#[test]
fn threshold_crossing_makes_the_host_busy() {
    let mut thresholds = Thresholds::NONE;
    thresholds.0[1] = Some(2.0); // r1m
    thresholds.0[10] = Some(100.0); // mem
    let mut slave = reporting_slave(Config { thresholds, ..config(1, 0) });
    let load = |r1m: f32, mem: f32| {
        let mut values = [0.0; 11];
        (values[1], values[10]) = (r1m, mem);
        LoadVector::full(values)
    };
    assert_eq!(slave.step(10, Input::Sampled(load(2.0, 100.0))), vec![], "equal is not beyond");
    let effects = slave.step(20, Input::Sampled(load(2.5, 500.0)));
    assert_eq!(effects, vec![Effect::StatusChanged { status0: LIM_BUSY | 1 << 1 }], "no report yet");
    assert_eq!(
        slave.step(30, Input::Sampled(load(2.5, 50.0))),
        vec![Effect::StatusChanged { status0: LIM_BUSY | 1 << 1 | 1 << 10 }]
    );
    assert_eq!(reports_sent(&slave.step(REPORT_MS, Input::Tick)), vec![(1, LIM_BUSY | 1 << 1 | 1 << 10)]);
    slave.step(REPORT_MS + 1, Input::Lock { duration_ms: None });
    assert_eq!(slave.status0(), LIM_LOCKEDU | LIM_BUSY | 1 << 1 | 1 << 10);
    slave.step(REPORT_MS + 2, Input::Unlock);
    let effects = slave.step(REPORT_MS + 3, Input::Sampled(load(0.5, 4000.0)));
    assert_eq!(effects, vec![Effect::StatusChanged { status0: LIM_OK }]);
    // Only the valid indices count: mem missing from a short sample is not "below 100".
    let short = LoadVector { values: [0.0; 11], n_valid: 3 };
    assert_eq!(slave.step(REPORT_MS + 4, Input::Sampled(short)), vec![]);
    assert_eq!(thresholds.busy_bits(&LoadVector::EMPTY), 0);
}

// Goal: the master's word for a host is LIM_UNAVAIL before its first report and after 3
// missed intervals (the last reported bits are kept, not shown); the next report shows its
// word again.
#[test]
fn an_unavailable_host_has_the_unavail_word() {
    let mut master = Lim::new(config(0, 0));
    master.step(0, Input::Tick);
    assert_eq!(master.hosts()[2].status_word(), LIM_UNAVAIL);
    let locked = Message::LoadReport(LoadReport {
        host_idx: 2,
        seqno: 1,
        status0: LIM_LOCKEDU,
        load: LoadVector::full([1.0; 11]),
    });
    assert_eq!(
        events(master.step(10, from(2, locked))),
        vec![
            Effect::HostAvailable(2),
            Effect::HostStatus { host: 2, status0: LIM_LOCKEDU },
            Effect::FetchHostInfo(2)
        ]
    );
    assert_eq!(master.hosts()[2].status_word(), LIM_LOCKEDU);
    assert_eq!(events(master.step(11 + 3 * REPORT_MS, Input::Tick)), vec![Effect::HostUnavailable(2)]);
    assert_eq!(master.hosts()[2].status_word(), LIM_UNAVAIL);
    assert_eq!(master.hosts()[2].status0, LIM_LOCKEDU, "kept, not shown");
    assert_eq!(
        events(master.step(2_000, from(2, report(2, 2)))),
        vec![Effect::HostAvailable(2), Effect::HostStatus { host: 2, status0: LIM_OK }]
    );
    assert_eq!(master.hosts()[2].status_word(), LIM_OK);
}

// Master election among LSF_MASTER_LIST candidates (docs/protocols/lim.md, "Master election").

/// Host `me` of three, with `candidates` (host indexes, most preferred first).
fn elect_config(me: u32, candidates: &[u32]) -> Config {
    Config { candidates: candidates.to_vec(), ..config(me, 100 * (me + 1)) }
}

fn beacon_of(host: u32, seqno: u32) -> Message {
    Message::Beacon(Beacon {
        cluster: "lava".into(),
        master: format!("h{host}"),
        host_idx: host,
        seqno,
        tcp_port: 7100,
    })
}

/// The beacon a master's effects send, if any: (host number, name).
fn beacon_sent(effects: &[Effect]) -> Option<(u32, String)> {
    effects.iter().find_map(|effect| match effect {
        Effect::SendToAll { message: Outgoing::Beacon(b), .. } => Some((b.host_idx, b.master.clone())),
        _ => None,
    })
}

// Goal: the first candidate is master from its first step; a later one waits 3 beacon
// intervals plus one per rank after its start before it takes the role, and then beacons
// under its own name and host number.
#[test]
fn candidates_take_the_role_in_list_order() {
    let mut first = Lim::new(elect_config(2, &[2, 1]));
    let effects = first.step(0, Input::Tick);
    assert!(first.is_master());
    assert_eq!(events(effects.clone())[..2], [Effect::BecameMaster, Effect::FetchHostInfo(2)]);
    assert_eq!(beacon_sent(&effects), Some((2, "h2".to_owned())));

    let mut second = Lim::new(elect_config(1, &[2, 1]));
    assert!(second.step(0, Input::Tick).is_empty());
    assert_eq!(second.takeover_wait_ms(), Some(3 * BEACON_MS));
    assert_eq!(second.next_deadline_ms(), 3 * BEACON_MS + 1);
    assert!(!second.step(3 * BEACON_MS, Input::Tick).contains(&Effect::BecameMaster));
    let effects = second.step(3 * BEACON_MS + 1, Input::Tick);
    assert!(second.is_master() && effects.contains(&Effect::BecameMaster));
    assert_eq!(beacon_sent(&effects), Some((1, "h1".to_owned())));
    assert_eq!(second.master_name(), "h1");

    let third = Lim::new(elect_config(0, &[2, 1, 0]));
    assert_eq!(third.takeover_wait_ms(), Some(4 * BEACON_MS));
    assert_eq!(Lim::new(elect_config(0, &[2, 1])).takeover_wait_ms(), None);
}

// Goal: a candidate that hears the one before it keeps following it and never takes the
// role; once that one falls silent it takes over after its wait.
#[test]
fn a_candidate_waits_while_a_better_one_beacons() {
    let mut second = Lim::new(elect_config(1, &[0, 1]));
    second.step(0, Input::Tick);
    for (seqno, at) in (1..).zip((500..=10_000).step_by(BEACON_MS as usize)) {
        let effects = second.step(at, from(0, beacon_of(0, seqno)));
        assert!(!effects.contains(&Effect::BecameMaster), "at {at}: {effects:?}");
        assert_eq!(second.master(), Some(0));
    }
    // The last beacon was at 9,500: the master is lost after 3 intervals, and the role taken.
    let effects = second.step(9_500 + 3 * BEACON_MS + 1, Input::Tick);
    assert_eq!(events(effects)[..2], [Effect::MasterLost, Effect::BecameMaster]);
    assert!(second.is_master());
}

// Goal: a master that hears a candidate before it steps down, follows it and reports to it;
// one that hears a candidate after it drops the beacon and stays master.
#[test]
fn a_master_gives_way_only_to_a_better_candidate() {
    let mut lim = Lim::new(elect_config(1, &[0, 1, 2]));
    lim.step(0, Input::Tick);
    lim.step(3 * BEACON_MS + 1, Input::Tick);
    assert!(lim.is_master());
    lim.step(3_100, from(1, report(1, 1))); // its own address: refused
    assert_eq!(drops(&lim, DropReason::WrongHostNo), 1);
    lim.step(3_200, from(2, report(2, 1)));
    assert_eq!(lim.hosts()[2].status, HostStatus::Ok);

    let effects = lim.step(3_300, from(2, beacon_of(2, 5)));
    assert!(lim.is_master() && effects.contains(&Effect::Dropped(DropReason::NotMaster)));

    let effects = lim.step(3_400, from(0, beacon_of(0, 7)));
    assert!(!lim.is_master());
    assert_eq!(lim.master(), Some(0));
    let found = Effect::MasterFound { master: "h0".into(), tcp_port: 7100 };
    assert_eq!(events(effects.clone()), vec![Effect::SteppedDown { to: 0 }, found]);
    assert_eq!(sends(&effects), vec![(addr(0), lim.config().initial_seqno + 1)], "reports to h0 at once");
    assert!(lim.hosts().iter().all(|h| h.status == HostStatus::Unavailable), "the host table is forgotten");
}

// Goal: a slave follows any candidate while it follows none, switches to a better one, and
// drops a worse one's beacons; a beacon from a host that is not a candidate, or naming
// another host, is never followed.
#[test]
fn slaves_follow_the_best_candidate_they_hear() {
    let mut slave = Lim::new(elect_config(2, &[0, 1]));
    slave.step(0, Input::Tick);
    slave.step(10, from(2, beacon_of(2, 1)));
    slave.step(20, from(0, beacon_of(1, 1)));
    assert_eq!(drops(&slave, DropReason::NotMaster), 2);
    assert_eq!(slave.master(), None);

    slave.step(30, from(1, beacon_of(1, 1)));
    assert_eq!(slave.master(), Some(1));
    slave.step(40, from(0, beacon_of(0, 1)));
    assert_eq!(slave.master(), Some(0));
    let effects = slave.step(50, from(1, beacon_of(1, 2)));
    assert_eq!(events(effects), vec![Effect::Dropped(DropReason::NotMaster)]);
    assert_eq!(slave.master(), Some(0));
    assert_eq!(slave.master_name(), "h0");
    // Reports go to the master it follows.
    let effects = slave.step(50 + REPORT_MS, Input::Tick);
    assert_eq!(sends(&effects).first().map(|s| s.0), Some(addr(0)));
}
