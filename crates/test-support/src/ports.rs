//! Loopback ports for tests.
//!
//! A port that was free when chosen is not reserved: another process may bind it before the
//! test's own server does. What starts a process on one should start it again on a fresh port if
//! it exits at once ([`crate::process::start_on_free_ports`]).

use std::net::{SocketAddr, TcpListener};

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    free_addr().port()
}

/// A loopback address nothing listens on right now: for a server the test starts there, or for
/// an endpoint that refuses connections.
pub fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}
