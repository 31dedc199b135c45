//! The BROI controller's BLP-aware barrier-region scheduler (the seed's §IV-D).
//!
//! Why: a delegated controller that flattens barriers into global epochs can send a burst of
//! requests that all sit in one bank; the BROI controller instead keeps one entry per thread
//! and, each step, picks for every bank that can take a request the best candidate from the
//! Ready-SET R (the first set, SubReady-SET R_i, of every entry), by
//!
//! ```text
//! Priority(R_i) = BLP(R - R_i + N_i) - sigma * size(R_i)            (Eq. 2)
//! ```
//!
//! where N_i is entry i's Next-SET: finishing a small R_i whose successor brings new banks
//! comes first. Steps: (i) priorities; (ii) R's requests into per-bank candidate queues;
//! (iii) the highest-priority candidate of each bank forms the Sch-SET (ties: row-buffer hit,
//! then oldest); (iv) when a SubReady-SET completes, its Next-SET becomes ready (the framework's
//! [`Queues::persisted`]). A bank "can take" a request when the MC holds no not-yet-started
//! write for it (one candidate per bank per step; the bank's own queue stays one deep so the
//! controller's choice is what the bank executes).
//!
//! Local before remote: remote entries (RDMA channels) are scheduled only on banks with no
//! local candidate and while the MC write queue is below `broi.remote_low_util_pct`, unless a
//! remote request has waited `broi.starvation_ns`, when it competes ahead of local ones.
//!
//! Guarantee: only requests of an entry's first unpersisted epoch are candidates, so barrier
//! order per thread is never crossed (the test-only broken variant admits the Next-SET too).

use super::{BankView, PersistScheduler, Pick, Queues, SchedParams};

/// A bank's best candidate so far.
#[derive(Clone, Copy)]
struct Cand {
    /// 2: a starved remote request, 1: local, 0: remote.
    class: u8,
    pri: f64,
    hit: bool,
    seq: u64,
    entry: usize,
}

impl Cand {
    fn beats(&self, o: &Cand) -> bool {
        if self.class != o.class {
            return self.class > o.class;
        }
        if self.pri != o.pri {
            return self.pri > o.pri;
        }
        if self.hit != o.hit {
            return self.hit;
        }
        self.seq < o.seq
    }
}

pub struct Broi {
    sigma: f64,
    starvation_ps: u64,
    low_util: f64,
    broken: bool,
    /// Scratch, reused: per-bank counts of R, and of one entry's R_i and N_i (zero between
    /// entries; `touched` lists the banks to reset).
    r: Vec<i32>,
    ri: Vec<i32>,
    ni: Vec<i32>,
    touched: Vec<usize>,
    pri: Vec<f64>,
    best: Vec<Option<Cand>>,
    free: Vec<usize>,
    /// When a remote request held back by the queue's load becomes starved (see `wake_at`).
    wake: Option<u64>,
    steps: u64,
    picks: u64,
    remote_picks: u64,
    starved_picks: u64,
}

impl Broi {
    pub fn new(p: &SchedParams) -> Broi {
        Broi {
            sigma: p.sigma,
            starvation_ps: p.starvation_ps,
            low_util: p.remote_low_util_pct,
            broken: p.broken_cross_barrier,
            r: Vec::new(),
            ri: Vec::new(),
            ni: Vec::new(),
            touched: Vec::new(),
            pri: Vec::new(),
            best: Vec::new(),
            free: Vec::new(),
            wake: None,
            steps: 0,
            picks: 0,
            remote_picks: 0,
            starved_picks: 0,
        }
    }

