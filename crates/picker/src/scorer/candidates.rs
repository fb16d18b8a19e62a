//! The candidates of one pick, stored column by column.
//!
//! Every filter and scorer is a pass over the candidates, and at thousands of endpoints the cost
//! of a pass is the memory it streams, not the arithmetic. Stored as one record per candidate, a
//! scorer that reads one signal would drag the whole record (64 bytes) through the cache; stored
//! as columns it reads 8 bytes per candidate, and the columns a pick touches fit in L2 at 5,000
//! endpoints. The buffers are kept by the picker and reused, so a pick allocates nothing that
//! grows with the fleet.
//!
//! Unknown signals are NaN in the columns and `None` through the accessors.

use crate::pool::{Pool, NEVER_SCRAPED};

/// Which endpoints of a pool are candidates.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Members<'a> {
    /// Every endpoint, in position order.
    All,
    /// The endpoints at these positions.
    Only(&'a [usize]),
}

/// Columns, all of the same length. Invariant: `keep` has that length too, and keeps every
/// candidate except between a filter narrowing it and [`Candidates::compact`].
#[derive(Debug, Default, Clone)]
pub(crate) struct Candidates {
    /// Position in the pool; ascending (candidates keep the pool's order).
    pub pos: Vec<u32>,
    /// The picker's slot for the endpoint's learned state.
    pub slot: Vec<u32>,
    /// When the last scrape landed (nanoseconds since the caller's epoch), or [`NEVER_SCRAPED`].
    pub scraped_ns: Vec<u64>,
    /// Waiting requests: scraped, plus the dispatch credit when the profile uses fresh load.
    pub waiting: Vec<f64>,
    /// Running requests (scraped).
    pub running: Vec<f64>,
    /// KV use in `0..=1` (scraped).
    pub kv: Vec<f64>,
    /// `1 / KV capacity in tokens` (scraped block size × blocks), 0 when unknown.
    pub kv_share_per_token: Vec<f64>,
    /// Requests this gateway has in flight there.
    pub in_flight: Vec<u32>,
    /// Prompt tokens this gateway has in flight there.
    pub in_flight_tokens: Vec<u64>,
    /// Prompt tokens dispatched since its last scrape and still in flight.
    pub token_credit: Vec<u32>,
    /// Uncached prompt tokens this gateway sent there that await their first token: prefill
    /// queued ahead of a new request.
    pub prefill_ahead: Vec<f64>,
    /// Prefix blocks of the request this endpoint probably holds.
    pub matched_blocks: Vec<u32>,
    /// Requests ahead of this one: the (fresh) scraped queue, or, when the server does not report
    /// one, what this gateway has in flight there. Filled by [`Candidates::derive`].
    pub queue_ahead: Vec<f64>,
    /// Prompt tokens probably not cached there. Filled by [`Candidates::derive`].
    pub uncached_tokens: Vec<f64>,
    /// Scraped signals withheld from scorers (every endpoint was stale; the filter failed open).
    pub hidden: bool,
    /// Which candidates the filters have kept so far.
    pub keep: Keep,
}

/// Which candidates the filters have kept so far, and how many.
#[derive(Debug, Default, Clone)]
pub(crate) struct Keep {
    bits: Vec<bool>,
    kept: usize,
}

impl Keep {
    fn reset(&mut self, n: usize) {
        self.bits.clear();
        self.bits.resize(n, true);
        self.kept = n;
    }

    /// Narrows the candidates still kept to those `pass()` accepts (one `bool` per candidate) —
    /// unless it accepts none of them, in which case nothing changes and it returns false (the
    /// filter fails open). In the common case, where every kept candidate passes, this is one
    /// pass that writes nothing; `pass` is called a second time only to drop some.
    pub(crate) fn narrow<I: Iterator<Item = bool>>(&mut self, pass: impl Fn() -> I) -> bool {
        let passing: usize = self
            .bits
            .iter()
            .zip(pass())
            .map(|(&k, p)| usize::from(k & p))
            .sum();
        if passing == 0 {
            return false;
        }
        if passing < self.kept {
            for (k, p) in self.bits.iter_mut().zip(pass()) {
                *k &= p;
            }
            self.kept = passing;
        }
        true
    }

    /// Whether candidate `i` is still kept.
    pub(crate) fn kept(&self, i: usize) -> bool {
        self.bits.get(i).copied().unwrap_or(false)
    }

    fn dropped_any(&self) -> bool {
        self.kept < self.bits.len()
    }
}

