//! The gateway replicas of a run: several infergate processes behind one Kubernetes Service,
//! each deciding alone.
//!
//! Each [`Gateway`] holds what one infergate process holds for a pool and does not share: its
//! own pool view, with its own in-flight counters and dispatch credit (the requests it sent
//! since the last scrape); its own picker, with its own prefix index, latency model, cold-start
//! LRU, rotation and random stream; and, in scenarios with priority bands, its own flow
//! controller and queue. What they do share is what they scrape from the model servers: every
//! scrape of a replica is installed into every gateway's pool at the same moment.
//!
//! Invariant: nothing else passes between gateways. A request is picked, dispatched, credited,
//! learned from and completed at the gateway it was dealt to, and only there.
//!
//! Arrivals are dealt to the gateways at random from a seed of their own, each arrival on its
//! own: a Service balances connections, not requests, so which replica a request meets is not
//! a rotation the gateways could rely on. (Clients that keep one connection for many requests
//! would stick to one replica; that is not modelled.) With one gateway nothing is drawn, and a
//! run is exactly the run of a single gateway.

use crate::gate::FlowGate;
use crate::replica::Oracle;
use infergate_picker::{Picker, Pool};
use infergate_rng::SplitMix64;
use serde::Serialize;
use std::time::Duration;

/// Mixed into the run's seed for the deal, so that it draws from no stream that anything else
/// draws from.
const DEAL_SEED: u64 = 0x6A7E_D0A1_0000_0000;

/// One gateway replica as the runner holds it.
pub(crate) struct Gateway {
    /// The replicas it scrapes, by index: the whole fleet, or in a multi-cluster run one
    /// cluster's (`crate::global`). Its pool holds no replica outside them.
    pub replicas: std::ops::Range<usize>,
    /// This gateway's view of the pool: the fleet's scrapes, its own counters.
    pub pool: Pool,
    /// What chooses each request's replica.
    pub chooser: Chooser,
    /// `Some` when the scenario runs flow control.
    pub gate: Option<FlowGate>,
    /// The flow-control deadline event pending in the heap for this gateway's gate, if any.
    pub gate_wake: Option<Duration>,
}

/// What chooses a gateway's replicas: a picker over its scraped view of the pool, or an oracle
/// that reads the engines' true state instead.
pub(crate) enum Chooser {
    /// Boxed: a picker is large and an oracle a byte, and a run holds one per gateway.
    Picker(Box<Picker>),
    Oracle(Oracle),
}

/// What one gateway replica saw and learned in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GatewayOutcome {
    /// Arrivals dealt to it.
    pub arrivals: u64,
    /// Distinct block hashes in its prefix index at the end of the run (0 without a picker).
    pub prefix_index_hashes: u64,
}

impl Gateway {
    /// Its picker; `None` where an oracle chooses.
    pub fn picker(&self) -> Option<&Picker> {
        match &self.chooser {
            Chooser::Picker(p) => Some(p),
            Chooser::Oracle(_) => None,
        }
    }

    /// Its picker, to update; `None` where an oracle chooses.
    pub fn picker_mut(&mut self) -> Option<&mut Picker> {
        match &mut self.chooser {
            Chooser::Picker(p) => Some(p),
            Chooser::Oracle(_) => None,
        }
    }

    /// What this gateway saw: `arrivals` were dealt to it.
    pub fn outcome(&self, arrivals: u64) -> GatewayOutcome {
        GatewayOutcome {
            arrivals,
            prefix_index_hashes: self.picker().map_or(0, |p| p.prefix_index_hashes() as u64),
        }
    }
}

/// The seed of gateway `gateway`'s picker: the run's own seed for the first, so that one
/// gateway is the single gateway of before, and a stream apart for each other.
pub(crate) fn picker_seed(seed: u64, gateway: usize) -> u64 {
    seed ^ (gateway as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Which of `gateways` gateways each of `arrivals` arrivals reaches, in arrival order: drawn at
/// random from `seed`, or all the first when there is one.
pub(crate) fn deal(arrivals: usize, gateways: usize, seed: u64) -> Vec<u32> {
    if gateways <= 1 {
        return vec![0; arrivals];
    }
    let mut rng = SplitMix64::new(seed ^ DEAL_SEED);
    (0..arrivals).map(|_| rng.below(gateways) as u32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gateway_takes_every_arrival_and_draws_nothing() {
        assert_eq!(deal(5, 1, 7), vec![0; 5]);
        assert_eq!(picker_seed(7, 0), 7);
    }

    #[test]
    fn arrivals_are_dealt_at_random_evenly_and_replayably() {
        let a = deal(40_000, 4, 3);
        assert_eq!(a, deal(40_000, 4, 3), "a seed replays its deal");
        assert_ne!(a, deal(40_000, 4, 4), "another seed deals otherwise");
        let mut shares = [0usize; 4];
        for &g in &a {
            shares[g as usize] += 1;
        }
        for s in shares {
            assert!((9_500..10_500).contains(&s), "{shares:?}");
        }
        // Not a rotation: some arrival meets the same gateway as the one before it.
        assert!(a.windows(2).any(|w| w[0] == w[1]));
    }

    #[test]
    fn every_gateway_has_a_picker_seed_of_its_own() {
        let seeds: std::collections::BTreeSet<u64> = (0..8).map(|g| picker_seed(1, g)).collect();
        assert_eq!(seeds.len(), 8);
    }
}
