//! The gateway-overhead load generator (`scripts/gateway-overhead.sh` drives it;
//! `docs/benchmarks.md` has the results).
//!
//! `run` sends small non-streaming chat completions (`max_tokens` 1 by default) to one or more
//! `host:port` targets, round-robin, for a bounded time after a warm-up, in one of two modes:
//!
//! - **open loop** (`--rate R`): requests leave at a fixed mean rate whatever the answers do
//!   (Poisson arrivals by default, `--arrivals uniform` for even spacing), paced by a thread of
//!   its own, over a keep-alive connection pool;
//! - **closed loop** (`--connections N`): N keep-alive connections, each sending its next request
//!   as soon as the last answer is read: the highest rate the path sustains.
//!
//! Latency is from just before a request is written to its last body byte, recorded in an HDR
//! histogram (nanoseconds, 3 significant digits), only for requests sent after the warm-up. It
//! prints p50/p90/p99/p99.9/max, the achieved rate, errors, and the CPU time each `--watch
//! NAME=PID` process (and the load generator itself) used over the measured window, as a share of
//! one core. One JSON line goes to stdout (and is appended to `--out FILE`); `table FILE` turns
//! such lines into the Markdown tables of `docs/journal.md`.
//!
//! ```text
//! cargo run --release -p infergate --example overhead -- run --label direct \
//!     --target 127.0.0.1:8001,127.0.0.1:8002 --rate 1000 --duration 20 --warmup 5
//! cargo run --release -p infergate --example overhead -- run --label infergate \
//!     --target 127.0.0.1:8080 --connections 64 --watch proxy=$(pgrep -n infergate)
//! cargo run --release -p infergate --example overhead -- table results.jsonl
//! ```
//!
//! Every load is bounded: at most `rate × (warmup + duration)` requests in open loop, nothing
//! sent after `warmup + duration` in closed loop, every request given up after `--timeout`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, Subcommand, ValueEnum};
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::Request;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::task::JoinSet;

#[derive(Debug, Parser)]
#[command(about = "Gateway-overhead load generator")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run one load and print its result.
    Run(RunArgs),
    /// Print the Markdown tables of a file of results.
    Table {
        /// JSON lines written by `run --out`.
        file: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Arrivals {
    /// Exponential gaps (a Poisson process): arrivals fall at every phase of the servers'
    /// timers.
    Poisson,
    /// Even gaps of exactly 1/rate.
    Uniform,
}

#[derive(Debug, Parser)]
struct RunArgs {
    /// Name of the path measured (`direct`, `infergate`, `envoy`, ...).
    #[arg(long)]
    label: String,
    /// Name of the setup it belongs to (the fleet); `table` compares paths within a set.
    #[arg(long, default_value = "default")]
    set: String,
    /// `host:port` targets, comma-separated; requests go round-robin over them.
    #[arg(long, value_delimiter = ',', required = true)]
    target: Vec<SocketAddr>,
    /// Open loop at this mean rate (requests per second).
    #[arg(long, conflicts_with = "connections")]
    rate: Option<f64>,
    /// Closed loop over this many connections.
    #[arg(long)]
    connections: Option<usize>,
    /// Open-loop arrival process.
    #[arg(long, value_enum, default_value_t = Arrivals::Poisson)]
    arrivals: Arrivals,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value_t = 20.0)]
    duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 5.0)]
    warmup: f64,
    /// Model named in the requests.
    #[arg(long, default_value = "llama")]
    model: String,
    /// `max_tokens` of each request.
    #[arg(long, default_value_t = 1)]
    max_tokens: u32,
    /// Seconds after which one request counts as failed.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Processes whose CPU use over the measured window is reported, as NAME=PID; a NAME given
    /// more than once reports the sum.
    #[arg(long)]
    watch: Vec<String>,
    /// Seed of the arrival process.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also append the JSON result line to this file.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// What the measured window saw.
struct Stats {
    hist: Histogram<u64>,
    ok: u64,
    errors: u64,
    first_error: Option<String>,
}

impl Stats {
    fn new() -> Self {
        Stats {
            hist: Histogram::new_with_bounds(1_000, 60_000_000_000, 3).unwrap(),
            ok: 0,
            errors: 0,
            first_error: None,
        }
    }

