//! The approximate prefix index.
//!
//! Per endpoint, an LRU of the block hashes sent to it, sized like its KV cache. Globally, a map
//! from hash to the endpoints holding it ("holders"), so a request is matched against every
//! endpoint at once in O(drops × log blocks + matched endpoints) instead of O(endpoints × blocks),
//! where a drop is a depth at which some endpoint's match ends (one or two for a typical request).
//!
//! # Invariant: holder sets are nested along a chain
//!
//! A request's hashes are learned deepest first (`h_n`, …, `h_1`), so `h_1` ends up the most
//! recent. Every later touch of `h_i` is also followed by a touch of `h_1..h_{i-1}`, so a block is
//! never older than its extensions and the LRU evicts the tail of a prefix before its head — the
//! same order in which vLLM frees a request's blocks. Hence, for one endpoint, the hashes it holds
//! from a chain always form a leading run, and `holders(h_{i+1}) ⊆ holders(h_i)`. "Number of
//! leading hashes present" (upstream's match) then equals "depth of the deepest hash present", and
//! the endpoints whose match is exactly `i` are `holders(h_i) \ holders(h_{i+1})`, which is found
//! by a merge of two sorted lists only where the holder count drops. Since nested sets of equal
//! size are equal, the holder count is non-increasing along the chain and the drops are found by
//! bisection rather than by looking every block up.

mod holders;

use std::mem::size_of;

use holders::{Holder, HolderMap, Holders};

use super::hint::{DropHints, DEPTHS};
use super::lru::EndpointLru;

/// Memory and occupancy of one endpoint's part of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexStats {
    /// Block hashes held.
    pub entries: usize,
    /// LRU capacity in blocks.
    pub capacity: usize,
    /// Upper bound of the bytes these entries use (as if no hash were shared with another
    /// endpoint).
    pub approx_bytes: usize,
}

/// Parts an interval is split into per round of [`PrefixIndex::match_into`]'s search.
const SPLIT: usize = 8;

/// Bytes one entry costs at most: its LRU node, its holder record and (unshared) a map entry at
/// the map's maximum load factor of 7/8.
pub const BYTES_PER_ENTRY: usize =
    16 + size_of::<Holder>() + (size_of::<u64>() + size_of::<Holders>() + 1) * 8 / 7;

/// The approximate prefix index over endpoint slots.
///
/// A slot is a small dense integer the owner assigns to each endpoint (the picker maps
/// [`crate::EndpointId`]s to slots and reuses freed ones).
#[derive(Debug, Default)]
pub struct PrefixIndex {
    holders: HolderMap,
    lrus: Vec<Option<EndpointLru>>,
    hints: DropHints,
}

