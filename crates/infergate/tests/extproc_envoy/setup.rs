//! The processes of a test besides Envoy: `infergate extproc` over a config written for the
//! test, and `infergate sim` replicas.

use std::net::SocketAddr;
use std::process::Stdio;

use crate::common::{get, infergate, instant_replica, start_on_free_ports, Running};
use crate::envoy::{Envoy, Pool, Spec};
pub use infergate_test_support::dir::TempDir;

/// A pool of a test config.
pub struct PoolDef<'a> {
    pub name: &'a str,
    pub model: &'a str,
    pub endpoints: Vec<SocketAddr>,
    /// YAML lines added to the scheduler (indented 6).
    pub extra: &'a str,
}

/// An InferenceGatewayConfig over `pools`; `spec_extra` is added under `spec:` (indented 2).
pub fn gateway_config(pools: &[PoolDef<'_>], spec_extra: &str) -> String {
    let mut y = format!(
        "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {{enabled: true}}\n{spec_extra}  schedulers:\n"
    );
    for p in pools {
        y.push_str(&format!(
            "    - name: {}\n      modelName: {}\n      modelSelector: {{matchLabels: {{pool: {}}}}}\n{}",
            p.name, p.model, p.name, p.extra
        ));
    }
    y.push_str("  endpoints:\n");
    for p in pools {
        for e in &p.endpoints {
            y.push_str(&format!(
                "    - {{address: \"{e}\", labels: {{pool: {}}}}}\n",
                p.name
            ));
        }
    }
    y
}

/// A running `infergate extproc`.
pub struct Picker {
    pub port: u16,
    pub admin: u16,
    pub child: Running,
    _dir: TempDir,
}

impl Picker {
    /// Starts `infergate extproc` over `config` and waits until it is ready (every endpoint
    /// scraped); started again on fresh ports if it exits first ([`start_on_free_ports`]).
    pub fn start(config: &str) -> Picker {
        Self::start_with_env(config, &[])
    }

    /// [`Picker::start`] with `env` set for the process (the OTEL variables, say).
    pub fn start_with_env(config: &str, env: &[(&str, String)]) -> Picker {
        let dir = TempDir::new("picker");
        let file = dir.path().join("gateway.yaml");
        std::fs::write(&file, config).unwrap();
        let spawn = |[port, admin]: [u16; 2]| {
            let log = std::fs::File::create(dir.path().join("extproc.log")).unwrap();
            infergate()
                .args(["extproc", "--config"])
                .arg(&file)
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap()
        };
        let ready = |[_, admin]: [u16; 2]| {
            get(admin, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
        };
        let (child, [port, admin]) =
            start_on_free_ports("infergate extproc to be ready", spawn, ready);
        Picker {
            port,
            admin,
            child,
            _dir: dir,
        }
    }

    /// What `infergate extproc` has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("extproc.log")).unwrap_or_default()
    }

    /// infergate's `/metrics`.
    pub fn metrics(&self) -> String {
        get(self.admin, "/metrics").unwrap_or_default()
    }

    /// The value of one exposition line, like `infergate_requests_total{…}`; 0 when absent.
    pub fn metric(&self, series: &str) -> f64 {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }
}

/// An `infergate sim` replica of the `instant` profile serving `model`, once healthy
/// ([`instant_replica`]): its address and the process.
pub fn sim(model: &str) -> (SocketAddr, Running) {
    let (running, port) = instant_replica(model);
    (SocketAddr::from(([127, 0, 0, 1], port)), running)
}

/// `infergate extproc` ([`Picker::start`]) over one pool `llama` on `endpoints`,
/// `scheduler_extra` added to its scheduler, `spec_extra` under `spec:`.
pub fn one_pool_picker(
    endpoints: &[SocketAddr],
    scheduler_extra: &str,
    spec_extra: &str,
) -> Picker {
    Picker::start(&gateway_config(
        &[PoolDef {
            name: "llama",
            model: "llama",
            endpoints: endpoints.to_vec(),
            extra: scheduler_extra,
        }],
        spec_extra,
    ))
}

/// One pool `llama` over `endpoints` (`scheduler_extra` added to its scheduler, `spec_extra`
/// under `spec:`), infergate picking for an Envoy in front that fails closed.
pub fn one_pool(
    endpoints: &[SocketAddr],
    scheduler_extra: &str,
    spec_extra: &str,
) -> (Picker, Envoy) {
    let picker = one_pool_picker(endpoints, scheduler_extra, spec_extra);
    let envoy = Spec {
        pools: vec![Pool {
            cluster: "llama",
            base_model: None,
            endpoints: endpoints.to_vec(),
        }],
        ext_proc: picker.port,
        fail_open: false,
        tls: false,
    }
    .start(true);
    (picker, envoy)
}
