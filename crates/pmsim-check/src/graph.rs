//! The persist-order graph of one run under one model (docs/design.md §6).
//!
//! Nodes are the trace's memory events that the record shows performed (stores, loads,
//! acquires, releases, rmws; loads are left out under RP, where they order nothing across
//! threads). Barrier order is *implicit*: each node carries its thread and epoch, and every node
//! precedes every node of a later epoch of its thread (under strict persistency every access is
//! its own epoch). All other edges are explicit and transitively reduced where that is exact:
//! - SPA: each store to a word follows the previous store performed on that word;
//! - conflict (EP, strict): a load follows the latest earlier store to its word by another
//!   thread; a store follows every load of another thread performed since that thread's last
//!   such edge (write-after-read); a load its store buffer forwarded orders nothing
//!   (`forwarded_loads`);
//! - RP: release → the acquire/rmw that synchronises with it (sync), stores → a later release of
//!   the same epoch (release rule), acquire → later stores of the same epoch (acquire rule; as a
//!   chain through the epoch's acquires where that is exact, see `acquire_chain_exact`).
//!
//! An event is performed when all of its record entries are (a store when all its words are).

use crate::error::CheckError;
use crate::model::{FenceReading, Model};
use crate::verdict::EdgeRule;
use pmsim_trace::{Access, Kind, RunRecord, Trace, WordAccess, WORD_BYTES};
use rustc_hash::FxHashMap;

pub(crate) type NodeId = u32;

/// (from, to, rule).
type Edge = (NodeId, NodeId, EdgeRule);

#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub gid: u64,
    pub thread: u16,
    /// Index in the thread's program order (over all events).
    pub prog: u32,
    /// Index in the thread's node list (`thread_nodes`): requirement prefixes are in these units.
    pub pos: u32,
    pub epoch: u32,
    pub kind: Kind,
    /// When the event is performed (all its record entries); `u64::MAX` if never.
    pub time: u64,
    pub is_store: bool,
    /// Acts as an acquire (acquire, rmw) for RP's acquire rule and sync edges.
    pub acq: bool,
    /// Acts as a release (release, rmw) for RP's release rule and sync edges.
    pub rel: bool,
    /// A store to persistent memory: the only nodes whose durability is ever required.
    pub pm: bool,
}

/// A completed dfence: stores of `thread` at node positions `< boundary` (its epochs before the
/// dfence) must be durable after `time`.
#[derive(Clone, Debug)]
pub(crate) struct Dfence {
    pub gid: u64,
    /// `dfence`, or a legacy `sfence`/`mfence` read as one; or, for a design that promises every
    /// performed store survives ([`Graph::require_performed_durable`]), the store itself.
    pub kind: Kind,
    pub thread: u16,
    pub time: u64,
    pub boundary: u32,
    /// Latest perform time of the PM stores it covers (`u64::MAX` if one never performs).
    pub ready: u64,
    /// A store's own durability point ([`Graph::require_performed_durable`]), not a fence.
    pub performed: bool,
}

pub(crate) struct Graph {
    pub model: Model,
    pub threads: usize,
    pub nodes: Vec<Node>,
    pub gid_node: FxHashMap<u64, NodeId>,
    /// `gid_node` as an array by gid (`NO_NODE`: none) when gids are dense, else empty: the
    /// incremental checker looks up every word change's store.
    dense_node: Vec<NodeId>,
    /// Word addresses by word index, and the reverse map.
    pub words: Vec<u64>,
    pub word_idx: FxHashMap<u64, u32>,
    /// Stores per word in the order performed (coherence order): position = index.
    pub word_stores: Vec<Vec<NodeId>>,
    /// Per store node, its (word index, position) pairs (CSR).
    sw_start: Vec<u32>,
    sw: Vec<(u32, u32)>,
    out_start: Vec<u32>,
    out: Vec<(NodeId, EdgeRule)>,
    in_start: Vec<u32>,
    inn: Vec<(NodeId, EdgeRule)>,
    /// Per thread: nodes in program order, and the start of each epoch in that list.
    pub thread_nodes: Vec<Vec<NodeId>>,
    pub epoch_start: Vec<Vec<u32>>,
    /// Nodes that are performed at some time, in processing order (time, then gid).
    pub order: Vec<NodeId>,
    /// Completed dfences sorted by completion time.
    pub dfences: Vec<Dfence>,
    /// x86 only: (completion time, node) of each fence point that completed (an `sfence` or
    /// `mfence` leaving the store buffer, a locked rmw or release performing), sorted by time then
    /// gid. From then on the point's persist-order predecessors must be durable: a completed
    /// fence is where x86 guarantees the stores flushed before it persistent (docs/design.md §5).
    pub fences_done: Vec<(u64, NodeId)>,
}

