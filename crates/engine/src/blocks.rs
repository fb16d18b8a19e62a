//! The KV block pool with prefix caching, after vLLM V1's `BlockPool`.
//!
//! Invariants:
//! - every block is either referenced (`ref_count > 0`) or on the free list, never both;
//! - the free list is in eviction order: allocation takes from the head; a block whose last
//!   reference goes is appended at the tail, so recently used blocks are evicted last;
//! - `cached` maps a content hash to the one block holding it; a block on the free list may still
//!   be cached (its content is intact until it is handed out again), and taking it from the free
//!   list for a new allocation evicts its hash.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A block's position in the pool.
pub type BlockId = u32;

/// A full block's content hash, chained over all blocks before it.
pub type BlockHash = u64;

const NIL: u32 = u32::MAX;

/// Block hashes are already uniformly mixed 64-bit values, so the map uses them as they are
/// instead of hashing them again (SipHash was a tenth of the simulator's time).
#[derive(Debug, Default, Clone, Copy)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type HashIndex = HashMap<BlockHash, BlockId, BuildHasherDefault<IdentityHasher>>;

#[derive(Debug, Clone)]
struct Block {
    ref_count: u32,
    hash: Option<BlockHash>,
    prev: u32,
    next: u32,
}

/// A fixed pool of KV blocks with an LRU free list and a content-hash index.
#[derive(Debug, Clone)]
pub struct BlockPool {
    blocks: Vec<Block>,
    head: u32,
    tail: u32,
    free: u32,
    cached: HashIndex,
    caching: bool,
}

impl BlockPool {
    /// A pool of `num_blocks` free blocks. With `caching` off no hash is ever kept.
    pub fn new(num_blocks: u32, caching: bool) -> BlockPool {
        let mut pool = BlockPool {
            blocks: Vec::with_capacity(num_blocks as usize),
            head: NIL,
            tail: NIL,
            free: 0,
            cached: HashIndex::with_capacity_and_hasher(
                if caching { num_blocks as usize } else { 0 },
                BuildHasherDefault::default(),
            ),
            caching,
        };
        for id in 0..num_blocks {
            pool.blocks.push(Block {
                ref_count: 0,
                hash: None,
                prev: NIL,
                next: NIL,
            });
            pool.push_tail(id);
        }
        pool
    }

    /// Blocks in the pool.
    pub fn capacity(&self) -> u32 {
        self.blocks.len() as u32
    }

    /// Blocks on the free list (some may still hold cached content).
    pub fn free_blocks(&self) -> u32 {
        self.free
    }

    /// Blocks referenced by at least one request.
    pub fn used_blocks(&self) -> u32 {
        self.capacity() - self.free
    }

    /// Hashes with a block behind them.
    pub fn cached_blocks(&self) -> usize {
        self.cached.len()
    }

    /// How many leading `hashes` are cached, and how many of those sit on the free list (and so
    /// would leave it when touched).
    pub fn longest_cached_prefix(&self, hashes: &[BlockHash]) -> (usize, u32) {
        if !self.caching {
            return (0, 0);
        }
        let mut on_free_list = 0;
        for (i, hash) in hashes.iter().enumerate() {
            match self.cached.get(hash) {
                Some(&id) => {
                    if self.blocks[id as usize].ref_count == 0 {
                        on_free_list += 1;
                    }
                }
                None => return (i, on_free_list),
            }
        }
        (hashes.len(), on_free_list)
    }

    /// Takes a reference on the cached blocks of `hashes` (all must be cached, as
    /// [`BlockPool::longest_cached_prefix`] reported) and appends their ids to `out`.
    pub fn touch(&mut self, hashes: &[BlockHash], out: &mut Vec<BlockId>) {
        for hash in hashes {
            let Some(&id) = self.cached.get(hash) else {
                debug_assert!(false, "touch of an uncached hash");
                continue;
            };
            if self.blocks[id as usize].ref_count == 0 {
                self.unlink(id);
            }
            self.blocks[id as usize].ref_count += 1;
            out.push(id);
        }
    }

    /// Hands out `n` blocks from the head of the free list, evicting their cached content, and
    /// appends them to `out`. Returns false (and changes nothing) when fewer than `n` are free.
    pub fn allocate(&mut self, n: u32, out: &mut Vec<BlockId>) -> bool {
        if n > self.free {
            return false;
        }
        for _ in 0..n {
            let id = self.head;
            self.unlink(id);
            let block = &mut self.blocks[id as usize];
            if let Some(hash) = block.hash.take() {
                if self.cached.get(&hash) == Some(&id) {
                    self.cached.remove(&hash);
                }
            }
            block.ref_count = 1;
            out.push(id);
        }
        true
    }

