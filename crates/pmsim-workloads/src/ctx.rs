//! The simulated heap and the emitter workloads run on.
//!
//! [`Heap`] holds real values word by word; [`Ctx`] is one thread's view: every `load` returns
//! the value in the heap *and* appends a `load` event, every `store` updates the heap *and*
//! appends a `store` event carrying the value. Accesses longer than a line are split at 64 B
//! line boundaries, as the trace format requires.

use crate::params::Params;
use crate::recovery::{OpLog, OpRecord};
use pmsim_trace::{Event, Kind, Trace, TraceBuilder, DEFAULT_PM, LINE_BYTES};
use rustc_hash::FxHashMap;

/// Base of the volatile (DRAM) region workloads allocate from.
pub const DRAM_BASE: u64 = 0x1000_0000;

/// Word-addressed memory with bump allocators for PM and DRAM.
#[derive(Default)]
pub struct Heap {
    words: FxHashMap<u64, u64>,
    pm_next: u64,
    dram_next: u64,
}

impl Heap {
    pub fn new() -> Heap {
        Heap { words: FxHashMap::default(), pm_next: DEFAULT_PM.base, dram_next: DRAM_BASE }
    }

    pub fn read_byte(&self, a: u64) -> u8 {
        let w = a & !7;
        (self.words.get(&w).copied().unwrap_or(0) >> ((a - w) * 8)) as u8
    }

    pub fn write_byte(&mut self, a: u64, b: u8) {
        let w = a & !7;
        let sh = (a - w) * 8;
        let e = self.words.entry(w).or_insert(0);
        *e = (*e & !(0xffu64 << sh)) | ((b as u64) << sh);
    }

    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        (0..len as u64).map(|i| self.read_byte(addr + i)).collect()
    }

    pub fn read_u64(&self, addr: u64, size: usize) -> u64 {
        let mut b = [0u8; 8];
        for (i, x) in b.iter_mut().enumerate().take(size) {
            *x = self.read_byte(addr + i as u64);
        }
        u64::from_le_bytes(b)
    }

    pub fn write(&mut self, addr: u64, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            self.write_byte(addr + i as u64, *b);
        }
    }

    fn bump(next: &mut u64, size: u64, align: u64) -> u64 {
        let align = align.max(8);
        let a = (*next).div_ceil(align) * align;
        *next = a + size.max(1);
        a
    }

    /// Allocates persistent memory (zeroed), aligned to `align` (at least 8).
    pub fn alloc_pm(&mut self, size: u64, align: u64) -> u64 {
        Self::bump(&mut self.pm_next, size, align)
    }

    /// Allocates volatile memory (zeroed), aligned to `align` (at least 8).
    pub fn alloc_dram(&mut self, size: u64, align: u64) -> u64 {
        Self::bump(&mut self.dram_next, size, align)
    }
}

/// A small, fast, seeded PRNG (SplitMix64): the same seed gives the same workload on any host.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// True with probability `pct`/100.
    pub fn percent(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Everything a generator mutates: trace under construction, heap, randomness, operation log.
pub struct Gen {
    pub b: TraceBuilder,
    pub heap: Heap,
    pub rng: Rng,
    pub log: OpLog,
    /// Per thread: ops ended since that thread's last dfence (their durability gid is pending).
    pending: Vec<Vec<usize>>,
    /// `durable_every`: operations per end-of-operation dfence.
    durable_every: usize,
}

impl Gen {
    pub fn new(p: &Params) -> Gen {
        Gen {
            b: TraceBuilder::new(p.threads),
            heap: Heap::new(),
            rng: Rng::new(p.seed),
            log: OpLog::default(),
            pending: vec![Vec::new(); p.threads],
            durable_every: p.get("durable_every").max(1) as usize,
        }
    }

    /// Thread 0 releases a fresh flag that threads `1..threads` acquire: everything thread 0 did
    /// so far happens before everything they do next.
    pub fn publish_setup(&mut self, threads: usize) {
        if threads > 1 {
            let flag = self.heap.alloc_dram(64, 64);
            self.ctx(0).release_value(flag, 1);
            for t in 1..threads {
                self.ctx(t).acquire(flag);
            }
        }
    }

    /// One thread's emitter.
    pub fn ctx(&mut self, thread: usize) -> Ctx<'_> {
        Ctx { g: self, thread }
    }

    /// Ends every thread with a dfence so the final image holds every operation, and returns the
    /// finished trace and log.
    pub fn finish(mut self) -> (Trace, OpLog) {
        for t in 0..self.pending.len() {
            self.ctx(t).dfence();
        }
        (self.b.finish(), self.log)
    }
}

