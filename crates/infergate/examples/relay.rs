//! The least any proxy can do: relay bytes between each client connection and an upstream
//! connection of its own, with no parsing, no routing and no event loop — two blocking threads per
//! connection, each a `read` then a `write` per message. `bench/overhead.sh` measures it as the
//! `relay` arm: the floor of what one extra hop costs on the machine, against which the gateway's
//! own share of its added latency can be read.
//!
//! ```text
//! cargo run --release -p infergate --example relay -- 127.0.0.1:9000 127.0.0.1:8001,127.0.0.1:8002
//! ```
//!
//! Each new client connection goes to the next upstream, round-robin (an L4 balancer). A request
//! that fails to connect upstream closes the client's connection; nothing is retried.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;

use anyhow::Context as _;

/// Bytes read at once; larger than any message of the overhead benchmark.
const BUFFER: usize = 64 * 1024;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: relay LISTEN UPSTREAM[,UPSTREAM...]";
    let listen = args.next().context(usage)?;
    let upstreams: Vec<String> = args
        .next()
        .context(usage)?
        .split(',')
        .map(str::to_owned)
        .collect();
    let listener = TcpListener::bind(&listen).with_context(|| format!("binding {listen}"))?;
    for (n, client) in listener.incoming().enumerate() {
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                eprintln!("relay: accept: {e}");
                continue;
            }
        };
        let upstream = upstreams[n % upstreams.len()].clone();
        thread::spawn(move || {
            if let Err(e) = connection(client, &upstream) {
                eprintln!("relay: {upstream}: {e}");
            }
        });
    }
    Ok(())
}

/// Relays one client connection to `upstream` until both directions are closed.
fn connection(client: TcpStream, upstream: &str) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_rx, server_tx) = (client.try_clone()?, server.try_clone()?);
    let responses = thread::spawn(move || pipe(server, client));
    let requests = pipe(client_rx, server_tx);
    let responses = responses
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("response thread panicked")));
    requests.and(responses)
}

/// Copies `from` to `to` until `from` ends, then ends `to`'s writing side.
fn pipe(mut from: TcpStream, mut to: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; BUFFER];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            // The peer may already be gone; either way this direction is done.
            let _ = to.shutdown(Shutdown::Write);
            return Ok(());
        }
        to.write_all(&buf[..n])?;
    }
}
