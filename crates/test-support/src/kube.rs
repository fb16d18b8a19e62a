//! A real Kubernetes control plane for a test: `tests/k8s/control-plane up DIR` (etcd and
//! kube-apiserver on loopback, built from their Go modules on first use and cached), stopped
//! with `down` when dropped; and `kubectl` against it.
//!
//! Pods never run here (no kubelet): a test creates a Pod and writes its status through the
//! status subresource (`Running`, a `podIP` on 127.0.0.x where a simulated replica listens,
//! `Ready=True`), so real routing flows through real discovery.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::dir::TempDir;

/// A running control plane; stopped when dropped.
pub struct ControlPlane {
    dir: TempDir,
    script: PathBuf,
}

/// The repository's root (this crate is `crates/test-support`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl ControlPlane {
    /// Starts one (building the binaries first if the cache lacks them). Panics with the
    /// script's output if it cannot: a test that needs an API server must not pass without.
    pub fn up(what: &str) -> ControlPlane {
        let cp = ControlPlane {
            dir: TempDir::new(what),
            script: repo_root().join("tests/k8s/control-plane"),
        };
        cp.script_must("up");
        cp
    }

    /// Runs `tests/k8s/control-plane VERB DIR`, which must succeed.
    fn script_must(&self, verb: &str) {
        let out = Command::new(&self.script)
            .arg(verb)
            .arg(self.dir())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tests/k8s/control-plane {verb} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Its directory (kubeconfig, logs, `bin/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The kubeconfig of its admin.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir().join("kubeconfig")
    }

    /// Stops the API server and etcd, keeping the data (a later [`ControlPlane::restart`]
    /// brings the same cluster back).
    pub fn stop(&self) {
        let _ = Command::new(&self.script)
            .arg("down")
            .arg(self.dir())
            .output();
    }

    /// Starts it again after [`ControlPlane::stop`], on the same data; the kubeconfig is
    /// rewritten for the new port.
    pub fn restart(&self) {
        self.script_must("up");
    }

    /// `kubectl ARGS` as the admin; its output, whatever the exit status.
    pub fn kubectl_output(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(self.dir().join("bin/kubectl"))
            .env("KUBECONFIG", self.kubeconfig())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        {
            let mut input = child.stdin.take().unwrap();
            if let Some(s) = stdin {
                input.write_all(s.as_bytes()).unwrap();
            }
        }
        child.wait_with_output().unwrap()
    }

    /// `kubectl ARGS`, which must succeed: its stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_in(args, None)
    }

    /// `kubectl ARGS` with `stdin`, which must succeed: its stdout.
    pub fn kubectl_in(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl_output(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f -` of `yaml` in `namespace`.
    pub fn apply(&self, namespace: &str, yaml: &str) {
        self.kubectl_in(&["apply", "-n", namespace, "-f", "-"], Some(yaml));
    }

    /// A Pod `name` labelled `labels` (`k=v,k=v`), made Ready at `ip` through the status
    /// subresource. With `node`, it names a node, so a delete leaves it Terminating (the
    /// API server deletes an unscheduled pod at once).
    pub fn ready_pod(
        &self,
        namespace: &str,
        name: &str,
        labels: &str,
        ip: &str,
        node: Option<&str>,
    ) {
        let labels: Vec<String> = labels
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| format!("{k}: \"{v}\""))
            .collect();
        let node = node.map_or(String::new(), |n| format!("\n  nodeName: {n}"));
        self.apply(
            namespace,
            &format!(
                "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{{}}}
spec:{node}
  containers: [{{name: server, image: vllm/vllm-openai}}]
",
                labels.join(", ")
            ),
        );
        self.set_pod_status(namespace, name, ip, true);
    }

    /// Writes a pod's status: `Running` at `ip`, condition `Ready` as `ready` says.
    pub fn set_pod_status(&self, namespace: &str, name: &str, ip: &str, ready: bool) {
        let ready = if ready { "True" } else { "False" };
        let patch = format!(
            r#"{{"status":{{"phase":"Running","podIP":"{ip}","podIPs":[{{"ip":"{ip}"}}],"conditions":[{{"type":"Ready","status":"{ready}"}}]}}}}"#
        );
        self.kubectl(&[
            "patch",
            "pod",
            name,
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ]);
    }

    /// A fresh namespace (the API server has no controller to finish deleting one, so every
    /// test takes its own).
    pub fn namespace(&self, name: &str) -> String {
        self.kubectl(&["create", "namespace", name]);
        name.to_owned()
    }

    /// Applies infergate's CRDs and waits until they are served.
    pub fn install_crds(&self) {
        let crds = repo_root().join("deploy/helm/infergate/crds");
        let crds = crds.to_string_lossy();
        self.kubectl(&["apply", "--server-side", "-f", &crds]);
        self.kubectl(&[
            "wait",
            "--for",
            "condition=established",
            "--timeout=60s",
            "-f",
            &crds,
        ]);
    }

    /// A JSONPath of one object, e.g. `("igwc", "my-gateway", "{.status.conditions}")`.
    pub fn jsonpath(&self, namespace: &str, kind: &str, name: &str, path: &str) -> String {
        self.kubectl(&[
            "get",
            kind,
            name,
            "-n",
            namespace,
            "-o",
            &format!("jsonpath={path}"),
        ])
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}