/// Runs `ops` operations per thread in a seeded random interleaving (operation granularity).
pub struct Interleaver;

impl Interleaver {
    /// Calls `op(ctx, op_index_within_thread)` until every thread has done `ops` operations,
    /// picking the next thread uniformly among those with operations left.
    ///
    /// Setup (the initial population) is done by thread 0 before the run; thread 0 then publishes
    /// it with a `release` of a flag that every other thread `acquire`s before its first
    /// operation, as a program starting its workers after loading does. Without it, nothing in
    /// the trace orders the setup stores before another thread's first operations: in the
    /// simulated run a worker would overwrite a word before the (slower) setup thread writes its
    /// initial value there.
    pub fn run(g: &mut Gen, threads: usize, ops: u64, mut op: impl FnMut(&mut Ctx<'_>, u64)) {
        g.publish_setup(threads);
        let mut left: Vec<u64> = vec![ops; threads];
        let mut live: Vec<usize> = (0..threads).collect();
        while !live.is_empty() {
            let i = g.rng.below(live.len() as u64) as usize;
            let t = live[i];
            let n = ops - left[t];
            op(&mut g.ctx(t), n);
            left[t] -= 1;
            if left[t] == 0 {
                live.swap_remove(i);
                live.sort_unstable();
            }
        }
    }
}

/// One thread's emitter over the shared [`Gen`].
pub struct Ctx<'a> {
    pub g: &'a mut Gen,
    pub thread: usize,
}

