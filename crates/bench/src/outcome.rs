//! What a virtual-time run saw: each request's fate, each replica's queue at its scrapes, and
//! the fleet's totals. The event loop records them; the runner returns them; reports read them.

use std::time::Duration;

/// What one request saw.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Outcome {
    /// When it was sent.
    pub sent: Duration,
    /// First token, if it got one.
    pub first_token: Option<Duration>,
    /// Last token, if it finished.
    pub finished: Option<Duration>,
    /// Tokens generated.
    pub output_tokens: u32,
    /// Refused (no endpoint, or the engine refused it).
    pub error: bool,
    /// Refused by flow control with this status (429 shed, 503 queue TTL), never sent.
    pub refused: Option<u16>,
    /// Its priority band, if it had one.
    pub band: Option<infergate_config::gateway::Band>,
}

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// One per request, in arrival order.
    pub requests: Vec<Outcome>,
    /// When the last arrival came.
    pub last_arrival: Duration,
    /// Fleet prefix-cache hits over queries (tokens).
    pub prefix_hit_ratio: f64,
    /// Preemptions across the fleet.
    pub preemptions: u64,
    /// Each replica's waiting queue at each of its scrapes until the last arrival.
    pub queue_samples: Vec<QueueSample>,
    /// One per request, in arrival order: the gaps between its successive tokens, in
    /// milliseconds (none for a request with fewer than two tokens). The report's ITL.
    pub token_gaps_ms: Vec<Vec<f32>>,
    /// One per gateway replica of a virtual run, in order; empty for a live run, whose
    /// gateway's state is not read.
    pub gateways: Vec<crate::gateway::GatewayOutcome>,
}

/// A replica's queue when it was scraped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueSample {
    /// When.
    pub at: Duration,
    /// Which replica (its index in the scenario's fleet).
    pub replica: u32,
    /// Requests waiting.
    pub waiting: u32,
    /// Requests running.
    pub running: u32,
}