fn words_of(addr: u64, size: u8) -> impl Iterator<Item = u64> {
    let end = addr + size.max(1) as u64;
    (addr & !(WORD_BYTES - 1)..end).step_by(WORD_BYTES as usize)
}

fn is_node_kind(k: Kind, model: Model) -> bool {
    match k {
        Kind::Load => model.conflicts(),
        Kind::Store | Kind::NtStore | Kind::Rmw | Kind::Acquire | Kind::Release => true,
        _ => false,
    }
}

/// Whether the RP acquire rule of one epoch (every acquire precedes every later store of the
/// epoch) may be encoded as a chain instead of all acquire × store pairs (quadratic on long
/// epochs that take many locks): each acquire → the next acquire, and each store ← only the
/// latest acquire before it (not its own rmw half). The chain adds no order between stores (an
/// acquire's only successors are later stores of its epoch and later epochs, which every earlier
/// acquire of the epoch precedes anyway), and it loses none at any crash instant provided that
/// acquires perform in program order and no store performs before the latest acquire before it:
/// then when a store has performed, so has every link of the chain leading to it. Otherwise the
/// epoch keeps the explicit pairs.
fn acquire_chain_exact(epoch: &[NodeId], nodes: &[Node], acq_half: &FxHashMap<u64, NodeId>) -> bool {
    let mut last: Option<NodeId> = None;
    let mut prev: Option<NodeId> = None; // the acquire before `last`
    for &n in epoch {
        let nd = &nodes[n as usize];
        if nd.is_store {
            let own = acq_half.get(&nd.gid).copied();
            let a = if last.is_some() && last == own { prev } else { last };
            if a.is_some_and(|a| nodes[a as usize].time > nd.time) {
                return false;
            }
        }
        if nd.acq {
            if last.is_some_and(|a| nodes[a as usize].time > nd.time) {
                return false;
            }
            prev = last;
            last = Some(n);
        }
    }
    true
}

struct Ev {
    thread: usize,
    kind: Kind,
    addr: u64,
    size: u8,
}

/// The trace's events by gid, with a dense slot per event for the build's per-event tables.
/// Trace readers and generators number events 0..n, so a gid is its own slot (an array index
/// instead of a hash lookup per record entry); a sparse numbering gets slots through one map.
struct Events {
    ranks: Option<FxHashMap<u64, u32>>,
    evs: Vec<Option<Ev>>,
}

impl Events {
    fn new(trace: &Trace) -> Events {
        let n: usize = trace.threads.iter().map(|s| s.events.len()).sum();
        let max = trace.threads.iter().flat_map(|s| s.events.iter().map(|e| e.gid)).max();
        match max {
            Some(m) if m >= 2 * n as u64 + 1024 => Events { ranks: Some(FxHashMap::default()), evs: Vec::new() },
            _ => Events { ranks: None, evs: (0..max.map_or(0, |m| m + 1)).map(|_| None).collect() },
        }
    }

    /// Adds an event; `false` if its gid is already taken.
    fn insert(&mut self, gid: u64, ev: Ev) -> bool {
        match &mut self.ranks {
            None => {
                let slot = &mut self.evs[gid as usize];
                slot.is_none() && slot.replace(ev).is_none()
            }
            Some(r) => {
                let next = self.evs.len() as u32;
                if *r.entry(gid).or_insert(next) != next {
                    return false;
                }
                self.evs.push(Some(ev));
                true
            }
        }
    }

    /// The event's slot, if the trace has it.
    fn slot(&self, gid: u64) -> Option<usize> {
        match &self.ranks {
            None => self.evs.get(gid as usize).and_then(|e| e.as_ref()).map(|_| gid as usize),
            Some(r) => r.get(&gid).map(|&s| s as usize),
        }
    }

    fn get(&self, gid: u64) -> Option<&Ev> {
        self.slot(gid).and_then(|s| self.evs[s].as_ref())
    }

    fn slots(&self) -> usize {
        self.evs.len()
    }
}

const NO_NODE: NodeId = NodeId::MAX;

