//! Faults a replica can be told to show: injected errors, crashes and restarts, hangs, a slow
//! GPU, and a `/metrics` endpoint that lies or never answers.
//!
//! [`Faults`] is the settings (the body of `POST /sim/faults`); [`FaultState`] applies them to the
//! requests as they arrive.

use bytes::Bytes;
use infergate_engine::tokens::mix;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Longest delay a fault may name (about four months): longer ones would overflow a clock.
const MAX_SECS: f64 = 1e7;

fn check_secs(name: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && (0.0..=MAX_SECS).contains(&v) {
        Ok(())
    } else {
        Err(format!(
            "{name} must be between 0 and {MAX_SECS} seconds, got {v}"
        ))
    }
}

/// What `/metrics` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricsFault {
    /// Answers with the current figures.
    #[default]
    Ok,
    /// Keeps answering with the figures of the moment the fault began.
    Stale,
    /// Accepts the scrape and never answers.
    Hang,
}

/// How a crashed replica comes back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restart {
    /// Seconds the port stays closed after the crash (connections are refused).
    pub down_secs: f64,
    /// Seconds after the port reopens during which `/health` answers 503 and requests are
    /// refused, as while a real server loads its weights.
    pub startup_secs: f64,
}

/// The faults a replica shows. Every field defaults to "no fault", so `{}` heals a replica and a
/// `POST /sim/faults` body names only what it breaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Share of inference requests answered with each HTTP status instead, for example
    /// `{"503": 0.05, "500": 0.01, "429": 0.02}`. Statuses 400–599; shares sum to at most 1.
    pub error_rates: BTreeMap<u16, f64>,
    /// Crash when inference request number N + 1 (counted from when the faults were set)
    /// arrives: the port closes and open connections are reset.
    pub crash_after_requests: Option<u64>,
    /// Crash this many seconds after the faults were set.
    pub crash_after_secs: Option<f64>,
    /// After a crash, come back with a fresh engine (cold cache, only the start-up adapters);
    /// without it the replica stays down. A restarted replica has no crash trigger armed.
    pub restart: Option<Restart>,
    /// Accept inference requests and never answer them.
    pub hang: bool,
    /// Step-time multiplier (thermal throttling, a noisy neighbour); 1 is normal speed.
    pub slowdown: f64,
    /// What `/metrics` does.
    pub metrics: MetricsFault,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            error_rates: BTreeMap::new(),
            crash_after_requests: None,
            crash_after_secs: None,
            restart: None,
            hang: false,
            slowdown: 1.0,
            metrics: MetricsFault::Ok,
        }
    }
}

impl Faults {
    /// Checks the values, naming the field that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let mut total = 0.0;
        for (&status, &rate) in &self.error_rates {
            if !(400..=599).contains(&status) {
                return Err(format!(
                    "error_rates: status {status} is not an HTTP error (400-599)"
                ));
            }
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!(
                    "error_rates: rate {rate} for {status} is not within 0..1"
                ));
            }
            total += rate;
        }
        if total > 1.0 + 1e-9 {
            return Err(format!(
                "error_rates: the rates sum to {total}, more than 1"
            ));
        }
        if let Some(secs) = self.crash_after_secs {
            check_secs("crash_after_secs", secs)?;
        }
        if let Some(r) = self.restart {
            check_secs("restart.down_secs", r.down_secs)?;
            check_secs("restart.startup_secs", r.startup_secs)?;
        }
        if !(self.slowdown.is_finite() && (0.01..=1000.0).contains(&self.slowdown)) {
            return Err(format!(
                "slowdown must be between 0.01 and 1000, got {}",
                self.slowdown
            ));
        }
        Ok(())
    }

    /// The same faults without their crash triggers: what a restarted replica runs with.
    pub(crate) fn after_restart(&self) -> Faults {
        Faults {
            crash_after_requests: None,
            crash_after_secs: None,
            ..self.clone()
        }
    }
}

/// What the fault settings make of one inference request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestFault {
    /// Serve it.
    None,
    /// Answer with this HTTP status.
    Error(u16),
    /// Never answer.
    Hang,
    /// The replica crashes now.
    Crash,
}

#[derive(Debug)]
struct Active {
    faults: Faults,
    set_at: Instant,
    requests: u64,
    /// The `/metrics` body frozen when a `Stale` fault began.
    stale_metrics: Option<Bytes>,
}

/// Fault settings shared by a replica's connections and its lifecycle loop.
#[derive(Debug)]
pub(crate) struct FaultState {
    active: Mutex<Active>,
    seed: u64,
    draws: AtomicU64,
    /// Wakes the lifecycle loop: a crash is due or the crash triggers changed.
    pub(crate) changed: Notify,
}

