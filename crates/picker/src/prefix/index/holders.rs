//! The map from block hash to the endpoints holding it, split into shards so that growing it
//! never stops a request for long.
//!
//! One hashbrown table grows by doubling, and a doubling rehashes every entry while the caller
//! waits: at 5,000 endpoints the index holds millions of hashes, and one such doubling
//! inside a dispatch took 1.7 s in `infergate bench --picker` — under the pool's picker lock, so
//! every request of the pool waited with it. Here the hashes are spread over [`SHARDS`] tables by
//! their top bits (block hashes are xxh64 outputs, uniform in every bit), each growing on its own,
//! so one growth rehashes about `1 / SHARDS` of the index. A lookup costs one more load, of a shard
//! header from an array of 32 KiB that stays in cache. (4,096 shards made the dispatch's median
//! slower at 5,000 endpoints, probably as their 128 KiB of headers compete for the cache, and
//! stalled no less: what is left of the slowest dispatch is, most likely, the allocator committing
//! fresh memory.)

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// A holder of a hash: which endpoint slot, and where the hash sits in that slot's LRU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Holder {
    pub(super) slot: u32,
    pub(super) node: u32,
}

/// Holders of one hash, sorted by slot. Most hashes have one holder, which costs no allocation.
#[derive(Debug)]
pub(super) enum Holders {
    One(Holder),
    Many(Vec<Holder>),
}

impl Holders {
    pub(super) fn as_slice(&self) -> &[Holder] {
        match self {
            Holders::One(h) => std::slice::from_ref(h),
            Holders::Many(v) => v,
        }
    }

    pub(super) fn find(&self, slot: u32) -> Option<Holder> {
        let s = self.as_slice();
        s.binary_search_by_key(&slot, |h| h.slot)
            .ok()
            .and_then(|i| s.get(i).copied())
    }

    pub(super) fn insert(&mut self, holder: Holder) {
        match self {
            Holders::One(one) => {
                let one = *one;
                let mut v = vec![one, holder];
                v.sort_unstable_by_key(|h| h.slot);
                *self = Holders::Many(v);
            }
            Holders::Many(v) => {
                let at = v.partition_point(|h| h.slot < holder.slot);
                v.insert(at, holder);
            }
        }
    }

    /// Removes `slot`; returns whether no holder is left.
    pub(super) fn remove(&mut self, slot: u32) -> bool {
        match self {
            Holders::One(one) => one.slot == slot,
            Holders::Many(v) => {
                if let Ok(i) = v.binary_search_by_key(&slot, |h| h.slot) {
                    v.remove(i);
                }
                if let [last] = v.as_slice() {
                    let last = *last;
                    *self = Holders::One(last);
                    return false;
                }
                v.is_empty()
            }
        }
    }
}

/// Hasher for keys that are already xxh64 outputs: one multiply and a fold, instead of SipHash.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct MixState;

pub(super) struct MixHasher(u64);

const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

impl BuildHasher for MixState {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher(0)
    }
}

impl Hasher for MixHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(MIX);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(MIX);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// Tables the map is split into. A power of two; the shard is the hash's top bits.
pub(super) const SHARDS: usize = 1024;

const SHARD_SHIFT: u32 = u64::BITS - SHARDS.trailing_zeros();

/// Block hash → holders, in [`SHARDS`] independently growing tables (see the module docs).
///
/// Invariant: a hash lives only in shard `shard_of(hash)`.
#[derive(Debug)]
pub(super) struct HolderMap {
    shards: Vec<HashMap<u64, Holders, MixState>>,
}

impl Default for HolderMap {
    fn default() -> Self {
        Self {
            // Empty tables allocate nothing: only the headers are paid for up front.
            shards: (0..SHARDS).map(|_| HashMap::default()).collect(),
        }
    }
}

fn shard_of(hash: u64) -> usize {
    (hash >> SHARD_SHIFT) as usize
}

impl HolderMap {
    fn shard(&self, hash: u64) -> Option<&HashMap<u64, Holders, MixState>> {
        self.shards.get(shard_of(hash))
    }

    pub(super) fn get(&self, hash: &u64) -> Option<&Holders> {
        self.shard(*hash)?.get(hash)
    }

    pub(super) fn get_mut(&mut self, hash: &u64) -> Option<&mut Holders> {
        self.shards.get_mut(shard_of(*hash))?.get_mut(hash)
    }

    pub(super) fn contains_key(&self, hash: &u64) -> bool {
        self.shard(*hash).is_some_and(|s| s.contains_key(hash))
    }

    /// Inserts `hash`, replacing its entry if it has one.
    pub(super) fn insert(&mut self, hash: u64, holders: Holders) {
        if let Some(shard) = self.shards.get_mut(shard_of(hash)) {
            shard.insert(hash, holders);
        }
    }

    pub(super) fn remove(&mut self, hash: &u64) {
        if let Some(shard) = self.shards.get_mut(shard_of(*hash)) {
            shard.remove(hash);
        }
    }

    /// Distinct hashes held: a walk over the shards, for statistics, not the request path.
    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(HashMap::len).sum()
    }

    /// The largest number of entries any one shard holds: what one growth rehashes at most.
    #[cfg(test)]
    pub(super) fn largest_shard(&self) -> usize {
        self.shards.iter().map(HashMap::len).max().unwrap_or(0)
    }

    #[cfg(test)]
    pub(super) fn values(&self) -> impl Iterator<Item = &Holders> {
        self.shards.iter().flat_map(HashMap::values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_rng::SplitMix64;

    fn one(slot: u32) -> Holders {
        Holders::One(Holder { slot, node: 0 })
    }

    #[test]
    fn uniform_hashes_spread_evenly_so_one_growth_rehashes_a_small_share() {
        let mut map = HolderMap::default();
        let mut rng = SplitMix64::new(5);
        let n = 200_000;
        for _ in 0..n {
            map.insert(rng.next_u64(), one(0));
        }
        assert_eq!(map.len(), n);
        // About 195 a shard on average; a shard is what one growth rehashes.
        let mean = n / SHARDS;
        assert!(map.largest_shard() <= 2 * mean, "{}", map.largest_shard());
    }

    #[test]
    fn lookups_reach_the_shard_of_each_hash_and_the_count_follows_changes() {
        let mut map = HolderMap::default();
        // Hashes whose top bits differ (first, last and a middle shard) and two that share one.
        let keys = [0, u64::MAX, 1 << 63, (1 << 63) | 7, 42 << SHARD_SHIFT];
        for (i, &k) in keys.iter().enumerate() {
            map.insert(k, one(i as u32));
        }
        assert_eq!(map.len(), keys.len());
        for (i, &k) in keys.iter().enumerate() {
            assert!(map.contains_key(&k));
            assert_eq!(map.get(&k).map(|h| h.as_slice()[0].slot), Some(i as u32));
        }
        assert!(!map.contains_key(&1));
        // Replacing an entry does not count it twice; removing an absent one changes nothing.
        map.insert(keys[2], one(9));
        assert_eq!(map.len(), keys.len());
        if let Some(h) = map.get_mut(&keys[2]) {
            h.insert(Holder { slot: 10, node: 1 });
        }
        assert_eq!(map.get(&keys[2]).map(|h| h.as_slice().len()), Some(2));
        map.remove(&keys[3]);
        map.remove(&keys[3]);
        map.remove(&12_345);
        assert_eq!(map.len(), keys.len() - 1);
        assert!(map.get(&keys[3]).is_none());
        assert!(map.get(&keys[2]).is_some());
        assert_eq!(map.values().count(), map.len());
    }
}