/// Marks the load accesses its thread's store buffer forwarded: a load word that reads its own
/// thread's store while that store is not the word's latest performed store (it has not
/// performed yet, or another thread's store performed on the word since). Such a load read
/// nothing from memory, so it orders nothing across threads (docs/design.md §6): no coherence
/// request saw it, so no design can order it, and x86-TSO orders an internal reads-from with
/// nothing. Taken at its record time instead, it would seem to precede stores performed before
/// its source and follow ones its value predates (found with seed 602980 of the long random
/// traces: an order no design keeps and no model asks for).
fn forwarded_loads(accesses: &[WordAccess], evs: &Events) -> Vec<bool> {
    let mut forwarded = vec![false; accesses.len()];
    let mut latest: FxHashMap<u64, u64> = FxHashMap::default(); // word -> last store performed
    for (i, a) in accesses.iter().enumerate() {
        match a.kind {
            Access::Store => {
                latest.insert(a.word, a.gid);
            }
            Access::Load { read } => {
                let own = evs.get(read).is_some_and(|s| {
                    s.thread == a.thread as usize && s.kind.writes() && words_of(s.addr, s.size).any(|w| w == a.word)
                });
                forwarded[i] = own && latest.get(&a.word) != Some(&read);
            }
        }
    }
    forwarded
}

/// The x86 fence points' completions (see [`Graph::fences_done`]): `sfence`/`mfence` from the
/// record, a locked instruction's point when it performs. A fence cannot complete before the
/// accesses it follows perform, so a completion is never taken earlier than its node's time.
fn fence_completions(
    record: &RunRecord,
    nodes: &[Node],
    gid_node: &FxHashMap<u64, NodeId>,
    points: &FxHashMap<u64, NodeId>,
    evs: &Events,
) -> Result<Vec<(u64, NodeId)>, CheckError> {
    let mut done: Vec<(u64, NodeId)> = Vec::with_capacity(record.fences.len() + points.len());
    for (index, &(gid, time)) in record.fences.iter().enumerate() {
        let node =
            gid_node.get(&gid).copied().filter(|&n| matches!(nodes[n as usize].kind, Kind::Sfence | Kind::Mfence));
        let Some(n) = node else {
            return Err(match evs.get(gid).map(|e| e.kind.name()) {
                Some(kind) => {
                    CheckError::KindMismatch { list: "fences", index, gid, kind, what: "an sfence/mfence completion" }
                }
                None => CheckError::UnknownGid { list: "fences", index, gid },
            });
        };
        done.push((time.max(nodes[n as usize].time), n));
    }
    for &p in points.values() {
        let time = nodes[p as usize].time;
        if time != u64::MAX {
            done.push((time, p));
        }
    }
    done.sort_unstable_by_key(|&(time, n)| (time, nodes[n as usize].gid, n));
    Ok(done)
}

/// A `dfence_boundary` epoch meaning "the nodes before the event in program order".
const BEFORE_IT: u32 = u32::MAX;