impl Candidates {
    /// Empties every column, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        self.pos.clear();
        self.slot.clear();
        self.scraped_ns.clear();
        self.waiting.clear();
        self.running.clear();
        self.kv.clear();
        self.kv_share_per_token.clear();
        self.in_flight.clear();
        self.in_flight_tokens.clear();
        self.token_credit.clear();
        self.prefill_ahead.clear();
        self.matched_blocks.clear();
        self.queue_ahead.clear();
        self.uncached_tokens.clear();
        self.keep.reset(0);
        self.hidden = false;
    }

    /// Number of candidates.
    pub(crate) fn len(&self) -> usize {
        self.pos.len()
    }

    /// Replaces the candidates with `members` of `pool`: their scraped signals are copied column
    /// by column, then their live counters are read once. With `fresh_load`, each waiting queue
    /// is credited with what was dispatched there since the scrape and is still in flight.
    /// `slot_of_pos` maps positions to the picker's slots.
    pub(crate) fn fill(
        &mut self,
        pool: &Pool,
        members: Members<'_>,
        slot_of_pos: &[u32],
        fresh_load: bool,
    ) {
        self.clear();
        let sig = pool.signal_columns();
        match members {
            Members::All => {
                let n = pool.len();
                self.pos.extend(0..n as u32);
                self.slot
                    .extend_from_slice(slot_of_pos.get(..n).unwrap_or(&[]));
                self.slot.resize(n, 0);
                self.scraped_ns.extend_from_slice(&sig.scraped_ns);
                self.waiting.extend_from_slice(&sig.waiting);
                self.running.extend_from_slice(&sig.running);
                self.kv.extend_from_slice(&sig.kv);
                self.kv_share_per_token
                    .extend_from_slice(&sig.kv_share_per_token);
            }
            Members::Only(positions) => {
                self.pos.extend(positions.iter().map(|&p| p as u32));
                gather(&mut self.slot, slot_of_pos, positions, 0);
                gather(
                    &mut self.scraped_ns,
                    &sig.scraped_ns,
                    positions,
                    NEVER_SCRAPED,
                );
                gather(&mut self.waiting, &sig.waiting, positions, f64::NAN);
                gather(&mut self.running, &sig.running, positions, f64::NAN);
                gather(&mut self.kv, &sig.kv, positions, f64::NAN);
                gather(
                    &mut self.kv_share_per_token,
                    &sig.kv_share_per_token,
                    positions,
                    0.0,
                );
            }
        }
        let n = self.pos.len();
        self.in_flight.resize(n, 0);
        self.in_flight_tokens.resize(n, 0);
        self.token_credit.resize(n, 0);
        self.prefill_ahead.resize(n, 0.0);
        self.matched_blocks.resize(n, 0);
        self.keep.reset(n);
        let counters = pool.all_counters();
        let rows = self
            .pos
            .iter()
            .zip(
                self.waiting
                    .iter_mut()
                    .zip(&self.running)
                    .zip(&mut self.prefill_ahead),
            )
            .zip(
                self.in_flight
                    .iter_mut()
                    .zip(self.in_flight_tokens.iter_mut().zip(&mut self.token_credit)),
            );
        for (
            (&pos, ((waiting, &running), prefill_ahead)),
            (in_flight, (in_flight_tokens, token_credit)),
        ) in rows
        {
            let (Some(c), Some(&mark)) = (counters.get(pos as usize), sig.marks.get(pos as usize))
            else {
                continue;
            };
            let local = c.load_since(mark);
            if fresh_load {
                *waiting = local.floored_waiting(*waiting, running);
            }
            *in_flight = u32::try_from(local.in_flight_requests).unwrap_or(u32::MAX);
            *in_flight_tokens = local.in_flight_tokens;
            *token_credit = u32::try_from(local.token_credit()).unwrap_or(u32::MAX);
            *prefill_ahead = count(local.prefill_pending_tokens);
        }
    }

    /// Withholds every scraped signal (the endpoints' metrics are stale).
    pub(crate) fn hide_metrics(&mut self) {
        self.hidden = true;
        for col in [
            &mut self.waiting,
            &mut self.running,
            &mut self.kv,
            &mut self.kv_share_per_token,
        ] {
            col.iter_mut().for_each(|x| *x = f64::NAN);
        }
    }

    /// Removes the candidates the filters dropped; free when none was.
    pub(crate) fn compact(&mut self) {
        if !self.keep.dropped_any() {
            return;
        }
        let keep = std::mem::take(&mut self.keep.bits);
        retain_by(&mut self.pos, &keep);
        retain_by(&mut self.slot, &keep);
        retain_by(&mut self.scraped_ns, &keep);
        retain_by(&mut self.waiting, &keep);
        retain_by(&mut self.running, &keep);
        retain_by(&mut self.kv, &keep);
        retain_by(&mut self.kv_share_per_token, &keep);
        retain_by(&mut self.in_flight, &keep);
        retain_by(&mut self.in_flight_tokens, &keep);
        retain_by(&mut self.token_credit, &keep);
        retain_by(&mut self.prefill_ahead, &keep);
        retain_by(&mut self.matched_blocks, &keep);
        self.keep.bits = keep;
        self.keep.reset(self.pos.len());
    }

    /// Fills the columns that depend on the prefix match: queue ahead and uncached tokens of a
    /// request of `prompt_tokens` tokens, with `block_tokens` tokens per matched block.
    pub(crate) fn derive(&mut self, prompt_tokens: u64, block_tokens: u64) {
        self.queue_ahead.clear();
        self.queue_ahead
            .extend(self.waiting.iter().zip(&self.in_flight).map(|(&w, &n)| {
                if w.is_nan() {
                    f64::from(n)
                } else {
                    w
                }
            }));
        // In floating point, which is exact for token counts (below 2^53) and keeps the loop free
        // of 64-bit integer conversions.
        let (prompt, block) = (prompt_tokens as f64, block_tokens as f64);
        self.uncached_tokens.clear();
        self.uncached_tokens.extend(
            self.matched_blocks
                .iter()
                .map(|&m| (prompt - f64::from(m) * block).max(0.0)),
        );
    }

    /// Waiting requests of candidate `i`, `None` when unknown.
    #[cfg(test)]
    pub(crate) fn waiting(&self, i: usize) -> Option<f64> {
        known(self.waiting.get(i))
    }

    /// KV use of candidate `i`, `None` when unknown.
    #[cfg(test)]
    pub(crate) fn kv(&self, i: usize) -> Option<f64> {
        known(self.kv.get(i))
    }
}

