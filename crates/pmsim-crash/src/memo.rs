//! Reusing the application's recovery, whole or piece by piece, from one crash instant to the
//! next.
//!
//! A workload's recovery is a deterministic function of the image words it reads and of the
//! answers of `dfence_done`; so is each *piece* of it ([`pmsim_workloads::piece`]: the walk of
//! one segment, one node...). The crash driver visits instants in time order, so completed
//! dfences stay completed: a piece that saw some dfences pending gives the same answers until the
//! first of those completes. [`RecoveryMemo`] keeps, for the whole recovery (the *root* piece)
//! and for every piece it ran, the output, the words it read itself (the image's read tracking,
//! [`pmsim_trace::ReadLog`], split between nested pieces), the instant at which a dfence it saw
//! pending completes, and the pieces it called. A piece is reused exactly when none of its words
//! changed since it ran, that instant has not come, it never looked at the image as a whole, and
//! every piece it called is reusable too and has not run again since (a piece that ran again has
//! a new output); otherwise it runs again (and the pieces it calls are
//! asked again, each reused or rerun by the same rule). The verdict is then, exactly, the one a
//! run of the whole recovery would give.
//!
//! Under a copy-on-write layer (an undo-log rollback's view, [`MemImage::cow_write`]) a piece
//! reads the layer's value of a word where the layer has one. Before a piece is asked for, the
//! memo compares the layer with the one the last piece was asked under (only when the layer
//! changed since, [`MemImage::cow_version`]) and marks the readers of every word whose layer
//! value appeared, went or changed, exactly as it marks the readers of an image word that
//! changed. A piece that writes the layer itself is never reused (a reuse would not write it).
//! The whole recovery, which builds the layer from words it reads, is memoised as usual.
//!
//! It also answers `dfence_done` from a bitset indexed by gid, advanced as time goes on, instead
//! of a hash map per query (a recovery asks once per logged operation).

use pmsim_trace::{MemImage, WordVal};
use pmsim_workloads::{PieceCache, PieceOut, PieceRun, Recovery};
use rustc_hash::FxHashMap;
use std::any::TypeId;
use std::cell::Cell;
use std::rc::Rc;

/// One recovery verdict: `Err` carries the recovery's message.
pub type Outcome = Result<(), String>;

/// The root piece's output (a type no recovery's piece can have).
struct Root(Outcome);

/// Completion of the run's dfences, advanced with time.
struct Dfences {
    /// (completion time, gid) of every dfence, by completion time.
    by_time: Vec<(u64, u64)>,
    /// How many of `by_time` had completed at the current instant.
    completed: usize,
    /// Bit `gid` set: that dfence completed at or before the current instant.
    done: Vec<u64>,
    /// gid -> completion time: by gid when gids are dense enough (a recovery asks once per logged
    /// operation, so this is on the hot path), else hashed.
    at: CompletionTimes,
}

impl Dfences {
    fn done(&self, gid: u64) -> bool {
        self.done.get((gid / 64) as usize).is_some_and(|w| w >> (gid % 64) & 1 == 1)
    }

    /// When `gid` completes (`u64::MAX`: never).
    fn completion(&self, gid: u64) -> u64 {
        match &self.at {
            CompletionTimes::Dense(v) => v.get(gid as usize).copied().unwrap_or(u64::MAX),
            CompletionTimes::Sparse(m) => m.get(&gid).copied().unwrap_or(u64::MAX),
        }
    }
}

/// Completion time per dfence gid (`u64::MAX`: never).
enum CompletionTimes {
    Dense(Vec<u64>),
    Sparse(FxHashMap<u64, u64>),
}

impl CompletionTimes {
    /// Gids above this use the hash map (a hand-written trace may number events sparsely).
    const DENSE_LIMIT: u64 = 1 << 24;

