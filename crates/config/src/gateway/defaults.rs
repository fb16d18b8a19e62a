//! Every default and every limit of `InferenceGatewayConfig`, in one place.
//!
//! The values follow the upstream HyperPod schema where it has one; infergate's own fields
//! (listen addresses, flow control, tenancy) take the defaults the CLI documents. Resolution
//! marks each value taken from here as a default, so `infergate check` shows which is which.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use super::scheduler::{AppProtocol, EngineType, SchedulerKind};
use super::traffic::{Band, Fairness, OverloadSensor, RateLimitStore, StoreFailure};

/// `spec.bbr.enabled` when `spec.bbr` is left out (a written block must say): on, the only value valid
/// for any number of schedulers (more than one needs it), and the documented behaviour of a
/// gateway that routes by the body's `model` (a model no scheduler serves gets 404, or the
/// `defaultBackend`).
pub const BBR_ENABLED: bool = true;
/// `spec.bbr.maxRequestBodyBytes`: the largest value accepted (256 MiB, the upstream schema's
/// limit).
pub const MAX_REQUEST_BODY_BYTES: u64 = 268_435_456;
/// `spec.bbr.maxRequestBodyBytes` when not written: 32 MiB. The upstream schema's 256 MiB let
/// six concurrent bodies take a gateway to 2.5 GB. Text prompts are far smaller (a 128k-token
/// prompt is about 0.5 MB of JSON); what needs room is base64 images and audio, which
/// OpenAI's API caps at 20 MB a file — and TGI's own default limit is 2 MB.
pub const DEFAULT_REQUEST_BODY_BYTES: u64 = 32 * 1024 * 1024;
/// `spec.bbr.maxBufferedBodyBytes`: the request bytes the HTTP front holds at once, over every
/// request (1 GiB: 32 bodies at the default limit). A body that would pass it gets 503.
pub const MAX_BUFFERED_BODY_BYTES: u64 = 1024 * 1024 * 1024;

/// `spec.schedulers[].outlierDetection.consecutiveFailures`: Envoy's default for consecutive
/// 5xx.
pub const OUTLIER_CONSECUTIVE_FAILURES: u32 = 5;
/// `spec.schedulers[].outlierDetection.baseEjectionTime`.
pub const OUTLIER_BASE_EJECTION: Duration = Duration::from_secs(10);
/// `spec.schedulers[].outlierDetection.maxEjectionTime`.
pub const OUTLIER_MAX_EJECTION: Duration = Duration::from_secs(300);
/// `spec.schedulers[].outlierDetection.maxEjectionPercent`: half, so a fault that hits every
/// pod at once (a bad rollout, an upstream dependency) cannot empty the pool.
pub const OUTLIER_MAX_EJECTION_PERCENT: u32 = 50;
/// `spec.schedulers[].outlierDetection.slowStartWindow`: the ramp back after an ejection, as
/// long as the first ejection.
pub const OUTLIER_SLOW_START: Duration = Duration::from_secs(10);
/// `spec.schedulers[].outlierDetection.frozenMetricsAfter`: a working model server changes its
/// metrics as soon as a request reaches it and with every engine step after (tens of
/// milliseconds); three seconds of the same body after a request was sent is sixty scrapes at
/// the default interval, longer than any one engine step, yet a fault is found within seconds.
pub const OUTLIER_FROZEN_METRICS_AFTER: Duration = Duration::from_secs(3);
/// `spec.schedulers[].streamIdleTimeout`: the longest silence between two chunks of an answer
/// that has begun. A model server streams a token every few tens of milliseconds; a minute
/// without one is a stalled server, not a slow one, yet leaves room for preemption and swapping.
pub const STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// `spec.listen.connections.maxConnections`. The listener also keeps under what the
/// process's descriptor limit allows.
pub const MAX_CONNECTIONS: u32 = 10_000;
/// `spec.listen.connections.perSourceShare`: one address may hold half the connections, so a
/// flood from one address leaves the other half to everyone else, while a single proxy in
/// front of the gateway (every request from one address) still has room.
pub const PER_SOURCE_SHARE: f64 = 0.5;
/// `spec.listen.connections.firstByteTimeout`.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(10);
/// `spec.listen.connections.headerTimeout`: a request head is a few hundred bytes; a client
/// that needs longer is trickling it (slowloris).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// `spec.listen.connections.bodyTimeout`: the default body limit at about 4.5 Mbit/s.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// `spec.listen.connections.idleTimeout`: longer than the keep-alive expiry of the common
/// clients (httpx, which the OpenAI SDK uses, drops idle connections after 5 s), so the
/// gateway is not the side that closes a connection a client is about to reuse.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// `spec.listen.connections.sendTimeout`.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// `spec.listen.connections.http2KeepAliveInterval`.
pub const HTTP2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// `spec.listen.connections.http2KeepAliveTimeout`.
pub const HTTP2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// `spec.bbr.defaultBackend.port`.
pub const DEFAULT_BACKEND_PORT: u16 = 8000;
/// `spec.bbr.replicas` (deployment only).
pub const BBR_REPLICAS: u32 = 2;
/// `spec.observability.metrics.enabled`.
pub const METRICS_ENABLED: bool = true;

