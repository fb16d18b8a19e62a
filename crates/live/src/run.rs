//! One live run: the scenario's fleet as real `infergate sim` replicas, the router under test in
//! front of them, the workload replayed through it in real time, everything torn down after.

use crate::files::{adapters, fleet_yaml, MODEL};
use crate::loadgen::{prepare, replay, Record, Target};
use crate::monitor::{family_sum, sample_queues, QUEUE_EVERY};
use crate::process::{free_ports, http, wait_until, Interrupt, Process};
use crate::router::{Launch, Router};
use crate::LiveError;
use infergate_bench::runner::RunOutcome;
use infergate_bench::scenario::Scenario;
use infergate_bench::workload::BenchRequest;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Knobs of live runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveOptions {
    /// The `infergate` binary that runs `sim` (and `serve`, for infergate's policies).
    pub infergate: PathBuf,
    /// How long after the last arrival requests may take to finish; those still open then are
    /// counted unfinished, as the virtual runner counts what its drain leaves.
    pub drain: Duration,
    /// How long the replicas and the router may take to become ready.
    pub startup: Duration,
}

impl LiveOptions {
    /// Defaults around the `infergate` binary at `infergate`: two minutes of drain, one of
    /// start-up.
    pub fn new(infergate: PathBuf) -> LiveOptions {
        LiveOptions {
            infergate,
            drain: Duration::from_secs(120),
            startup: Duration::from_secs(60),
        }
    }
}

/// Runs live runs one after another on one async runtime, and turns Ctrl-C or SIGTERM into a
/// teardown of whatever is running.
#[derive(Debug)]
pub struct LiveRunner {
    runtime: tokio::runtime::Runtime,
    interrupt: Interrupt,
    options: LiveOptions,
}

/// Distinguishes the work directories of runs within one process.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Fleet counters read from the replicas' `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Counters {
    prefix_queries: f64,
    prefix_hits: f64,
    preemptions: f64,
}

