//! The flow controller of one pool: admit, queue, dispatch, expire and shed.
//!
//! It holds no clock: every call is told the time as a `Duration` since an origin of the caller's
//! choosing (one origin per controller), so the live gateway and the virtual-time runner drive
//! the same code. The caller's loop:
//!
//! - [`FlowController::enqueue`] each arriving request; [`Admission::DispatchNow`] goes on at
//!   once, [`Admission::Queued`] waits for a decision;
//! - [`FlowController::observe`] each new pool state (when metrics land);
//! - [`FlowController::on_complete`] each dispatched request that finished, however it ended;
//! - [`FlowController::poll`] after each of those calls and at [`FlowController::next_deadline`],
//!   and act on every [`Decision`] it returns.
//!
//! Invariants (each public method keeps them; the property tests check them):
//! - strict priority: a request is dispatched only while no request of a higher band waits, and
//!   never ahead of a queued request of its own band;
//! - a band dispatches only while the pool, credited with the requests dispatched and completed
//!   since the last observation, is below the band's ceiling (the detector's, by default
//!   [`ceiling`](crate::ceiling); read against [`PoolState::headroom_against`], which leaves
//!   KV-cache use out for Standard while the pool is not overloaded when the overload rule's
//!   `kv_only_in_overload` says so) — or while nothing current is known about the pool (no
//!   observation, one older than `state_max_age`, or no fresh endpoint), when flow control fails
//!   open;
//! - queued requests and bytes never exceed their band's caps nor the global caps;
//! - no queued request outlives its deadline past the first `poll` at or after it;
//! - a Sheddable request is refused (429, `rejected-saturated`) exactly when its band cannot
//!   dispatch because the pool is saturated; Critical is refused only when the queues are full
//!   even after displacing every lower-band request, or when its TTL runs out;
//! - with the overload rule ([`crate::Overload`]), no request below Critical is refused with
//!   429, `rejected-overloaded`, before it has waited the overload wait and the pool reads as
//!   overloaded: with the sojourn sensor (the default), not before some request below Critical
//!   has waited at least the wait for another wait (twice the wait in all), or within the
//!   interval after an earlier such refusal; with the backlog sensor, not before its band has
//!   been backlogged (never empty) for the interval. With the sojourn sensor no request below
//!   Critical is still queued after a `poll` at which it has waited twice the wait. With the
//!   backlog sensor none is still queued after the first `poll` past its cut, unless the rule
//!   holds while a backlog drains (`Overload::hold_while_draining`) and what is queued in its
//!   band and above drains within the wait at the pool's completion rate; and none, held or
//!   not, after the first `poll` at which the band has been backlogged for the interval and the
//!   request has waited twice the wait;
//! - the pool counts as overloaded (for reading KV-cache use and the decode pace for Standard)
//!   while the sensor says so (the sojourn sensor: from the moment the oldest request below
//!   Critical has waited past the wait without a break for another wait, until no band below
//!   Critical has held a request for the interval; the backlog sensor: while a band below
//!   Critical has been backlogged for the interval), while every Sheddable request has been
//!   refused for saturation for the interval (the latest within it), and for the interval after
//!   the overload rule refuses a request.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use infergate_config::gateway::{Band, OverloadSensor};

use crate::config::{band_index, FlowConfig, Overload};
use crate::decision::{Admission, Decision, DropReason, Outcome, Rejection, RequestId};
use crate::drain::DrainRate;
use crate::fair::FairQueue;
use crate::saturation::PoolState;

/// A request asking to be admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRequest {
    /// The caller's id for it; unique among the requests queued.
    pub id: RequestId,
    /// Its priority band.
    pub band: Band,
    /// Its tenant; requests naming none share one anonymous tenant.
    pub tenant: Option<String>,
    /// Its size, for the byte caps (the request body).
    pub bytes: u64,
}

/// A misuse of the controller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// The id is already queued.
    #[error("request {0} is already queued")]
    DuplicateId(RequestId),
}

/// What is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueLength {
    /// Requests.
    pub requests: usize,
    /// Their bytes.
    pub bytes: u64,
}

#[derive(Debug)]
struct Entry {
    band: Band,
    tenant: Arc<str>,
    bytes: u64,
    enqueued_at: Duration,
    deadline: Duration,
}

