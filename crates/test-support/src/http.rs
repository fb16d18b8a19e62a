//! Plain HTTP/1.1 over loopback with blocking sockets, for tests that drive other processes:
//! one request a connection, the raw response back.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One HTTP/1.1 request with a JSON body (empty for none) to `addr` ("ip:port"); the whole raw
/// response, or `None` if the connection failed or timed out.
pub fn http(addr: &str, method: &str, path: &str, body: &str, timeout: Duration) -> Option<String> {
    http_with(addr, method, path, &[], body, timeout)
}

/// [`http`] with extra request `headers`.
pub fn http_with(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}

/// `GET path` on a loopback port, given 5 s.
pub fn get(port: u16, path: &str) -> Option<String> {
    http(
        &format!("127.0.0.1:{port}"),
        "GET",
        path,
        "",
        Duration::from_secs(5),
    )
}

/// A raw HTTP/1.1 response split into its status, its headers (names lower-cased, values
/// trimmed, in order) and its body as sent (still chunked if it was).
pub fn split_response(raw: &str) -> (u16, Vec<(String, String)>, &str) {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {raw}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body)
}

/// The body of a response split by [`split_response`], with its chunked transfer coding undone
/// when `headers` say it has one (Go's servers chunk any answer over a few KiB).
pub fn body_of(headers: &[(String, String)], body: &str) -> String {
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if !chunked {
        return body.to_owned();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = size.split(';').next().unwrap_or("").trim();
        let Ok(n) = usize::from_str_radix(size, 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    out
}

/// The sum of every sample in a Prometheus exposition `text` whose line starts with `series` (a
/// name, or a name with some of its labels); 0 when none does.
pub fn metric_sum(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_joined_and_a_plain_one_kept() {
        let chunked = vec![("transfer-encoding".to_owned(), "chunked".to_owned())];
        assert_eq!(
            body_of(&chunked, "5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n"),
            "hello, world"
        );
        assert_eq!(body_of(&[], "5\r\nhello"), "5\r\nhello");
    }
}