/// `spec.schedulers[].targetPort`.
pub const TARGET_PORT: u16 = 8000;
/// `spec.schedulers[].appProtocol`.
pub const APP_PROTOCOL: AppProtocol = AppProtocol::Http;
/// `spec.schedulers[].scheduler`.
pub const SCHEDULER: SchedulerKind = SchedulerKind::LlmD;
/// `spec.schedulers[].engineType`.
pub const ENGINE_TYPE: EngineType = EngineType::Vllm;
/// `spec.schedulers[].forwardPriority`: off, because vLLM's default `fcfs` policy refuses a
/// request `priority` other than 0.
pub const FORWARD_PRIORITY: bool = false;
/// `spec.schedulers[].resumeStreams`: on, since a client that lost its stream has lost the
/// whole answer, and the continuation costs only the prefill of what was already written.
pub const RESUME_STREAMS: bool = true;
/// `spec.schedulers[].replicas` (deployment only).
pub const SCHEDULER_REPLICAS: u32 = 2;
/// `spec.schedulers[].configMapRef.key`.
pub const CONFIG_MAP_KEY: &str = "default-plugins.yaml";

/// `weights.queue` when not written.
pub const WEIGHT_QUEUE: u32 = 2;
/// `weights.kvCache` when not written.
pub const WEIGHT_KV_CACHE: u32 = 2;
/// `weights.prefix` when not written.
pub const WEIGHT_PREFIX: u32 = 3;
/// `weights.loraAffinity`, `runningRequests`, `predictedLatency` and `lru` when not written: off.
pub const WEIGHT_OFF: u32 = 0;

/// `spec.listen.address`: 127.0.0.1:8080.
pub const LISTEN_ADDRESS: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));
/// `spec.listen.adminAddress`: 127.0.0.1:9090.
pub const ADMIN_ADDRESS: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9090));

/// Header naming the tenant when it is not taken from a JWT claim.
pub const TENANT_HEADER: &str = "x-gateway-inference-fairness-id";
/// Header naming the criticality when it is not taken from a JWT claim.
pub const CRITICALITY_HEADER: &str = "x-gateway-inference-objective";
/// llm-d's name for the same header (an InferenceObjective's name), read first when the
/// criticality comes from the default header.
pub const OBJECTIVE_HEADER: &str = "x-llm-d-inference-objective";
/// `spec.tenancy.defaultCriticality`: the band of a request that names none.
pub const CRITICALITY: Band = Band::Standard;

