//! A persistent tree node with shifts and splits: what FAST_FAIR, P-Masstree and P-ART share.
//!
//! A node is a fixed-size PM block of 8-byte fields read whole ([`NodeImage`]). A change inside
//! one node is a shift the structure orders itself (FAST_FAIR's line-by-line shift, Masstree's
//! permutation word, P-ART's key byte then child); a change that needs a new node builds it off
//! to the side and makes it durable *before* anything points to it: [`persist_new`] (its non-zero
//! lines, `ofence`), then [`link`] (the pointer store, `ofence`) for a split sibling or a swapped
//! child, or [`publish_root`] (a release of the root pointer, `ofence`) when the tree grows. A
//! crash therefore leaves the old tree, or the old tree plus an unreachable node, or the new one.
//! Internal nodes of the B+trees route a key by [`route`]. Recovery walks a B-link tree's leaf
//! chain ([`Blink::leaves`]), or the same walk as memoised pieces, one per leaf
//! ([`Blink::leaves_pieces`]).

use crate::ctx::Ctx;
use crate::index::common::{put_u64, store_nonzero_lines, u64_at};
use crate::recovery::{piece, PieceCache};
use std::rc::Rc;

/// A node's bytes, as read from PM or built for it.
pub struct NodeImage(pub Vec<u8>);

impl NodeImage {
    /// A node of `size` zero bytes (how a freshly allocated node starts).
    pub fn zeroed(size: u64) -> NodeImage {
        NodeImage(vec![0; size as usize])
    }

    /// Reads node `n` of `size` bytes (one load per line).
    pub fn read(c: &mut Ctx<'_>, n: u64, size: u64) -> NodeImage {
        NodeImage(c.load_bytes(n, size as usize))
    }

    /// The 8-byte field at `off`.
    pub fn get(&self, off: u64) -> u64 {
        u64_at(&self.0, off as usize)
    }

    /// Sets the 8-byte field at `off`.
    pub fn set(&mut self, off: u64, v: u64) {
        put_u64(&mut self.0, off as usize, v);
    }
}

/// B+tree routing in an internal node: the leftmost child, or the child of the last separator
/// key `<= k` (entries in key order).
pub fn route(leftmost: u64, entries: impl IntoIterator<Item = (u64, u64)>, k: u64) -> u64 {
    let mut child = leftmost;
    for (key, p) in entries {
        if k < key {
            break;
        }
        child = p;
    }
    child
}

/// Makes a node built off to the side durable before any pointer to it: its non-zero lines
/// (the rest of a fresh node is already zero), then an `ofence`.
pub fn persist_new(c: &mut Ctx<'_>, n: u64, bytes: &[u8]) {
    store_nonzero_lines(c, n, bytes);
    c.ofence();
}

/// Links a persisted node into the tree: the pointer store at `at`, then an `ofence` so the link
/// is durable before the old node is shrunk or its parent changes.
pub fn link(c: &mut Ctx<'_>, at: u64, node: u64) {
    c.store_u64(at, node);
    c.ofence();
}

/// Grows the tree: publishes a persisted new root by a release of the root pointer, then `ofence`.
pub fn publish_root(c: &mut Ctx<'_>, root_ptr: u64, new_root: u64) {
    c.release_value(root_ptr, new_root);
    c.ofence();
}

/// A B-link tree node as recovery reads it from an image (FAST_FAIR, P-Masstree).
pub trait BlinkNode {
    fn level(&self) -> u64;
    fn leftmost(&self) -> u64;
    /// The right sibling (0: none).
    fn sibling(&self) -> u64;
    /// Live (key, pointer) entries in key order.
    fn entries(&self) -> Vec<(u64, u64)>;
}

/// A B-link tree in a crash image: `read` reads (and checks) a node, `bound` gives the lowest key
/// of a node's right sibling (entries at or above it were copied there by a split caught before
/// the node was shrunk, and a search for them moves right).
pub struct Blink<R, B> {
    pub read: R,
    pub bound: B,
}