    /// Records that block `id` is full and holds the content `hash`. If another block already
    /// holds that content this one stays unhashed (vLLM keeps the first copy).
    pub fn cache_full_block(&mut self, id: BlockId, hash: BlockHash) {
        if !self.caching || self.blocks[id as usize].hash.is_some() {
            return;
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = self.cached.entry(hash) {
            slot.insert(id);
            self.blocks[id as usize].hash = Some(hash);
        }
    }

    /// Drops one reference on each of a request's blocks, last block first, so that the tail of
    /// a finished sequence is evicted before its (more shareable) head.
    pub fn free_request(&mut self, blocks: &[BlockId]) {
        for &id in blocks.iter().rev() {
            let block = &mut self.blocks[id as usize];
            debug_assert!(block.ref_count > 0, "double free of block {id}");
            block.ref_count = block.ref_count.saturating_sub(1);
            if block.ref_count == 0 {
                self.push_tail(id);
            }
        }
    }

    fn push_tail(&mut self, id: BlockId) {
        let block = &mut self.blocks[id as usize];
        block.prev = self.tail;
        block.next = NIL;
        if self.tail == NIL {
            self.head = id;
        } else {
            self.blocks[self.tail as usize].next = id;
        }
        self.tail = id;
        self.free += 1;
    }

    fn unlink(&mut self, id: BlockId) {
        let Block { prev, next, .. } = self.blocks[id as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.blocks[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.blocks[next as usize].prev = prev;
        }
        self.blocks[id as usize].prev = NIL;
        self.blocks[id as usize].next = NIL;
        self.free -= 1;
    }

    /// Walks the free list and checks every invariant; for tests.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut seen = 0;
        let mut id = self.head;
        let mut prev = NIL;
        while id != NIL {
            let block = &self.blocks[id as usize];
            assert_eq!(block.ref_count, 0, "referenced block {id} on the free list");
            assert_eq!(block.prev, prev);
            prev = id;
            id = block.next;
            seen += 1;
        }
        assert_eq!(seen, self.free);
        let referenced = self.blocks.iter().filter(|b| b.ref_count > 0).count() as u32;
        assert_eq!(referenced + self.free, self.capacity());
        for (hash, &id) in &self.cached {
            assert_eq!(self.blocks[id as usize].hash, Some(*hash));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_cached_prefix_is_found_and_shared() {
        let mut pool = BlockPool::new(8, true);
        let mut a = Vec::new();
        assert!(pool.allocate(3, &mut a));
        for (i, &id) in a.iter().enumerate() {
            pool.cache_full_block(id, 100 + i as u64);
        }
        assert_eq!(pool.longest_cached_prefix(&[100, 101, 999]), (2, 0));
        let mut b = Vec::new();
        pool.touch(&[100, 101], &mut b);
        assert_eq!(b, a[..2]);
        assert_eq!(pool.used_blocks(), 3);
        pool.check_invariants();
    }

    #[test]
    fn freed_blocks_are_evicted_last_block_first() {
        let mut pool = BlockPool::new(4, true);
        let mut req = Vec::new();
        assert!(pool.allocate(4, &mut req));
        for (i, &id) in req.iter().enumerate() {
            pool.cache_full_block(id, i as u64);
        }
        pool.free_request(&req);
        // Still cached after the free: the whole prefix hits, all four on the free list.
        assert_eq!(pool.longest_cached_prefix(&[0, 1, 2, 3]), (4, 4));
        let mut one = Vec::new();
        assert!(pool.allocate(1, &mut one));
        assert_eq!(one, vec![req[3]], "the last block is evicted first");
        assert_eq!(pool.longest_cached_prefix(&[0, 1, 2, 3]), (3, 3));
        pool.check_invariants();
    }

    #[test]
    fn allocation_fails_whole_when_short() {
        let mut pool = BlockPool::new(2, true);
        let mut out = Vec::new();
        assert!(!pool.allocate(3, &mut out));
        assert!(out.is_empty());
        assert_eq!(pool.free_blocks(), 2);
    }

    #[test]
    fn without_caching_nothing_hits() {
        let mut pool = BlockPool::new(2, false);
        let mut out = Vec::new();
        assert!(pool.allocate(1, &mut out));
        pool.cache_full_block(out[0], 7);
        assert_eq!(pool.longest_cached_prefix(&[7]), (0, 0));
    }

    #[test]
    fn a_shared_block_returns_to_the_free_list_only_with_its_last_reference() {
        let mut pool = BlockPool::new(3, true);
        let mut a = Vec::new();
        assert!(pool.allocate(1, &mut a));
        pool.cache_full_block(a[0], 5);
        let mut b = Vec::new();
        pool.touch(&[5], &mut b);
        pool.free_request(&a);
        assert_eq!(pool.free_blocks(), 2);
        pool.free_request(&b);
        assert_eq!(pool.free_blocks(), 3);
        pool.check_invariants();
    }

    proptest! {
        #[test]
        fn invariants_hold_under_random_use(ops in proptest::collection::vec((0u8..4, 0u64..12, 1u32..4), 1..200)) {
            let mut pool = BlockPool::new(16, true);
            let mut live: Vec<Vec<BlockId>> = Vec::new();
            for (op, key, n) in ops {
                match op {
                    0 => {
                        let mut blocks = Vec::new();
                        if pool.allocate(n, &mut blocks) {
                            for (i, &id) in blocks.iter().enumerate() {
                                pool.cache_full_block(id, key * 10 + i as u64);
                            }
                            live.push(blocks);
                        }
                    }
                    1 if !live.is_empty() => {
                        let blocks = live.swap_remove(key as usize % live.len());
                        pool.free_request(&blocks);
                    }
                    _ => {
                        let hashes: Vec<u64> = (0..u64::from(n)).map(|i| key * 10 + i).collect();
                        let (hit, _) = pool.longest_cached_prefix(&hashes);
                        let mut blocks = Vec::new();
                        pool.touch(&hashes[..hit], &mut blocks);
                        live.push(blocks);
                    }
                }
                pool.check_invariants();
            }
        }
    }
}
