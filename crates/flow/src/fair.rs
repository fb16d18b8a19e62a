//! One band's queue: a FIFO per tenant, and fair sharing among the tenants that have something
//! queued, by self-clocked weighted fair queueing with a cost of one per request.
//!
//! Every backlogged tenant carries the virtual finish tag of its head request; the tenant with
//! the smallest tag (then the earliest-set tag) is served, the band's virtual time becomes that
//! tag, and the tenant's next head gets `tag + step`, with `step = SCALE / weight`. A tenant
//! that becomes backlogged starts one step past the band's virtual time. With every weight 1
//! this is round-robin: each backlogged tenant in turn, a newcomer at the end of the round.
//!
//! Invariants, kept by every method here:
//! - every backlogged tenant's tag lies in `[vtime, vtime + its step]`; so between two services
//!   of a backlogged tenant `i`, another tenant `j` is served at most `⌈w_j / w_i⌉ + 1` times
//!   (round-robin: at most once), which bounds how long any tenant can be passed over;
//! - a tenant is in `order` exactly when its FIFO is non-empty, and an empty tenant is dropped,
//!   so memory follows what is queued, never how many tenants were ever seen;
//! - within a tenant, requests leave in the order they arrived (or are removed out of it).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::RequestId;

/// Virtual time of one request at weight 1. Large enough that `SCALE / weight` loses nothing
/// that matters for any `u32` weight.
const SCALE: u128 = 1 << 48;

#[derive(Debug)]
struct TenantQueue {
    items: VecDeque<RequestId>,
    tag: u128,
    seq: u64,
    step: u128,
}

/// The queue of one band.
#[derive(Debug, Default)]
pub(crate) struct FairQueue {
    tenants: HashMap<Arc<str>, TenantQueue>,
    order: BTreeSet<(u128, u64, Arc<str>)>,
    vtime: u128,
    seq: u64,
}

impl FairQueue {
    /// Queues `id` behind `tenant`'s earlier requests.
    pub fn push(&mut self, tenant: &Arc<str>, id: RequestId, weight: u32) {
        if let Some(t) = self.tenants.get_mut(tenant) {
            t.items.push_back(id);
            return;
        }
        let step = SCALE / u128::from(weight.max(1));
        let tag = self.vtime + step;
        self.seq += 1;
        self.order.insert((tag, self.seq, Arc::clone(tenant)));
        self.tenants.insert(
            Arc::clone(tenant),
            TenantQueue {
                items: VecDeque::from([id]),
                tag,
                seq: self.seq,
                step,
            },
        );
    }

    /// Takes the head of the tenant whose turn it is.
    pub fn pop(&mut self) -> Option<RequestId> {
        let (tag, seq, tenant) = self.order.pop_first()?;
        self.vtime = tag;
        let Some(t) = self.tenants.get_mut(&tenant) else {
            // `order` and `tenants` hold the same tenants; nothing to serve if they ever differ.
            return None;
        };
        debug_assert_eq!((t.tag, t.seq), (tag, seq));
        let id = t.items.pop_front();
        if t.items.is_empty() {
            self.tenants.remove(&tenant);
        } else {
            t.tag += t.step;
            self.seq += 1;
            t.seq = self.seq;
            self.order.insert((t.tag, t.seq, tenant));
        }
        id
    }

    /// Removes `id` of `tenant` wherever it waits; whether it was queued. The tenant keeps its
    /// place in the round.
    pub fn remove(&mut self, tenant: &Arc<str>, id: RequestId) -> bool {
        let Some(t) = self.tenants.get_mut(tenant) else {
            return false;
        };
        // Expiry removes the oldest and eviction the newest, so look from both ends.
        let at = if t.items.front() == Some(&id) {
            Some(0)
        } else {
            t.items.iter().rposition(|&x| x == id)
        };
        let Some(at) = at else {
            return false;
        };
        t.items.remove(at);
        if t.items.is_empty() {
            let key = (t.tag, t.seq, Arc::clone(tenant));
            self.order.remove(&key);
            self.tenants.remove(tenant);
        }
        true
    }

    /// Tenants with something queued.
    #[cfg(test)]
    pub fn tenants(&self) -> usize {
        self.tenants.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    fn drain(q: &mut FairQueue, n: usize) -> Vec<RequestId> {
        (0..n).filter_map(|_| q.pop()).collect()
    }

    #[test]
    fn equal_weights_take_turns_and_a_newcomer_joins_the_end_of_the_round() {
        let mut q = FairQueue::default();
        let (a, b, c) = (key("a"), key("b"), key("c"));
        for i in 0..3 {
            q.push(&a, i, 1);
        }
        for i in 10..13 {
            q.push(&b, i, 1);
        }
        assert_eq!(q.pop(), Some(0));
        q.push(&c, 20, 1);
        assert_eq!(drain(&mut q, 7), vec![10, 1, 20, 11, 2, 12]);
        assert_eq!(q.tenants(), 0);
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn weights_set_the_shares_and_fifo_holds_within_a_tenant() {
        let mut q = FairQueue::default();
        let (a, b) = (key("a"), key("b"));
        for i in 0..40 {
            q.push(&a, i, 3);
            q.push(&b, 100 + i, 1);
        }
        let out = drain(&mut q, 40);
        let from_a: Vec<_> = out.iter().copied().filter(|&i| i < 100).collect();
        assert_eq!(from_a.len(), 30);
        assert!(from_a.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn removal_keeps_the_round_and_drops_an_emptied_tenant() {
        let mut q = FairQueue::default();
        let (a, b) = (key("a"), key("b"));
        q.push(&a, 1, 1);
        q.push(&a, 2, 1);
        q.push(&b, 3, 1);
        assert!(q.remove(&a, 1));
        assert!(!q.remove(&a, 1));
        assert!(q.remove(&b, 3));
        assert_eq!(q.tenants(), 1);
        assert_eq!(drain(&mut q, 3), vec![2]);
    }
}