impl Graph {
    pub fn build(trace: &Trace, record: &RunRecord, model: Model, fences: FenceReading) -> Result<Graph, CheckError> {
        let threads = trace.num_threads();
        if threads > u16::MAX as usize {
            return Err(CheckError::TooManyThreads(threads));
        }
        // 1. Events and epochs.
        let mut evs = Events::new(trace);
        let mut nodes: Vec<Node> = Vec::new();
        let mut gid_node: FxHashMap<u64, NodeId> = FxHashMap::default();
        let mut acq_half: FxHashMap<u64, NodeId> = FxHashMap::default();
        let mut x86_points: FxHashMap<u64, NodeId> = FxHashMap::default();
        let mut thread_nodes = vec![Vec::new(); threads];
        let mut epoch_start: Vec<Vec<u32>> = vec![vec![0]; threads];
        let mut dfence_boundary: FxHashMap<u64, (u16, u32, usize)> = FxHashMap::default();
        // Legacy reading: the `rmw`/`release` events that are durable fence points.
        let mut locked_points: Vec<u64> = Vec::new();
        // A legacy x86 trace checked against EP/RP/strict (or any trace, for a design that maps
        // x86 fences): its `sfence`/`mfence` are read as every design that promises those
        // models maps them (docs/design.md §3): a barrier, and a durable one (a dfence) when its
        // thread flushed some line (or made a non-temporal store to PM) since its previous fence
        // point (`sfence`, `mfence`, `rmw`, `release`).
        let legacy =
            model != Model::X86 && (fences == FenceReading::Mapped || trace.dialect() == pmsim_trace::Dialect::X86);
        for (t, s) in trace.threads.iter().enumerate() {
            let mut epoch = 0u32;
            let mut flushed = false;
            // Every barrier opens a new epoch index, even when the epoch it closes is empty.
            let new_epoch = |epoch: &mut u32, starts: &mut Vec<u32>, len: usize| {
                *epoch += 1;
                starts.push(len as u32);
            };
            for (i, e) in s.events.iter().enumerate() {
                if !evs.insert(e.gid, Ev { thread: t, kind: e.kind, addr: e.addr, size: e.size }) {
                    return Err(CheckError::DuplicateGid { gid: e.gid });
                }
                if is_node_kind(e.kind, model) {
                    if legacy && matches!(e.kind, Kind::Rmw | Kind::Release) && std::mem::take(&mut flushed) {
                        // A locked instruction after flushes is their fence point: the designs
                        // take it as a dfence before it (docs/design.md §3), so what precedes it
                        // is durable when it performs; an sfence after it has nothing left to
                        // persist. A durability point only, not a barrier: loads after it may
                        // perform before it in the engine.
                        dfence_boundary.insert(e.gid, (t as u16, BEFORE_IT, i));
                        locked_points.push(e.gid);
                    }
                    let acq = matches!(e.kind, Kind::Acquire | Kind::Rmw);
                    let rel = matches!(e.kind, Kind::Release | Kind::Rmw);
                    let base = Node {
                        gid: e.gid,
                        thread: t as u16,
                        prog: i as u32,
                        pos: 0, // set once the thread's list is complete
                        epoch,
                        kind: e.kind,
                        time: u64::MAX,
                        is_store: e.kind.writes(),
                        acq,
                        rel,
                        pm: e.kind.writes() && trace.is_pm(e.addr),
                    };
                    if model == Model::Rp && e.kind == Kind::Rmw {
                        // RP: an rmw's acquire half orders the releaser's stores before the
                        // stores *after* it; its release half (the store) follows the stores
                        // before it. Two nodes keep the rmw from fencing its own thread.
                        let id = nodes.len() as NodeId;
                        nodes.push(Node { is_store: false, pm: false, rel: false, ..base.clone() });
                        acq_half.insert(e.gid, id);
                        thread_nodes[t].push(id);
                    }
                    let id = nodes.len() as NodeId;
                    let acq = acq && !acq_half.contains_key(&e.gid);
                    nodes.push(Node { acq, ..base });
                    gid_node.insert(e.gid, id);
                    thread_nodes[t].push(id);
                    // x86 persists a non-temporal store at the next sfence, as a flushed line.
                    flushed |= e.kind == Kind::NtStore && trace.is_pm(e.addr);
                    if model == Model::X86 && matches!(e.kind, Kind::Rmw | Kind::Release) {
                        // x86: the fence point of a locked instruction, apart from its own store
                        // (which no flush covers, so later stores must not require it).
                        let p = nodes.len() as NodeId;
                        nodes.push(Node {
                            is_store: false,
                            pm: false,
                            acq: false,
                            rel: false,
                            ..nodes[id as usize].clone()
                        });
                        x86_points.insert(e.gid, p);
                        thread_nodes[t].push(p);
                    }
                    if model == Model::Strict {
                        new_epoch(&mut epoch, &mut epoch_start[t], thread_nodes[t].len());
                    }
                } else if model == Model::X86 && matches!(e.kind, Kind::Sfence | Kind::Mfence | Kind::Clflush) {
                    // A fence point of the x86 rule (never a store; its time is set there); a
                    // `clflush` is one for the stores to its own line.
                    let id = nodes.len() as NodeId;
                    nodes.push(Node {
                        gid: e.gid,
                        thread: t as u16,
                        prog: i as u32,
                        pos: 0,
                        epoch,
                        kind: e.kind,
                        time: u64::MAX,
                        is_store: false,
                        acq: false,
                        rel: false,
                        pm: false,
                    });
                    gid_node.insert(e.gid, id);
                    thread_nodes[t].push(id);
                } else if e.kind.is_barrier() || (legacy && matches!(e.kind, Kind::Sfence | Kind::Mfence)) {
                    new_epoch(&mut epoch, &mut epoch_start[t], thread_nodes[t].len());
                    // A dfence persists what was flushed before it too (the designs forget those
                    // flushes there); an ofence persists nothing.
                    let durable = match e.kind {
                        Kind::Ofence => false,
                        Kind::Dfence => {
                            flushed = false;
                            true
                        }
                        _ => std::mem::take(&mut flushed),
                    };
                    if durable {
                        dfence_boundary.insert(e.gid, (t as u16, epoch, i));
                    }
                } else if matches!(e.kind, Kind::Clwb | Kind::ClflushOpt | Kind::Clflush) {
                    flushed = true;
                    if e.kind == Kind::Clflush && model != Model::X86 && fences == FenceReading::Mapped {
                        // The mapping designs take a clflush as an ofence after it (x86 orders
                        // it with the thread's later stores; docs/design.md §3).
                        new_epoch(&mut epoch, &mut epoch_start[t], thread_nodes[t].len());
                    }
                }
            }
            epoch_start[t].push(thread_nodes[t].len() as u32); // sentinel end
            for (pos, &n) in thread_nodes[t].iter().enumerate() {
                nodes[n as usize].pos = pos as u32;
            }
        }

        // The node of each event slot (`NO_NODE`: none), for the per-entry look-ups below.
        let mut node_of: Vec<NodeId> = vec![NO_NODE; evs.slots()];
        for (&gid, &n) in &gid_node {
            if let Some(s) = evs.slot(gid) {
                node_of[s] = n;
            }
        }
        let node_at = |gid: u64| evs.slot(gid).map(|s| node_of[s]).filter(|&n| n != NO_NODE);
        // With dense gids, slots are gids.
        let dense_node = if evs.ranks.is_none() { node_of.clone() } else { Vec::new() };

        // 2. Validate the record; gather word accesses (synthesising them for sync events the
        //    record lists only in `syncs`).
        let mut accesses: Vec<WordAccess> = Vec::with_capacity(record.accesses.len());
        let mut has_access: Vec<bool> = vec![false; evs.slots()];
        // Per event slot, the words its store accesses wrote so far (bit = word offset from the
        // event's first word; an event covers at most 33 words).
        let mut seen_store: Vec<u64> = vec![0; evs.slots()];
        let mut prev = 0u64;
        for (index, a) in record.accesses.iter().enumerate() {
            let list = "accesses";
            if a.time < prev {
                return Err(CheckError::TimeNotMonotone { list, index, time: a.time, prev });
            }
            prev = a.time;
            let slot = evs.slot(a.gid).ok_or(CheckError::UnknownGid { list, index, gid: a.gid })?;
            let ev = evs.evs[slot].as_ref().ok_or(CheckError::UnknownGid { list, index, gid: a.gid })?;
            if ev.thread != a.thread as usize {
                return Err(CheckError::ThreadMismatch {
                    list,
                    index,
                    gid: a.gid,
                    trace_thread: ev.thread,
                    record_thread: a.thread,
                });
            }
            let (ok, what) = match a.kind {
                Access::Store => (ev.kind.writes(), "a store access"),
                Access::Load { .. } => (ev.kind.reads(), "a load access"),
            };
            if !ok {
                return Err(CheckError::KindMismatch { list, index, gid: a.gid, kind: ev.kind.name(), what });
            }
            if !words_of(ev.addr, ev.size).any(|w| w == a.word) {
                return Err(CheckError::WordOutside { index, gid: a.gid, word: a.word, addr: ev.addr, size: ev.size });
            }
            if a.kind == Access::Store {
                let bit = 1u64 << ((a.word - (ev.addr & !(WORD_BYTES - 1))) / WORD_BYTES);
                if seen_store[slot] & bit != 0 {
                    return Err(CheckError::DuplicateStore { index, gid: a.gid, word: a.word });
                }
                seen_store[slot] |= bit;
            }
            has_access[slot] = true;
            accesses.push(*a);
        }
        let mut sync_time: FxHashMap<u64, u64> = FxHashMap::default();
        let mut synth: Vec<WordAccess> = Vec::new();
        prev = 0;
        for (index, s) in record.syncs.iter().enumerate() {
            let list = "syncs";
            if s.time < prev {
                return Err(CheckError::TimeNotMonotone { list, index, time: s.time, prev });
            }
            prev = s.time;
            let slot = evs.slot(s.gid).ok_or(CheckError::UnknownGid { list, index, gid: s.gid })?;
            let ev = evs.evs[slot].as_ref().ok_or(CheckError::UnknownGid { list, index, gid: s.gid })?;
            if !ev.kind.is_sync() {
                return Err(CheckError::KindMismatch { list, index, gid: s.gid, kind: ev.kind.name(), what: "a sync" });
            }
            if ev.thread != s.thread as usize {
                return Err(CheckError::ThreadMismatch {
                    list,
                    index,
                    gid: s.gid,
                    trace_thread: ev.thread,
                    record_thread: s.thread,
                });
            }
            if ev.addr != s.addr {
                return Err(CheckError::SyncAddr { index, gid: s.gid, addr: s.addr, trace_addr: ev.addr });
            }
            sync_time.insert(s.gid, s.time);
            if !has_access[slot] {
                for w in words_of(ev.addr, ev.size) {
                    if ev.kind.reads() {
                        synth.push(WordAccess {
                            time: s.time,
                            gid: s.gid,
                            thread: s.thread,
                            word: w,
                            kind: Access::Load { read: pmsim_trace::INITIAL_ID },
                        });
                    }
                    if ev.kind.writes() {
                        synth.push(WordAccess {
                            time: s.time,
                            gid: s.gid,
                            thread: s.thread,
                            word: w,
                            kind: Access::Store,
                        });
                    }
                }
            }
        }
        if !synth.is_empty() {
            accesses.extend(synth);
            accesses.sort_by_key(|a| a.time); // stable: recorded order kept among equal times
        }
        let forwarded = if model.conflicts() { forwarded_loads(&accesses, &evs) } else { Vec::new() };

        // 3. Node times and store words.
        // Store accesses per node (a store node is performed once all its words are).
        let mut store_words_seen: Vec<u32> = vec![0; nodes.len()];
        for a in &accesses {
            if let Some(n) = node_at(a.gid) {
                let node = &mut nodes[n as usize];
                node.time = if node.time == u64::MAX { a.time } else { node.time.max(a.time) };
                if a.kind == Access::Store {
                    store_words_seen[n as usize] += 1;
                }
            }
        }
        for (gid, &t) in &sync_time {
            if let Some(&n) = gid_node.get(gid) {
                let node = &mut nodes[n as usize];
                node.time = if node.time == u64::MAX { t } else { node.time.max(t) };
            }
        }
        for (&gid, &h) in &acq_half {
            nodes[h as usize].time = nodes[gid_node[&gid] as usize].time;
        }
        for (n, node) in nodes.iter_mut().enumerate() {
            if node.is_store {
                let Some(ev) = evs.get(node.gid) else { continue };
                let expected = words_of(ev.addr, ev.size).count();
                if store_words_seen[n] as usize != expected {
                    node.time = u64::MAX; // some word never performed
                }
            }
        }

        // 4. Per-word coherence order and word edges.
        let mut words: Vec<u64> = Vec::new();
        let mut word_idx: FxHashMap<u64, u32> = FxHashMap::default();
        let mut word_stores: Vec<Vec<NodeId>> = Vec::new();
        // Per store node, its (word index, position) pairs (CSR, sized by the store accesses
        // counted above, filled in access order).
        let mut sw_start = Vec::with_capacity(nodes.len() + 1);
        sw_start.push(0u32);
        for &c in &store_words_seen {
            sw_start.push(sw_start[sw_start.len() - 1] + c);
        }
        let mut sw = vec![(0u32, 0u32); sw_start[nodes.len()] as usize];
        let mut sw_fill = sw_start.clone();
        let mut edges: Vec<Edge> = Vec::new();
        struct WordState {
            last: Option<(NodeId, u16)>,
            last_diff: Option<NodeId>,
            pending: Vec<(u16, Vec<NodeId>)>,
        }
        let mut wstate: Vec<WordState> = Vec::new();
        let conflicts = model.conflicts();
        for (i, a) in accesses.iter().enumerate() {
            let Some(n) = node_at(a.gid) else { continue };
            let wi = *word_idx.entry(a.word).or_insert_with(|| {
                words.push(a.word);
                word_stores.push(Vec::new());
                wstate.push(WordState { last: None, last_diff: None, pending: Vec::new() });
                (words.len() - 1) as u32
            });
            let ws = &mut wstate[wi as usize];
            let th = a.thread;
            match a.kind {
                Access::Store => {
                    let pos = word_stores[wi as usize].len() as u32;
                    word_stores[wi as usize].push(n);
                    sw[sw_fill[n as usize] as usize] = (wi, pos);
                    sw_fill[n as usize] += 1;
                    if let Some((p, pt)) = ws.last {
                        if p != n {
                            edges.push((p, n, EdgeRule::Spa));
                        }
                        if pt != th {
                            ws.last_diff = Some(p);
                        }
                    }
                    ws.last = Some((n, th));
                    if conflicts {
                        for (u, list) in ws.pending.iter_mut() {
                            if *u != th {
                                for &l in list.iter() {
                                    if l != n {
                                        edges.push((l, n, EdgeRule::Conflict));
                                    }
                                }
                                list.clear();
                            }
                        }
                    }
                }
                Access::Load { .. } => {
                    if !conflicts || forwarded[i] {
                        continue;
                    }
                    let src = match ws.last {
                        Some((p, pt)) if pt != th => Some(p),
                        Some(_) => ws.last_diff,
                        None => None,
                    };
                    if let Some(p) = src {
                        if p != n {
                            edges.push((p, n, EdgeRule::Conflict));
                        }
                    }
                    match ws.pending.iter_mut().find(|(u, _)| *u == th) {
                        Some((_, l)) => l.push(n),
                        None => ws.pending.push((th, vec![n])),
                    }
                }
            }
        }

        if model == Model::X86 {
            crate::x86::add_edges(trace, record, &mut nodes, &gid_node, &x86_points, &mut edges);
        }

        // 5. RP: sync, release-rule and acquire-rule edges.
        if model == Model::Rp {
            let mut last_rel: FxHashMap<u64, NodeId> = FxHashMap::default();
            for s in &record.syncs {
                let Some(&n) = gid_node.get(&s.gid) else { continue };
                let a = acq_half.get(&s.gid).copied().unwrap_or(n);
                if nodes[a as usize].acq {
                    if let Some(&r) = last_rel.get(&s.addr) {
                        if r != a {
                            edges.push((r, a, EdgeRule::Sync));
                        }
                    }
                }
                if nodes[n as usize].rel {
                    last_rel.insert(s.addr, n);
                }
            }
            for t in 0..threads {
                let starts = &epoch_start[t];
                for e in 0..starts.len() - 1 {
                    let epoch = &thread_nodes[t][starts[e] as usize..starts[e + 1] as usize];
                    let chain = acquire_chain_exact(epoch, &nodes, &acq_half);
                    let mut since_rel: Vec<NodeId> = Vec::new();
                    let mut acqs: Vec<NodeId> = Vec::new();
                    for &n in epoch {
                        let nd = &nodes[n as usize];
                        if nd.is_store {
                            // an rmw's own acquire half is not before its store
                            let own = acq_half.get(&nd.gid).copied();
                            let mut before = acqs.iter().copied().filter(|&a| Some(a) != own);
                            if chain {
                                edges.extend(before.next_back().map(|a| (a, n, EdgeRule::Acquire)));
                            } else {
                                edges.extend(before.map(|a| (a, n, EdgeRule::Acquire)));
                            }
                        }
                        if chain && nd.acq {
                            edges.extend(acqs.last().map(|&a| (a, n, EdgeRule::Acquire)));
                        }
                        if nd.rel {
                            for &s in &since_rel {
                                edges.push((s, n, EdgeRule::Release));
                            }
                            since_rel.clear();
                        }
                        if nd.is_store {
                            since_rel.push(n);
                        }
                        if nd.acq {
                            acqs.push(n);
                        }
                    }
                }
            }
        }
        edges.sort_unstable_by_key(|&(a, b, r)| (a, b, r as u8));
        edges.dedup_by_key(|e| (e.0, e.1));

        let csr = |key: &dyn Fn(&Edge) -> (NodeId, NodeId)| {
            let mut start = vec![0u32; nodes.len() + 1];
            for e in &edges {
                start[key(e).0 as usize + 1] += 1;
            }
            for i in 0..nodes.len() {
                start[i + 1] += start[i];
            }
            let mut fill = start.clone();
            let mut list = vec![(0u32, EdgeRule::Barrier); edges.len()];
            for e in &edges {
                let (from, to) = key(e);
                list[fill[from as usize] as usize] = (to, e.2);
                fill[from as usize] += 1;
            }
            (start, list)
        };
        let (out_start, out) = csr(&|e| (e.0, e.1));
        let (in_start, inn) = csr(&|e| (e.1, e.0));

        // 6. Processing order and dfences.
        let mut order: Vec<NodeId> =
            (0..nodes.len() as NodeId).filter(|&n| nodes[n as usize].time != u64::MAX).collect();
        order.sort_unstable_by_key(|&n| (nodes[n as usize].time, nodes[n as usize].gid));
        // Per thread, the latest perform time over its first k PM stores in program order, so a
        // dfence's `ready` costs O(1) instead of a walk over its thread.
        let ready_prefix: Vec<Vec<u64>> = thread_nodes
            .iter()
            .map(|list| {
                let mut acc = 0u64;
                let mut v = Vec::with_capacity(list.len() + 1);
                v.push(0);
                for &n in list {
                    let nd = &nodes[n as usize];
                    if nd.pm {
                        acc = acc.max(nd.time);
                    }
                    v.push(acc);
                }
                v
            })
            .collect();
        let mut dfences = Vec::new();
        // A legacy trace's durable sfences/mfences complete as the record's `fences` say; the
        // others are barriers only.
        let legacy_dfences = record.fences.iter().filter(|(gid, _)| legacy && dfence_boundary.contains_key(gid));
        // A locked fence point completes when its instruction performs (never: no requirement).
        let locked: Vec<(u64, u64)> = locked_points
            .iter()
            .map(|&gid| (gid, nodes[gid_node[&gid] as usize].time))
            .filter(|&(_, time)| time != u64::MAX)
            .collect();
        for (index, &(gid, time)) in record.dfences.iter().chain(legacy_dfences).chain(&locked).enumerate() {
            let Some(&(thread, boundary, prog)) = dfence_boundary.get(&gid) else {
                let kind = evs.get(gid).map(|e| e.kind.name());
                return Err(match kind {
                    Some(kind) => {
                        CheckError::KindMismatch { list: "dfences", index, gid, kind, what: "a dfence completion" }
                    }
                    None => CheckError::UnknownGid { list: "dfences", index, gid },
                });
            };
            // The nodes before the dfence in program order are a prefix of its thread's list.
            let t = thread as usize;
            let before = thread_nodes[t].partition_point(|&n| (nodes[n as usize].prog as usize) < prog);
            let ready = ready_prefix[t][before];
            let boundary = if boundary == BEFORE_IT { before as u32 } else { epoch_start[t][boundary as usize] };
            let kind = evs.get(gid).map_or(Kind::Dfence, |e| e.kind);
            dfences.push(Dfence { gid, kind, thread, time, boundary, ready, performed: false });
        }
        dfences.sort_by_key(|d| (d.time, d.gid));
        let fences_done = if model == Model::X86 {
            fence_completions(record, &nodes, &gid_node, &x86_points, &evs)?
        } else {
            Vec::new()
        };

        Ok(Graph {
            model,
            threads,
            nodes,
            gid_node,
            dense_node,
            words,
            word_idx,
            word_stores,
            sw_start,
            sw,
            out_start,
            out,
            in_start,
            inn,
            thread_nodes,
            epoch_start,
            order,
            dfences,
            fences_done,
        })
    }

