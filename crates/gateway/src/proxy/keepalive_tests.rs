use std::sync::atomic::{AtomicUsize, Ordering};

use http_body_util::BodyExt;
use hyper::header::HOST;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A raw HTTP/1.1 endpoint answering `ok` to each request; `close_after_answer` makes it close
/// the connection right after each answer without saying so (no `Connection: close`), as a
/// server whose keep-alive timer fired would. Returns its address and its accept count.
async fn endpoint(close_after_answer: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                loop {
                    // One request: its head, then as many body bytes as it declares.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    while buf.len() < head_end + len {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + len);
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if s.write_all(answer).await.is_err() || close_after_answer {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

fn request(address: &str) -> Request<Full<Bytes>> {
    let mut req = Request::new(Full::new(Bytes::from_static(b"{\"model\":\"m\"}")));
    *req.method_mut() = hyper::Method::POST;
    *req.uri_mut() = "/v1/completions".parse().unwrap();
    req.headers_mut().insert(HOST, address.parse().unwrap());
    req
}

async fn body_of(resp: Response<Incoming>) -> Bytes {
    resp.into_body().collect().await.unwrap().to_bytes()
}

#[tokio::test]
async fn a_released_connection_carries_the_next_requests() {
    let (addr, accepted) = endpoint(false).await;
    let conns = Connections::new();
    for _ in 0..5 {
        let (resp, lease) = conns.send(&addr, request(&addr)).await.unwrap();
        assert_eq!(body_of(resp).await, "ok");
        lease.release();
        assert_eq!(conns.idle(&addr), 1);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_dropped_lease_closes_its_connection() {
    let (addr, accepted) = endpoint(false).await;
    let conns = Connections::new();
    for _ in 0..3 {
        let (resp, lease) = conns.send(&addr, request(&addr)).await.unwrap();
        assert_eq!(body_of(resp).await, "ok");
        drop(lease);
        assert_eq!(conns.idle(&addr), 0);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn concurrent_requests_each_get_a_connection_and_all_come_back() {
    let (addr, accepted) = endpoint(false).await;
    let conns = Connections::new();
    let (a, b) = tokio::join!(
        conns.send(&addr, request(&addr)),
        conns.send(&addr, request(&addr))
    );
    let ((ra, la), (rb, lb)) = (a.unwrap(), b.unwrap());
    assert_eq!(body_of(ra).await, "ok");
    assert_eq!(body_of(rb).await, "ok");
    la.release();
    lb.release();
    assert_eq!(conns.idle(&addr), 2);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_connection_the_endpoint_closed_while_idle_is_not_an_error() {
    let (addr, accepted) = endpoint(true).await;
    let conns = Connections::new();
    for _ in 0..3 {
        let (resp, lease) = conns.send(&addr, request(&addr)).await.unwrap();
        assert_eq!(body_of(resp).await, "ok");
        lease.release();
        // The endpoint's close reaches the idle connection before the next request.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_refused_connect_names_the_endpoint() {
    // A port that was free a moment ago: nothing listens there.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let err = Connections::new()
        .send(&addr, request(&addr))
        .await
        .unwrap_err();
    assert!(matches!(err, UpstreamError::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains(&addr), "{err}");
}