impl FaultState {
    pub(crate) fn new(faults: Faults, seed: u64) -> FaultState {
        FaultState {
            active: Mutex::new(Active {
                faults,
                set_at: Instant::now(),
                requests: 0,
                stale_metrics: None,
            }),
            seed,
            draws: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Active> {
        // A panic while holding this lock cannot leave the settings half-written (every write
        // is a plain assignment), so a poisoned lock is still good to read.
        self.active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The current settings.
    pub(crate) fn get(&self) -> Faults {
        self.lock().faults.clone()
    }

    /// Replaces the settings; request and time triggers count from now. Returns the previous
    /// settings.
    pub(crate) fn set(&self, faults: Faults, stale_metrics: Option<Bytes>) -> Faults {
        let previous = {
            let mut active = self.lock();
            let previous = std::mem::replace(&mut active.faults, faults);
            active.set_at = Instant::now();
            active.requests = 0;
            active.stale_metrics = stale_metrics;
            previous
        };
        self.changed.notify_one();
        previous
    }

    /// Decides the fate of an arriving inference request.
    pub(crate) fn on_request(&self) -> RequestFault {
        let mut active = self.lock();
        active.requests += 1;
        if active
            .faults
            .crash_after_requests
            .is_some_and(|n| active.requests > n)
        {
            drop(active);
            self.changed.notify_one();
            return RequestFault::Crash;
        }
        if active.faults.hang {
            return RequestFault::Hang;
        }
        if active.faults.error_rates.is_empty() {
            return RequestFault::None;
        }
        let draw = self.draws.fetch_add(1, Ordering::Relaxed);
        let u = (mix(self.seed ^ mix(draw)) >> 11) as f64 / (1u64 << 53) as f64;
        let mut edge = 0.0;
        for (&status, &rate) in &active.faults.error_rates {
            edge += rate;
            if u < edge {
                return RequestFault::Error(status);
            }
        }
        RequestFault::None
    }

    /// When the replica should crash, if a trigger has fired or is armed: `Some(now)` or earlier
    /// once due.
    pub(crate) fn crash_deadline(&self) -> Option<Instant> {
        let active = self.lock();
        let by_requests = active
            .faults
            .crash_after_requests
            .filter(|&n| active.requests > n)
            .map(|_| active.set_at);
        let by_time = active
            .faults
            .crash_after_secs
            .map(|s| active.set_at + Duration::from_secs_f64(s));
        match (by_requests, by_time) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How `/metrics` should answer, with the frozen body when stale.
    pub(crate) fn metrics(&self) -> (MetricsFault, Option<Bytes>) {
        let active = self.lock();
        (active.faults.metrics, active.stale_metrics.clone())
    }

    /// Freezes `body` as the stale `/metrics` answer if none is frozen yet.
    pub(crate) fn freeze_metrics(&self, body: Bytes) {
        let mut active = self.lock();
        if active.faults.metrics == MetricsFault::Stale && active.stale_metrics.is_none() {
            active.stale_metrics = Some(body);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_body_means_no_fault() {
        let faults: Faults = serde_json::from_str("{}").unwrap();
        assert_eq!(faults, Faults::default());
        assert_eq!(faults.validate(), Ok(()));
    }

    #[test]
    fn error_rates_parse_by_status_and_are_checked() {
        let faults: Faults =
            serde_json::from_str(r#"{"error_rates": {"503": 0.05, "500": 0.01}}"#).unwrap();
        assert_eq!(faults.error_rates.get(&503), Some(&0.05));
        assert_eq!(faults.validate(), Ok(()));
        let bad: Faults = serde_json::from_str(r#"{"error_rates": {"200": 0.5}}"#).unwrap();
        assert!(bad.validate().unwrap_err().contains("error_rates"));
        let over: Faults =
            serde_json::from_str(r#"{"error_rates": {"500": 0.6, "503": 0.6}}"#).unwrap();
        assert!(over.validate().is_err());
        assert!(serde_json::from_str::<Faults>(r#"{"explode": true}"#).is_err());
        let forever: Faults = serde_json::from_str(r#"{"crash_after_secs": 1e300}"#).unwrap();
        assert!(forever.validate().unwrap_err().contains("crash_after_secs"));
        let stopped: Faults = serde_json::from_str(r#"{"slowdown": 0}"#).unwrap();
        assert!(stopped.validate().unwrap_err().contains("slowdown"));
    }

    #[test]
    fn injected_errors_come_at_about_the_asked_rate() {
        let mut faults = Faults::default();
        faults.error_rates.insert(503, 0.2);
        let state = FaultState::new(faults, 7);
        let errors = (0..10_000)
            .filter(|_| state.on_request() == RequestFault::Error(503))
            .count();
        assert!((1_800..2_200).contains(&errors), "{errors}");
    }

    #[test]
    fn the_crash_comes_with_request_n_plus_one() {
        let faults = Faults {
            crash_after_requests: Some(2),
            ..Faults::default()
        };
        let state = FaultState::new(faults, 0);
        assert_eq!(state.on_request(), RequestFault::None);
        assert_eq!(state.on_request(), RequestFault::None);
        assert!(state.crash_deadline().is_none());
        assert_eq!(state.on_request(), RequestFault::Crash);
        assert!(state.crash_deadline().is_some());
    }
}