    /// `by_time`: (completion time, gid) sorted; the first completion of a gid counts.
    fn new(by_time: &[(u64, u64)]) -> CompletionTimes {
        let max = by_time.iter().map(|&(_, gid)| gid).max();
        match max {
            Some(m) if m >= Self::DENSE_LIMIT => {
                let mut at = FxHashMap::default();
                for &(ct, gid) in by_time {
                    at.entry(gid).or_insert(ct);
                }
                CompletionTimes::Sparse(at)
            }
            _ => {
                let mut at = vec![u64::MAX; max.map_or(0, |m| m as usize + 1)];
                for &(ct, gid) in by_time {
                    let slot = &mut at[gid as usize];
                    *slot = (*slot).min(ct);
                }
                CompletionTimes::Dense(at)
            }
        }
    }
}

/// A piece's last run.
struct Entry {
    out: PieceOut,
    /// Bumped at every run: the word index's records of older runs are then dead.
    gen: u32,
    /// A word the last run read changed since.
    dirty: bool,
    /// The last run looked at the image as a whole (never reused).
    all: bool,
    /// The first instant at which a dfence the last run saw pending has completed.
    expires: u64,
    /// Pieces the last run called, in order, with their generation then: a piece that ran
    /// again since has a new output, so its caller must run again too.
    children: Vec<(u32, u32)>,
    /// The verdict number at which `valid` was last decided.
    seen: u64,
    valid: bool,
}

/// Piece outputs and what they depend on.
#[derive(Default)]
struct Cache {
    ids: FxHashMap<(TypeId, Box<[u64]>), u32>,
    entries: Vec<Entry>,
    index: WordIndex,
    /// Children of the pieces now running, innermost last.
    stack: Vec<Vec<(u32, u32)>>,
    /// Numbers the verdicts (validity is decided once per piece per verdict).
    verdict: u64,
    /// The current instant.
    now: u64,
    /// Reused buffer for a run's words.
    words: Vec<u64>,
    /// Piece runs (the root's included).
    piece_runs: u64,
    /// The copy-on-write layer the last piece was asked under, and that layer's version.
    layer: FxHashMap<u64, WordVal>,
    layer_version: u64,
    /// Reused buffer for the current layer while it is compared with `layer`.
    layer_now: FxHashMap<u64, WordVal>,
}

impl Cache {
    /// Whether entry `id`'s output is what a run now would return.
    fn valid(&mut self, id: u32) -> bool {
        let e = &self.entries[id as usize];
        if e.seen == self.verdict {
            return e.valid;
        }
        let mut ok = !e.dirty && !e.all && self.now < e.expires;
        if ok {
            let children = std::mem::take(&mut self.entries[id as usize].children);
            ok = children.iter().all(|&(c, gen)| self.valid(c) && self.entries[c as usize].gen == gen);
            self.entries[id as usize].children = children;
        }
        let e = &mut self.entries[id as usize];
        e.seen = self.verdict;
        e.valid = ok;
        ok
    }

    /// Marks the readers of every word whose view through `img`'s copy-on-write layer differs
    /// from the layer the last piece was asked under (see the module doc).
    fn sync_layer(&mut self, img: &MemImage) {
        if img.cow_version() == self.layer_version {
            return;
        }
        self.layer_version = img.cow_version();
        let mut now = std::mem::take(&mut self.layer_now);
        now.clear();
        img.cow_for_each(|w, v| {
            now.insert(w, v);
        });
        let Cache { index, entries, layer, .. } = self;
        let mut marked = false;
        let mut mark = |w: u64| {
            index.readers(w, entries, |e| {
                marked |= !e.dirty;
                e.dirty = true;
            })
        };
        for (&w, v) in &now {
            if layer.get(&w) != Some(v) {
                mark(w);
            }
        }
        for &w in layer.keys() {
            if !now.contains_key(&w) {
                mark(w);
            }
        }
        // The old layer's map becomes the next buffer.
        self.layer_now = std::mem::replace(layer, now);
        if marked {
            // Validity decided earlier in this verdict may be stale now.
            self.verdict += 1;
        }
    }
}