#[cfg(test)]
fn known(x: Option<&f64>) -> Option<f64> {
    x.copied().filter(|v| !v.is_nan())
}

/// A counter as a float. Through `i64`, which x86-64 converts in one instruction where `u64`
/// takes a sequence of six: this runs for every endpoint of every pick. Counters stay far below
/// 2^63, where both conversions are the same.
#[inline]
fn count(x: u64) -> f64 {
    i64::try_from(x).unwrap_or(i64::MAX) as f64
}

/// Appends `column[p]` for every `p` of `positions` (`default` where out of range).
fn gather<T: Copy>(out: &mut Vec<T>, column: &[T], positions: &[usize], default: T) {
    out.extend(
        positions
            .iter()
            .map(|&p| column.get(p).copied().unwrap_or(default)),
    );
}

fn retain_by<T>(v: &mut Vec<T>, keep: &[bool]) {
    // `retain` visits every element once, in order.
    let mut k = keep.iter();
    v.retain(|_| k.next().copied().unwrap_or(false));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{EndpointId, EndpointSpec, ScrapedMetrics};
    use std::time::Duration;

    fn pool() -> Pool {
        let specs = (0..4)
            .map(|i| EndpointSpec::new(i, format!("10.0.0.{i}:80")))
            .collect();
        let mut pool = Pool::new(specs).unwrap();
        for i in 0..3u64 {
            let m = ScrapedMetrics {
                waiting: Some(i),
                kv_usage: Some(0.25 * i as f64),
                ..ScrapedMetrics::empty(Duration::from_millis(i))
            };
            pool.update_metrics(EndpointId(i), m).unwrap();
        }
        pool
    }

    #[test]
    fn narrowing_keeps_columns_aligned_and_fails_open_when_nothing_passes() {
        let pool = pool();
        let mut c = Candidates::default();
        c.fill(&pool, Members::All, &[10, 11, 12, 13], false);
        let mut d = Candidates::default();
        d.fill(
            &pool,
            Members::Only(&[0, 1, 2, 3]),
            &[10, 11, 12, 13],
            false,
        );
        // Unknown is NaN, which is not equal to itself: compare what is printed.
        assert_eq!(format!("{c:?}"), format!("{d:?}"));
        assert_eq!(c.scraped_ns[3], NEVER_SCRAPED);
        let mask = |f: &dyn Fn(usize) -> bool| (0..4).map(f).collect::<Vec<bool>>();
        let busy = mask(&|i| c.waiting(i).is_some_and(|w| w > 5.0));
        let scraped = mask(&|i| c.scraped_ns[i] != NEVER_SCRAPED);
        let not_quarter = mask(&|i| c.kv(i) != Some(0.25));
        assert!(!c.keep.narrow(|| busy.iter().copied()));
        assert!(c.keep.narrow(|| scraped.iter().copied()));
        assert!(c.keep.narrow(|| not_quarter.iter().copied()));
        // Endpoint 3 passed the last test but was already out after the one before.
        c.compact();
        assert_eq!(c.pos, vec![0, 2]);
        assert_eq!(c.slot, vec![10, 12]);
        assert_eq!(c.waiting, vec![0.0, 2.0]);
        assert_eq!(c.kv, vec![0.0, 0.5]);
        assert_eq!(c.len(), c.matched_blocks.len());
        c.matched_blocks = vec![1, 0];
        let in_flight = c.in_flight.clone();
        c.hide_metrics();
        c.derive(100, 16);
        assert_eq!(c.uncached_tokens, vec![84.0, 100.0]);
        assert_eq!(
            c.queue_ahead,
            in_flight.iter().map(|&n| f64::from(n)).collect::<Vec<_>>()
        );
    }
}
