//! The summary of a set of persists that every analysis state carries.
//!
//! Why this shape: the coalescing rule of docs/design.md §8 only asks whether a set of persists has
//! anything at or above a level other than one given persist. The highest level plus the
//! identity of the single persist at that level (or [`Frontier::MANY`]) answers it exactly, and
//! merges exactly under set union, in 16 bytes without allocation.

/// Highest level in a set of persists and who is alone at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Frontier {
    /// Highest level in the set; 0 for the empty set.
    pub level: u32,
    /// Identity of the only persist at `level`, [`Frontier::MANY`] when several are, 0 when the
    /// set is empty.
    pub who: u64,
}

impl Frontier {
    pub const EMPTY: Frontier = Frontier { level: 0, who: 0 };
    pub const MANY: u64 = u64::MAX;

    /// The union of two sets.
    #[inline(always)]
    pub fn merge(self, o: Frontier) -> Frontier {
        if self.level > o.level {
            self
        } else if o.level > self.level {
            o
        } else if self.who == o.who {
            self
        } else {
            Frontier { level: self.level, who: Frontier::MANY }
        }
    }

    /// May a persist whose predecessors are `self` join persist `q` (docs/design.md §8)?
    #[inline(always)]
    pub fn allows_joining(self, q: Frontier) -> bool {
        self.level < q.level || (self.level == q.level && self.who == q.who)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_is_set_union_of_the_top_level() {
        let a = Frontier { level: 3, who: 7 };
        let b = Frontier { level: 3, who: 9 };
        assert_eq!(a.merge(Frontier::EMPTY), a);
        assert_eq!(a.merge(a), a);
        assert_eq!(a.merge(b), Frontier { level: 3, who: Frontier::MANY });
        assert_eq!(a.merge(Frontier { level: 4, who: 1 }).level, 4);
        assert!(Frontier { level: 2, who: 5 }.allows_joining(a));
        assert!(a.allows_joining(a));
        assert!(!a.merge(b).allows_joining(a));
        assert!(!Frontier { level: 4, who: 7 }.allows_joining(a));
    }
}
