//! A small blocking HTTP/1.1 client that can tell the test when the first body byte arrived, so
//! a test can tell a stream passed through as it came from one that was held back.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// An answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// From the request's last byte written to the body's end.
    pub elapsed: Duration,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `x-gateway-destination-endpoint` infergate set on the response: where it was served.
    pub fn served(&self) -> String {
        self.header("x-gateway-destination-endpoint")
            .unwrap_or_else(|| panic!("no served endpoint in {self:?}"))
            .to_owned()
    }
}

/// POSTs `body` to `127.0.0.1:port` + `path` with `headers` (content-type JSON is added).
pub fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    request(port, "POST", path, headers, body)
}

pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    exchange(port, method, path, headers, body, || {})
}

/// [`post`], calling `first_byte` as soon as the first byte of the body has been read, before
/// the rest of it is.
pub fn post_releasing(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    first_byte: impl FnOnce(),
) -> Reply {
    exchange(port, "POST", path, headers, body, first_byte)
}

fn exchange(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    first_byte: impl FnOnce(),
) -> Reply {
    let mut first_byte = Some(first_byte);
    let mut body_began = || {
        if let Some(f) = first_byte.take() {
            f();
        }
    };
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let sent = Instant::now();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').unwrap();
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let mut reply = Reply {
        status,
        headers,
        body: Vec::new(),
        elapsed: Duration::ZERO,
    };
    let chunked = reply
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap(), 16).unwrap();
            if size == 0 {
                break;
            }
            let mut chunk = vec![0; size];
            reader.read_exact(&mut chunk).unwrap();
            body_began();
            reply.body.extend_from_slice(&chunk);
            line.clear();
            reader.read_line(&mut line).unwrap();
        }
    } else if let Some(len) = reply
        .header("content-length")
        .map(|v| v.parse::<usize>().unwrap())
    {
        let mut body = vec![0; len];
        if len > 0 {
            reader.read_exact(&mut body[..1]).unwrap();
            body_began();
            reader.read_exact(&mut body[1..]).unwrap();
        }
        reply.body = body;
    } else {
        reader.read_to_end(&mut reply.body).unwrap();
        body_began();
    }
    reply.elapsed = sent.elapsed();
    reply
}

/// A chat completion body for `model` whose prompt is `prompt`.
pub fn chat(model: &str, prompt: &str) -> Vec<u8> {
    serde_json::json!({
        "model": model,
        "max_tokens": 3,
        "messages": [{"role": "user", "content": prompt}],
    })
    .to_string()
    .into_bytes()
}