    /// For a design that promises every performed store survives (eADR, BBB): each PM store is
    /// also a durability point of its own, from the instant it performs, for itself and every
    /// PM store before it in its thread's program order (once they have all performed). The
    /// model's order alone cannot tell a battery-backed buffer from a volatile one: any prefix
    /// of the persist order may be missing at a crash.
    pub fn require_performed_durable(&mut self) {
        for (t, list) in self.thread_nodes.iter().enumerate() {
            let mut ready = 0u64;
            for (pos, &n) in list.iter().enumerate() {
                let node = &self.nodes[n as usize];
                if !node.pm {
                    continue;
                }
                ready = ready.max(node.time);
                if node.time == u64::MAX {
                    continue;
                }
                self.dfences.push(Dfence {
                    gid: node.gid,
                    kind: node.kind,
                    thread: t as u16,
                    time: node.time,
                    boundary: pos as u32 + 1,
                    ready,
                    performed: true,
                });
            }
        }
        self.dfences.sort_by_key(|d| (d.time, d.gid));
    }

    /// The node of event `gid`, if it is one.
    pub fn node_of(&self, gid: u64) -> Option<NodeId> {
        if self.dense_node.is_empty() {
            return self.gid_node.get(&gid).copied();
        }
        self.dense_node.get(gid as usize).copied().filter(|&n| n != NO_NODE)
    }

