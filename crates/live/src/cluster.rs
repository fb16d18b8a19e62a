//! A Kubernetes API for a peer that can only discover its endpoints as pods: the repository's
//! test control plane (`tests/k8s/control-plane`: etcd and kube-apiserver on loopback, no
//! kubelet), the CRDs and objects the peer reads, and one Pod per simulated replica, made Ready
//! at the replica's address through the status subresource, as a kubelet would report it.
//!
//! The script is found through `INFERGATE_CONTROL_PLANE` (a path to it), else in the checkout
//! this crate was built from. Its first `up` on a machine builds the binaries (minutes).

use crate::files::{pod_status_patch, pods_yaml};
use crate::LiveError;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The namespace the pods and the picker live in.
pub const NAMESPACE: &str = "default";

/// A started control plane, stopped (`down`) when dropped.
#[derive(Debug)]
pub struct Cluster {
    script: PathBuf,
    dir: PathBuf,
}

impl Cluster {
    /// Starts a control plane with its files in `dir` (building it first if its cache lacks the
    /// binaries), installs `crds`, applies `objects` (YAML) and creates one Ready pod per
    /// replica, in replica order.
    pub fn up(
        dir: &Path,
        crds: &[PathBuf],
        objects: &str,
        replicas: &[SocketAddr],
    ) -> Result<Cluster, LiveError> {
        let script = control_plane_script()?;
        std::fs::create_dir_all(dir).map_err(|e| LiveError::io(dir, e))?;
        // Built before the first command can fail, so a failed `up` is still torn down.
        let cluster = Cluster {
            script,
            dir: dir.to_owned(),
        };
        let out = Command::new(&cluster.script)
            .arg("up")
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| LiveError::io(&cluster.script, e))?;
        check("tests/k8s/control-plane up", &out)?;
        for crd in crds {
            let crd = crd.to_string_lossy();
            cluster.kubectl(&["apply", "--server-side", "-f", &crd], None)?;
            // Objects of a kind are refused until its CRD is served.
            cluster.kubectl(
                &[
                    "wait",
                    "--for",
                    "condition=established",
                    "--timeout=60s",
                    "-f",
                    &crd,
                ],
                None,
            )?;
        }
        cluster.kubectl(&["apply", "-n", NAMESPACE, "-f", "-"], Some(objects))?;
        cluster.kubectl(
            &["apply", "-n", NAMESPACE, "-f", "-"],
            Some(&pods_yaml(replicas.len())),
        )?;
        for (i, r) in replicas.iter().enumerate() {
            cluster.kubectl(
                &[
                    "patch",
                    "pod",
                    &format!("bench-{i}"),
                    "-n",
                    NAMESPACE,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    &pod_status_patch(r.ip()),
                ],
                None,
            )?;
        }
        Ok(cluster)
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// `kubectl ARGS` as the admin, which must succeed.
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<(), LiveError> {
        let kubectl = self.dir.join("bin/kubectl");
        let mut child = Command::new(&kubectl)
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LiveError::io(&kubectl, e))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            use std::io::Write as _;
            pipe.write_all(text.as_bytes())
                .map_err(|e| LiveError::io(&kubectl, e))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| LiveError::io(&kubectl, e))?;
        check(&format!("kubectl {}", args.join(" ")), &out)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(&self.script)
            .arg("down")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// `Err` with the command's output unless it succeeded.
fn check(what: &str, out: &Output) -> Result<(), LiveError> {
    if out.status.success() {
        return Ok(());
    }
    Err(LiveError::Start {
        what: what.to_owned(),
        reason: format!(
            "{}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    })
}

/// `$INFERGATE_CONTROL_PLANE`, else the checkout's `tests/k8s/control-plane`.
fn control_plane_script() -> Result<PathBuf, LiveError> {
    let path = std::env::var_os("INFERGATE_CONTROL_PLANE")
        .filter(|p| !p.is_empty())
        .map_or_else(|| repo_file("tests/k8s/control-plane"), PathBuf::from);
    if path.is_file() {
        Ok(path)
    } else {
        Err(LiveError::Start {
            what: "a Kubernetes control plane".into(),
            reason: format!(
                "no {}: set INFERGATE_CONTROL_PLANE to the repository's tests/k8s/control-plane",
                path.display()
            ),
        })
    }
}

/// A file of the checkout this crate was built from (`crates/live` is two levels down).
pub(crate) fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}
