//! Drives one engine through a list of arrivals in virtual time, the way a load generator
//! would, and records what each request saw. Used by the fidelity tests and the speed benchmark;
//! the fleet benchmark has its own runner with routing in it.

use crate::engine::{Engine, Event, EventKind, NewRequest};
use std::collections::VecDeque;
use std::time::Duration;

/// One request of a workload and when the client wants to send it.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// When the client wants to send it.
    pub at: Duration,
    /// The request.
    pub request: NewRequest,
}

/// What one request saw, from the client's side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestRecord {
    /// When it was actually sent (later than its arrival if the client was at its cap).
    pub sent: Duration,
    /// When its first token arrived.
    pub first_token: Option<Duration>,
    /// When it finished.
    pub finished: Option<Duration>,
    /// Tokens generated.
    pub output_tokens: u32,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u32,
    /// Times it was preempted.
    pub preemptions: u32,
}

impl RequestRecord {
    /// Time to first token.
    pub fn ttft(&self) -> Option<Duration> {
        self.first_token.map(|t| t - self.sent)
    }

    /// Mean time per output token after the first.
    pub fn tpot(&self) -> Option<Duration> {
        let (first, done) = (self.first_token?, self.finished?);
        let gaps = self.output_tokens.checked_sub(1).filter(|&n| n > 0)?;
        Some((done - first) / gaps)
    }
}

/// Everything a run recorded.
#[derive(Debug, Clone, Default)]
pub struct RunRecord {
    /// One record per arrival, in arrival order.
    pub requests: Vec<RequestRecord>,
    /// Every gap between consecutive tokens of a request, in seconds (needs the engine's
    /// `report_every_token`).
    pub itl: Vec<f64>,
    /// When the last request finished.
    pub end: Duration,
}

/// Sends `arrivals` (sorted by time) to `engine`, never more than `max_in_flight` at once (a
/// closed loop when every arrival is at zero), and runs until all finish or `until` passes.
/// Requests the engine refuses are recorded with no first token.
pub fn run(
    engine: &mut Engine,
    arrivals: Vec<Arrival>,
    max_in_flight: usize,
    until: Duration,
) -> RunRecord {
    run_sending_until(engine, arrivals, max_in_flight, Duration::MAX, until)
}

/// [`run`], with a client that sends nothing at or after `stop_sending` and waits for what it
/// sent: a load generator's phase bounded by time rather than by a request count (AIPerf's
/// `duration` with a grace period). A request never sent keeps its default record: sent at
/// zero, no first token, never finished.
pub fn run_sending_until(
    engine: &mut Engine,
    arrivals: Vec<Arrival>,
    max_in_flight: usize,
    stop_sending: Duration,
    until: Duration,
) -> RunRecord {
    let mut record = RunRecord {
        requests: vec![RequestRecord::default(); arrivals.len()],
        ..RunRecord::default()
    };
    let mut index_of: std::collections::HashMap<crate::RequestId, usize> =
        std::collections::HashMap::new();
    let mut last_token: Vec<Duration> = vec![Duration::ZERO; arrivals.len()];
    let mut pending: VecDeque<(usize, Arrival)> = arrivals.into_iter().enumerate().collect();
    let mut held: VecDeque<(usize, Arrival)> = VecDeque::new();
    let mut in_flight = 0usize;
    let mut events: Vec<Event> = Vec::new();
    let cap = max_in_flight.max(1);
    loop {
        let next_arrival = pending.front().map(|(_, a)| a.at);
        let wake = engine.next_wakeup();
        let now = match (next_arrival, wake) {
            (Some(a), Some(w)) => a.min(w),
            (Some(a), None) => a,
            (None, Some(w)) => w,
            (None, None) => break,
        };
        if now > until {
            break;
        }
        if next_arrival == Some(now) {
            if let Some(item) = pending.pop_front() {
                held.push_back(item);
            }
        } else {
            events.clear();
            engine.advance(now, &mut events);
            for event in &events {
                let Some(&i) = index_of.get(&event.id) else {
                    continue;
                };
                let r = &mut record.requests[i];
                match &event.kind {
                    EventKind::Token { index } => {
                        if *index == 0 {
                            r.first_token = Some(event.at);
                        } else {
                            record.itl.push((event.at - last_token[i]).as_secs_f64());
                        }
                        last_token[i] = event.at;
                    }
                    EventKind::Preempted => r.preemptions += 1,
                    EventKind::Finished { usage, .. } => {
                        r.finished = Some(event.at);
                        r.output_tokens = usage.completion_tokens;
                        r.cached_tokens = usage.cached_tokens;
                        record.end = record.end.max(event.at);
                        in_flight -= 1;
                    }
                }
            }
        }
        while in_flight < cap && now < stop_sending {
            let Some((i, arrival)) = held.pop_front() else {
                break;
            };
            record.requests[i].sent = now;
            if let Ok(id) = engine.submit(now, arrival.request) {
                index_of.insert(id, i);
                in_flight += 1;
            }
        }
    }
    record
}

/// The median of `values`: the middle value of an odd count, the mean of the middle two of an
/// even one (never one of the two alone, which would tilt every even-sized group the same way);
/// NaN when empty.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        0.5 * (values[mid - 1] + values[mid])
    }
}

/// The `q`-quantile (0..=1) of `values` by nearest rank; `None` when empty.
pub fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&mut [0.185, 0.615]), 0.4);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn quantile_is_nearest_rank() {
        let mut v = vec![4.0, 1.0, 3.0, 2.0];
        assert_eq!(quantile(&mut v, 0.5), Some(2.0));
        assert_eq!(quantile(&mut v, 1.0), Some(4.0));
        assert_eq!(quantile(&mut v, 0.0), Some(1.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }
}
