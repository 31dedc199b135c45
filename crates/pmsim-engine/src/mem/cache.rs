//! Set-associative, tag-only caches with a pluggable replacement policy.
//!
//! Caches hold no data: the coherent value of every word lives in [`CoherentMemory`], which is
//! what any cache holding the line would supply. The tag arrays only decide latency and which
//! lines are evicted, so they are plain arrays scanned in place (no allocation per access).
//!
//! Layout (for speed; the policy's choices are those of the textbook policy): under LRU a set
//! keeps its valid ways in recency order, most recent first, so a set is one run of tags and
//! there is no separate stamp array: a hit reads one host cache line (an 8-way set is 64 B) and
//! usually finds the line in the first way, a fill evicts the last way. Invalidated ways stay as
//! holes in place; a fill closes the first hole. The order of the valid ways is exactly their
//! order of last use, so the victim is the one the stamped [`Lru`] would choose (the test
//! `recency_order_matches_stamped_lru` replays random access streams through both). Random
//! replacement keeps ways where they were filled, as its victim is a way index.
//!
//! [`CoherentMemory`]: super::nvm::CoherentMemory

/// A wide way holds `line | VALID` (lines are 64 B aligned, so bit 0 is free); an empty way is 0
/// (narrow ways: see `TagWord`), so a tag array starts as zeroed memory the OS maps lazily (64 cores' L2s are 24 MiB of tags,
/// which a filled array would write on every run).
const VALID: u64 = 1;
const EMPTY: u64 = 0;

/// Which way to evict in a full set (the interface a policy that keeps per-way state
/// implements; the built-in LRU keeps its state in the order of the ways instead, see above).
pub trait Replacement: Send {
    /// Called on every hit or fill of `way` in `set`.
    fn touch(&mut self, set: usize, way: usize);
    /// Chooses the victim way of a full set.
    fn victim(&mut self, set: usize) -> usize;
}

/// Least recently used, with a per-set access counter (the reference model of the recency
/// order the caches keep).
pub struct Lru {
    ways: usize,
    stamp: Vec<u32>,
    clock: u32,
}

impl Replacement for Lru {
    #[inline(always)]
    fn touch(&mut self, set: usize, way: usize) {
        self.clock = self.clock.wrapping_add(1);
        self.stamp[set * self.ways + way] = self.clock;
    }
    fn victim(&mut self, set: usize) -> usize {
        let s = &self.stamp[set * self.ways..(set + 1) * self.ways];
        let now = self.clock;
        // Oldest = largest age (wrapping-safe); on a tie the last such way, as `max_by_key`.
        let mut best = 0;
        let mut best_age = 0;
        for (w, &st) in s.iter().enumerate() {
            let age = now.wrapping_sub(st);
            if age >= best_age {
                best = w;
                best_age = age;
            }
        }
        best
    }
}

/// Uniformly random victim from a seeded generator (deterministic).
pub struct RandomRepl {
    ways: usize,
    state: u64,
}

impl Replacement for RandomRepl {
    fn touch(&mut self, _set: usize, _way: usize) {}
    fn victim(&mut self, _set: usize) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % self.ways as u64) as usize
    }
}

/// Builds the policy named in the configuration (validated there).
pub fn policy(name: &str, sets: usize, ways: usize, seed: u64) -> Box<dyn Replacement> {
    match name {
        "random" => Box::new(RandomRepl { ways, state: seed | 1 }),
        _ => Box::new(Lru { ways, stamp: vec![0; sets * ways], clock: 0 }),
    }
}

/// A way's stored tag. Tags are `u32` (the line index + 1) while every line the cache has seen
/// fits, which halves the tag arrays (64 cores' L2 tags fall out of the host's caches);
/// the first line that does not fit (an address at or above 256 GiB) widens the array to `u64`
/// (`line | VALID`) for the rest of the run, so any address works and costs only that copy.
/// Either way an empty way is 0.
trait TagWord: Copy + Eq {
    const EMPTY: Self;
    /// The tag of `line`, or `None` if it does not fit this width.
    fn of(line: u64) -> Option<Self>;
    /// The line of a (non-empty) tag.
    fn line(self) -> u64;
}

impl TagWord for u32 {
    const EMPTY: u32 = 0;
    #[inline(always)]
    fn of(line: u64) -> Option<u32> {
        let index = line >> 6;
        (index < u32::MAX as u64).then_some(index as u32 + 1)
    }
    #[inline(always)]
    fn line(self) -> u64 {
        (self as u64 - 1) << 6
    }
}

impl TagWord for u64 {
    const EMPTY: u64 = EMPTY;
    #[inline(always)]
    fn of(line: u64) -> Option<u64> {
        Some(line | VALID)
    }
    #[inline(always)]
    fn line(self) -> u64 {
        self & !VALID
    }
}