/// The memo's side of one verdict: the cache with the image and the dfences of this instant.
struct Runner<'a> {
    cache: &'a mut Cache,
    dfences: &'a Dfences,
    img: &'a MemImage,
}

impl PieceCache for Runner<'_> {
    fn run_piece(&mut self, ty: TypeId, key: &[u64], run: &mut PieceRun<'_>) -> PieceOut {
        let c = &mut *self.cache;
        let id = match c.ids.get(&(ty, key) as &dyn EntryKey) {
            Some(&id) => id,
            None => {
                let id = c.entries.len() as u32;
                c.entries.push(Entry {
                    out: Rc::new(()),
                    gen: 0,
                    dirty: true,
                    all: false,
                    expires: 0,
                    children: Vec::new(),
                    seen: 0,
                    valid: false,
                });
                c.ids.insert((ty, key.into()), id);
                id
            }
        };
        // A piece inside the recovery reads through the copy-on-write layer the recovery built.
        let root = c.stack.is_empty();
        if !root {
            c.sync_layer(self.img);
        }
        if c.valid(id) {
            let gen = c.entries[id as usize].gen;
            if let Some(parent) = c.stack.last_mut() {
                parent.push((id, gen));
            }
            return c.entries[id as usize].out.clone();
        }
        let mark = self.img.read_mark();
        let layer_before = self.img.cow_version();
        c.stack.push(Vec::new());
        let expires = Cell::new(u64::MAX);
        let dfences = self.dfences;
        // No pending dfence completes before the next one in time: once that is the expiry,
        // further pending answers need no look-up.
        let soonest = dfences.by_time.get(dfences.completed).map_or(u64::MAX, |d| d.0);
        let dfence_done = |gid: u64| {
            let done = dfences.done(gid);
            if !done && expires.get() > soonest {
                expires.set(expires.get().min(dfences.completion(gid)));
            }
            done
        };
        let out = run(self, &dfence_done);
        let c = &mut *self.cache;
        let children = c.stack.pop().unwrap_or_default();
        let mut words = std::mem::take(&mut c.words);
        words.clear();
        // A piece that wrote the layer must run again: a reuse would leave the layer unwritten.
        let wrote_layer = !root && self.img.cow_version() != layer_before;
        let all = mark.is_none_or(|m| self.img.split_reads(m, &mut words)) || wrote_layer;
        let e = &mut c.entries[id as usize];
        e.gen = e.gen.wrapping_add(1);
        let gen = e.gen;
        *e = Entry {
            out: out.clone(),
            gen,
            dirty: false,
            all,
            expires: expires.get(),
            children,
            seen: c.verdict,
            valid: true,
        };
        c.index.add(&words, id, gen, &c.entries);
        if let Some(parent) = c.stack.last_mut() {
            parent.push((id, gen));
        }
        c.words = words;
        c.piece_runs += 1;
        out
    }
}

/// Looks `(TypeId, Box<[u64]>)` keys up by `(TypeId, &[u64])` without allocating.
trait EntryKey {
    fn ty(&self) -> TypeId;
    fn key(&self) -> &[u64];
}

impl EntryKey for (TypeId, Box<[u64]>) {
    fn ty(&self) -> TypeId {
        self.0
    }
    fn key(&self) -> &[u64] {
        &self.1
    }
}

impl EntryKey for (TypeId, &[u64]) {
    fn ty(&self) -> TypeId {
        self.0
    }
    fn key(&self) -> &[u64] {
        self.1
    }
}

impl<'a> std::borrow::Borrow<dyn EntryKey + 'a> for (TypeId, Box<[u64]>) {
    fn borrow(&self) -> &(dyn EntryKey + 'a) {
        self
    }
}

impl PartialEq for dyn EntryKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.ty() == other.ty() && self.key() == other.key()
    }
}

impl Eq for dyn EntryKey + '_ {}

impl std::hash::Hash for dyn EntryKey + '_ {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.ty().hash(h);
        self.key().hash(h);
    }
}

