//! Network namespaces as hosts of their own (`ip netns`, a veth pair to the test's namespace,
//! from iproute2), and faults on their links (`nft`, from nftables): a process started in one
//! has its own loopback and its own address, and a cut link drops every packet — a black hole,
//! not a refusal. Needs root (CI runs as root; elsewhere `sudo -n` is used); a test that cannot
//! create one fails, saying why.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Namespaces made by this process so far: each gets its own /30 and interface names.
static MADE: AtomicU32 = AtomicU32::new(0);

/// `program` as root: itself when the test runs as root (CI), else through `sudo -n` (a
/// developer's machine with passwordless sudo).
fn as_root(program: &str) -> Command {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    if root {
        Command::new(program)
    } else {
        let mut c = Command::new("sudo");
        c.args(["-n", program]);
        c
    }
}

fn run(program: &str, args: &[&str]) {
    let out = as_root(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e} (iproute2 and nftables are needed)"));
    assert!(
        out.status.success(),
        "{program} {}: {} (creating network namespaces needs CAP_NET_ADMIN)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespace with a veth link to the test's namespace; removed (and its processes' sockets
/// with it) when dropped.
#[derive(Debug)]
pub struct Netns {
    /// Its name for `ip netns`.
    pub name: String,
    /// Its end of the link's address: processes inside listen here.
    pub ip: String,
    /// The test namespace's end.
    pub peer_ip: String,
    host_if: String,
}

impl Netns {
    /// A new namespace with its loopback up and a veth pair to this one, on a /30 of its own.
    pub fn create() -> Netns {
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("{:x}{n}", pid % 0x10000);
        let name = format!("ig-{tag}");
        let host_if = format!("igh{tag}");
        let ns_if = format!("ign{tag}");
        // 10.(100 + pid % 100).n.(4k+1, 4k+2): processes running at once rarely share pid % 100.
        let net = format!("10.{}.{}", 100 + pid % 100, n);
        let (peer_ip, ip) = (format!("{net}.1"), format!("{net}.2"));
        run("ip", &["netns", "add", &name]);
        let ns = Netns {
            name,
            ip,
            peer_ip,
            host_if,
        };
        run(
            "ip",
            &["netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"],
        );
        run(
            "ip",
            &[
                "link",
                "add",
                &ns.host_if,
                "type",
                "veth",
                "peer",
                "name",
                &ns_if,
                "netns",
                &ns.name,
            ],
        );
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/30", ns.peer_ip),
                "dev",
                &ns.host_if,
            ],
        );
        run("ip", &["link", "set", &ns.host_if, "up"]);
        ns.exec(&["ip", "addr", "add", &format!("{}/30", ns.ip), "dev", &ns_if]);
        ns.exec(&["ip", "link", "set", &ns_if, "up"]);
        ns
    }

    fn exec(&self, args: &[&str]) {
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(args);
        run("ip", &all);
    }

    /// `program` to be run inside the namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = as_root("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// Cuts the namespace off: every packet in or out is dropped (nftables), loopback inside
    /// included, so nothing is refused and nothing answers.
    pub fn black_hole(&self) {
        self.exec(&["nft", "add", "table", "inet", "ig_cut"]);
        for (chain, hook) in [("in", "input"), ("out", "output")] {
            self.exec(&[
                "nft",
                &format!(
                    "add chain inet ig_cut {chain} {{ type filter hook {hook} priority 0 ; policy drop ; }}"
                ),
            ]);
        }
    }

    /// Undoes [`Self::black_hole`].
    pub fn heal(&self) {
        self.exec(&["nft", "delete", "table", "inet", "ig_cut"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Whatever still runs inside goes with it (through sudo, a killed child may leave its
        // own child behind).
        if let Ok(out) = as_root("ip").args(["netns", "pids", &self.name]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = as_root("kill").args(["-9", pid]).output();
            }
        }
        let _ = as_root("ip").args(["link", "del", &self.host_if]).output();
        let _ = as_root("ip").args(["netns", "del", &self.name]).output();
    }
}
