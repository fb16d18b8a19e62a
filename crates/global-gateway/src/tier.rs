//! The tier's shared state: the member table behind one lock, the settings, the clients, the
//! metrics and the clock every decision reads.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use infergate_config::global::ResolvedGlobal;
use infergate_control::keys::Auth;
use infergate_control::limits::RateLimits;
use infergate_global_picker::{Member, ScoreParts, TierSettings};
use infergate_rng::SplitMix64;
use infergate_telemetry::global::GlobalMetrics;
use infergate_telemetry::Metrics;

use crate::connect::{MemberConnector, MemberTls};

/// A pooled client of one member endpoint, sending buffered bodies.
pub(crate) type MemberClient = Client<MemberConnector, Full<Bytes>>;

/// What the table does not hold about a member: where it is and what it is sent.
#[derive(Debug, Clone)]
pub(crate) struct MemberAddress {
    /// Data plane, `host:port`.
    pub data: String,
    /// Admin listener, `host:port`.
    pub admin: String,
    /// `Authorization` to send, from its token file.
    pub authorization: Option<Arc<str>>,
    /// Data-path requests: the connect timeout from the config, TLS when `https`.
    pub data_client: MemberClient,
    /// Status pulls: their own pool, so a hung pull never holds a request's connection; a
    /// pull must fail within its own timeout, connect included.
    pub status_client: MemberClient,
}

/// The `Authorization` sent to member `m`: `Bearer` and its token file's content, read now;
/// `None` without a token file.
pub(crate) fn authorization(
    m: &infergate_config::global::ResolvedMember,
) -> std::io::Result<Option<Arc<str>>> {
    let Some(file) = &m.bearer_token_file else {
        return Ok(None);
    };
    let token = std::fs::read_to_string(file)?;
    Ok(Some(Arc::from(format!("Bearer {}", token.trim()))))
}

impl MemberAddress {
    /// Member `m`'s endpoints with its token and TLS (`tls`: data, admin).
    pub fn new(
        m: &infergate_config::global::ResolvedMember,
        authorization: Option<Arc<str>>,
        tls: (Option<MemberTls>, Option<MemberTls>),
        connect_timeout: Duration,
        status_timeout: Duration,
    ) -> Self {
        Self {
            data: m.data.authority.clone(),
            admin: m.admin.authority.clone(),
            authorization,
            data_client: client(MemberConnector::new(connect_timeout, tls.0)),
            status_client: client(MemberConnector::new(status_timeout, tls.1)),
        }
    }
}

/// The members and what the decisions last made of them.
#[derive(Debug)]
pub(crate) struct Table {
    /// The members, in the config's order.
    pub members: Vec<Member>,
    /// Each member's last score (for its gauges).
    pub last_score: Vec<Option<ScoreParts>>,
    /// The seeded generator the ramp draws from.
    pub rng: SplitMix64,
}

/// Everything a request, a pull and the admin listener share.
#[derive(Debug)]
pub(crate) struct Tier {
    pub config: ResolvedGlobal,
    pub settings: TierSettings,
    pub addresses: Vec<MemberAddress>,
    table: Mutex<Table>,
    origin: Instant,
    pub metrics: GlobalMetrics,
    /// Callers' tokens verified, when `spec.auth` is set.
    pub auth: Option<Arc<Auth>>,
    /// Per-tenant limits, when `spec.rateLimits` is set.
    pub limits: Option<Arc<RateLimits>>,
    /// The cluster tier's families, of which the tier feeds (and exports) only the auth,
    /// key-set and rate-limit ones: the same code counts the same things under the same names.
    pub cluster_metrics: Arc<Metrics>,
}

/// What the tier takes from the callers' side of the config, built on the runtime (a JWKS
/// fetch starts at once).
#[derive(Debug)]
pub(crate) struct Callers {
    pub auth: Option<Arc<Auth>>,
    pub limits: Option<Arc<RateLimits>>,
    pub metrics: Arc<Metrics>,
}

pub(crate) fn client(connector: MemberConnector) -> MemberClient {
    let mut b = Client::builder(TokioExecutor::new());
    b.pool_idle_timeout(Duration::from_secs(60))
        .pool_timer(TokioTimer::new());
    b.build(connector)
}

impl Tier {
    /// The tier of `config`, with each member's token and TLS set up (`addresses[i]` for member
    /// `i`).
    pub fn new(
        config: ResolvedGlobal,
        addresses: Vec<MemberAddress>,
        callers: Callers,
        seed: u64,
    ) -> Self {
        let settings = TierSettings::from_resolved(&config);
        let members = config
            .members
            .iter()
            .map(Member::from_resolved)
            .collect::<Vec<_>>();
        let names: Vec<String> = config.members.iter().map(|m| m.name.clone()).collect();
        let n = members.len();
        Self {
            settings,
            addresses,
            table: Mutex::new(Table {
                members,
                last_score: vec![None; n],
                rng: SplitMix64::new(seed),
            }),
            origin: Instant::now(),
            metrics: GlobalMetrics::new(&names),
            auth: callers.auth,
            limits: callers.limits,
            cluster_metrics: callers.metrics,
            config,
        }
    }

    /// The tier's clock: time since it started.
    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// The table, locked. Every holder does a few comparisons and no I/O, so a poisoned lock
    /// (a panic while held) leaves consistent enough state to go on with.
    pub fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
