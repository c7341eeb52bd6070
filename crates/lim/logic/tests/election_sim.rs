//! Seeded simulation of the master election among `LSF_MASTER_LIST` candidates
//! (docs/protocols/lim.md, "Master election"): 3–6 real [`Lim`]s, 2–3 of them candidates in
//! a random order, over a network that loses, duplicates and delays datagrams (so reorders
//! them) and is cut into parts, one-way cuts included; lims stop and start with empty state.
//!
//! Checked after every step: only a candidate is ever master; a beacon names its sender and
//! its sender's host number; a report goes only to the master its sender follows.
//!
//! Then, with the network whole and calm and every lim up: within 3 beacon intervals plus
//! the longest takeover wait plus the delay, exactly one master — the first candidate — and
//! every other lim follows it, and the master has every host available. The first candidate
//! stops: within its loss (3 intervals), the second's wait and a beacon, the second is the
//! only master and every running lim follows it. The first comes back: within a beacon
//! interval plus the delay it is master again and the second has stepped down.
//!
//! `LAVA_LIM_ELECTION_SEED=N cargo test -p lava-lim-logic --test election_sim` runs seed `N`
//! alone and traces it; `LAVA_LIM_ELECTION_SEEDS=K` runs seeds `1..=K` (default 300).

use std::net::{Ipv4Addr, SocketAddr};

use lava_lim_logic::{
    Beacon, Config, Effect, HostConfig, HostInfo, HostStatus, Input, Lim, LoadVector, Message, Outgoing,
    Thresholds,
};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

const STEP_MS: u64 = 10;
const FAULT_MS: u64 = 60_000;
const CLUSTER: &str = "elect";

fn addr(idx: usize) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 9000 + idx as u16))
}

fn name(idx: usize) -> String {
    format!("e{idx}")
}

struct Packet {
    at: u64,
    from: usize,
    to: usize,
    message: Message,
}

struct Sim {
    seed: u64,
    trace: bool,
    rng: Rng,
    now: u64,
    n: usize,
    candidates: Vec<u32>,
    beacon_ms: u64,
    report_ms: u64,
    lims: Vec<Option<Lim>>,
    next_sample: Vec<u64>,
    net: Vec<Packet>,
    cut: Vec<(usize, usize)>,
    loss: u64,
    dup: u64,
    max_delay_ms: u64,
    seqno: u32,
}

impl Sim {
    fn new(seed: u64, trace: bool) -> Sim {
        let mut rng = Rng(seed);
        let n = 3 + rng.below(4) as usize;
        let mut pool: Vec<u32> = (0..n as u32).collect();
        let mut candidates = Vec::new();
        for _ in 0..2 + rng.below(2) {
            let k = rng.below(pool.len() as u64) as usize;
            candidates.push(pool.swap_remove(k));
        }
        let beacon_ms = 200 + 100 * rng.below(8);
        let report_ms = 200 + 100 * rng.below(8);
        let mut sim = Sim {
            seed,
            trace,
            rng,
            now: 0,
            n,
            candidates,
            beacon_ms,
            report_ms,
            lims: (0..n).map(|_| None).collect(),
            next_sample: vec![0; n],
            net: Vec::new(),
            cut: Vec::new(),
            loss: 0,
            dup: 0,
            max_delay_ms: beacon_ms.min(report_ms) / 2,
            seqno: 1,
        };
        for idx in 0..n {
            sim.start(idx);
        }
        sim.say(format!(
            "{n} hosts, candidates {:?}, beacon {beacon_ms} ms, report {report_ms} ms",
            sim.candidates
        ));
        sim
    }

    fn say(&self, line: String) {
        if self.trace {
            println!("[{:>6}] {line}", self.now);
        }
    }

    fn fail(&self, what: String) -> ! {
        panic!(
            "seed {}: at {} ms: {what}\nreproduce: LAVA_LIM_ELECTION_SEED={} cargo test -p lava-lim-logic --test election_sim",
            self.seed, self.now, self.seed
        );
    }

    fn start(&mut self, idx: usize) {
        // Sequence numbers start at a clock in ms, as the shell's do, so a restart is ahead.
        self.seqno = self.seqno.wrapping_add(100_000);
        let config = Config {
            cluster: CLUSTER.to_owned(),
            hosts: (0..self.n).map(|i| HostConfig { name: name(i), addr: Some(addr(i)) }).collect(),
            candidates: self.candidates.clone(),
            me: idx as u32,
            beacon_interval_ms: self.beacon_ms,
            report_interval_ms: self.report_ms,
            tcp_port: 7000,
            initial_seqno: self.seqno,
            thresholds: Thresholds::NONE,
        };
        self.lims[idx] = Some(Lim::new(config));
        self.next_sample[idx] = self.now;
        self.say(format!("start e{idx}"));
    }

    fn stop(&mut self, idx: usize) {
        self.lims[idx] = None;
        self.say(format!("stop e{idx}"));
    }

    fn step(&mut self, idx: usize, input: Input) {
        let Some(lim) = self.lims[idx].as_mut() else { return };
        let effects = lim.step(self.now, input);
        let master = lim.master();
        if lim.is_master() && !self.candidates.contains(&(idx as u32)) {
            self.fail(format!("e{idx} is master but not a candidate"));
        }
        for effect in effects {
            match effect {
                Effect::SendToAll { message, .. } => {
                    if let Outgoing::Beacon(Beacon { host_idx, master, .. }) = &message
                        && (*host_idx != idx as u32 || *master != name(idx))
                    {
                        self.fail(format!("e{idx} beacons as {master} (host {host_idx})"));
                    }
                    for to in (0..self.n).filter(|&to| to != idx) {
                        self.send(idx, to, &message);
                    }
                }
                Effect::Send { to, message, .. } => {
                    let to = (0..self.n).find(|&i| addr(i) == to).expect("configured");
                    if master != Some(to as u32) {
                        self.fail(format!("e{idx} reports to e{to} but follows {master:?}"));
                    }
                    self.send(idx, to, &message);
                }
                Effect::FetchHostInfo(host) => {
                    // The host's lim answers at once (host facts are not under test here).
                    let info = HostInfo { ncpus: 1, maxmem_mb: 1, maxswp_mb: 1 };
                    let lim = self.lims[idx].as_mut().expect("running");
                    lim.step(self.now, Input::HostInfo { host, info: Some(info) });
                }
                Effect::BecameMaster | Effect::SteppedDown { .. } | Effect::MasterLost => {
                    self.say(format!("e{idx}: {effect:?}"));
                }
                _ => {}
            }
        }
    }