enum Tags {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

/// Index of `tag` in the set starting at `base`.
#[inline(always)]
fn find_in<T: TagWord>(tags: &[T], base: usize, ways: usize, tag: T) -> Option<usize> {
    tags[base..base + ways].iter().position(|&t| t == tag).map(|w| base + w)
}

/// Makes the way at `at` the most recent of its set (LRU only): the ways before it move down.
#[inline(always)]
fn promote<T: TagWord>(tags: &mut [T], base: usize, at: usize, lru: bool) {
    if lru && at != base {
        let t = tags[at];
        tags.copy_within(base..at, base + 1);
        tags[base] = t;
    }
}

/// Inserts `tag` (or touches it if present) in the set at `base`; returns the evicted tag.
#[inline(always)]
fn fill_in<T: TagWord>(tags: &mut [T], base: usize, ways: usize, tag: T, random: &mut Option<RandomRepl>) -> Option<T> {
    let lru = random.is_none();
    // One pass: the line's way if present, else the first hole.
    let mut hole = usize::MAX;
    for at in base..base + ways {
        let t = tags[at];
        if t == tag {
            promote(tags, base, at, lru);
            return None;
        }
        if t == T::EMPTY && hole == usize::MAX {
            hole = at;
        }
    }
    let (at, victim) = if hole != usize::MAX {
        (hole, None)
    } else {
        let at = match random {
            Some(r) => base + r.victim(0),
            None => base + ways - 1,
        };
        (at, Some(tags[at]))
    };
    tags[at] = tag;
    promote(tags, base, at, lru);
    victim
}

/// A tag array.
pub struct Cache {
    sets: usize,
    ways: usize,
    tags: Tags,
    /// `None`: LRU, kept as the order of the ways; `Some`: random victims.
    random: Option<RandomRepl>,
    pub hits: u64,
    pub misses: u64,
}

impl Cache {
    pub fn new(size_kib: u64, ways: usize, policy_name: &str, seed: u64) -> Cache {
        let lines = (size_kib * 1024 / 64) as usize;
        let sets = (lines / ways).max(1);
        let random = (policy_name == "random").then_some(RandomRepl { ways, state: seed | 1 });
        Cache { sets, ways, tags: Tags::Narrow(vec![0; sets * ways]), random, hits: 0, misses: 0 }
    }

    /// First way of `line`'s set.
    #[inline(always)]
    fn base_of(&self, line: u64) -> usize {
        debug_assert!(line & VALID == 0, "unaligned line {line:#x}");
        (((line >> 6) as usize) & (self.sets - 1)) * self.ways
    }

    /// Index of `line`'s way in the tag array.
    #[inline(always)]
    fn find(&self, line: u64) -> Option<usize> {
        let base = self.base_of(line);
        match &self.tags {
            Tags::Narrow(t) => u32::of(line).and_then(|tag| find_in(t, base, self.ways, tag)),
            Tags::Wide(t) => find_in(t, base, self.ways, line | VALID),
        }
    }

    /// Looks `line` up, counting the hit or miss and updating recency on a hit.
    #[inline]
    pub fn access(&mut self, line: u64) -> bool {
        match self.find(line) {
            Some(at) => {
                self.hits += 1;
                let (base, lru) = (self.base_of(line), self.random.is_none());
                match &mut self.tags {
                    Tags::Narrow(t) => promote(t, base, at, lru),
                    Tags::Wide(t) => promote(t, base, at, lru),
                }
                true
            }
            None => {
                self.misses += 1;
                false
            }
        }
    }

    /// Presence check without side effects.
    #[inline]
    pub fn contains(&self, line: u64) -> bool {
        self.find(line).is_some()
    }

    /// Inserts `line` (or touches it if present); returns the evicted line, if any.
    pub fn fill(&mut self, line: u64) -> Option<u64> {
        let base = self.base_of(line);
        if let Tags::Narrow(t) = &mut self.tags {
            match u32::of(line) {
                Some(tag) => return fill_in(t, base, self.ways, tag, &mut self.random).map(u32::line),
                None => {
                    let wide = t.iter().map(|&k| if k == 0 { EMPTY } else { k.line() | VALID }).collect();
                    self.tags = Tags::Wide(wide);
                }
            }
        }
        match &mut self.tags {
            Tags::Wide(t) => fill_in(t, base, self.ways, line | VALID, &mut self.random).map(u64::line),
            Tags::Narrow(_) => unreachable!("widened above"),
        }
    }