impl PrefixIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Learns that the request with `hashes` was sent to `slot`, whose LRU holds at most
    /// `capacity` blocks (evicting least recent blocks first when it holds more).
    pub fn learn(&mut self, slot: u32, hashes: &[u64], capacity: usize) {
        let capacity = capacity.max(1);
        let idx = slot as usize;
        if self.lrus.len() <= idx {
            self.lrus.resize_with(idx + 1, || None);
        }
        let Some(entry) = self.lrus.get_mut(idx) else {
            return;
        };
        let lru = entry.get_or_insert_with(|| EndpointLru::new(capacity));
        lru.capacity = capacity;
        while lru.len() > capacity {
            if let Some(old) = lru.pop_oldest() {
                forget_holder(&mut self.holders, old, slot);
            }
        }
        // Deepest first, so the head of the prefix is the most recent (see the module invariant).
        for &h in hashes.iter().rev() {
            if let Some(holder) = self.holders.get(&h).and_then(|hs| hs.find(slot)) {
                lru.touch(holder.node);
                continue;
            }
            if lru.len() >= capacity {
                if let Some(old) = lru.pop_oldest() {
                    forget_holder(&mut self.holders, old, slot);
                }
            }
            let node = lru.push(h);
            let holder = Holder { slot, node };
            match self.holders.get_mut(&h) {
                Some(hs) => hs.insert(holder),
                None => {
                    self.holders.insert(h, Holders::One(holder));
                }
            }
        }
    }

    /// For every endpoint that holds at least the first block, pushes `(slot, matched_blocks)`
    /// into `out` (cleared first). Endpoints not listed match 0 blocks.
    ///
    /// By the nesting invariant the holder count is non-increasing along the chain and equal
    /// counts mean equal sets, so only the depths where the count drops matter; they are found by
    /// bisection. Cost: O(drops × log blocks) map lookups — about ten for a request that shares a
    /// system prompt and then goes its own way, instead of one per block of the shared run, each
    /// a likely cache miss in a large index — plus a merge of the two holder lists at each drop.
    ///
    /// The bisection starts from the depths where the last match of a prompt with the same first
    /// block ended ([`DropHints`]): where they still hold, the first round of lookups finds every
    /// drop and nothing is left to bisect. The hints only choose where to look; the result does
    /// not depend on them.
    pub fn match_into(&mut self, hashes: &[u64], out: &mut Vec<(u32, u32)>) {
        out.clear();
        let Some(&first_hash) = hashes.first() else {
            return;
        };
        let mut hinted = [0u16; DEPTHS];
        for (h, &d) in hinted.iter_mut().zip(self.hints.get(first_hash)) {
            *h = d;
        }
        let this = &*self;
        let first = this.holders_of(first_hash);
        if first.is_empty() {
            return;
        }
        // A drop at match length `m` lies between indices `m − 1` (held) and `m` (not held):
        // both become split points, so a drop that has not moved is a leaf of the first round.
        let mut points = [0usize; 2 * DEPTHS];
        let mut n = 0;
        for m in hinted.iter().map(|&d| usize::from(d)).filter(|&d| d > 0) {
            for p in [m - 1, m] {
                if p > 0 && p < hashes.len() {
                    if let Some(slot) = points.get_mut(n) {
                        *slot = p;
                        n += 1;
                    }
                }
            }
        }
        let points = points.get_mut(..n).unwrap_or_default();
        points.sort_unstable();
        // The lookups of all points first, so their cache misses overlap.
        let mut at: [(usize, &[Holder]); 2 * DEPTHS] = [(0, &[]); 2 * DEPTHS];
        let mut parts = 0;
        let mut last = 0;
        for &p in points.iter() {
            if p == last {
                continue;
            }
            last = p;
            if let (Some(a), Some(h)) = (at.get_mut(parts), hashes.get(p)) {
                *a = (p, this.holders_of(*h));
                parts += 1;
            }
        }
        let mut prev = (0, first);
        for &next in at.iter().take(parts) {
            this.drops(hashes, prev.0, prev.1, next.0, next.1, out);
            prev = next;
        }
        // Depth `hashes.len()` is past the end: nobody holds it.
        this.drops(hashes, prev.0, prev.1, hashes.len(), &[], out);
        self.hints
            .remember(first_hash, out.iter().map(|&(_, matched)| matched));
    }

    /// The holders of `hash`, sorted by slot (empty when nobody holds it).
    fn holders_of(&self, hash: u64) -> &[Holder] {
        self.holders.get(&hash).map_or(&[], Holders::as_slice)
    }

    /// Emits the endpoints whose match lies in `lo + 1 ..= hi`, given the holders of `hashes[lo]`
    /// and of `hashes[hi]` (`hi` may be `hashes.len()`, held by nobody).
    ///
    /// The interval is split in up to [`SPLIT`] parts at once rather than halved: the lookups of
    /// one round do not depend on each other, so their cache misses overlap, and a 256-block
    /// prompt needs three rounds of waiting on memory instead of eight. Recursion depth is at most
    /// `log_SPLIT(blocks) + 1`.
    fn drops(
        &self,
        hashes: &[u64],
        lo: usize,
        at_lo: &[Holder],
        hi: usize,
        at_hi: &[Holder],
        out: &mut Vec<(u32, u32)>,
    ) {
        if at_lo.len() == at_hi.len() {
            // Nested and of equal size: the same set, so no endpoint's match ends in between.
            return;
        }
        if hi == lo + 1 {
            // Those in `at_lo` but not in `at_hi` match exactly `hi` blocks.
            let mut j = 0;
            for h in at_lo {
                while at_hi.get(j).is_some_and(|n| n.slot < h.slot) {
                    j += 1;
                }
                if at_hi.get(j).is_none_or(|n| n.slot != h.slot) {
                    out.push((h.slot, hi as u32));
                }
            }
            return;
        }
        let step = (hi - lo).div_ceil(SPLIT);
        let mut at = [(lo, at_lo); SPLIT + 1];
        let mut parts = 1;
        for (k, point) in (lo + step..hi).step_by(step).enumerate() {
            if let Some(a) = at.get_mut(k + 1) {
                *a = (
                    point,
                    hashes.get(point).map_or(&[][..], |h| self.holders_of(*h)),
                );
                parts = k + 2;
            }
        }
        let mut prev = (lo, at_lo);
        for &next in at.iter().take(parts).skip(1).chain([(hi, at_hi)].iter()) {
            self.drops(hashes, prev.0, prev.1, next.0, next.1, out);
            prev = next;
        }
    }

    /// Leading blocks of `hashes` held by `slot`, in O(log blocks).
    pub fn matched_blocks(&self, slot: u32, hashes: &[u64]) -> usize {
        hashes.partition_point(|&h| self.contains(slot, h))
    }

    /// Whether `slot` holds `hash`.
    pub fn contains(&self, slot: u32, hash: u64) -> bool {
        self.holders
            .get(&hash)
            .is_some_and(|hs| hs.find(slot).is_some())
    }

    /// Whether any endpoint holds `hash` (a request whose first block is unknown is "cold").
    pub fn is_known(&self, hash: u64) -> bool {
        self.holders.contains_key(&hash)
    }

    /// Drops everything learned about `slot` (the endpoint left the pool).
    pub fn forget(&mut self, slot: u32) {
        let Some(lru) = self.lrus.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        for h in lru.hashes() {
            forget_holder(&mut self.holders, h, slot);
        }
    }

    /// Occupancy of `slot`.
    pub fn stats(&self, slot: u32) -> IndexStats {
        match self.lrus.get(slot as usize).and_then(Option::as_ref) {
            Some(lru) => IndexStats {
                entries: lru.len(),
                capacity: lru.capacity,
                approx_bytes: lru.len() * BYTES_PER_ENTRY,
            },
            None => IndexStats {
                entries: 0,
                capacity: 0,
                approx_bytes: 0,
            },
        }
    }

    /// Distinct hashes held by any endpoint.
    pub fn distinct_hashes(&self) -> usize {
        self.holders.len()
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        let mut total = 0;
        for (slot, lru) in self.lrus.iter().enumerate() {
            let Some(lru) = lru else { continue };
            assert!(lru.len() <= lru.capacity);
            for h in lru.hashes() {
                let holder = self.holders.get(&h).unwrap().find(slot as u32).unwrap();
                assert_eq!(lru.hash_of(holder.node), Some(h));
                total += 1;
            }
        }
        let held: usize = self.holders.values().map(|h| h.as_slice().len()).sum();
        assert_eq!(held, total);
    }
}

fn forget_holder(holders: &mut HolderMap, hash: u64, slot: u32) {
    if let Some(hs) = holders.get_mut(&hash) {
        if hs.remove(slot) {
            holders.remove(&hash);
        }
    }
}

#[cfg(test)]
mod tests;