    fn ok(&mut self, latency: Duration) {
        self.ok += 1;
        self.hist
            .saturating_record(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    fn error(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }
}

type Shared = Arc<Mutex<Stats>>;

/// The measured window and the end of the load.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    measure_from: Instant,
    end: Instant,
}

impl Window {
    fn new(warmup: f64, duration: f64) -> Self {
        // A moment to set up before the first request.
        let start = Instant::now() + Duration::from_millis(100);
        let measure_from = start + Duration::from_secs_f64(warmup);
        Window {
            start,
            measure_from,
            end: measure_from + Duration::from_secs_f64(duration),
        }
    }

    fn measured(&self, sent: Instant) -> bool {
        sent >= self.measure_from && sent < self.end
    }
}

fn body(model: &str, max_tokens: u32, i: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"model":"{model}","max_tokens":{max_tokens},"messages":[{{"role":"system","content":"You are a helpful assistant."}},{{"role":"user","content":"Request {i}: say hello in one word."}}]}}"#
    ))
}

/// A fast seeded generator for the arrival gaps (SplitMix64).
struct SplitMix(u64);

impl SplitMix {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // In (0, 1]: never 0, so ln() is finite.
        ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// Send times (offsets from the start) of an open-loop run, up to `total` seconds.
fn schedule(rate: f64, total: f64, arrivals: Arrivals, seed: u64) -> Vec<Duration> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity((rate * total * 1.1) as usize + 16);
    let mut t = 0.0;
    loop {
        t += match arrivals {
            Arrivals::Uniform => 1.0 / rate,
            Arrivals::Poisson => -rng.next_f64().ln() / rate,
        };
        if t >= total {
            return out;
        }
        out.push(Duration::from_secs_f64(t));
    }
}

/// On-CPU nanoseconds of every thread of a process so far.
fn cpu_nanos(pid: &str) -> Option<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = task.ok()?.path().join("schedstat");
        if let Ok(text) = std::fs::read_to_string(path) {
            total += text
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Some(total)
}

/// Busy time of the whole machine so far (every CPU, `/proc/stat`), in nanoseconds.
fn machine_busy_nanos() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = text
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait, in USER_HZ
    // ticks (100 a second on Linux).
    let busy: u64 = fields
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    Some(busy * 10_000_000)
}

/// CPU use of the watched processes between two instants, as a share of one core; `other` is
/// what the rest of the machine used meanwhile (other users of shared cores).
struct CpuWatch {
    names: Vec<(String, String)>,
    before: Vec<Option<u64>>,
    machine: Option<u64>,
    at: Instant,
}

impl CpuWatch {
    fn start(watch: &[String]) -> Self {
        let mut names: Vec<(String, String)> = watch
            .iter()
            .filter_map(|w| w.split_once('='))
            .map(|(n, p)| (n.to_owned(), p.to_owned()))
            .collect();
        names.push(("loadgen".to_owned(), std::process::id().to_string()));
        let before = names.iter().map(|(_, p)| cpu_nanos(p)).collect();
        CpuWatch {
            names,
            before,
            machine: machine_busy_nanos(),
            at: Instant::now(),
        }
    }

    fn finish(self) -> BTreeMap<String, f64> {
        let wall = self.at.elapsed().as_nanos() as f64;
        // A name watched more than once (Envoy and its ext_proc server, both "proxy") sums.
        let mut out: BTreeMap<String, f64> = BTreeMap::new();
        for ((name, pid), before) in self.names.iter().zip(self.before) {
            if let Some(used) = before.and_then(|b| cpu_nanos(pid)?.checked_sub(b)) {
                *out.entry(name.clone()).or_insert(0.0) += used as f64 / wall;
            }
        }
        let machine = self
            .machine
            .and_then(|before| machine_busy_nanos()?.checked_sub(before));
        if let Some(busy) = machine {
            let ours: f64 = out.values().sum();
            out.insert("other".into(), (busy as f64 / wall - ours).max(0.0));
        }
        out
    }
}