impl LiveRunner {
    /// A runner with `options`; from now on Ctrl-C and SIGTERM interrupt the run in progress.
    pub fn new(options: LiveOptions) -> Result<LiveRunner, LiveError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| LiveError::io(std::path::Path::new("tokio runtime"), e))?;
        let interrupt = Interrupt::watch(&runtime);
        Ok(LiveRunner {
            runtime,
            interrupt,
            options,
        })
    }

    /// Whether Ctrl-C or SIGTERM has come.
    pub fn interrupted(&self) -> bool {
        self.interrupt.is_set()
    }

    /// Runs `requests` (arrival times from zero) on the scenario's fleet behind `router`, with
    /// replica engines seeded as the virtual runner seeds them for `seed`, and returns what every
    /// request saw. The replicas start cold, in a fresh process per run.
    pub fn run(
        &self,
        scenario: &Scenario,
        router: &Router,
        requests: &[BenchRequest],
        seed: u64,
    ) -> Result<RunOutcome, LiveError> {
        let dir = std::env::temp_dir().join(format!(
            "infergate-live-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| LiveError::io(&dir, e))?;
        let result = self.run_in(&dir, scenario, router, requests, seed);
        match &result {
            Ok(_) => {
                let _ = std::fs::remove_dir_all(&dir);
            }
            Err(_) => eprintln!("live: configs and logs kept in {}", dir.display()),
        }
        result
    }

    fn run_in(
        &self,
        dir: &std::path::Path,
        scenario: &Scenario,
        router: &Router,
        requests: &[BenchRequest],
        seed: u64,
    ) -> Result<RunOutcome, LiveError> {
        let n = scenario.replicas().count();
        let ports = free_ports(n + 5)?;
        let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        let replicas: Vec<SocketAddr> = if router.discovers_pods() {
            (0..n)
                .map(|i| SocketAddr::new(pod_ip(i), ports[0]))
                .collect()
        } else {
            ports[..n].iter().map(|&p| addr(p)).collect()
        };
        let fleet = dir.join("fleet.yaml");
        let adapters = adapters(requests);
        std::fs::write(&fleet, fleet_yaml(scenario, &replicas, seed, &adapters))
            .map_err(|e| LiveError::io(&fleet, e))?;
        let mut cmd = Command::new(&self.options.infergate);
        cmd.arg("sim")
            .arg("--fleet")
            .arg(&fleet)
            .env("RUST_LOG", "warn");
        let mut sim = Process::spawn("infergate sim", cmd, &dir.join("sim.log"))?;
        let startup = self.options.startup;
        for r in &replicas {
            wait_until(
                &format!("replica {r} /health"),
                startup,
                &mut [&mut sim],
                &self.interrupt,
                || http(*r, "GET", "/health", "").is_some_and(|(s, _)| s == 200),
            )?;
        }

        let flow_control = with_flow_control(scenario, router);
        let launch = Launch {
            dir,
            infergate: &self.options.infergate,
            replicas: &replicas,
            adapters: &adapters,
            flow_control,
            listen: addr(ports[n]),
            admin: addr(ports[n + 1]),
            picker: [addr(ports[n + 2]), addr(ports[n + 3]), addr(ports[n + 4])],
        };
        let mut front = router.start(&launch)?;
        let ready = front.ready;
        if let Some((at, path)) = ready {
            wait_until(
                &format!("{} {path}", router.name()),
                startup,
                &mut running(&mut sim, &mut front.processes),
                &self.interrupt,
                || http(at, "GET", path, "").is_some_and(|(s, _)| s == 200),
            )?;
        }
        // Ready means a completion goes through: the Python routers have no other signal, and
        // it proves the path for every router alike.
        let probe = format!(r#"{{"model": "{MODEL}", "prompt": "ready?", "max_tokens": 1}}"#);
        wait_until(
            &format!("a completion through {}", router.name()),
            startup,
            &mut running(&mut sim, &mut front.processes),
            &self.interrupt,
            || {
                http(launch.listen, "POST", "/v1/completions", &probe)
                    .is_some_and(|(s, _)| s == 200)
            },
        )?;

        let before = fleet_counters(&replicas);
        let prepared = prepare(requests, MODEL);
        let target = Target {
            addr: launch.listen,
        };
        let (done, watching) = watch::channel(false);
        let (records, queue_samples) = self.runtime.block_on(async {
            // A little lead so the first arrival is not late while the tasks are spawned.
            let start = Instant::now() + Duration::from_millis(50);
            let replay = async {
                let records = replay(
                    &target,
                    &prepared,
                    start,
                    self.options.drain,
                    self.interrupt.clone().wait(),
                )
                .await;
                let _ = done.send(true);
                records
            };
            tokio::join!(
                replay,
                sample_queues(&replicas, start, QUEUE_EVERY, watching)
            )
        });
        let records = records.map_err(|_| LiveError::Interrupted)?;
        // A router or fleet that died mid-run makes every figure meaningless: say so.
        for p in &mut front.processes {
            p.check_running()?;
        }
        sim.check_running()?;
        let after = fleet_counters(&replicas);
        drop(front);
        drop(sim);

        let outcomes: Vec<_> = records
            .iter()
            .zip(requests)
            .map(|(rec, req)| rec.outcome(req.band, flow_control))
            .collect();
        let last_arrival = outcomes.iter().map(|o| o.sent).max().unwrap_or_default();
        let queries = after.prefix_queries - before.prefix_queries;
        Ok(RunOutcome {
            requests: outcomes,
            last_arrival,
            prefix_hit_ratio: (after.prefix_hits - before.prefix_hits) / queries.max(1.0),
            preemptions: (after.preemptions - before.preemptions).max(0.0) as u64,
            queue_samples,
            token_gaps_ms: records.iter().map(Record::token_gaps_ms).collect(),
            gateways: Vec::new(),
        })
    }
}

/// Every process a run needs running: the fleet's and the router's.
/// Whether `router` runs behind infergate's flow control in `scenario`, as in the virtual runner:
/// `infergate` always, as it ships; another policy through `serve` only in a scenario with
/// priority bands, where every policy is measured behind the same admission; the peers never
/// (they forward everything at once).
fn with_flow_control(scenario: &Scenario, router: &Router) -> bool {
    match router {
        Router::Infergate { policy } => {
            scenario.bands.is_some() || policy == infergate_bench::runner::INFERGATE
        }
        _ => false,
    }
}

fn running<'a>(sim: &'a mut Process, front: &'a mut [Process]) -> Vec<&'a mut Process> {
    std::iter::once(sim).chain(front.iter_mut()).collect()
}

/// The address of replica `index` for a router that finds replicas as pods: pod IPs on
/// loopback from 127.0.2.1 up (Linux routes all of 127.0.0.0/8 to the loopback interface),
/// clear of 127.0.0.x, which other tests give their pods, and of 127.0.1.1, which Debian gives
/// the host's name.
fn pod_ip(index: usize) -> IpAddr {
    let base = u32::from(Ipv4Addr::new(127, 0, 2, 1));
    IpAddr::V4(Ipv4Addr::from(base.saturating_add(index as u32)))
}

/// The fleet's prefix-cache and preemption counters, summed over the replicas (a replica that
/// does not answer adds nothing).
fn fleet_counters(replicas: &[SocketAddr]) -> Counters {
    let mut total = Counters::default();
    for r in replicas {
        let Some((200, text)) = http(*r, "GET", "/metrics", "") else {
            continue;
        };
        total.prefix_queries += family_sum(&text, "vllm:prefix_cache_queries_total");
        total.prefix_hits += family_sum(&text, "vllm:prefix_cache_hits_total");
        total.preemptions += family_sum(&text, "vllm:num_preemptions_total");
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infergate_runs_behind_its_flow_control_as_in_the_virtual_runner() {
        let find = |id: &str| {
            infergate_bench::scenario::all()
                .into_iter()
                .find(|s| s.id == id)
                .unwrap()
        };
        let (plain, banded) = (find("mixed-gpu-32b"), find("priority-overload-8b"));
        let serve = |policy: &str| Router::Infergate {
            policy: policy.into(),
        };
        assert!(with_flow_control(&plain, &serve("infergate")));
        assert!(!with_flow_control(&plain, &serve("gie-default")));
        assert!(with_flow_control(&banded, &serve("gie-default")));
        assert!(!with_flow_control(&banded, &Router::EnvoyRoundRobin));
    }

    #[test]
    fn pod_ips_count_up_from_127_0_2_1_across_octets() {
        assert_eq!(pod_ip(0), IpAddr::from([127, 0, 2, 1]));
        assert_eq!(pod_ip(7), IpAddr::from([127, 0, 2, 8]));
        assert_eq!(pod_ip(300), IpAddr::from([127, 0, 3, 45]));
    }
}
