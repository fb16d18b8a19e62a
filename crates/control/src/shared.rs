//! The state every request and the control plane share, behind the plane's handle: the
//! routing table and the services a reload replaces, each swapped whole.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
use infergate_telemetry::capture::Capture;
use infergate_telemetry::metrics::Metrics;

use crate::clock::Clock;
use crate::discovery::MemberSource;
use crate::keys::{Auth, JwksRefresh};
use crate::limits::RateLimits;
use crate::routes::Routes;

/// What every request and the control plane share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The routing table, replaced whole by a reload.
    pub(crate) routes: ArcSwap<Routes>,
    /// The one clock of picks and scrapes.
    pub(crate) clock: Clock,
    /// The gateway's metrics.
    pub(crate) metrics: Arc<Metrics>,
    /// `observability.metrics.enabled`.
    pub(crate) metrics_enabled: bool,
    /// JWT auth with its keys, when `spec.auth` is set; replaced by a reload.
    pub(crate) auth: ArcSwapOption<Auth>,
    /// When signing keys are loaded again (for key stores a reload starts).
    pub(crate) jwks: JwksRefresh,
    /// Per-tenant rate limits, when `spec.rateLimits` is set; replaced by a reload (which
    /// keeps the store when it is the same).
    pub(crate) rate_limits: ArcSwapOption<RateLimits>,
    /// The trace capture, when `--capture` asked for one.
    pub(crate) capture: Option<Capture>,
    /// Where discovered pools' members come from (Kubernetes discovery).
    pub(crate) members: Option<Arc<dyn MemberSource>>,
    /// Where a scheduler's `configMapRef` is read.
    pub(crate) picker_configs: Option<Arc<dyn crate::policy::PickerConfigSource>>,
    /// `--emit-endpoint-scores`: every pick explained.
    pub(crate) emit_endpoint_scores: bool,
    /// Makes each request's spans (disabled without an OTLP endpoint).
    pub(crate) tracer: infergate_trace::Tracer,
    /// Rounds of scrapes handled, the member status document's `sequence`; the scrapers'
    /// publishers advance it ([`crate::scrape::ScrapeContext::refreshes`] says why there).
    pub(crate) refreshes: Arc<AtomicU64>,
}

impl Shared {
    /// Whether the member source (if any) has synced: until then pools may lack members.
    pub(crate) fn members_synced(&self) -> bool {
        self.members.as_ref().is_none_or(|m| m.health().synced)
    }

    /// Whether auth is off or its keys have loaded (part of readiness).
    pub(crate) fn keys_ready(&self) -> bool {
        self.auth
            .load()
            .as_ref()
            .is_none_or(|a| a.keys().current().is_some())
    }
}