    fn send(&mut self, from: usize, to: usize, message: &Outgoing) {
        if self.cut.contains(&(from, to)) || self.rng.chance(self.loss) {
            return;
        }
        let message = match message {
            Outgoing::Beacon(b) => Message::Beacon(b.clone()),
            Outgoing::LoadReport(r) => Message::LoadReport(*r),
        };
        let copies = if self.rng.chance(self.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let at = self.now + 1 + self.rng.below(self.max_delay_ms);
            self.net.push(Packet { at, from, to, message: message.clone() });
        }
    }

    fn tick(&mut self) {
        self.now += STEP_MS;
        let now = self.now;
        let mut due: Vec<Packet> = Vec::new();
        let mut k = 0;
        while k < self.net.len() {
            if self.net[k].at <= now {
                due.push(self.net.swap_remove(k));
            } else {
                k += 1;
            }
        }
        due.sort_by_key(|p| (p.at, p.from, p.to));
        for packet in due {
            self.step(packet.to, Input::Datagram { from: addr(packet.from), message: packet.message });
        }
        for idx in 0..self.n {
            if self.lims[idx].is_none() {
                continue;
            }
            if now >= self.next_sample[idx] {
                self.next_sample[idx] = now + 1_000;
                self.step(idx, Input::Sampled(LoadVector::full([0.5; 11])));
            }
            if self.lims[idx].as_ref().is_some_and(|lim| now >= lim.next_deadline_ms()) {
                self.step(idx, Input::Tick);
            }
        }
    }

    fn faults(&mut self) {
        if self.rng.chance(5) {
            self.loss = self.rng.below(300);
            self.dup = self.rng.below(100);
            self.cut.clear();
            if self.rng.chance(500) {
                for from in 0..self.n {
                    for to in 0..self.n {
                        if from != to && self.rng.chance(250) {
                            self.cut.push((from, to));
                        }
                    }
                }
            }
            self.say(format!("loss {} dup {} cut {:?}", self.loss, self.dup, self.cut));
        }
        if self.rng.chance(3) {
            let idx = self.rng.below(self.n as u64) as usize;
            if self.lims[idx].is_some() {
                self.stop(idx);
            } else {
                self.start(idx);
            }
        }
    }

    /// Runs calm until `done` holds, at most `within` ms; fails naming `what` otherwise.
    fn until(&mut self, within: u64, what: &str, done: impl Fn(&Sim) -> bool) {
        let end = self.now + within;
        while self.now < end {
            self.tick();
            if done(self) {
                return;
            }
        }
        let views: Vec<String> = (0..self.n)
            .map(|i| match &self.lims[i] {
                Some(lim) => format!("e{i}: master {:?} is_master {}", lim.master(), lim.is_master()),
                None => format!("e{i}: stopped"),
            })
            .collect();
        self.fail(format!("not within {within} ms: {what}; {views:?}"));
    }

    /// Exactly one master, `master`, followed by every running lim, with every running
    /// host available at it.
    fn settled_on(&self, master: u32) -> bool {
        let running: Vec<usize> = (0..self.n).filter(|&i| self.lims[i].is_some()).collect();
        let Some(m) = self.lims[master as usize].as_ref() else { return false };
        m.is_master()
            && running.iter().all(|&i| {
                let lim = self.lims[i].as_ref().expect("running");
                lim.master() == Some(master)
                    && (i == master as usize || !lim.is_master())
                    && m.hosts()[i].status == HostStatus::Ok
            })
    }

    fn run(&mut self) {
        while self.now < FAULT_MS {
            self.faults();
            self.tick();
        }
        self.loss = 0;
        self.dup = 0;
        self.cut.clear();
        for idx in 0..self.n {
            if self.lims[idx].is_none() {
                self.start(idx);
            }
        }
        let rank_max = self.candidates.len() as u64;
        let settle = (3 + rank_max) * self.beacon_ms + 3 * self.report_ms + 2 * self.max_delay_ms + 1_000;
        let first = self.candidates[0];
        self.until(settle, "the first candidate masters a calm, whole cluster", |s| s.settled_on(first));
        self.stop(first as usize);
        let second = self.candidates[1];
        let failover = 4 * self.beacon_ms + 3 * self.report_ms + 2 * self.max_delay_ms + 1_000;
        self.until(failover, "the second candidate takes over", |s| s.settled_on(second));
        self.start(first as usize);
        let back = self.beacon_ms + self.report_ms + 2 * self.max_delay_ms + 1_000;
        self.until(back, "the first candidate is master again", |s| s.settled_on(first));
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

#[test]
fn the_first_live_candidate_masters_and_everyone_follows() {
    if let Some(seed) = env_u64("LAVA_LIM_ELECTION_SEED") {
        Sim::new(seed, true).run();
        return;
    }
    for seed in 1..=env_u64("LAVA_LIM_ELECTION_SEEDS").unwrap_or(300) {
        Sim::new(seed, false).run();
    }
}
