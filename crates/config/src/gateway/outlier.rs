//! `spec.schedulers[].outlierDetection`: when a pool's endpoints that keep failing are taken
//! out of its picks (an infergate addition). The decision itself is the picker's
//! (`infergate_picker::OutlierPolicy`); `docs/reliability.md` says what counts as a failure.

use std::time::Duration;

use super::defaults;
use super::duration::GatewayDuration;
use super::error::{invalid, GatewayConfigError};
use super::scheduler::OutlierDetection;
use super::setting::Setting;

/// `outlierDetection` with every default applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedOutlierDetection {
    /// Failed attempts in a row that eject; 0: off.
    pub consecutive_failures: Setting<u32>,
    /// First ejection.
    pub base_ejection_time: Setting<Duration>,
    /// Longest ejection.
    pub max_ejection_time: Setting<Duration>,
    /// Most of the pool ejected at once, percent.
    pub max_ejection_percent: Setting<u32>,
    /// Ramp back after an ejection; zero: none.
    pub slow_start_window: Setting<Duration>,
    /// Metrics unchanged this long after a request was sent are stale; zero: never.
    pub frozen_metrics_after: Setting<Duration>,
}

impl ResolvedOutlierDetection {
    /// Resolves `spec` (absent: every default).
    pub fn new(spec: Option<&OutlierDetection>) -> Self {
        let o = spec.cloned().unwrap_or_default();
        ResolvedOutlierDetection {
            consecutive_failures: Setting::or(
                o.consecutive_failures,
                defaults::OUTLIER_CONSECUTIVE_FAILURES,
            ),
            base_ejection_time: Setting::or(
                o.base_ejection_time.map(GatewayDuration::get),
                defaults::OUTLIER_BASE_EJECTION,
            ),
            max_ejection_time: Setting::or(
                o.max_ejection_time.map(GatewayDuration::get),
                defaults::OUTLIER_MAX_EJECTION,
            ),
            max_ejection_percent: Setting::or(
                o.max_ejection_percent,
                defaults::OUTLIER_MAX_EJECTION_PERCENT,
            ),
            slow_start_window: Setting::or(
                o.slow_start_window.map(GatewayDuration::get),
                defaults::OUTLIER_SLOW_START,
            ),
            frozen_metrics_after: Setting::or(
                o.frozen_metrics_after.map(GatewayDuration::get),
                defaults::OUTLIER_FROZEN_METRICS_AFTER,
            ),
        }
    }

    /// One line for `infergate check`.
    pub fn summary(&self) -> String {
        let frozen = if self.frozen_metrics_after.value.is_zero() {
            "metrics that stop moving are not watched (frozenMetricsAfter 0s)".to_owned()
        } else {
            format!(
                "metrics unchanged for {} after a request was sent count as stale",
                self.frozen_metrics_after
                    .map(GatewayDuration::from_duration)
            )
        };
        if self.consecutive_failures.value == 0 {
            return format!("off (consecutiveFailures 0); {frozen}");
        }
        format!(
            "eject after {} (or frozen metrics) for {}, doubling to {}; at most {} of the pool; back over {}; {frozen}",
            self.consecutive_failures
                .map(|n| format!("{n} failures in a row")),
            self.base_ejection_time.map(GatewayDuration::from_duration),
            self.max_ejection_time.map(GatewayDuration::from_duration),
            self.max_ejection_percent.map(|p| format!("{p}%")),
            self.slow_start_window.map(GatewayDuration::from_duration),
        )
    }
}

/// Checks `outlierDetection`; `at` names a field under it.
pub(crate) fn check(
    o: &OutlierDetection,
    at: &dyn Fn(&str) -> String,
) -> Result<(), GatewayConfigError> {
    if let Some(p) = o.max_ejection_percent {
        if !(1..=100).contains(&p) {
            return Err(invalid(
                at("outlierDetection.maxEjectionPercent"),
                format!("must be 1..100, got {p}"),
            ));
        }
    }
    let base = o
        .base_ejection_time
        .map_or(defaults::OUTLIER_BASE_EJECTION, GatewayDuration::get);
    let max = o
        .max_ejection_time
        .map_or(defaults::OUTLIER_MAX_EJECTION, GatewayDuration::get);
    if base.is_zero() {
        return Err(invalid(
            at("outlierDetection.baseEjectionTime"),
            "must be above 0s (turn detection off with consecutiveFailures: 0)",
        ));
    }
    if max < base {
        return Err(invalid(
            at("outlierDetection.maxEjectionTime"),
            "must be at least baseEjectionTime",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_values_resolve_and_show() {
        let o: OutlierDetection = serde_norway::from_str(
            "consecutiveFailures: 3\nbaseEjectionTime: 5s\nmaxEjectionPercent: 34\n",
        )
        .unwrap();
        check(&o, &|f| f.to_owned()).unwrap();
        let r = ResolvedOutlierDetection::new(Some(&o));
        assert_eq!(r.consecutive_failures, Setting::set(3));
        assert_eq!(r.base_ejection_time, Setting::set(Duration::from_secs(5)));
        assert_eq!(
            r.max_ejection_time,
            Setting::default_value(defaults::OUTLIER_MAX_EJECTION)
        );
        let s = r.summary();
        assert!(
            s.contains("after 3 failures in a row (or frozen metrics) for 5s,"),
            "{s}"
        );
        assert!(s.contains("at most 34% of the pool;"), "{s}");
        assert!(s.contains("back over 10s (default);"), "{s}");
        assert!(
            s.contains("metrics unchanged for 3s (default) after a request was sent"),
            "{s}"
        );
        let never: OutlierDetection = serde_norway::from_str("frozenMetricsAfter: 0s").unwrap();
        assert!(ResolvedOutlierDetection::new(Some(&never))
            .summary()
            .contains("not watched (frozenMetricsAfter 0s)"));
        let off = OutlierDetection {
            consecutive_failures: Some(0),
            ..Default::default()
        };
        assert!(ResolvedOutlierDetection::new(Some(&off))
            .summary()
            .starts_with("off"));
    }

    #[test]
    fn bad_values_name_their_field() {
        let at = |f: &str| format!("spec.schedulers[0].{f}");
        for (yaml, field) in [
            ("maxEjectionPercent: 0", "maxEjectionPercent"),
            ("maxEjectionPercent: 101", "maxEjectionPercent"),
            ("baseEjectionTime: 0s", "baseEjectionTime"),
            (
                "baseEjectionTime: 1m\nmaxEjectionTime: 30s",
                "maxEjectionTime",
            ),
        ] {
            let o: OutlierDetection = serde_norway::from_str(yaml).unwrap();
            let e = check(&o, &at).unwrap_err();
            assert_eq!(
                e.field(),
                Some(format!("spec.schedulers[0].outlierDetection.{field}").as_str()),
                "{yaml}"
            );
        }
    }
}