/// Samples CPU use over the measured window, in the background.
fn watch_cpu(watch: Vec<String>, window: Window) -> tokio::task::JoinHandle<BTreeMap<String, f64>> {
    tokio::spawn(async move {
        tokio::time::sleep_until(window.measure_from.into()).await;
        let w = CpuWatch::start(&watch);
        tokio::time::sleep_until(window.end.into()).await;
        w.finish()
    })
}

async fn read_answer(resp: hyper::Response<hyper::body::Incoming>) -> Result<(), String> {
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!(
            "status {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ))
    }
}

async fn open_loop(args: &RunArgs, rate: f64, stats: Shared) -> (Window, BTreeMap<String, f64>) {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let offsets = schedule(rate, args.warmup + args.duration, args.arrivals, args.seed);
    let window = Window::new(args.warmup, args.duration);
    let cpu = watch_cpu(args.watch.clone(), window);
    // A thread of its own paces the sends: a tokio timer only has millisecond resolution.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let start = window.start;
    let pacer = std::thread::spawn(move || {
        for (i, offset) in offsets.into_iter().enumerate() {
            let due = start + offset;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if tx.send(i as u64).is_err() {
                return;
            }
        }
    });
    let timeout = Duration::from_secs_f64(args.timeout);
    let mut tasks = JoinSet::new();
    while let Some(i) = rx.recv().await {
        while tasks.try_join_next().is_some() {}
        let target = args.target[(i as usize) % args.target.len()];
        let req = Request::post(format!("http://{target}/v1/chat/completions"))
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body(&args.model, args.max_tokens, i)))
            .unwrap();
        let (client, stats) = (client.clone(), stats.clone());
        let sent = Instant::now();
        let measured = window.measured(sent);
        tasks.spawn(async move {
            let answer = tokio::time::timeout(timeout, async {
                let resp = client.request(req).await.map_err(|e| format!("{e:?}"))?;
                read_answer(resp).await
            })
            .await;
            let latency = sent.elapsed();
            if measured {
                let mut s = stats.lock().unwrap();
                match answer {
                    Ok(Ok(())) => s.ok(latency),
                    Ok(Err(e)) => s.error(e),
                    Err(_) => s.error(format!("no answer in {timeout:?}")),
                }
            }
        });
    }
    let _ = pacer.join();
    // Every request has its own timeout, so this ends.
    while tasks.join_next().await.is_some() {}
    (window, cpu.await.unwrap_or_default())
}