impl<N: BlinkNode, Rd: Fn(u64) -> crate::index::common::R<N>, B: Fn(&N) -> Option<u64>> Blink<Rd, B> {
    /// A search from `root` as the lock-free readers do it (move right past splits).
    pub fn search(&self, root: u64, k: u64) -> crate::index::common::R<Option<u64>> {
        let mut n = root;
        for _ in 0..1_000_000 {
            if n == 0 {
                return crate::index::common::err("search reached a null child");
            }
            let node = (self.read)(n)?;
            if (self.bound)(&node).is_some_and(|b| k >= b) {
                n = node.sibling();
                continue;
            }
            if node.level() == 0 {
                return Ok(node.entries().into_iter().find(|e| e.0 == k).map(|e| e.1));
            }
            n = route(node.leftmost(), node.entries(), k);
        }
        crate::index::common::err("search does not terminate")
    }

    /// The first leaf: the leftmost children from `root` down, each one level lower.
    fn leftmost_leaf(&self, root: u64) -> crate::index::common::R<u64> {
        use crate::index::common::err;
        let mut n = root;
        let mut level = (self.read)(n)?.level();
        if level > 64 {
            return err(format!("root level {level}"));
        }
        while level > 0 {
            let lm = (self.read)(n)?.leftmost();
            if lm == 0 || (self.read)(lm)?.level() != level - 1 {
                return err(format!("node {n:#x} at level {level} has a bad leftmost child {lm:#x}"));
            }
            n = lm;
            level -= 1;
        }
        Ok(n)
    }

    /// Recovery's walk: descends the leftmost children to the leaves (each one level lower),
    /// reads the leaf chain (keys strictly increasing, no cycle) and checks every key it holds is
    /// reachable from the root. Returns the (key, pointer) entries found.
    pub fn leaves(&self, root: u64) -> crate::index::common::R<Vec<(u64, u64)>> {
        use crate::index::common::{err, guard};
        let mut found = Vec::new();
        if root == 0 {
            return Ok(found);
        }
        let mut n = self.leftmost_leaf(root)?;
        let mut seen = rustc_hash::FxHashSet::default();
        let mut last: Option<u64> = None;
        while n != 0 {
            guard(&mut seen, n, "leaf")?;
            let node = (self.read)(n)?;
            if node.level() != 0 {
                return err(format!("leaf chain reaches internal node {n:#x}"));
            }
            let bound = (self.bound)(&node);
            for (k, p) in node.entries() {
                if bound.is_some_and(|b| k >= b) {
                    continue; // copied to the sibling by a split caught before the shrink
                }
                if last.is_some_and(|l| k <= l) {
                    return err(format!("leaf {n:#x}: key {k:#x} out of order"));
                }
                last = Some(k);
                found.push((k, p));
            }
            n = node.sibling();
        }
        for &(k, p) in &found {
            if self.search(root, k)? != Some(p) {
                return err(format!("key {k:#x} is on the leaf level but not reachable from the root"));
            }
        }
        Ok(found)
    }
}

/// A leaf as a piece of the recovery walk gives it (see [`Blink::leaf_piece`]).
pub type LeafPiece = Rc<crate::index::common::R<LeafRead>>;

/// A leaf as the recovery walk reads it ([`Blink::leaves_pieces`]).
#[derive(Clone, Debug, Default)]
pub struct LeafRead {
    /// Entries below the sibling's lowest key, in the leaf's order.
    pub entries: Vec<(u64, u64)>,
    pub sibling: u64,
}

impl<N: BlinkNode, Rd: Fn(u64) -> crate::index::common::R<N>, B: Fn(&N) -> Option<u64>> Blink<Rd, B> {
    /// Leaf `n` as the piece (`tag`, `n`) of `cache`: must be a leaf; its entries below the bound.
    pub fn leaf_piece(&self, cache: &mut dyn PieceCache, tag: u64, n: u64) -> Rc<crate::index::common::R<LeafRead>> {
        piece(cache, &[tag, n], |_, _| {
            let node = (self.read)(n)?;
            if node.level() != 0 {
                return crate::index::common::err(format!("leaf chain reaches internal node {n:#x}"));
            }
            let bound = (self.bound)(&node);
            // Entries at or above the bound were copied to the sibling by a split caught before
            // the shrink.
            let entries = node.entries().into_iter().filter(|&(k, _)| bound.is_none_or(|b| k < b)).collect();
            Ok(LeafRead { entries, sibling: node.sibling() })
        })
    }