#[derive(Debug, Default)]
struct BandQueue {
    fair: FairQueue,
    /// Queued requests by deadline; with one TTL per band, also by arrival.
    by_deadline: BTreeSet<(Duration, RequestId)>,
    len: QueueLength,
    /// Since when the queue has held a request without emptying; `None` while empty.
    backlogged_since: Option<Duration>,
}

#[derive(Debug, Clone, Copy)]
struct Observed {
    state: PoolState,
    at: Duration,
}

/// Flow control of one pool. See the module documentation for the loop that drives it.
#[derive(Debug)]
pub struct FlowController {
    config: FlowConfig,
    entries: HashMap<RequestId, Entry>,
    bands: [BandQueue; 3],
    total: QueueLength,
    observed: Option<Observed>,
    /// Requests dispatched minus requests completed since the last observation.
    credit: i64,
    drain: DrainRate,
    /// Decisions made outside `poll` (requests displaced by `enqueue`), handed out by the next.
    outbox: Vec<Decision>,
    /// Since when every Sheddable request has been refused for saturation, and the latest such
    /// refusal; `None` once a Sheddable request is let in. Sheddable is refused rather than
    /// queued, so its queue never shows the pressure a backlog would.
    sheddable_refused: Option<(Duration, Duration)>,
    /// When the overload rule last refused a request. The refusal can empty the queue that made
    /// the pool read as overloaded while the servers are as full as they were, so the overload
    /// lasts an interval past it.
    last_overload_refusal: Option<Duration>,
    /// Since when the oldest request queued below Critical has waited at least the overload
    /// wait without a break: what the sojourn sensor reads. Kept while the rule has refused a
    /// request within the interval, and while the overload it started lasts and a band below
    /// Critical has held a request within the interval; `None` otherwise.
    overdue_since: Option<Duration>,
    /// Since when no band below Critical has held a request, as the sojourn sensor last read the
    /// queues; `None` while one holds a request.
    below_critical_empty_since: Option<Duration>,
}

impl FlowController {
    /// A controller with nothing queued and nothing known about the pool.
    pub fn new(config: FlowConfig) -> Self {
        Self {
            config,
            entries: HashMap::new(),
            bands: Default::default(),
            total: QueueLength::default(),
            observed: None,
            credit: 0,
            drain: DrainRate::default(),
            outbox: Vec::new(),
            sheddable_refused: None,
            last_overload_refusal: None,
            overdue_since: None,
            below_critical_empty_since: Some(Duration::ZERO),
        }
    }

    /// Its settings.
    pub fn config(&self) -> &FlowConfig {
        &self.config
    }

    /// Admits `req` at `now`: dispatch now, queue, or refuse. Queueing may displace lower-band
    /// requests from a full queue; the next [`Self::poll`] reports them.
    pub fn enqueue(&mut self, req: FlowRequest, now: Duration) -> Result<Admission, FlowError> {
        if self.entries.contains_key(&req.id) {
            return Err(FlowError::DuplicateId(req.id));
        }
        self.sense(now);
        let b = band_index(req.band);
        let nothing_ahead = self.bands[..=b].iter().all(|q| q.len.requests == 0);
        if !self.config.enabled || (nothing_ahead && self.below_ceiling(req.band, now)) {
            self.credit += 1;
            self.let_in(req.band);
            return Ok(Admission::DispatchNow);
        }
        if req.band == Band::Sheddable && !self.below_ceiling(req.band, now) {
            self.note_sheddable_refused(now);
            return Ok(Admission::Rejected(self.refusal(
                DropReason::Saturated,
                req.band,
                now,
            )));
        }
        let limits = *self.config.band(req.band);
        let band_len = self.bands[b].len;
        let over_band = band_len.requests + 1 > limits.max_queue_requests as usize
            || band_len.bytes.saturating_add(req.bytes) > limits.max_queue_bytes;
        if over_band || !self.make_room(req.band, req.bytes, now) {
            return Ok(Admission::Rejected(self.refusal(
                DropReason::QueueFull,
                req.band,
                now,
            )));
        }
        let deadline = now + limits.queue_ttl;
        let tenant: Arc<str> = Arc::from(req.tenant.as_deref().unwrap_or(""));
        let weight = self.config.weight(&tenant);
        let q = &mut self.bands[b];
        q.backlogged_since.get_or_insert(now);
        q.fair.push(&tenant, req.id, weight);
        q.by_deadline.insert((deadline, req.id));
        q.len.requests += 1;
        q.len.bytes += req.bytes;
        self.total.requests += 1;
        self.total.bytes += req.bytes;
        self.entries.insert(
            req.id,
            Entry {
                band: req.band,
                tenant,
                bytes: req.bytes,
                enqueued_at: now,
                deadline,
            },
        );
        Ok(Admission::Queued { deadline })
    }

