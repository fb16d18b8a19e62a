//! infergate's live benchmark runner: the virtual runner's scenarios run for real.
//!
//! A run starts the scenario's fleet as real `infergate sim` replicas (one process, one loopback
//! port per replica, the virtual runner's profiles and seeds), puts the router under test in
//! front of them as a separate process (`infergate serve` with any picker policy, Envoy
//! round-robin, sglang-router, vllm-router, or the upstream EPP behind Envoy), replays the workload through it at the requests'
//! real arrival times with a Rust load generator that streams every answer and timestamps each
//! token, and tears everything down — on success, on error, on panic and on Ctrl-C or SIGTERM.
//! What every request saw becomes the virtual runner's `Outcome`, so the same report code
//! computes the same figures, and a live run can be checked against its virtual twin.
//!
//! ```text
//! prompt   bench request → text the simulator tokenizes into exactly its tokens and blocks
//! loadgen  arrivals → streamed /v1/completions → token timestamps → Outcome
//! monitor  every replica's queue during the run, from its /metrics
//! router   which router, found where, started how
//! cluster  a test Kubernetes API whose pods are the replicas, for a router that discovers pods
//! run      fleet + router + replay + teardown → RunOutcome
//! suite    a scenario × routers × seeds → ScenarioReport
//! ```

#![forbid(unsafe_code)]

pub mod cluster;
pub mod files;
pub mod loadgen;
pub mod monitor;
pub mod process;
pub mod prompt;
pub mod router;
pub mod run;
pub mod sse;
pub mod suite;

pub use router::Router;
pub use run::{LiveOptions, LiveRunner};
pub use suite::run_live_scenario;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a live run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A file, socket or runtime operation failed.
    #[error("{}: {cause}", path.display())]
    Io {
        /// What was being read, written or bound.
        path: PathBuf,
        /// The error (in the message, not a `source()`, so a chain printer shows it once).
        cause: std::io::Error,
    },
    /// A process could not be started.
    #[error("starting {what}: {reason}")]
    Start {
        /// The process.
        what: String,
        /// Why.
        reason: String,
    },
    /// A process exited while the run needed it.
    #[error("{what} exited ({status}); the end of its log:\n{log_tail}")]
    Exited {
        /// The process.
        what: String,
        /// Its exit status.
        status: String,
        /// The last lines of its output.
        log_tail: String,
    },
    /// Something did not become ready in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
    /// A router name is unknown, or the router is not installed.
    #[error("router `{name}`: {reason}")]
    Router {
        /// The name asked for.
        name: String,
        /// Why it cannot run.
        reason: String,
    },
    /// Ctrl-C or SIGTERM: everything started was torn down.
    #[error("interrupted; every process of the run was stopped")]
    Interrupted,
    /// The scenario's capacity or workload could not be made.
    #[error(transparent)]
    Bench(#[from] infergate_bench::runner::BenchError),
}

impl LiveError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, cause: std::io::Error) -> LiveError {
        LiveError::Io {
            path: path.to_owned(),
            cause,
        }
    }
}

impl From<infergate_bench::trace::TraceError> for LiveError {
    fn from(e: infergate_bench::trace::TraceError) -> LiveError {
        LiveError::Bench(e.into())
    }
}