    /// Eq. 2 priority of every local entry's SubReady-SET (for tests and the pick).
    ///
    /// Cost per step is the queued requests plus the entries and banks, never entries x banks:
    /// an entry changes BLP(R - R_i + N_i) against BLP(R) only at the banks its own R_i and
    /// N_i touch, so each entry starts from BLP(R) and corrects those banks alone (at 64
    /// cores the full entries x banks table was most of a step).
    pub fn priorities(&mut self, q: &Queues, nb: usize) -> &[f64] {
        let ne = q.entries.len();
        self.r.clear();
        self.r.resize(nb, 0);
        self.ri.clear();
        self.ri.resize(nb, 0);
        self.ni.clear();
        self.ni.resize(nb, 0);
        for e in &q.entries {
            if e.remote {
                continue;
            }
            let (Some(first), second) = (e.first_epoch(), e.second_epoch()) else { continue };
            for r in &e.queued {
                if r.key() == first || (self.broken && Some(r.key()) == second) {
                    self.r[r.bank as usize] += 1;
                }
            }
        }
        let base = self.r.iter().filter(|&&n| n > 0).count() as i64;
        self.pri.clear();
        self.pri.resize(ne, base as f64);
        for (i, e) in q.entries.iter().enumerate() {
            if e.remote || e.queued.is_empty() {
                continue;
            }
            let (Some(first), second) = (e.first_epoch(), e.second_epoch()) else { continue };
            self.touched.clear();
            let mut size = 0u32;
            for r in &e.queued {
                let b = r.bank as usize;
                let ready = r.key() == first || (self.broken && Some(r.key()) == second);
                if !ready && Some(r.key()) != second {
                    continue;
                }
                if self.ri[b] == 0 && self.ni[b] == 0 {
                    self.touched.push(b);
                }
                if ready {
                    size += 1;
                    self.ri[b] += 1;
                } else {
                    self.ni[b] += 1;
                }
            }
            let mut blp = base;
            for &b in &self.touched {
                let r = self.r[b];
                blp += i64::from(r - self.ri[b] + self.ni[b] > 0) - i64::from(r > 0);
                self.ri[b] = 0;
                self.ni[b] = 0;
            }
            self.pri[i] = blp as f64 - self.sigma * f64::from(size);
        }
        &self.pri
    }
}

impl PersistScheduler for Broi {
    fn name(&self) -> &'static str {
        "broi"
    }

    fn pick(&mut self, q: &Queues, v: &BankView, out: &mut Vec<Pick>) {
        let nb = v.backlog.len();
        self.steps += 1;
        let bpm = v.banks_per_mc.max(1);
        let open = |b: usize| v.backlog[b] == 0 && v.queue_free[b / bpm] > 0;
        // A saturated memory side (the common step under load: every bank busy or every
        // queue full) takes nothing, whatever the priorities.
        if !(0..nb).any(open) {
            self.wake = None;
            return;
        }
        self.priorities(q, nb);
        self.best.clear();
        self.best.resize(nb, None);
        // The earliest time a waiting remote candidate turns starved.
        let mut starves = u64::MAX;
        for (i, e) in q.entries.iter().enumerate() {
            let Some(first) = e.first_epoch() else { continue };
            let second = e.second_epoch();
            for r in &e.queued {
                if !(r.key() == first || (self.broken && Some(r.key()) == second)) {
                    continue;
                }
                let b = r.bank as usize;
                if !open(b) {
                    continue;
                }
                let hit = v.open_row[b] == r.row;
                // Remote requests rank by age only.
                let c = if e.remote {
                    let starved = v.now.saturating_sub(r.arrive) >= self.starvation_ps;
                    if !starved {
                        starves = starves.min(r.arrive.saturating_add(self.starvation_ps));
                    }
                    Cand { class: if starved { 2 } else { 0 }, pri: 0.0, hit, seq: r.seq, entry: i }
                } else {
                    Cand { class: 1, pri: self.pri[i], hit, seq: r.seq, entry: i }
                };
                if self.best[b].is_none_or(|o| c.beats(&o)) {
                    self.best[b] = Some(c);
                }
            }
        }
        self.free.clear();
        self.free.extend_from_slice(&v.queue_free);
        self.wake = None;
        for b in 0..nb {
            let Some(c) = self.best[b] else { continue };
            let (i, seq) = (c.entry, c.seq);
            let remote = q.entries[i].remote;
            let mc = b / bpm;
            if self.free[mc] == 0 {
                continue;
            }
            if c.class == 0 {
                // Local before remote: only into a lightly loaded queue.
                let used = v.queue_cap[mc] - v.queue_free[mc];
                if (used as f64) >= v.queue_cap[mc] as f64 * self.low_util / 100.0 {
                    // Held back by load, not by a bank: if the queue never drains below the
                    // mark (remote_low_util_pct = 0, or nothing else in flight), only time
                    // frees it, when the request starves and outranks local ones.
                    self.wake = Some(starves);
                    continue;
                }
            }
            self.free[mc] -= 1;
            if remote {
                self.remote_picks += 1;
                if c.class == 2 {
                    self.starved_picks += 1;
                }
            }
            self.picks += 1;
            out.push((i, seq));
        }
    }

    fn wake_at(&self) -> Option<u64> {
        self.wake
    }

    fn stats(&self, out: &mut crate::design::DesignStats) {
        out.insert("broi_steps".into(), self.steps as f64);
        out.insert("broi_picks".into(), self.picks as f64);
        out.insert("broi_remote_picks".into(), self.remote_picks as f64);
        out.insert("broi_starved_remote_picks".into(), self.starved_picks as f64);
    }
}