    /// Makes room under the global caps for one more request of `band` with `bytes`, displacing
    /// the newest requests of the lowest bands below it; whether it fits. Displaces nothing when
    /// even displacing every lower-band request would not make it fit.
    fn make_room(&mut self, band: Band, bytes: u64, now: Duration) -> bool {
        let max_requests = self.config.max_queue_requests as usize;
        let max_bytes = self.config.max_queue_bytes;
        let fits = |t: QueueLength| {
            t.requests < max_requests && t.bytes.saturating_add(bytes) <= max_bytes
        };
        if fits(self.total) {
            return true;
        }
        let lower = &self.bands[band_index(band) + 1..];
        let freeable = QueueLength {
            requests: lower.iter().map(|q| q.len.requests).sum(),
            bytes: lower.iter().map(|q| q.len.bytes).sum(),
        };
        let after = QueueLength {
            requests: self.total.requests - freeable.requests,
            bytes: self.total.bytes - freeable.bytes,
        };
        if !fits(after) {
            return false;
        }
        while !fits(self.total) {
            let victim = self.bands[band_index(band) + 1..]
                .iter()
                .rev()
                .find_map(|q| q.by_deadline.last().map(|&(_, id)| id));
            let Some(id) = victim else {
                return false;
            };
            if let Some(e) = self.unlink(id, true) {
                let rejection = self.refusal(DropReason::Displaced, e.band, now);
                self.outbox.push(Decision {
                    id,
                    band: e.band,
                    waited: now.saturating_sub(e.enqueued_at),
                    outcome: Outcome::Reject(rejection),
                });
            }
        }
        true
    }

    /// Installs what is now known about the pool. Dispatch credit restarts from here, since the
    /// observation reflects what was dispatched and completed before it.
    pub fn observe(&mut self, state: PoolState, now: Duration) {
        self.observed = Some(Observed { state, at: now });
        self.credit = 0;
        self.sense(now);
    }

    /// A dispatched request finished (answered, failed or abandoned): its capacity is free.
    pub fn on_complete(&mut self, now: Duration) {
        self.credit -= 1;
        self.drain.record(now);
        self.sense(now);
    }

    /// Removes a queued request without a decision (its client went away); whether it was
    /// queued.
    pub fn cancel(&mut self, id: RequestId) -> bool {
        self.unlink(id, true).is_some()
    }

    /// Expires, dispatches and sheds what is due at `now`, returning every decision made since
    /// the last call.
    pub fn poll(&mut self, now: Duration) -> Vec<Decision> {
        let mut out = std::mem::take(&mut self.outbox);
        // Closes the drain rate's window, so a pool that stopped finishing reads as draining
        // slowly when the overload rule asks.
        self.drain.per_sec(now);
        self.sense(now);
        for b in 0..self.bands.len() {
            while let Some(&(deadline, id)) = self.bands[b].by_deadline.first() {
                if deadline > now {
                    break;
                }
                self.reject(id, DropReason::TtlExpired, now, &mut out);
            }
        }
        for band in Band::ALL {
            let b = band_index(band);
            while self.bands[b].len.requests > 0 && self.below_ceiling(band, now) {
                let Some(id) = self.bands[b].fair.pop() else {
                    break;
                };
                if let Some(e) = self.unlink(id, false) {
                    self.credit += 1;
                    self.let_in(band);
                    out.push(Decision {
                        id,
                        band,
                        waited: now.saturating_sub(e.enqueued_at),
                        outcome: Outcome::Dispatch,
                    });
                }
            }
            if self.bands[b].len.requests > 0 {
                // Strict priority: nothing below a band that still waits goes out.
                break;
            }
        }
        let shed = band_index(Band::Sheddable);
        if self.bands[shed].len.requests > 0 && !self.below_ceiling(Band::Sheddable, now) {
            self.note_sheddable_refused(now);
            while let Some(&(_, id)) = self.bands[shed].by_deadline.first() {
                self.reject(id, DropReason::Saturated, now, &mut out);
            }
        }
        // After dispatch, so a request that can go now goes, however long it waited.
        for band in [Band::Standard, Band::Sheddable] {
            while let Some(id) = self.overdue_in_overload(band, now) {
                self.reject(id, DropReason::Overloaded, now, &mut out);
                self.last_overload_refusal = Some(now);
            }
        }
        // What was dispatched or refused changed the oldest waiting request.
        self.sense(now);
        out
    }