impl Ctx<'_> {
    fn push(&mut self, ev: Event, value: Option<&[u8]>) -> u64 {
        self.g.b.push(self.thread, ev, value)
    }

    pub fn rng(&mut self) -> &mut Rng {
        &mut self.g.rng
    }

    pub fn alloc_pm(&mut self, size: u64, align: u64) -> u64 {
        self.g.heap.alloc_pm(size, align)
    }

    pub fn alloc_dram(&mut self, size: u64, align: u64) -> u64 {
        self.g.heap.alloc_dram(size, align)
    }

    /// `n` non-memory instructions.
    pub fn compute(&mut self, n: u64) {
        if n > 0 {
            self.push(Event { addr: n, ..Event::new(Kind::Compute) }, None);
        }
    }

    /// Loads `size` (1..=8) bytes and returns them as a little-endian integer.
    pub fn load(&mut self, addr: u64, size: usize) -> u64 {
        self.push(Event::mem(Kind::Load, addr, size as u8), None);
        self.g.heap.read_u64(addr, size)
    }

    pub fn load_u64(&mut self, addr: u64) -> u64 {
        self.load(addr, 8)
    }

    /// Loads `len` bytes, one event per line touched.
    pub fn load_bytes(&mut self, addr: u64, len: usize) -> Vec<u8> {
        for (a, n) in line_pieces(addr, len) {
            self.push(Event::mem(Kind::Load, a, n as u8), None);
        }
        self.g.heap.read(addr, len)
    }

    fn store_kind(&mut self, kind: Kind, addr: u64, bytes: &[u8]) {
        let mut off = 0usize;
        for (a, n) in line_pieces(addr, bytes.len()) {
            let piece = &bytes[off..off + n];
            self.push(Event::mem(kind, a, n as u8), Some(piece));
            off += n;
        }
        self.g.heap.write(addr, bytes);
    }

    /// Stores `bytes`, one event per line touched.
    pub fn store(&mut self, addr: u64, bytes: &[u8]) {
        self.store_kind(Kind::Store, addr, bytes);
    }

    /// Stores `size` (1..=8) bytes of `v`, little-endian.
    pub fn store_n(&mut self, addr: u64, size: usize, v: u64) {
        self.store(addr, &v.to_le_bytes()[..size]);
    }

    pub fn store_u64(&mut self, addr: u64, v: u64) {
        self.store_n(addr, 8, v);
    }

    /// Non-temporal store (bypasses caches).
    pub fn ntstore(&mut self, addr: u64, bytes: &[u8]) {
        self.store_kind(Kind::NtStore, addr, bytes);
    }

    /// Strand barrier (strand persistency): later persists start a new strand.
    pub fn strand(&mut self) {
        self.push(Event::new(Kind::Strand), None);
    }

    pub fn ofence(&mut self) {
        self.push(Event::new(Kind::Ofence), None);
    }

    /// Durability fence; every operation this thread ended before it becomes durable with it.
    pub fn dfence(&mut self) -> u64 {
        let gid = self.push(Event::new(Kind::Dfence), None);
        for i in std::mem::take(&mut self.g.pending[self.thread]) {
            self.g.log.ops[i].durable_at = Some(gid);
        }
        gid
    }

    /// The dfence that ends an operation the original program makes durable before returning;
    /// with `durable_every = K` only every K-th of the thread's operations issues it.
    pub fn op_dfence(&mut self) -> Option<u64> {
        (self.g.pending[self.thread].len() >= self.g.durable_every).then(|| self.dfence())
    }

    /// Acquire of `addr` (an annotated 8-byte load).
    pub fn acquire(&mut self, addr: u64) -> u64 {
        self.push(Event::mem(Kind::Acquire, addr, 8), None);
        self.g.heap.read_u64(addr, 8)
    }

    /// Release of `addr`: an annotated 8-byte store of `v`.
    pub fn release_value(&mut self, addr: u64, v: u64) {
        self.push(Event::mem(Kind::Release, addr, 8), Some(&v.to_le_bytes()));
        self.g.heap.write(addr, &v.to_le_bytes());
    }

    /// Atomic compare-and-swap of 8 bytes: an `rmw` (acquire + release). On failure the rmw
    /// writes back the value it read, as a locked x86 cmpxchg does.
    pub fn cas(&mut self, addr: u64, expected: u64, new: u64) -> bool {
        let cur = self.g.heap.read_u64(addr, 8);
        let ok = cur == expected;
        let v = if ok { new } else { cur };
        self.push(Event::mem(Kind::Rmw, addr, 8), Some(&v.to_le_bytes()));
        self.g.heap.write(addr, &v.to_le_bytes());
        ok
    }

    /// Atomic fetch-and-add of 8 bytes (an `rmw`); returns the old value.
    pub fn fetch_add(&mut self, addr: u64, d: u64) -> u64 {
        let cur = self.g.heap.read_u64(addr, 8);
        let v = cur.wrapping_add(d);
        self.push(Event::mem(Kind::Rmw, addr, 8), Some(&v.to_le_bytes()));
        self.g.heap.write(addr, &v.to_le_bytes());
        cur
    }

    /// Takes a spin lock at `addr` (operations run one at a time, so it is always free: one CAS).
    pub fn lock(&mut self, addr: u64) {
        let ok = self.cas(addr, 0, 1 + self.thread as u64);
        debug_assert!(ok, "lock {addr:#x} held across operations");
    }

    /// Releases a spin lock at `addr` (release storing 0).
    pub fn unlock(&mut self, addr: u64) {
        self.release_value(addr, 0);
    }

    /// Starts an operation named `label`.
    pub fn begin(&mut self, label: &str) {
        let id = self.g.b.label(label);
        self.push(Event { addr: id as u64, ..Event::new(Kind::Begin) }, None);
    }

    /// Ends an operation and logs it for recovery checking.
    pub fn end(&mut self, label: &str, rec: OpRecord) {
        let id = self.g.b.label(label);
        let gid = self.push(Event { addr: id as u64, ..Event::new(Kind::End) }, None);
        let idx = self.g.log.ops.len();
        self.g.log.ops.push(OpRecord { thread: self.thread as u16, end_gid: gid, durable_at: None, ..rec });
        self.g.pending[self.thread].push(idx);
    }

    /// The current value of memory (no event): for generator bookkeeping only.
    pub fn peek(&self, addr: u64, size: usize) -> u64 {
        self.g.heap.read_u64(addr, size)
    }
}

/// Splits `[addr, addr+len)` at 64 B line boundaries.
pub fn line_pieces(addr: u64, len: usize) -> impl Iterator<Item = (u64, usize)> {
    let end = addr + len as u64;
    let mut a = addr;
    std::iter::from_fn(move || {
        if a >= end {
            return None;
        }
        let line_end = (a / LINE_BYTES + 1) * LINE_BYTES;
        let e = line_end.min(end);
        let piece = (a, (e - a) as usize);
        a = e;
        Some(piece)
    })
}