/// `spec.flowControl.enabled`.
pub const FLOW_CONTROL_ENABLED: bool = true;
/// `spec.flowControl.queueTtl`: how long a request may wait in a queue before it gets 503.
pub const QUEUE_TTL: Duration = Duration::from_secs(30);
/// `spec.flowControl.overload.enabled`.
pub const OVERLOAD_ENABLED: bool = true;
/// `spec.flowControl.overload.interval`: how long the overload lasts after the rule's last
/// refusal (the refusal empties the queue that showed it, not the servers) and how long every
/// Sheddable request must have been refused to count as overload; with the `sojourn` sensor,
/// how long the queues below Critical must stay empty to end an overload (one empty moment
/// between two arrivals does not); with the `backlog` sensor, a band's queue that has not been
/// empty for this long is overloaded. Longer than the bursts a
/// pool absorbs by queueing (a surge of a second or two drains between its peaks), short enough
/// that a sustained overload is cut before the waits it builds pass a chat client's patience.
pub const OVERLOAD_INTERVAL: Duration = Duration::from_secs(2);
/// `spec.flowControl.overload.maxWait`: how long a request of an overloaded band may wait. A
/// request dispatched after waiting longer would miss a first-token target of a few seconds
/// anyway, and holding it makes every request behind it wait as long.
pub const OVERLOAD_MAX_WAIT: Duration = Duration::from_secs(1);
/// `spec.flowControl.overload.kvCacheAlways`: off, KV-cache use holds Standard only while the
/// pool is overloaded (Sheddable and Critical always). A model server admits until its KV cache is nearly full, so
/// below overload a pool at the KV threshold is well packed, not full, and holding requests there
/// cost up to 10 % of capacity at SLO in the bench (a quarter with shared prefixes); in overload
/// the signal keeps the batches short enough for the answered requests' time per token.
pub const OVERLOAD_KV_CACHE_ALWAYS: bool = false;
/// `spec.flowControl.overload.holdWhileDraining`: on, a request that has waited `maxWait` is
/// held, up to twice `maxWait`, while the queue ahead of it drains within `maxWait` at the
/// pool's completion rate: such a queue is a burst passing, and refusing its head turns a wait
/// of a little over `maxWait` into a miss. Where the queue is deeper the rule refuses as before.
pub const OVERLOAD_HOLD_WHILE_DRAINING: bool = true;
/// `spec.flowControl.overload.sensor`: `sojourn`. The `backlog` sensor read a queue the gateway
/// held through a burst as overload once it had not emptied for `interval`, while each request
/// in it waited a fraction of a second; the overload then read KV use and the decode pace and
/// refused what a peer's server answers within 2 s: on the bench's fleets with tensor-parallel
/// replicas, capacity at P99 TTFT ≤ 2 s below every peer's (docs/benchmarks.md).
pub const OVERLOAD_SENSOR: OverloadSensor = OverloadSensor::Sojourn;
/// `spec.flowControl.maxQueueRequests`: requests queued over all bands.
pub const MAX_QUEUE_REQUESTS: u32 = 4_096;
/// `spec.flowControl.maxQueueBytes`: request bytes queued over all bands (1 GiB).
pub const MAX_QUEUE_BYTES: u64 = 1_073_741_824;
/// `spec.flowControl.bands[].maxQueueRequests`.
pub const BAND_MAX_QUEUE_REQUESTS: u32 = 1_024;
/// `spec.flowControl.bands[].maxQueueBytes` (256 MiB).
pub const BAND_MAX_QUEUE_BYTES: u64 = 268_435_456;
/// `spec.flowControl.bands[].saturationCeiling`: the mean pool saturation up to which a band
/// dispatches.
///
/// Critical may push the pool to twice the thresholds: the headroom above Standard's ceiling lets
/// a Critical request go out at once while Standard holds the pool at its own, and the bound keeps
/// a Critical flood from growing the servers' queues without limit. Standard stops at 1 (it then
/// waits in the gateway's queue). Sheddable stops at 0.75, below Standard: a Sheddable request
/// let in at Standard's own ceiling runs for seconds and takes the place a Standard request
/// arriving next would need, which then waits in the gateway behind work that was allowed to
/// be dropped. A quarter of the threshold (1.25 waiting requests per endpoint at the default
/// depth of 5) is kept for Standard; in the priority-overload experiment this moved Standard's
/// P99 at 130 % load from 1.9 s to 0.3 s at the same goodput (`docs/benchmarks.md`).
///
/// Invariant: non-increasing from Critical to Sheddable, as the validation requires of configured
/// ones too, so a band that cannot dispatch implies that no lower band can either.
pub const fn saturation_ceiling(band: Band) -> f64 {
    match band {
        Band::Critical => 2.0,
        Band::Standard => 1.0,
        Band::Sheddable => 0.75,
    }
}
/// `spec.flowControl.saturation.queueDepthThreshold`: waiting requests at which an endpoint
/// counts as saturated (upstream's detector).
pub const SATURATION_QUEUE_DEPTH: u32 = 5;
/// `spec.flowControl.saturation.kvCacheThreshold`: KV-cache use at which an endpoint counts as
/// saturated.
pub const SATURATION_KV_CACHE: f64 = 0.8;
/// `spec.flowControl.saturation.interTokenLatencyThreshold`: the recent mean inter-token latency
/// (the model server's own histogram, over the last second of scrapes) at which an endpoint
/// counts as saturated. It is read as KV-cache use is: for Standard only while the pool is
/// overloaded, for Sheddable at all times, and for Critical at Critical's own ceiling. Over
/// capacity a gateway that keeps every batch full makes every stream slow: on a mixed fleet at
/// 150 % load the fast GPUs ran at 90–97 ms per token and a third of their requests missed a
/// 100 ms TPOT objective, so goodput fell below round-robin's. 80 ms is four fifths of that
/// common objective, so that a stream's mean stays under it while the pool drains
/// (`docs/benchmarks.md`, "Decode pace under overload").
pub const SATURATION_INTER_TOKEN_LATENCY: Duration = Duration::from_millis(80);
/// `spec.flowControl.saturation.metricsStalenessThreshold`: metrics older than this are stale.
pub const METRICS_STALENESS: Duration = Duration::from_millis(200);