pub struct RecoveryMemo {
    dfences: Dfences,
    cache: Cache,
    /// Runs of the whole recovery (the rest of the verdicts were reused).
    pub runs: u64,
}

impl RecoveryMemo {
    /// `dfences`: (gid, completion time) of every dfence of the run.
    pub fn new(dfences: &[(u64, u64)]) -> RecoveryMemo {
        let mut by_time: Vec<(u64, u64)> = dfences.iter().map(|&(gid, ct)| (ct, gid)).collect();
        by_time.sort_unstable();
        let words = dfences.iter().map(|&(gid, _)| gid / 64 + 1).max().unwrap_or(0);
        let at = CompletionTimes::new(&by_time);
        RecoveryMemo {
            dfences: Dfences { by_time, completed: 0, done: vec![0; words as usize], at },
            cache: Cache::default(),
            runs: 0,
        }
    }

    /// Moves to instant `t` (never earlier than the last one).
    fn advance(&mut self, t: u64) {
        let d = &mut self.dfences;
        while let Some(&(ct, gid)) = d.by_time.get(d.completed) {
            if ct > t {
                break;
            }
            d.done[(gid / 64) as usize] |= 1 << (gid % 64);
            d.completed += 1;
        }
        self.cache.now = t;
    }

    /// The image changed at `word` since the last call of [`RecoveryMemo::verdict`].
    pub fn changed(&mut self, word: u64) {
        let Cache { index, entries, .. } = &mut self.cache;
        index.readers(word, entries, |e| e.dirty = true);
    }

    /// Piece runs so far (the whole recovery's included).
    pub fn piece_runs(&self) -> u64 {
        self.cache.piece_runs
    }

    /// The recovery's verdict on `img` at instant `t` (non-decreasing from call to call).
    pub fn verdict(&mut self, r: &dyn Recovery, img: &mut MemImage, t: u64) -> Outcome {
        self.advance(t);
        self.cache.verdict += 1;
        img.track_reads(Default::default());
        let before = self.cache.piece_runs;
        let out = {
            let img: &MemImage = img;
            let mut runner = Runner { cache: &mut self.cache, dfences: &self.dfences, img };
            pmsim_workloads::piece(&mut runner, &[], |c, d| {
                Root(r.check_with(img, d, c).map(|_| ()).map_err(|e| e.to_string()))
            })
        };
        img.take_reads();
        if self.cache.piece_runs != before {
            self.runs += 1;
        }
        out.0.clone()
    }
}

/// Which pieces read which word: per word the (entry, generation) of its latest reader, in 4 KiB
/// pages (an array store per word read, not a hash insertion), and a list of the other live
/// readers of words several pieces read (e.g. a segment's piece under its old and its new depth).
/// Records of an entry's older runs are dead (generation differs) and ignored.
#[derive(Default)]
struct WordIndex {
    page_of: FxHashMap<u64, u32>,
    pages: Vec<[u64; 512]>,
    /// Further readers of words whose page slot is taken by a live reader.
    more: FxHashMap<u64, Vec<u64>>,
}

const NONE: u64 = u64::MAX;

fn live(rec: u64, entries: &[Entry]) -> bool {
    rec != NONE && entries.get((rec >> 32) as usize).is_some_and(|e| e.gen == rec as u32)
}

impl WordIndex {
    fn add(&mut self, words: &[u64], id: u32, gen: u32, entries: &[Entry]) {
        let rec = (id as u64) << 32 | gen as u64;
        let (mut last, mut cur) = (u64::MAX, 0usize);
        for &w in words {
            let p = w >> 12;
            if p != last {
                last = p;
                let pages = &mut self.pages;
                cur = *self.page_of.entry(p).or_insert_with(|| {
                    pages.push([NONE; 512]);
                    (pages.len() - 1) as u32
                }) as usize;
            }
            let slot = &mut self.pages[cur][((w >> 3) & 511) as usize];
            let held = std::mem::replace(slot, rec);
            if held == rec || !live(held, entries) || held >> 32 == id as u64 {
                continue;
            }
            // Another live reader: it moves to the list, and this one keeps the slot, so its
            // next runs (the usual case: the same piece again) take the array path.
            let more = self.more.entry(w).or_default();
            more.retain(|&r| live(r, entries) && r >> 32 != id as u64);
            more.push(held);
        }
    }

