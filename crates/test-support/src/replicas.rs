//! Simulated vLLM replicas (`infergate-simserver`) served on loopback ports in the test's own
//! tokio runtime, and the specs tests start them with.

use std::net::SocketAddr;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use infergate_engine::{EngineConfig, Profile};
use infergate_simserver::{serve, ReplicaSpec, SimError};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::client::{send, stream, Stream, CALL_LIMIT};

/// The model the simulated replicas serve unless told otherwise.
pub const LLAMA: &str = "meta-llama/Llama-3.1-8B-Instruct";

/// Llama-3.1-8B on one H100, as vLLM would start it.
pub fn h100() -> EngineConfig {
    EngineConfig::new(Profile::lookup("llama-3.1-8b", "h100", 1).unwrap())
}

/// An H100 replica running `scale` times faster than real time.
pub fn fast_spec(scale: f64) -> ReplicaSpec {
    let mut spec = ReplicaSpec::new(h100());
    spec.time_scale = scale;
    spec
}

/// An H100 replica in real time: tokens take milliseconds, so a long answer streams for
/// seconds.
pub fn real_time() -> ReplicaSpec {
    ReplicaSpec::new(h100())
}

/// An instant-profile replica: every engine step takes a microsecond; answers of 8 tokens on
/// average.
pub fn instant() -> ReplicaSpec {
    let mut s = ReplicaSpec::new(EngineConfig::new(Profile::instant()));
    s.mean_output_tokens = 8.0;
    s
}

/// An [`instant`] replica with LoRA slots (4 on the GPU, 8 on the CPU) and `adapters` loaded.
pub fn instant_with_adapters(adapters: &[&str]) -> ReplicaSpec {
    let mut s = instant();
    s.engine.max_loras = 4;
    s.engine.max_cpu_loras = 8;
    s.lora_adapters = adapters.iter().map(|a| (*a).to_owned()).collect();
    s
}

/// A replica serving on a loopback port until dropped or stopped.
pub struct Replica {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), SimError>>>,
}

impl Replica {
    /// Serves `spec` on a fresh loopback port (bound before this returns).
    pub async fn start(spec: ReplicaSpec) -> Replica {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(spec, listener, async move {
            let _ = stopped.await;
        }));
        Replica {
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops it and returns what `serve` returned.
    pub async fn stop(mut self) -> Result<(), SimError> {
        let _ = self.stop.take().unwrap().send(());
        timeout(CALL_LIMIT, self.task.take().unwrap())
            .await
            .expect("serve stops")
            .unwrap()
    }

    /// `GET path`: the status and the body.
    pub async fn get(&self, path: &str) -> (StatusCode, Bytes) {
        send(self.addr, Method::GET, path, None).await.unwrap()
    }

    /// `POST path` with the JSON text `body`: the status and the body.
    pub async fn post(&self, path: &str, body: &str) -> (StatusCode, Bytes) {
        send(
            self.addr,
            Method::POST,
            path,
            Some(body.as_bytes().to_vec()),
        )
        .await
        .unwrap()
    }

    /// `POST path` with `body`: the status and the JSON answer (a panic if it is not JSON).
    pub async fn post_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let (status, bytes) = self.post(path, &body.to_string()).await;
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{path} answered {status} with non-JSON {bytes:?}: {e}"));
        (status, value)
    }

    /// Its `/metrics` text, which must answer 200.
    pub async fn metrics(&self) -> String {
        let (status, body) = self.get("/metrics").await;
        assert_eq!(status, StatusCode::OK);
        String::from_utf8(body.to_vec()).unwrap()
    }

    /// A streaming `POST path` of `body` ([`stream`]).
    pub async fn stream(&self, path: &str, body: &Value) -> Stream {
        stream(self.addr, path, body).await.unwrap()
    }

    /// Replaces its injected faults with `faults` (`POST /sim/faults`), which must be accepted.
    pub async fn set_faults(&self, faults: Value) {
        let (status, body) = self.post("/sim/faults", &faults.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{body:?}");
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