/// `spec.flowControl.fairness`.
pub const FAIRNESS: Fairness = Fairness::RoundRobin;

/// `spec.rateLimits.store`.
pub const RATE_LIMIT_STORE: RateLimitStore = RateLimitStore::Local;
/// `spec.rateLimits.onStoreError`: admit when the shared store is down (and report it).
pub const STORE_FAILURE: StoreFailure = StoreFailure::FailOpen;
/// `spec.rateLimits.storeTimeout`: a loopback or same-zone Redis answers in well under a
/// millisecond, so 50 ms means it is in trouble; this also bounds what a stalled store adds to
/// a request's latency.
pub const RATE_LIMIT_STORE_TIMEOUT: Duration = Duration::from_millis(50);
/// `spec.rateLimits.defaultMaxTokens`: completion tokens reserved for a request that names no
/// maximum (a typical chat answer; the reservation is settled with the real usage).
pub const RATE_LIMIT_MAX_TOKENS: u64 = 256;

/// `spec.rewrites[].targets[].weight`.
pub const REWRITE_WEIGHT: u32 = 1;

/// Label every upstream LoRA adapter ConfigMap carries.
pub const BBR_MANAGED_LABEL: &str = "inference.networking.k8s.io/bbr-managed";

/// Limits the schema enforces.
pub mod limits {
    /// `spec.schedulers`: at most this many.
    pub const SCHEDULERS: usize = 100;
    /// `spec.schedulers[].name`: at most this many characters.
    pub const SCHEDULER_NAME_LEN: usize = 63;
    /// `spec.schedulers[].modelName`: at most this many characters.
    pub const MODEL_NAME_LEN: usize = 253;
    /// `spec.schedulers[].loraAdapters`: at most this many.
    pub const LORA_ADAPTERS: usize = 50;
    /// `spec.schedulers[].loraAdapters[]`: at most this many characters.
    pub const ADAPTER_NAME_LEN: usize = 253;
    /// `spec.schedulers[].logLevel`: 0 up to this.
    pub const LOG_LEVEL: u32 = 5;
    /// `spec.auth.jwt.provider.audiences`: at most this many.
    pub const AUDIENCES: usize = 8;
    /// `spec.auth.jwt.provider.requiredClaims`: at most this many.
    pub const REQUIRED_CLAIMS: usize = 16;
    /// `requiredClaims[].values`: at most this many.
    pub const CLAIM_VALUES: usize = 128;
    /// `requiredClaims[].values[]`: at most this many characters.
    pub const CLAIM_VALUE_LEN: usize = 1024;
    /// `spec.rateLimits…tokensPerMinute`: at most this many, so that a bucket's arithmetic
    /// (tokens × 60,000 ms, twice over for debt) stays exact in the 53-bit integers of the
    /// shared store's Lua script.
    pub const TOKENS_PER_MINUTE: u64 = 10_000_000_000;
    /// `spec.rateLimits.storeTimeout`: at most this long.
    pub const STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
}