    /// Whether the pool is overloaded at `now`: the sensor says so (the sojourn sensor: the
    /// oldest request below Critical has waited past the overload wait without a break for
    /// another overload wait, and a band below Critical has held a request within the interval,
    /// see [`Self::sense`]; the backlog sensor: a band below Critical has not been empty for the
    /// overload interval), every Sheddable request has been refused for saturation for the
    /// interval and one was refused within it, or the overload rule refused a request within the
    /// interval.
    fn overloaded(&self, now: Duration) -> bool {
        let Some(rule) = self.config.overload else {
            return false;
        };
        let backlogged = match rule.sensor {
            OverloadSensor::Sojourn => self.sojourn_overloaded(rule, now),
            OverloadSensor::Backlog => [Band::Standard, Band::Sheddable].into_iter().any(|b| {
                self.bands[band_index(b)]
                    .backlogged_since
                    .is_some_and(|since| since + rule.interval <= now)
            }),
        };
        let shedding = self.sheddable_refused.is_some_and(|(since, last)| {
            since + rule.interval <= now && now < last + rule.interval
        });
        backlogged || shedding || self.refused_lately(rule, now)
    }

    /// Whether the overload rule refused a request within the interval before `now`.
    fn refused_lately(&self, rule: Overload, now: Duration) -> bool {
        self.last_overload_refusal
            .is_some_and(|at| now < at + rule.interval)
    }

    /// Whether the sojourn sensor's overload holds at `now`: it has set in and a band below
    /// Critical has held a request within the interval.
    fn sojourn_overloaded(&self, rule: Overload, now: Duration) -> bool {
        self.overdue_long_enough(rule, now) && self.queued_lately(rule, now)
    }

    /// Whether a band below Critical holds a request at `now`, or held one within the interval
    /// before it, as the sojourn sensor last read the queues.
    fn queued_lately(&self, rule: Overload, now: Duration) -> bool {
        self.below_critical_empty_since
            .is_none_or(|since| now < since + rule.interval)
    }

    /// Whether the sojourn sensor reads the pool as overloaded at `now`: the oldest request
    /// below Critical has been past the overload wait for another overload wait.
    fn overdue_long_enough(&self, rule: Overload, now: Duration) -> bool {
        self.overdue_since
            .is_some_and(|since| since + rule.max_wait <= now)
    }

    /// Brings the sojourn sensor up to `now`. Called by every method that changes the queues,
    /// the observation or the clock, so the oldest request's wait is read at each change.
    ///
    /// The sensor reads how long requests wait, not whether they wait: the gateway holds a
    /// burst at the servers' queue threshold, and that queue stays non-empty for seconds while
    /// each request in it waits a fraction of one (the backlog sensor read it as overload, and
    /// refused what the servers would have answered in time). Once the oldest request below
    /// Critical has waited the overload wait, arrivals have outrun the pool for that long; when
    /// that has lasted another overload wait, the pool is overloaded. It stays so until no band
    /// below Critical has held a request for the interval: the rule's refusals keep the waits
    /// just under the overload wait, and reading that as the end of the overload would let the
    /// servers' batches refill. Nor does one empty moment end it: a pool that the overload's
    /// reading of KV-cache use and the decode pace lets catch up empties its queue between two
    /// arrivals, and ending the overload there let the batches refill at once (mixed-gpu-32b at
    /// 120 % read as overloaded for 175 s of 300, in five episodes, with goodput under the
    /// TTFT + TPOT objective below round-robin's; docs/benchmarks.md).
    fn sense(&mut self, now: Duration) {
        let Some(rule) = self
            .config
            .overload
            .filter(|r| r.sensor == OverloadSensor::Sojourn)
        else {
            return;
        };
        let below_critical = [Band::Standard, Band::Sheddable];
        let queued = below_critical
            .iter()
            .any(|&b| self.bands[band_index(b)].len.requests > 0);
        self.below_critical_empty_since = if queued {
            None
        } else {
            self.below_critical_empty_since.or(Some(now))
        };
        if self.sojourn_overloaded(rule, now) {
            return;
        }
        // When the oldest request crossed the overload wait, if it has.
        let crossed = below_critical
            .iter()
            .filter_map(|&b| self.oldest_wait(b, now))
            .max()
            .and_then(|w| w.checked_sub(rule.max_wait))
            .map(|past| now.saturating_sub(past));
        let refused_lately = self.refused_lately(rule, now);
        self.overdue_since = match (self.overdue_since, crossed) {
            (Some(since), Some(_)) => Some(since),
            (None, Some(at)) => Some(at),
            (since, None) if refused_lately => Some(since.unwrap_or(now)),
            (_, None) => None,
        };
    }

