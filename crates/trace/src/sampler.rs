//! Whether a trace is recorded: the OpenTelemetry samplers `OTEL_TRACES_SAMPLER` names.
//!
//! Decided once per request, at its root span; every span below it follows. A ratio is a
//! pure function of the trace id, so every service sampling by the same ratio keeps the same
//! traces.

use crate::context::{SpanContext, TraceId};

/// A sampling policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Sampler {
    /// Every trace.
    AlwaysOn,
    /// None.
    AlwaysOff,
    /// This fraction of traces (0 to 1), chosen by trace id.
    TraceIdRatio(f64),
    /// The caller's decision when the request carries one; else the inner sampler's.
    ParentBased(Box<Sampler>),
}

impl Default for Sampler {
    /// `parentbased_always_on`, OpenTelemetry's default: a trace a caller records is recorded
    /// here too, and a request without one starts a recorded trace.
    fn default() -> Self {
        Sampler::ParentBased(Box::new(Sampler::AlwaysOn))
    }
}

impl Sampler {
    /// The sampler `OTEL_TRACES_SAMPLER` names, with `OTEL_TRACES_SAMPLER_ARG` as the ratio of
    /// the ratio samplers (default 1). `None` for an unknown name or a ratio outside 0 to 1.
    pub fn named(name: &str, arg: Option<&str>) -> Option<Self> {
        let ratio = || -> Option<f64> {
            match arg.map(str::trim).filter(|a| !a.is_empty()) {
                None => Some(1.0),
                Some(a) => a.parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r)),
            }
        };
        let parent = |s| Sampler::ParentBased(Box::new(s));
        Some(match name.trim() {
            "always_on" => Sampler::AlwaysOn,
            "always_off" => Sampler::AlwaysOff,
            "traceidratio" => Sampler::TraceIdRatio(ratio()?),
            "parentbased_always_on" => parent(Sampler::AlwaysOn),
            "parentbased_always_off" => parent(Sampler::AlwaysOff),
            "parentbased_traceidratio" => parent(Sampler::TraceIdRatio(ratio()?)),
            _ => return None,
        })
    }

    /// Whether the trace `trace_id` (continuing `parent`, when the request carried one) is
    /// recorded.
    pub fn samples(&self, parent: Option<&SpanContext>, trace_id: TraceId) -> bool {
        match self {
            Sampler::AlwaysOn => true,
            Sampler::AlwaysOff => false,
            Sampler::TraceIdRatio(ratio) => {
                // The id's last 8 bytes as a number below 2^63, against the ratio's share of it.
                let mut low = [0; 8];
                low.copy_from_slice(&trace_id.0[8..]);
                let x = u64::from_be_bytes(low) >> 1;
                (x as f64) < ratio * (1u64 << 63) as f64
            }
            Sampler::ParentBased(root) => match parent {
                Some(p) => p.sampled,
                None => root.samples(None, trace_id),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::SpanId;

    fn id(n: u64) -> TraceId {
        let mut b = [0; 16];
        b[8..].copy_from_slice(&n.to_be_bytes());
        b[0] = 1;
        TraceId(b)
    }

    #[test]
    fn names_and_arguments_read_as_the_specification_says() {
        assert_eq!(Sampler::named("always_on", None), Some(Sampler::AlwaysOn));
        assert_eq!(
            Sampler::named("traceidratio", Some("0.25")),
            Some(Sampler::TraceIdRatio(0.25))
        );
        assert_eq!(
            Sampler::named("parentbased_traceidratio", None),
            Some(Sampler::ParentBased(Box::new(Sampler::TraceIdRatio(1.0))))
        );
        assert_eq!(Sampler::named("traceidratio", Some("1.5")), None);
        assert_eq!(Sampler::named("traceidratio", Some("half")), None);
        assert_eq!(Sampler::named("jaeger_remote", None), None);
    }

    #[test]
    fn a_ratio_keeps_about_its_share_and_the_same_ids_every_time() {
        let s = Sampler::TraceIdRatio(0.25);
        let mut rng = infergate_rng::SplitMix64::new(7);
        let kept = (0..20_000)
            .filter(|_| s.samples(None, id(rng.next_u64())))
            .count();
        assert!((4_600..5_400).contains(&kept), "kept {kept} of 20000");
        assert!(s.samples(None, id(0)));
        assert!(!s.samples(None, id(u64::MAX)));
        assert!(!Sampler::TraceIdRatio(0.0).samples(None, id(0)));
    }

    #[test]
    fn parent_based_follows_the_caller() {
        let s = Sampler::default();
        let parent = |sampled| SpanContext {
            trace_id: id(1),
            span_id: SpanId([1; 8]),
            sampled,
            trace_state: None,
        };
        assert!(s.samples(Some(&parent(true)), id(1)));
        assert!(!s.samples(Some(&parent(false)), id(1)));
        assert!(s.samples(None, id(1)));
        let off = Sampler::named("parentbased_always_off", None).unwrap();
        assert!(!off.samples(None, id(1)));
        assert!(off.samples(Some(&parent(true)), id(1)));
    }
}
