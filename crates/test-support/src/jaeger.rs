//! A real trace collector: Jaeger (built by `tests/traces/jaeger` at its pinned version) on free
//! loopback ports with in-memory storage, and the spans its query API gives back.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::http::{body_of, get, split_response};
use crate::process::{start_on_free_ports, Running};

/// The step spans every request without auth or rate limits records, under its request span.
pub const UNAUTHENTICATED_STEPS: [&str; 3] = [
    "infergate.route",
    "infergate.flow_control",
    "infergate.pick",
];

/// A running Jaeger.
pub struct Jaeger {
    /// The process (killed on drop).
    pub process: Running,
    /// Its OTLP/gRPC receiver.
    pub otlp_grpc: u16,
    /// Its OTLP/HTTP receiver.
    pub otlp_http: u16,
    /// Its query API (`/api/traces`, `/api/services`).
    pub query: u16,
}

impl Jaeger {
    /// Builds Jaeger if this machine has not yet, and starts it with its config in `dir`.
    pub fn start(dir: &Path) -> Jaeger {
        let out = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/traces/jaeger"
        ))
        .arg("path")
        .stderr(Stdio::inherit())
        .output()
        .expect("tests/traces/jaeger runs");
        assert!(out.status.success(), "building Jaeger failed");
        let bin = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        let config = dir.join("jaeger.yaml");
        let spawn = |[grpc, http, query, query_grpc]: [u16; 4]| {
            std::fs::write(
                &config,
                format!(
                    "service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {{receivers: [otlp], processors: [], exporters: [jaeger_storage_exporter]}}
  telemetry: {{metrics: {{level: none}}, logs: {{level: warn}}}}
extensions:
  jaeger_query:
    storage: {{traces: mem}}
    http: {{endpoint: 127.0.0.1:{query}}}
    grpc: {{endpoint: 127.0.0.1:{query_grpc}}}
  jaeger_storage:
    backends: {{mem: {{memory: {{max_traces: 1000}}}}}}
receivers:
  otlp:
    protocols:
      grpc: {{endpoint: 127.0.0.1:{grpc}}}
      http: {{endpoint: 127.0.0.1:{http}}}
exporters:
  jaeger_storage_exporter: {{trace_storage: mem}}
"
                ),
            )
            .unwrap();
            Command::new(&bin)
                .arg("--config")
                .arg(&config)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        };
        let ready = |[grpc, http, query, _]: [u16; 4]| {
            get(query, "/api/services").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
                && std::net::TcpStream::connect(("127.0.0.1", grpc)).is_ok()
                && std::net::TcpStream::connect(("127.0.0.1", http)).is_ok()
        };
        let (process, [otlp_grpc, otlp_http, query, _]) =
            start_on_free_ports("Jaeger", spawn, ready);
        Jaeger {
            process,
            otlp_grpc,
            otlp_http,
            query,
        }
    }
}

/// A span as Jaeger's query API gives it.
#[derive(Debug)]
pub struct Span {
    /// Its id, hex.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its parent's id (the first reference).
    pub parent: Option<String>,
    /// Its attributes (and Jaeger's `span.kind`, `error`, …).
    pub tags: HashMap<String, Value>,
    /// The service that sent it.
    pub service: String,
}

impl Jaeger {
    /// The spans of every trace `query` (a query-API path) finds, once at least `want` are
    /// there (or after 30 s, whatever is there).
    pub fn spans(&self, query: &str, want: usize) -> Vec<Span> {
        let port = self.query;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found = read_spans(port, query);
            if found.len() >= want || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn read_spans(port: u16, query: &str) -> Vec<Span> {
    let Some(raw) = get(port, query) else {
        return Vec::new();
    };
    let (status, headers, body) = split_response(&raw);
    if status != 200 {
        return Vec::new();
    }
    let v: Value = serde_json::from_str(&body_of(&headers, body)).unwrap();
    let mut out = Vec::new();
    for trace in v["data"].as_array().into_iter().flatten() {
        for s in trace["spans"].as_array().into_iter().flatten() {
            let process = s["processID"].as_str().unwrap();
            out.push(Span {
                id: s["spanID"].as_str().unwrap().to_owned(),
                name: s["operationName"].as_str().unwrap().to_owned(),
                parent: s["references"]
                    .as_array()
                    .and_then(|r| r.first())
                    .map(|r| r["spanID"].as_str().unwrap().to_owned()),
                tags: s["tags"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| (t["key"].as_str().unwrap().to_owned(), t["value"].clone()))
                    .collect(),
                service: trace["processes"][process]["serviceName"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            });
        }
    }
    out
}

/// The span called `name`; panics, listing them, when there is none.
pub fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
}

/// Asserts that each span named in `names` is there and a child of `parent`.
pub fn assert_children(spans: &[Span], parent: &Span, names: &[&str]) {
    for name in names {
        assert_eq!(
            named(spans, name).parent.as_ref(),
            Some(&parent.id),
            "{name} is not a child of {}",
            parent.name
        );
    }
}