    /// A Sheddable request was refused for saturation at `now`.
    fn note_sheddable_refused(&mut self, now: Duration) {
        let since = match self.sheddable_refused {
            // A pause longer than the interval since the last refusal starts the count again.
            Some((since, last)) if self.config.overload.is_none_or(|r| now < last + r.interval) => {
                since
            }
            _ => now,
        };
        self.sheddable_refused = Some((since, now));
    }

    /// A request of `band` was let in.
    fn let_in(&mut self, band: Band) {
        if band == Band::Sheddable {
            self.sheddable_refused = None;
        }
    }

    /// The oldest request of `band` if the band is overloaded at `now` and that request has
    /// waited its overload wait.
    fn overdue_in_overload(&self, band: Band, now: Duration) -> Option<RequestId> {
        self.overload_cut(band)
            .filter(|&(at, _)| at <= now)
            .map(|(_, id)| id)
    }

    /// `band`'s oldest request and when the overload rule refuses it if nothing else happens
    /// first: once the pool reads as overloaded (the sojourn sensor: a request below Critical
    /// has waited past the overload wait for another overload wait, this one at the latest
    /// when it has waited twice the wait; the backlog sensor: the band's queue has not been
    /// empty for the interval) and the request has waited its overload wait. `None` for
    /// Critical, without the rule, or with nothing queued.
    ///
    /// With one TTL per band, the first request by deadline is also the oldest by arrival.
    fn overload_cut(&self, band: Band) -> Option<(Duration, RequestId)> {
        let rule = self.config.overload.filter(|_| band != Band::Critical)?;
        let q = &self.bands[band_index(band)];
        let &(_, id) = q.by_deadline.first()?;
        let oldest = self.entries.get(&id)?;
        let onset = match rule.sensor {
            OverloadSensor::Sojourn => {
                self.overdue_since
                    .unwrap_or(oldest.enqueued_at + rule.max_wait)
                    + rule.max_wait
            }
            OverloadSensor::Backlog => q.backlogged_since? + rule.interval,
        };
        let cut = onset.max(oldest.enqueued_at + rule.max_wait);
        // A queue that the pool drains within the overload wait is a burst passing, not
        // arrivals outrunning the pool: refusing its head would turn a wait of a little over
        // `max_wait` into a miss. Held, the head waits at most twice the wait.
        let at = if rule.hold_while_draining && self.clears_within(band, rule.max_wait) {
            cut.max(oldest.enqueued_at + 2 * rule.max_wait)
        } else {
            cut
        };
        Some((at, id))
    }

    /// Whether the requests queued in `band` and the bands above it drain within `wait` at the
    /// pool's completion rate (false while that rate is unknown).
    fn clears_within(&self, band: Band, wait: Duration) -> bool {
        let rate = self.drain.last_rate();
        rate > 0.0 && self.queued_up_to(band) as f64 <= rate * wait.as_secs_f64()
    }

    /// Requests queued in `band` and the bands above it: those a request of `band` waits behind.
    fn queued_up_to(&self, band: Band) -> usize {
        self.bands[..=band_index(band)]
            .iter()
            .map(|q| q.len.requests)
            .sum()
    }