    /// [`Blink::leaves`] piece by piece: each leaf is a piece (`tag`, leaf), and the check that
    /// its keys are reachable from the root another (`tag + 1`, leaf, root), which reads the
    /// internal nodes on their paths. Same verdict and message as `leaves`; returns the leaves
    /// of the chain, in order, with what they hold.
    pub fn leaves_pieces(
        &self,
        root: u64,
        cache: &mut dyn PieceCache,
        tag: u64,
    ) -> crate::index::common::R<Vec<(u64, Rc<crate::index::common::R<LeafRead>>)>> {
        use crate::index::common::{err, guard};
        let mut out = Vec::new();
        if root == 0 {
            return Ok(out);
        }
        let mut n = self.leftmost_leaf(root)?;
        let mut seen = rustc_hash::FxHashSet::default();
        let mut last: Option<u64> = None;
        while n != 0 {
            guard(&mut seen, n, "leaf")?;
            let leaf = self.leaf_piece(cache, tag, n);
            let l = match &*leaf {
                Ok(l) => l,
                Err(e) => return Err(e.clone()),
            };
            for &(k, _) in &l.entries {
                if last.is_some_and(|l| k <= l) {
                    return err(format!("leaf {n:#x}: key {k:#x} out of order"));
                }
                last = Some(k);
            }
            let next = l.sibling;
            out.push((n, leaf));
            n = next;
        }
        for &(leaf, _) in &out {
            let lost = piece(cache, &[tag + 1, leaf, root], |c, _| -> crate::index::common::R<Option<u64>> {
                if let Ok(l) = &*self.leaf_piece(c, tag, leaf) {
                    for &(k, p) in &l.entries {
                        if self.search(root, k)? != Some(p) {
                            return Ok(Some(k));
                        }
                    }
                }
                Ok(None)
            });
            match &*lost {
                Err(e) => return Err(e.clone()),
                Ok(Some(k)) => return err(format!("key {k:#x} is on the leaf level but not reachable from the root")),
                Ok(None) => {}
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_takes_the_child_of_the_last_separator_not_above_the_key() {
        let entries = [(10, 0xb), (20, 0xc)];
        assert_eq!(route(0xa, entries, 5), 0xa);
        assert_eq!(route(0xa, entries, 10), 0xb);
        assert_eq!(route(0xa, entries, 19), 0xb);
        assert_eq!(route(0xa, entries, 25), 0xc);
    }

    /// A two-leaf tree in memory: leaves 1 and 2 under root 3.
    struct N(u64, u64, u64, Vec<(u64, u64)>);
    impl BlinkNode for N {
        fn level(&self) -> u64 {
            self.0
        }
        fn leftmost(&self) -> u64 {
            self.1
        }
        fn sibling(&self) -> u64 {
            self.2
        }
        fn entries(&self) -> Vec<(u64, u64)> {
            self.3.clone()
        }
    }

    fn tree(leaf1: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        let read = move |n: u64| -> crate::index::common::R<N> {
            Ok(match n {
                1 => N(0, 0, 2, leaf1.clone()),
                2 => N(0, 0, 0, vec![(30, 0x30), (40, 0x40)]),
                _ => N(1, 1, 0, vec![(30, 2)]),
            })
        };
        let bound = |n: &N| (n.sibling() == 2).then_some(30);
        Blink { read, bound }.leaves(3).unwrap_or_default()
    }

    #[test]
    fn leaves_skip_copies_a_split_left_behind_and_reject_disorder() {
        // Leaf 1 still holds the key 30 its split copied to leaf 2: it is read once.
        let found = tree(vec![(10, 0x10), (30, 0x30)]);
        assert_eq!(found, vec![(10, 0x10), (30, 0x30), (40, 0x40)]);
        // Keys out of order in a leaf make the walk fail (an empty result here).
        assert!(tree(vec![(20, 0x20), (10, 0x10)]).is_empty());
    }
}
