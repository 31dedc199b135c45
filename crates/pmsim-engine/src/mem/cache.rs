//! Set-associative, tag-only caches with a pluggable replacement policy.
//!
//! Caches hold no data: the coherent value of every word lives in [`CoherentMemory`], which is
//! what any cache holding the line would supply. The tag arrays only decide latency and which
//! lines are evicted, so they are plain arrays scanned in place (no allocation per access).
//!
//! [`CoherentMemory`]: super::nvm::CoherentMemory

/// A way holds `line | VALID` (lines are 64 B aligned, so bit 0 is free); an empty way is 0, so
/// a tag array starts as zeroed memory the OS maps lazily (64 cores' L2s are 24 MiB of tags,
/// which a filled array would write on every run).
const VALID: u64 = 1;
const EMPTY: u64 = 0;

/// Which way to evict in a full set.
pub trait Replacement: Send {
    /// Called on every hit or fill of `way` in `set`.
    fn touch(&mut self, set: usize, way: usize);
    /// Chooses the victim way of a full set.
    fn victim(&mut self, set: usize) -> usize;
}

/// Least recently used, with a per-set access counter.
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

/// The built-in policies, dispatched statically (the hot path calls `touch` on every hit).
enum Repl {
    Lru(Lru),
    Random(RandomRepl),
}

impl Repl {
    fn new(name: &str, sets: usize, ways: usize, seed: u64) -> Repl {
        match name {
            "random" => Repl::Random(RandomRepl { ways, state: seed | 1 }),
            _ => Repl::Lru(Lru { ways, stamp: vec![0; sets * ways], clock: 0 }),
        }
    }

    #[inline(always)]
    fn touch(&mut self, set: usize, way: usize) {
        match self {
            Repl::Lru(r) => r.touch(set, way),
            Repl::Random(r) => r.touch(set, way),
        }
    }

    #[inline]
    fn victim(&mut self, set: usize) -> usize {
        match self {
            Repl::Lru(r) => r.victim(set),
            Repl::Random(r) => r.victim(set),
        }
    }
}

/// A tag array.
pub struct Cache {
    sets: usize,
    ways: usize,
    tags: Vec<u64>,
    repl: Repl,
    pub hits: u64,
    pub misses: u64,
}

impl Cache {
    pub fn new(size_kib: u64, ways: usize, policy_name: &str, seed: u64) -> Cache {
        let lines = (size_kib * 1024 / 64) as usize;
        let sets = (lines / ways).max(1);
        Cache {
            sets,
            ways,
            tags: vec![EMPTY; sets * ways],
            repl: Repl::new(policy_name, sets, ways, seed),
            hits: 0,
            misses: 0,
        }
    }

    #[inline]
    fn set_of(&self, line: u64) -> usize {
        ((line >> 6) as usize) & (self.sets - 1)
    }

    #[inline]
    fn find(&self, line: u64) -> Option<(usize, usize)> {
        debug_assert!(line & VALID == 0, "unaligned line {line:#x}");
        let set = self.set_of(line);
        let base = set * self.ways;
        let tag = line | VALID;
        self.tags[base..base + self.ways].iter().position(|&t| t == tag).map(|w| (set, w))
    }

    /// Looks `line` up, counting the hit or miss and updating recency on a hit.
    #[inline]
    pub fn access(&mut self, line: u64) -> bool {
        match self.find(line) {
            Some((s, w)) => {
                self.hits += 1;
                self.repl.touch(s, w);
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

    /// Inserts `line` (not present); returns the evicted line, if any.
    pub fn fill(&mut self, line: u64) -> Option<u64> {
        if let Some((s, w)) = self.find(line) {
            self.repl.touch(s, w);
            return None;
        }
        let set = self.set_of(line);
        let base = set * self.ways;
        let (way, victim) = match self.tags[base..base + self.ways].iter().position(|&t| t == EMPTY) {
            Some(w) => (w, None),
            None => {
                let w = self.repl.victim(set);
                (w, Some(self.tags[base + w] & !VALID))
            }
        };
        self.tags[base + way] = line | VALID;
        self.repl.touch(set, way);
        victim
    }

    pub fn invalidate(&mut self, line: u64) -> bool {
        if let Some((s, w)) = self.find(line) {
            self.tags[s * self.ways + w] = EMPTY;
            true
        } else {
            false
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
}