async fn connection_loop(
    target: SocketAddr,
    args: Arc<RunArgs>,
    window: Window,
    first: u64,
    stats: Shared,
) {
    let timeout = Duration::from_secs_f64(args.timeout);
    let host = target.to_string();
    let mut i = first;
    while Instant::now() < window.end {
        let Ok(Ok(stream)) =
            tokio::time::timeout(timeout, tokio::net::TcpStream::connect(target)).await
        else {
            if window.measured(Instant::now()) {
                stats
                    .lock()
                    .unwrap()
                    .error(format!("connect {target} failed"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let Ok((mut sender, conn)) =
            hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream)).await
        else {
            continue;
        };
        tokio::spawn(conn);
        while Instant::now() < window.end {
            if sender.ready().await.is_err() {
                break;
            }
            let req = Request::post("/v1/chat/completions")
                .header(HOST, &host)
                .header(CONTENT_TYPE, "application/json")
                .body(Full::new(body(&args.model, args.max_tokens, i)))
                .unwrap();
            i += 1 << 20;
            let sent = Instant::now();
            let answer = tokio::time::timeout(timeout, async {
                let resp = sender
                    .send_request(req)
                    .await
                    .map_err(|e| format!("{e:?}"))?;
                read_answer(resp).await
            })
            .await;
            let latency = sent.elapsed();
            let failed = !matches!(answer, Ok(Ok(())));
            if window.measured(sent) {
                let mut s = stats.lock().unwrap();
                match answer {
                    Ok(Ok(())) => s.ok(latency),
                    Ok(Err(e)) => s.error(e),
                    Err(_) => s.error(format!("no answer in {timeout:?}")),
                }
            }
            if failed {
                // A fresh connection: this one may be broken.
                break;
            }
        }
    }
}

async fn closed_loop(
    args: Arc<RunArgs>,
    connections: usize,
    stats: Shared,
) -> (Window, BTreeMap<String, f64>) {
    let window = Window::new(args.warmup, args.duration);
    let cpu = watch_cpu(args.watch.clone(), window);
    tokio::time::sleep_until(window.start.into()).await;
    let mut tasks = JoinSet::new();
    for c in 0..connections {
        let target = args.target[c % args.target.len()];
        tasks.spawn(connection_loop(
            target,
            args.clone(),
            window,
            c as u64,
            stats.clone(),
        ));
    }
    while tasks.join_next().await.is_some() {}
    (window, cpu.await.unwrap_or_default())
}

fn us(nanos: u64) -> f64 {
    (nanos as f64 / 100.0).round() / 10.0
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rate.is_some() != args.connections.is_some(),
        "give exactly one of --rate (open loop) or --connections (closed loop)"
    );
    anyhow::ensure!(
        args.duration > 0.0 && args.duration <= 600.0 && (0.0..=120.0).contains(&args.warmup),
        "--duration must be in (0, 600] and --warmup in [0, 120] seconds"
    );
    if let Some(rate) = args.rate {
        anyhow::ensure!(
            rate > 0.0 && rate <= 200_000.0,
            "--rate must be in (0, 200000]"
        );
    }
    if let Some(c) = args.connections {
        anyhow::ensure!(
            (1..=4096).contains(&c),
            "--connections must be in [1, 4096]"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let stats: Shared = Arc::new(Mutex::new(Stats::new()));
    let args = Arc::new(args);
    let (window, cpu) = runtime.block_on({
        let (args, stats) = (args.clone(), stats.clone());
        async move {
            match (args.rate, args.connections) {
                (Some(rate), _) => open_loop(&args, rate, stats).await,
                (_, Some(c)) => closed_loop(args.clone(), c, stats).await,
                _ => unreachable!("checked above"),
            }
        }
    });
    let s = stats.lock().unwrap();
    let secs = (window.end - window.measure_from).as_secs_f64();
    let h = &s.hist;
    let q = |x: f64| us(h.value_at_quantile(x));
    let result = json!({
        "label": args.label,
        "set": args.set,
        "mode": if args.rate.is_some() { "open" } else { "closed" },
        "rate": args.rate,
        "arrivals": args.rate.map(|_| format!("{:?}", args.arrivals).to_lowercase()),
        "connections": args.connections,
        "targets": args.target.len(),
        "warmup_s": args.warmup,
        "duration_s": secs,
        "max_tokens": args.max_tokens,
        "ok": s.ok,
        "errors": s.errors,
        "first_error": s.first_error,
        "achieved_rps": ((s.ok + s.errors) as f64 / secs).round(),
        "ok_rps": (s.ok as f64 / secs).round(),
        "p50_us": q(0.50),
        "p90_us": q(0.90),
        "p99_us": q(0.99),
        "p999_us": q(0.999),
        "max_us": us(h.max()),
        "mean_us": (h.mean() / 100.0).round() / 10.0,
        "cpu": cpu,
    });
    eprintln!(
        "{:<10} {:<6} {:>8} req/s ok {:>7} err {:>4}  p50 {:>8.1} µs  p90 {:>8.1}  p99 {:>8.1}  p99.9 {:>8.1}  max {:>9.1}  cpu {:?}",
        args.label,
        result["mode"].as_str().unwrap_or(""),
        result["achieved_rps"],
        s.ok,
        s.errors,
        q(0.50),
        q(0.90),
        q(0.99),
        q(0.999),
        us(h.max()),
        cpu,
    );
    if let Some(e) = &s.first_error {
        eprintln!("first error: {e}");
    }
    let line = serde_json::to_string(&result)?;
    println!("{line}");
    if let Some(path) = &args.out {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        writeln!(f, "{line}")?;
    }
    Ok(())
}

fn f(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn cpu_of(v: &Value, name: &str) -> Option<f64> {
    v.get("cpu")
        .and_then(|c| c.get(name))
        .and_then(Value::as_f64)
}

fn fmt_us(x: Option<f64>) -> String {
    x.map_or("–".into(), |x| format!("{x:.0} µs"))
}

fn fmt_delta(x: Option<f64>) -> String {
    x.map_or("–".into(), |x| format!("{x:+.0} µs"))
}

fn fmt_share(x: Option<f64>) -> String {
    x.map_or("–".into(), |x| format!("{:.0} %", x * 100.0))
}

/// The Markdown tables of a results file, per set: fixed rate (with the latency each path adds
/// over `direct` at the same rate) and closed-loop maximum (with requests per proxy core-second).
fn table(file: &PathBuf) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file)?;
    let rows: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let mut sets: Vec<&str> = Vec::new();
    for r in &rows {
        let set = r["set"].as_str().unwrap_or("default");
        if !sets.contains(&set) {
            sets.push(set);
        }
    }
    let mut first = true;
    for set in sets {
        let in_set = |mode: &str| -> Vec<&Value> {
            rows.iter()
                .filter(|r| r["mode"] == mode && r["set"].as_str().unwrap_or("default") == set)
                .collect()
        };
        let (open, closed) = (in_set("open"), in_set("closed"));
        if !open.is_empty() {
            if !first {
                println!();
            }
            first = false;
            println!("**{set}: open loop, fixed rate**");
            println!();
            open_table(&open);
        }
        if !closed.is_empty() {
            if !first {
                println!();
            }
            first = false;
            println!("**{set}: closed loop, maximum rate**");
            println!();
            closed_table(&closed);
        }
    }
    Ok(())
}

fn open_table(open: &[&Value]) {
    println!("| path | offered | achieved | p50 | p90 | p99 | p99.9 | max | added p50 | added p99 | proxy CPU | proxy CPU per request | other load | errors |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in open {
        let direct = open
            .iter()
            .find(|d| d["label"] == "direct" && d["rate"] == r["rate"]);
        let added = |key: &str| -> Option<f64> {
            let d = direct?;
            if d["label"] == r["label"] {
                return None;
            }
            Some(f(r, key)? - f(d, key)?)
        };
        // The proxy's core-seconds per second over the requests it answered per second.
        let per_request = cpu_of(r, "proxy")
            .zip(f(r, "ok_rps").filter(|n| *n > 0.0))
            .map(|(share, rps)| share / rps * 1e6);
        println!(
            "| {} | {} req/s | {} req/s | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r["label"].as_str().unwrap_or("?"),
            f(r, "rate").unwrap_or(0.0),
            f(r, "achieved_rps").unwrap_or(0.0),
            fmt_us(f(r, "p50_us")),
            fmt_us(f(r, "p90_us")),
            fmt_us(f(r, "p99_us")),
            fmt_us(f(r, "p999_us")),
            fmt_us(f(r, "max_us")),
            fmt_delta(added("p50_us")),
            fmt_delta(added("p99_us")),
            fmt_share(cpu_of(r, "proxy")),
            fmt_us(per_request),
            fmt_share(cpu_of(r, "other")),
            r["errors"],
        );
    }
}

fn closed_table(closed: &[&Value]) {
    println!("| path | connections | achieved | p50 | p99 | proxy CPU | req/s per proxy core | sim + loadgen CPU | other load | errors |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in closed {
        let proxy = cpu_of(r, "proxy");
        let per_core = proxy
            .filter(|p| *p > 0.0)
            .and_then(|p| Some(f(r, "ok_rps")? / p));
        let other = match (cpu_of(r, "sim"), cpu_of(r, "loadgen")) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        println!(
            "| {} | {} | {} req/s | {} | {} | {} | {} | {} | {} | {} |",
            r["label"].as_str().unwrap_or("?"),
            r["connections"],
            f(r, "achieved_rps").unwrap_or(0.0),
            fmt_us(f(r, "p50_us")),
            fmt_us(f(r, "p99_us")),
            fmt_share(proxy),
            per_core.map_or("–".into(), |x| format!("{x:.0} req/s")),
            fmt_share(other),
            fmt_share(cpu_of(r, "other")),
            r["errors"],
        );
    }
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Run(args) => run(args),
        Cmd::Table { file } => table(&file),
    }
}
