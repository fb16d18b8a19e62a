//! One endpoint's LRU of block hashes: a doubly linked list in a slab, no per-entry allocation.
//!
//! The list does not own a hash → node map; the index's holder lists point at nodes, so a hash
//! held by several endpoints costs one map entry, not one per endpoint.

pub(crate) const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    hash: u64,
    prev: u32,
    next: u32,
}

/// Invariant: the list from `head` (most recent) to `tail` (least recent) visits exactly `len`
/// nodes; every node not in it is in `free`.
#[derive(Debug)]
pub(crate) struct EndpointLru {
    nodes: Vec<Node>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    len: usize,
    pub(crate) capacity: usize,
}

impl EndpointLru {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            len: 0,
            capacity,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Moves `node` to the most-recent end.
    pub(crate) fn touch(&mut self, node: u32) {
        if self.head == node {
            return;
        }
        self.unlink(node);
        self.push_front(node);
    }

    /// Adds `hash` as the most recent entry and returns its node. The caller evicts first when
    /// full; this never evicts by itself.
    pub(crate) fn push(&mut self, hash: u64) -> u32 {
        let node = match self.free.pop() {
            Some(n) => {
                if let Some(slot) = self.nodes.get_mut(n as usize) {
                    slot.hash = hash;
                }
                n
            }
            None => {
                self.nodes.push(Node {
                    hash,
                    prev: NIL,
                    next: NIL,
                });
                (self.nodes.len() - 1) as u32
            }
        };
        self.push_front(node);
        self.len += 1;
        node
    }

    /// Removes and returns the least recent hash.
    pub(crate) fn pop_oldest(&mut self) -> Option<u64> {
        let tail = self.tail;
        let hash = self.nodes.get(tail as usize)?.hash;
        self.unlink(tail);
        self.free.push(tail);
        self.len -= 1;
        Some(hash)
    }

    /// Every hash held, most recent first.
    pub(crate) fn hashes(&self) -> impl Iterator<Item = u64> + '_ {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            let node = self.nodes.get(cur as usize)?;
            cur = node.next;
            Some(node.hash)
        })
    }

    #[cfg(test)]
    pub(crate) fn hash_of(&self, node: u32) -> Option<u64> {
        self.nodes.get(node as usize).map(|n| n.hash)
    }

    fn unlink(&mut self, node: u32) {
        let Some(&Node { prev, next, .. }) = self.nodes.get(node as usize) else {
            return;
        };
        match self.nodes.get_mut(prev as usize) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.nodes.get_mut(next as usize) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }

    fn push_front(&mut self, node: u32) {
        let old_head = self.head;
        if let Some(n) = self.nodes.get_mut(node as usize) {
            n.prev = NIL;
            n.next = old_head;
        }
        match self.nodes.get_mut(old_head as usize) {
            Some(h) => h.prev = node,
            None => self.tail = node,
        }
        self.head = node;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recent_first_and_touch_refreshes() {
        let mut lru = EndpointLru::new(3);
        let a = lru.push(1);
        lru.push(2);
        lru.push(3);
        lru.touch(a);
        assert_eq!(lru.hashes().collect::<Vec<_>>(), vec![1, 3, 2]);
        assert_eq!(lru.pop_oldest(), Some(2));
        assert_eq!(lru.pop_oldest(), Some(3));
        let d = lru.push(4);
        assert_eq!(lru.hash_of(d), Some(4));
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.pop_oldest(), Some(1));
        assert_eq!(lru.pop_oldest(), Some(4));
        assert_eq!(lru.pop_oldest(), None);
        assert_eq!(lru.len(), 0);
    }
}
