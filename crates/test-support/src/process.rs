//! Child processes that die with the test, starting one on free ports despite the race for
//! them, and stopping one as an operator would.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::ports::free_port;

/// A child process, killed and reaped when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends SIGTERM to `child` (with `kill`) and waits for it to exit: its exit status. Panics,
/// saying that `what` did not stop on SIGTERM, if it is still running after 20 s.
pub fn terminate(child: &mut Child, what: &str) -> ExitStatus {
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "{what} did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A process started by `spawn` on `N` fresh free loopback ports, once `ready` holds for them:
/// the process and its ports.
///
/// A port is free when chosen but taken only when the process binds it; on a busy machine
/// another process (or an outgoing connection) can take it in between, and the process then
/// exits at once, the address being in use. That is the test machine's race, not the program's
/// fault, so a process that exits before it is ready is started again on fresh ports, three
/// times at most. Each start waits up to 30 s.
pub fn start_on_free_ports<const N: usize>(
    what: &str,
    mut spawn: impl FnMut([u16; N]) -> Child,
    mut ready: impl FnMut([u16; N]) -> bool,
) -> (Running, [u16; N]) {
    let mut exits = Vec::new();
    while exits.len() < 3 {
        let ports = std::array::from_fn(|_| free_port());
        let mut child = Running(spawn(ports));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if ready(ports) {
                return (child, ports);
            }
            if let Some(status) = child.0.try_wait().unwrap() {
                exits.push(status);
                break;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("{what}: the process exited before it was ready, on three sets of ports: {exits:?}");
}