    /// An acquire-rule edge into a node that is not a store: a link of an epoch's acquire chain
    /// (see [`acquire_chain_exact`]), not an order of the model by itself.
    pub fn is_chain_edge(&self, to: NodeId, rule: EdgeRule) -> bool {
        rule == EdgeRule::Acquire && !self.nodes[to as usize].is_store
    }

    /// (word index, position in the word's coherence order) for each word a store wrote.
    pub fn store_words(&self, n: NodeId) -> &[(u32, u32)] {
        &self.sw[self.sw_start[n as usize] as usize..self.sw_start[n as usize + 1] as usize]
    }

    pub fn out_edges(&self, n: NodeId) -> &[(NodeId, EdgeRule)] {
        &self.out[self.out_start[n as usize] as usize..self.out_start[n as usize + 1] as usize]
    }

    pub fn in_edges(&self, n: NodeId) -> &[(NodeId, EdgeRule)] {
        &self.inn[self.in_start[n as usize] as usize..self.in_start[n as usize + 1] as usize]
    }

    /// The nodes of epoch `e` of thread `t`, in program order.
    pub fn epoch_nodes(&self, t: usize, e: u32) -> &[NodeId] {
        let s = &self.epoch_start[t];
        let e = e as usize;
        if e + 1 >= s.len() {
            return &[];
        }
        &self.thread_nodes[t][s[e] as usize..s[e + 1] as usize]
    }

    /// The position (in the thread's node list) where epoch `e` of thread `t` starts.
    pub fn epoch_pos(&self, t: usize, e: u32) -> u32 {
        self.epoch_start[t][(e as usize).min(self.epoch_start[t].len() - 1)]
    }

    /// Thread `t`'s nodes at positions `from..to`.
    pub fn pos_nodes(&self, t: usize, from: u32, to: u32) -> &[NodeId] {
        let list = &self.thread_nodes[t];
        let to = (to as usize).min(list.len());
        &list[(from as usize).min(to)..to]
    }

    pub fn num_epochs(&self, t: usize) -> u32 {
        (self.epoch_start[t].len() - 1) as u32
    }

    /// The rule name for barrier order under this model.
    pub fn barrier_rule(&self) -> EdgeRule {
        if self.model == Model::Strict {
            EdgeRule::ProgramOrder
        } else {
            EdgeRule::Barrier
        }
    }
}