    pub fn invalidate(&mut self, line: u64) -> bool {
        match self.find(line) {
            Some(at) => {
                match &mut self.tags {
                    Tags::Narrow(t) => t[at] = 0,
                    Tags::Wide(t) => t[at] = EMPTY,
                }
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recent_in_set() {
        // 1 KiB, 2 ways -> 8 sets; lines 64*8 apart share a set.
        let mut c = Cache::new(1, 2, "lru", 1);
        let stride = 64 * 8;
        assert_eq!(c.fill(0), None);
        assert_eq!(c.fill(stride), None);
        assert!(c.access(0));
        assert_eq!(c.fill(2 * stride), Some(stride));
        assert!(c.contains(0) && !c.contains(stride));
        assert!(!c.access(stride));
        assert_eq!((c.hits, c.misses), (1, 1));
    }

    #[test]
    fn random_policy_is_seeded() {
        let run = |seed| {
            let mut c = Cache::new(1, 4, "random", seed);
            (0..64u64).filter_map(|i| c.fill(i * 64 * 4)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    /// The cache as it was before the recency-order layout: ways stay where they were filled
    /// (first empty way), and the policy's own state picks the victim.
    struct Reference {
        sets: usize,
        ways: usize,
        tags: Vec<u64>,
        repl: Box<dyn Replacement>,
    }

    impl Reference {
        fn new(size_kib: u64, ways: usize, name: &str, seed: u64) -> Reference {
            let sets = (size_kib as usize * 1024 / 64 / ways).max(1);
            Reference { sets, ways, tags: vec![EMPTY; sets * ways], repl: policy(name, sets, ways, seed) }
        }
        fn find(&self, line: u64) -> Option<(usize, usize)> {
            let set = ((line >> 6) as usize) & (self.sets - 1);
            let b = set * self.ways;
            self.tags[b..b + self.ways].iter().position(|&t| t == line | VALID).map(|w| (set, w))
        }
        fn access(&mut self, line: u64) -> bool {
            self.find(line).map(|(s, w)| self.repl.touch(s, w)).is_some()
        }
        fn fill(&mut self, line: u64) -> Option<u64> {
            if let Some((s, w)) = self.find(line) {
                self.repl.touch(s, w);
                return None;
            }
            let set = ((line >> 6) as usize) & (self.sets - 1);
            let b = set * self.ways;
            let (w, victim) = match self.tags[b..b + self.ways].iter().position(|&t| t == EMPTY) {
                Some(w) => (w, None),
                None => {
                    let w = self.repl.victim(set);
                    (w, Some(self.tags[b + w] & !VALID))
                }
            };
            self.tags[b + w] = line | VALID;
            self.repl.touch(set, w);
            victim
        }
        fn invalidate(&mut self, line: u64) -> bool {
            self.find(line).map(|(s, w)| self.tags[s * self.ways + w] = EMPTY).is_some()
        }
    }

    /// Random streams of accesses, fills, invalidations and presence checks over a line pool a
    /// few times the cache's capacity: every answer (hit, victim, presence) must be the
    /// reference's.
    #[test]
    fn recency_order_matches_stamped_lru() {
        // (policy, KiB, ways, lines in the pool, first line): the pools at 256 GiB straddle the
        // largest line a `u32` tag holds, so the array widens to `u64` tags mid-stream.
        let wide = (u32::MAX as u64 - 20) << 6;
        for (policy_name, size_kib, ways, pool, first) in [
            ("lru", 1, 2, 40u64, 0),
            ("lru", 1, 4, 64, 0),
            ("lru", 2, 8, 100, 0),
            ("lru", 1, 1, 30, 0),
            ("random", 1, 4, 64, 0),
            ("lru", 1, 4, 64, wide),
            ("random", 1, 2, 40, wide),
        ] {
            let mut c = Cache::new(size_kib, ways, policy_name, 5);
            let mut r = Reference::new(size_kib, ways, policy_name, 5);
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let (mut hits, mut victims) = (0, 0);
            for step in 0..200_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let line = first + (x >> 8) % pool * 64;
                let what =
                    format!("{policy_name} {size_kib} KiB from {first:#x} {ways} ways, step {step}, line {line:#x}");
                match x % 8 {
                    0..=2 => {
                        let hit = c.access(line);
                        assert_eq!(hit, r.access(line), "access: {what}");
                        hits += hit as u64;
                    }
                    3..=5 => {
                        let v = c.fill(line);
                        assert_eq!(v, r.fill(line), "fill: {what}");
                        victims += v.is_some() as u64;
                    }
                    6 => assert_eq!(c.invalidate(line), r.invalidate(line), "invalidate: {what}"),
                    _ => assert_eq!(c.contains(line), r.find(line).is_some(), "contains: {what}"),
                }
            }
            assert_eq!(c.hits, hits);
            assert_eq!(matches!(c.tags, Tags::Wide(_)), first == wide, "tag width");
            // The streams exercise both outcomes.
            assert!(hits > 1000 && victims > 1000, "{policy_name}: {hits} hits, {victims} victims");
        }
    }
}
