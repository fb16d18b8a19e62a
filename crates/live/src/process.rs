//! Child processes that cannot outlive a run, free loopback ports, plain HTTP/1.1 probes, and
//! the interrupt that turns Ctrl-C or SIGTERM into an orderly teardown.

use crate::LiveError;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A child process that is killed and reaped when dropped — on success, on error and on panic
/// alike — so a run leaves nothing behind. Its stdout and stderr go to a log file.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `command` as `name`, its output to `log`.
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> Result<Process, LiveError> {
        let out = File::create(log).map_err(|e| LiveError::io(log, e))?;
        let err = out.try_clone().map_err(|e| LiveError::io(log, e))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| LiveError::Start {
                what: name.to_owned(),
                reason: format!("{}: {e}", command.get_program().to_string_lossy()),
            })?;
        Ok(Process {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
        })
    }

    /// `Err` naming the process, its exit status and the end of its log if it has exited.
    pub fn check_running(&mut self) -> Result<(), LiveError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(LiveError::Exited {
                what: self.name.clone(),
                status: status.to_string(),
                log_tail: log_tail(&self.log),
            }),
            Err(e) => Err(LiveError::io(&self.log, e)),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last lines of a log, for error messages.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// `n` distinct loopback ports nothing listens on right now (all bound at once, then released).
pub fn free_ports(n: usize) -> Result<Vec<u16>, LiveError> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LiveError::io(Path::new("127.0.0.1:0"), e))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LiveError::io(Path::new("127.0.0.1:0"), e))
}

/// One HTTP/1.1 exchange on a fresh connection: the status and the body, or `None` if the
/// connection failed or timed out.
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let timeout = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    let status = raw.split(' ').nth(1)?.parse().ok()?;
    let body = raw.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    Some((status, body))
}

/// Set once Ctrl-C or SIGTERM arrives while a live run is in progress.
#[derive(Debug, Clone)]
pub struct Interrupt {
    rx: watch::Receiver<bool>,
}

impl Interrupt {
    /// Watches for Ctrl-C and SIGTERM on `runtime`. Once watched, neither signal ends the process
    /// by itself any more: the run notices, tears its processes down and returns an error.
    pub fn watch(runtime: &tokio::runtime::Runtime) -> Interrupt {
        let (tx, rx) = watch::channel(false);
        runtime.spawn(async move {
            #[cfg(unix)]
            let term = async {
                use tokio::signal::unix::{signal, SignalKind};
                match signal(SignalKind::terminate()) {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            #[cfg(not(unix))]
            let term = std::future::pending::<()>();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = term => {}
            }
            let _ = tx.send(true);
        });
        Interrupt { rx }
    }

    /// An interrupt that never fires (tests).
    pub fn never() -> Interrupt {
        let (tx, rx) = watch::channel(false);
        // Dropping the sender leaves the value false for ever.
        drop(tx);
        Interrupt { rx }
    }

    /// Whether the signal has come.
    pub fn is_set(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves when the signal comes (never, if it cannot come any more).
    pub async fn wait(mut self) {
        if self.rx.wait_for(|set| *set).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Polls `ok` every 50 ms until it holds; fails when `timeout` passes, when one of `processes`
/// exits, or on an interrupt.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    processes: &mut [&mut Process],
    interrupt: &Interrupt,
    mut ok: impl FnMut() -> bool,
) -> Result<(), LiveError> {
    let deadline = Instant::now() + timeout;
    loop {
        if ok() {
            return Ok(());
        }
        for p in processes.iter_mut() {
            p.check_running()?;
        }
        if interrupt.is_set() {
            return Err(LiveError::Interrupted);
        }
        if Instant::now() >= deadline {
            return Err(LiveError::Timeout {
                what: what.to_owned(),
                after: timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_process_is_killed_and_reaped() {
        let dir = std::env::temp_dir().join(format!("infergate-live-proc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let mut p = Process::spawn("sleeper", cmd, &dir.join("sleep.log")).unwrap();
        let pid = p.child.id();
        p.check_running().unwrap();
        drop(p);
        // Reaped: the pid is gone from the process table (not even a zombie).
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_exited_process_is_reported_with_its_log() {
        let dir = std::env::temp_dir().join(format!("infergate-live-exit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo bad flag >&2; exit 3"]);
        let mut p = Process::spawn("broken", cmd, &dir.join("broken.log")).unwrap();
        let err = wait_until(
            "never",
            Duration::from_secs(10),
            &mut [&mut p],
            &Interrupt::never(),
            || false,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("broken") && err.contains("bad flag"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ports_are_distinct() {
        let ports = free_ports(16).unwrap();
        let set: std::collections::BTreeSet<_> = ports.iter().collect();
        assert_eq!(set.len(), 16);
    }
}
