//! The least a proxy can do, in three forms, as floors for the gateway-overhead benchmark
//! (`bench/overhead.sh`, arms `relay`, `relay-tokio` and `relay-hyper`):
//!
//! - default: relay bytes between each client connection and an upstream connection of its own,
//!   two blocking threads per connection, a `read` then a `write` per message — no parsing, no
//!   event loop;
//! - `--tokio`: the same relay on a one-thread tokio runtime (`copy_bidirectional`): the cost of
//!   an event loop (`epoll_wait` between messages) over blocking threads;
//! - `--hyper`: an HTTP/1.1 proxy with hyper on a one-thread runtime, each request forwarded
//!   unchanged through a keep-alive client pool, the response streamed back: what parsing and
//!   re-encoding HTTP adds, and what infergate adds beyond it (routing by body, the pick,
//!   metrics).
//!
//! ```text
//! cargo run --release -p infergate --example relay -- [--tokio|--hyper] 127.0.0.1:9000 127.0.0.1:8001,127.0.0.1:8002
//! ```
//!
//! Upstreams are taken round-robin, per connection (relays) or per request (`--hyper`). Nothing
//! is retried: a failed upstream closes the client's connection (relays) or answers 502.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
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
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper::{Request, Response, StatusCode};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    type Body = http_body_util::combinators::BoxBody<bytes::Bytes, hyper::Error>;
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<_, Incoming> = Client::builder(TokioExecutor::new()).build(connector);
    let upstreams = Arc::new(upstreams);
    let next = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let (client, upstreams, next) = (client.clone(), upstreams.clone(), next.clone());
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let (client, upstreams, next) = (client.clone(), upstreams.clone(), next.clone());
            async move {
                let upstream = &upstreams[next.fetch_add(1, Ordering::Relaxed) % upstreams.len()];
                let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
                let uri = format!("http://{upstream}{path}").parse::<hyper::Uri>();
                let answer: Response<Body> = match uri {
                    Ok(uri) => {
                        *req.uri_mut() = uri;
                        match client.request(req).await {
                            Ok(resp) => resp.map(BodyExt::boxed),
                            Err(e) => bad_gateway(&e.to_string()),
                        }
                    }
                    Err(e) => bad_gateway(&e.to_string()),
                };
                Ok::<_, std::convert::Infallible>(answer)
            }
        });
        tokio::spawn(async move {
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                eprintln!("relay: {e}");
            }
        });
    }

    fn bad_gateway(why: &str) -> Response<Body> {
        let mut r = Response::new(
            Full::new(bytes::Bytes::from(why.to_owned()))
                .map_err(|never| match never {})
                .boxed(),
        );
        *r.status_mut() = StatusCode::BAD_GATEWAY;
        r
    }
}
