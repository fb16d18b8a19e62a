//! The least a proxy can do, in three forms, as floors for the gateway-overhead benchmark
//! (`scripts/gateway-overhead.sh`, arms `relay`, `relay-tokio` and `relay-hyper`):
//!
//! - default: relay bytes between each client connection and an upstream connection of its own,
//!   two blocking threads per connection, a `read` then a `write` per message — no parsing, no
//!   event loop;
//! - `--tokio`: the same relay on a one-thread tokio runtime (`copy_bidirectional`): the cost of
//!   an event loop (`epoll_wait` between messages) over blocking threads;
//! - `--hyper`: an HTTP/1.1 proxy with hyper on a one-thread runtime, each client connection
//!   paired with an upstream connection of its own and each request forwarded on it unchanged
//!   (hyper's server and `client::conn::http1`, no pool), the response streamed back: what
//!   parsing and re-encoding HTTP adds, and what infergate adds beyond it (routing by body, the
//!   pick, its connection pool, metrics).
//!
//! ```text
//! cargo run --release -p infergate --example relay -- [--tokio|--hyper] 127.0.0.1:9000 127.0.0.1:8001,127.0.0.1:8002
//! ```
//!
//! Upstreams are taken round-robin per client connection. Nothing is retried: a failed upstream
//! closes the client's connection.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;

use anyhow::Context as _;

/// Bytes read at once; larger than any message of the overhead benchmark.
const BUFFER: usize = 64 * 1024;

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mode = match args.first().map(String::as_str) {
        Some("--tokio") | Some("--hyper") => Some(args.remove(0)),
        _ => None,
    };
    let usage = "usage: relay [--tokio|--hyper] LISTEN UPSTREAM[,UPSTREAM...]";
    let [listen, upstreams] = <[String; 2]>::try_from(args).map_err(|_| anyhow::anyhow!(usage))?;
    let upstreams: Vec<String> = upstreams.split(',').map(str::to_owned).collect();
    match mode.as_deref() {
        Some("--tokio") => runtime()?.block_on(tokio_relay(listen, upstreams)),
        Some("--hyper") => runtime()?.block_on(hyper_proxy(listen, upstreams)),
        _ => blocking_relay(&listen, &upstreams),
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn blocking_relay(listen: &str, upstreams: &[String]) -> anyhow::Result<()> {
    let listener = TcpListener::bind(listen).with_context(|| format!("binding {listen}"))?;
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

async fn tokio_relay(listen: String, upstreams: Vec<String>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    for n in 0usize.. {
        let (mut client, _) = listener.accept().await?;
        let upstream = upstreams[n % upstreams.len()].clone();
        tokio::spawn(async move {
            let relayed = async {
                let mut server = tokio::net::TcpStream::connect(&upstream).await?;
                client.set_nodelay(true)?;
                server.set_nodelay(true)?;
                tokio::io::copy_bidirectional(&mut client, &mut server).await
            };
            if let Err(e) = relayed.await {
                eprintln!("relay: {upstream}: {e}");
            }
        });
    }
    Ok(())
}

async fn hyper_proxy(listen: String, upstreams: Vec<String>) -> anyhow::Result<()> {
    use http_body_util::BodyExt;
    use hyper::body::Incoming;
    use hyper::client::conn::http1;
    use hyper::Request;
    use hyper_util::rt::TokioIo;

    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    for n in 0usize.. {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let upstream = upstreams[n % upstreams.len()].clone();
        tokio::spawn(async move {
            // One upstream connection per client connection, as the relays pair them: HTTP/1.1
            // requests on a connection come one at a time, so no pool is needed.
            let proxied = async {
                let server = tokio::net::TcpStream::connect(&upstream).await?;
                server.set_nodelay(true)?;
                let (sender, conn) = http1::handshake::<_, Incoming>(TokioIo::new(server)).await?;
                tokio::spawn(conn);
                let sender = Arc::new(tokio::sync::Mutex::new(sender));
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let sender = sender.clone();
                    async move {
                        let mut sender = sender.lock().await;
                        sender.ready().await?;
                        let resp = sender.send_request(req).await?;
                        Ok::<_, hyper::Error>(resp.map(BodyExt::boxed))
                    }
                });
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await?;
                anyhow::Ok(())
            };
            if let Err(e) = proxied.await {
                eprintln!("relay: {upstream}: {e}");
            }
        });
    }
    Ok(())
}