    fn reject(
        &mut self,
        id: RequestId,
        reason: DropReason,
        now: Duration,
        out: &mut Vec<Decision>,
    ) {
        let Some(e) = self.unlink(id, true) else {
            return;
        };
        let retry_after = (reason.status() == 429).then(|| self.retry_after(e.band, now));
        out.push(Decision {
            id,
            band: e.band,
            waited: now.saturating_sub(e.enqueued_at),
            outcome: Outcome::Reject(Rejection {
                reason,
                retry_after,
            }),
        });
    }

    /// Removes `id` from every index; `from_fair` when the fair queue still holds it.
    fn unlink(&mut self, id: RequestId, from_fair: bool) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        let q = &mut self.bands[band_index(e.band)];
        if from_fair {
            q.fair.remove(&e.tenant, id);
        }
        q.by_deadline.remove(&(e.deadline, id));
        q.len.requests -= 1;
        q.len.bytes -= e.bytes;
        if q.len.requests == 0 {
            q.backlogged_since = None;
        }
        self.total.requests -= 1;
        self.total.bytes -= e.bytes;
        Some(e)
    }

    /// The earliest time at which [`Self::poll`] has something new to decide without any other
    /// call: a queue TTL running out, the overload rule's cut, or the pool observation going
    /// stale (which opens the gates); `None` when nothing waits.
    pub fn next_deadline(&self) -> Option<Duration> {
        let ttl = self
            .bands
            .iter()
            .filter_map(|q| q.by_deadline.first().map(|&(d, _)| d))
            .chain(
                Band::ALL
                    .into_iter()
                    .filter_map(|b| self.overload_cut(b).map(|(at, _)| at)),
            )
            .min();
        let stale = self
            .observed
            .filter(|o| o.state.is_known() && !self.entries.is_empty())
            .map(|o| o.at + self.config.state_max_age);
        match (ttl, stale) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether a request of `band` would be dispatched at `now` if nothing were queued ahead of
    /// it: flow control is off, nothing current is known about the pool, or the pool with its
    /// credit is below the band's ceiling.
    pub fn below_ceiling(&self, band: Band, now: Duration) -> bool {
        if !self.config.enabled {
            return true;
        }
        // Read only for Standard (`PoolState::headroom_against`).
        let kv_ignored =
            self.config.overload.is_some_and(|o| o.kv_only_in_overload) && !self.overloaded(now);
        match self.current(now) {
            None => true,
            Some(state) => state.headroom_against(band, kv_ignored) > self.credit as f64,
        }
    }

    /// The last observation, if it is current at `now` and knows something.
    fn current(&self, now: Duration) -> Option<&PoolState> {
        self.observed
            .as_ref()
            .filter(|o| now.saturating_sub(o.at) < self.config.state_max_age)
            .map(|o| &o.state)
            .filter(|s| s.is_known())
    }

    /// The Retry-After of a 429 to a request of `band`: the requests ahead of it (queued in its
    /// band and above, and waiting in the model servers) over the pool's drain rate.
    fn retry_after(&mut self, band: Band, now: Duration) -> Duration {
        let queued = self.queued_up_to(band);
        let waiting = self.current(now).map_or(0.0, |s| s.waiting);
        self.drain.retry_after(queued as f64 + waiting, now)
    }

    fn refusal(&mut self, reason: DropReason, band: Band, now: Duration) -> Rejection {
        Rejection {
            reason,
            retry_after: Some(self.retry_after(band, now)),
        }
    }

    /// The last pool state observed, current or not; `None` before the first observation.
    pub fn last_observed(&self) -> Option<&PoolState> {
        self.observed.as_ref().map(|o| &o.state)
    }

    /// What is queued in `band`.
    pub fn queued(&self, band: Band) -> QueueLength {
        self.bands[band_index(band)].len
    }

    /// What is queued over all bands.
    pub fn total_queued(&self) -> QueueLength {
        self.total
    }

    /// How long the oldest request of `band` has waited at `now`; `None` when none waits.
    pub fn oldest_wait(&self, band: Band, now: Duration) -> Option<Duration> {
        let (_, id) = self.bands[band_index(band)].by_deadline.first()?;
        let e = self.entries.get(id)?;
        Some(now.saturating_sub(e.enqueued_at))
    }

    /// Completions per second as of `now`.
    pub fn drain_rate(&mut self, now: Duration) -> f64 {
        self.drain.per_sec(now)
    }
}