    /// Calls `f` on every piece whose last run read `word`.
    fn readers(&self, word: u64, entries: &mut [Entry], mut f: impl FnMut(&mut Entry)) {
        let Some(&p) = self.page_of.get(&(word >> 12)) else { return };
        let rec = self.pages[p as usize][((word >> 3) & 511) as usize];
        if rec == NONE {
            return;
        }
        let mut visit = |rec: u64| {
            if live(rec, entries) {
                f(&mut entries[(rec >> 32) as usize]);
            }
        };
        visit(rec);
        if !self.more.is_empty() {
            if let Some(v) = self.more.get(&word) {
                v.iter().for_each(|&r| visit(r));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmsim_trace::WordVal;
    use pmsim_workloads::{piece, RecoveryError, RecoveryReport};

    /// Root reads the piece count at 0; piece i sums the 4 words at 0x1000 (i + 1); piece 0
    /// also calls a nested piece reading 0x9000 (which the root calls first too); piece 1 asks
    /// whether dfence 7 completed.
    struct Toy;

    impl Recovery for Toy {
        fn check_with(
            &self,
            img: &MemImage,
            _: &dyn Fn(u64) -> bool,
            pieces: &mut dyn PieceCache,
        ) -> Result<RecoveryReport, RecoveryError> {
            let mut sums = Vec::new();
            // The nested piece, asked by the root first (then by piece 0, which depends on it).
            piece(pieces, &[99], |_, _| img.read_u64(0x9000));
            for i in 0..img.read_u64(0) {
                let s = piece(pieces, &[i], |c, d| {
                    let mut s: u64 = (0..4).map(|k| img.read_u64(0x1000 * (i + 1) + 8 * k)).sum();
                    if i == 0 {
                        s += *piece(c, &[99], |_, _| img.read_u64(0x9000));
                    }
                    if i == 1 && d(7) {
                        s += 1000;
                    }
                    s
                });
                sums.push(*s);
            }
            Err(RecoveryError::new(format!("{sums:?}")))
        }
    }

    fn set(img: &mut MemImage, memo: &mut RecoveryMemo, w: u64, data: u64) {
        img.set(w, WordVal { id: 1, data });
        memo.changed(w);
    }

    #[test]
    fn a_piece_reruns_exactly_when_a_word_it_read_or_a_dfence_it_saw_pending_changed() {
        let mut img = MemImage::new();
        let mut memo = RecoveryMemo::new(&[(7, 50)]);
        let mut t = 0;
        let check = |img: &mut MemImage, memo: &mut RecoveryMemo, t: u64, want: &str, runs: u64| {
            let before = memo.piece_runs();
            let want = format!("recovery check failed: {want}");
            assert_eq!(memo.verdict(&Toy, img, t), Err(want.clone()));
            let fresh = Toy.check(img, &|g| g == 7 && t >= 50).unwrap_err().to_string();
            assert_eq!(want, fresh);
            assert_eq!(memo.piece_runs() - before, runs, "piece runs for {want}");
        };
        set(&mut img, &mut memo, 0, 3);
        set(&mut img, &mut memo, 0x2000, 5);
        check(&mut img, &mut memo, t, "[0, 5, 0]", 5);
        check(&mut img, &mut memo, t, "[0, 5, 0]", 0);
        // A word only piece 2 reads: the root and piece 2 run again.
        set(&mut img, &mut memo, 0x3010, 4);
        check(&mut img, &mut memo, t, "[0, 5, 4]", 2);
        // Unnoticed, the change would go unseen (what this test guards against).
        img.set(0x3010, WordVal { id: 1, data: 6 });
        assert_eq!(memo.verdict(&Toy, &mut img, t), Err("recovery check failed: [0, 5, 4]".to_string()));
        assert!(Toy.check(&img, &|_| false).unwrap_err().to_string().ends_with("[0, 5, 6]"));
        set(&mut img, &mut memo, 0x3010, 6);
        check(&mut img, &mut memo, t, "[0, 5, 6]", 2);
        // The nested piece's word: it, its caller and the root.
        set(&mut img, &mut memo, 0x9000, 1);
        check(&mut img, &mut memo, t, "[1, 5, 6]", 3);
        // A word nobody read.
        set(&mut img, &mut memo, 0x3020, 9);
        check(&mut img, &mut memo, t, "[1, 5, 6]", 0);
        // Dfence 7 completes at 50: only piece 1 (and the root) asked.
        t = 49;
        check(&mut img, &mut memo, t, "[1, 5, 6]", 0);
        t = 50;
        check(&mut img, &mut memo, t, "[1, 1005, 6]", 2);
        t = 60;
        check(&mut img, &mut memo, t, "[1, 1005, 6]", 0);
        // Fewer pieces: the root alone.
        set(&mut img, &mut memo, 0, 2);
        check(&mut img, &mut memo, t, "[1, 1005]", 1);
        // The root runs (its word changed) and reruns the nested piece before piece 0 asks for
        // it: piece 0, whose input changed though none of its own words did, runs again.
        set(&mut img, &mut memo, 0, 3);
        set(&mut img, &mut memo, 0x9000, 2);
        check(&mut img, &mut memo, t, "[2, 1005, 6]", 3);
    }

    /// Every dfence of a generated trace, completed at instant 0.
    fn all_dfences(t: &pmsim_trace::Trace) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        for th in &t.threads {
            for ev in &th.events {
                if ev.kind == pmsim_trace::Kind::Dfence {
                    v.push((ev.gid, 0));
                }
            }
        }
        v
    }

    #[test]
    fn corrupting_any_word_gives_the_verdict_of_a_fresh_run() {
        for w in ["dash-eh", "dash-lh", "cceh", "fastfair", "p-masstree", "nstore"] {
            let mut p = std::collections::BTreeMap::new();
            p.insert("ops".to_string(), "40".to_string());
            let g = pmsim_workloads::generate(w, &p).unwrap();
            let mut img = pmsim_workloads::global_order_image(&g.trace, u64::MAX);
            img.keep_dense();
            let mut memo = RecoveryMemo::new(&all_dfences(&g.trace));
            let r = &*g.recovery;
            assert_eq!(memo.verdict(r, &mut img, 1), Ok(()), "{w}");
            let words: Vec<(u64, WordVal)> = img.sorted();
            let (mut failed, mut partial) = (0, 0);
            for &(a, v) in words.iter().step_by(4) {
                for data in [v.data ^ 0xff, v.data ^ (1 << 40), 0] {
                    img.set(a, WordVal { data, ..v });
                    memo.changed(a);
                    let before = memo.piece_runs();
                    let got = memo.verdict(r, &mut img, 1);
                    let fresh = r.check(&img, &|_| true).map(|_| ()).map_err(|e| e.to_string());
                    assert_eq!(got, fresh, "{w}: word {a:#x} = {data:#x}");
                    failed += got.is_err() as u32;
                    // The root, one piece and its nested pieces: a local rerun.
                    partial += (1..=4).contains(&(memo.piece_runs() - before)) as u32;
                    img.set(a, v);
                    memo.changed(a);
                }
            }
            assert_eq!(memo.verdict(r, &mut img, 1), Ok(()), "{w}");
            assert!(failed > 10, "{w}: only {failed} corruptions were detected");
            if w != "nstore" {
                assert!(partial > 10, "{w}: only {partial} corruptions reran a few pieces");
            }
        }
    }
}
