//! A real `redis-server` for tests, on a loopback port of its own, killed when dropped, and
//! plain RESP commands to it.
//!
//! `REDIS_SERVER` names the binary when it is not `redis-server` on the PATH.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::free_port;

/// A running `redis-server`, nothing persisted.
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    /// A server on a free loopback port.
    ///
    /// A port that was free when chosen is not reserved: another test's server, started at the
    /// same moment, may bind it first, and then this one exits while the other answers on the
    /// port — a server shared with a test that will kill it. So a server counts as started only
    /// once the one answering reports this child's process id; otherwise it starts again on a
    /// fresh port.
    pub fn on_free_port() -> RedisServer {
        const TRIES: usize = 5;
        for _ in 0..TRIES {
            if let Some(server) = Self::on_port(free_port()) {
                return server;
            }
        }
        panic!("redis-server did not start on a port of its own in {TRIES} tries");
    }

    /// A server on `port`, once it answers there; `None` when it exited or another server
    /// answers instead.
    pub fn on_port(port: u16) -> Option<RedisServer> {
        let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
        let child = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start `{bin}` ({e}): these tests need a real Redis; install it \
                     (apt-get install -y redis-server) or set REDIS_SERVER to its path"
                )
            });
        // Dropping it kills the child, whatever happens below.
        let mut server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if server.child.try_wait().unwrap().is_some() {
                return None; // it exited: the port was taken
            }
            if let Some(pid) = server_pid(port) {
                return (pid == server.child.id()).then_some(server);
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A server on loopback `port` (one this test has just freed, say to restart its server);
    /// panics if another process answers there.
    pub fn taking(port: u16) -> RedisServer {
        Self::on_port(port).unwrap_or_else(|| {
            panic!("redis-server could not take port {port}: another process has it")
        })
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The process id that the Redis answering on loopback `port` reports (`INFO server`), if one
/// answers.
fn server_pid(port: u16) -> Option<u32> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    conn.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .ok()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&reply);
        if let Some(rest) = text.split("process_id:").nth(1) {
            if let Some((pid, _)) = rest.split_once("\r\n") {
                return pid.trim().parse().ok();
            }
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
        }
    }
}

/// One command to the Redis on loopback `port`; its raw RESP reply.
pub fn command(port: u16, args: &[&str]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(cmd.as_bytes()).unwrap();
    let mut buf = [0u8; 512];
    let n = loop {
        match s.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            n => break n.unwrap(),
        }
    };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The bulk strings of a RESP reply, in order (a nil or missing one is left out).
pub fn strings(reply: &str) -> Vec<&str> {
    reply
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.starts_with(['*', '$']))
        .collect()
}

/// Redis's clock in whole milliseconds (`TIME`), as a Lua script running there reads it.
pub fn time_ms(port: u16) -> u64 {
    let reply = command(port, &["TIME"]);
    let parts: Vec<u64> = strings(&reply).iter().map(|v| v.parse().unwrap()).collect();
    parts[0] * 1000 + parts[1] / 1000
}
