//! RESP2, the Redis protocol, as far as the rate-limit store needs it: commands out as arrays of
//! bulk strings; replies in as simple strings, errors, integers, bulk strings and arrays.
//!
//! The parser reads bytes from the network, so it is bounded and total: any input yields a
//! value, "need more bytes", or an error — never a panic, never an allocation larger than the
//! bounds below, never a recursion deeper than [`MAX_DEPTH`].

use std::fmt;

/// Largest bulk string accepted (the store's replies are a few integers).
pub const MAX_BULK: usize = 1 << 20;
/// Most elements accepted in one array.
pub const MAX_ARRAY: usize = 1 << 10;
/// Deepest nesting of arrays accepted.
pub const MAX_DEPTH: usize = 4;
/// Longest line (simple string, error, integer or length) accepted.
pub const MAX_LINE: usize = 4 << 10;

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `+OK`
    Simple(String),
    /// `-ERR …`: the server refused the command.
    Error(String),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`, or `$-1` (nil).
    Bulk(Option<Vec<u8>>),
    /// `*2\r\n…`, or `*-1` (nil).
    Array(Option<Vec<Value>>),
}

/// Bytes that are not a RESP2 reply within the bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn bad(what: impl Into<String>) -> ProtocolError {
    ProtocolError(what.into())
}

/// Appends a command: an array of bulk strings.
pub fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Parses one reply from the front of `buf`: the value and the bytes it took, or `None` when
/// `buf` ends before the reply does.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, ProtocolError> {
    parse_at(buf, 0, 0)
}

/// The line starting at `at`, without its CRLF, and where the next one starts.
fn line(buf: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let rest = buf.get(at..).unwrap_or_default();
    let window = &rest[..rest.len().min(MAX_LINE + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(end) => Ok(Some((&rest[..end], at + end + 2))),
        None if rest.len() > MAX_LINE + 1 => Err(bad("a line longer than the bound")),
        None => Ok(None),
    }
}

fn integer(text: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| bad("not an integer"))
}

/// A length: `-1` is nil (`None`); otherwise at most `max`.
fn length(text: &[u8], max: usize) -> Result<Option<usize>, ProtocolError> {
    match integer(text)? {
        -1 => Ok(None),
        n => usize::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .map(Some)
            .ok_or_else(|| bad(format!("length {n} out of bounds"))),
    }
}

fn parse_at(buf: &[u8], at: usize, depth: usize) -> Result<Option<(Value, usize)>, ProtocolError> {
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some((text, next)) = line(buf, at + 1)? else {
        return Ok(None);
    };
    let text_string = || String::from_utf8_lossy(text).into_owned();
    let value = match kind {
        b'+' => (Value::Simple(text_string()), next),
        b'-' => (Value::Error(text_string()), next),
        b':' => (Value::Integer(integer(text)?), next),
        b'$' => match length(text, MAX_BULK)? {
            None => (Value::Bulk(None), next),
            Some(n) => {
                let end = next + n;
                if buf.len() < end + 2 {
                    return Ok(None);
                }
                if &buf[end..end + 2] != b"\r\n" {
                    return Err(bad("a bulk string not ended by CRLF"));
                }
                (Value::Bulk(Some(buf[next..end].to_vec())), end + 2)
            }
        },
        b'*' => match length(text, MAX_ARRAY)? {
            None => (Value::Array(None), next),
            Some(n) => {
                if depth >= MAX_DEPTH {
                    return Err(bad("arrays nested deeper than the bound"));
                }
                let mut items = Vec::with_capacity(n.min(16));
                let mut pos = next;
                for _ in 0..n {
                    match parse_at(buf, pos, depth + 1)? {
                        Some((v, p)) => {
                            items.push(v);
                            pos = p;
                        }
                        None => return Ok(None),
                    }
                }
                (Value::Array(Some(items)), pos)
            }
        },
        other => return Err(bad(format!("unknown reply type byte 0x{other:02x}"))),
    };
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&[b"HGET", b"k", b""], &mut out);
        assert_eq!(out, b"*3\r\n$4\r\nHGET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn every_reply_type_parses_and_reports_its_length() {
        let cases: &[(&[u8], Value)] = &[
            (b"+OK\r\n", Value::Simple("OK".into())),
            (
                b"-NOSCRIPT No matching script\r\n",
                Value::Error("NOSCRIPT No matching script".into()),
            ),
            (b":-42\r\n", Value::Integer(-42)),
            (b"$3\r\na\r\n\r\n", Value::Bulk(Some(b"a\r\n".to_vec()))),
            (b"$-1\r\n", Value::Bulk(None)),
            (b"*-1\r\n", Value::Array(None)),
            (
                b"*3\r\n:1\r\n*1\r\n$0\r\n\r\n$-1\r\n",
                Value::Array(Some(vec![
                    Value::Integer(1),
                    Value::Array(Some(vec![Value::Bulk(Some(Vec::new()))])),
                    Value::Bulk(None),
                ])),
            ),
        ];
        for (bytes, value) in cases {
            let mut with_more = bytes.to_vec();
            with_more.extend_from_slice(b"+next\r\n");
            assert_eq!(
                parse(&with_more),
                Ok(Some((value.clone(), bytes.len()))),
                "{}",
                String::from_utf8_lossy(bytes)
            );
            // Every strict prefix is incomplete, not an error.
            for cut in 0..bytes.len() {
                assert_eq!(parse(&bytes[..cut]), Ok(None), "cut at {cut}");
            }
        }
    }

    #[test]
    fn bytes_outside_the_protocol_or_its_bounds_are_errors() {
        let too_long = format!("${}\r\n", MAX_BULK + 1);
        let too_many = format!("*{}\r\n", MAX_ARRAY + 1);
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1);
        let long_line = format!("+{}", "x".repeat(MAX_LINE + 2));
        for bad in [
            "!oops\r\n",
            ":12a\r\n",
            "$-2\r\n",
            "$2\r\nabcd\r\n",
            too_long.as_str(),
            too_many.as_str(),
            deep.as_str(),
            long_line.as_str(),
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?} parsed");
        }
    }

    proptest! {
        /// The parser reads bytes from the network: whatever arrives, it answers without
        /// panicking, and a reply it accepts never claims more bytes than it was given.
        #[test]
        fn any_bytes_parse_or_fail_without_panicking(bytes in prop::collection::vec(
            prop_oneof![
                4 => prop::sample::select(b"+-:$*\r\n0123456789-".to_vec()),
                1 => any::<u8>(),
            ],
            0..64,
        )) {
            if let Ok(Some((_, used))) = parse(&bytes) {
                prop_assert!(used <= bytes.len());
            }
        }

        /// A command encoded as a reply array parses back to its arguments.
        #[test]
        fn encoded_commands_parse_back(args in prop::collection::vec(
            prop::collection::vec(any::<u8>(), 0..40),
            0..8,
        )) {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let mut out = Vec::new();
            encode(&refs, &mut out);
            let want = Value::Array(Some(args.into_iter().map(|a| Value::Bulk(Some(a))).collect()));
            prop_assert_eq!(parse(&out), Ok(Some((want, out.len()))));
        }
    }
}
