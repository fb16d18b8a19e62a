//! W3C Trace Context: the `traceparent` and `tracestate` headers a request arrives with, and the
//! ones it leaves with.
//!
//! `traceparent` is `version-traceid-parentid-flags` in lowercase hex. Version `ff`, an all-zero
//! trace or parent id, a wrong length or upper-case hex make the header invalid, and an invalid
//! header is treated as absent (the trace starts here), as the recommendation says. A version
//! above `00` is read by the `00` layout, ignoring what follows it.

use std::fmt::Write as _;

use hyper::header::{HeaderMap, HeaderValue};

/// The header a trace's position travels in.
pub const TRACEPARENT: &str = "traceparent";
/// The header vendors' trace state travels in; passed on unchanged.
pub const TRACESTATE: &str = "tracestate";

/// The longest `tracestate` passed on: the recommendation's 512 characters. A longer one is
/// dropped rather than cut (cutting could split a member).
const TRACESTATE_MAX: usize = 512;

/// A trace's id: 16 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span's id: 8 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

/// Where a span sits in its trace, as propagated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    /// The trace.
    pub trace_id: TraceId,
    /// The span.
    pub span_id: SpanId,
    /// The `sampled` flag: the trace is being recorded upstream of here.
    pub sampled: bool,
    /// `tracestate`, passed on as it came.
    pub trace_state: Option<String>,
}

impl SpanContext {
    /// The context a request's headers carry; `None` when `traceparent` is absent, repeated or
    /// invalid.
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let mut parents = headers.get_all(TRACEPARENT).iter();
        let parent = parents.next()?.to_str().ok()?;
        if parents.next().is_some() {
            return None;
        }
        let (trace_id, span_id, flags) = parse_traceparent(parent)?;
        // Several tracestate headers are one list, joined in order.
        let mut state = String::new();
        for v in headers.get_all(TRACESTATE) {
            let Ok(v) = v.to_str() else {
                state.clear();
                break;
            };
            let v = v.trim();
            if v.is_empty() {
                continue;
            }
            if !state.is_empty() {
                state.push(',');
            }
            state.push_str(v);
        }
        let trace_state = (!state.is_empty() && state.len() <= TRACESTATE_MAX && state.is_ascii())
            .then_some(state);
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
            trace_state,
        })
    }

    /// The `traceparent` value naming this span (version `00`).
    pub fn traceparent(&self) -> String {
        let mut s = String::with_capacity(55);
        s.push_str("00-");
        hex(&mut s, &self.trace_id.0);
        s.push('-');
        hex(&mut s, &self.span_id.0);
        s.push_str(if self.sampled { "-01" } else { "-00" });
        s
    }

    /// The headers that carry this span on: `traceparent`, and `tracestate` when there is
    /// one.
    pub fn propagation(&self) -> impl Iterator<Item = (&'static str, String)> + '_ {
        std::iter::once((TRACEPARENT, self.traceparent()))
            .chain(self.trace_state.iter().map(|s| (TRACESTATE, s.clone())))
    }

    /// Sets [`SpanContext::propagation`]'s headers, replacing what the client sent.
    pub fn inject(&self, headers: &mut HeaderMap) {
        headers.remove(TRACESTATE);
        for (name, value) in self.propagation() {
            if let Ok(v) = HeaderValue::from_str(&value) {
                headers.insert(name, v);
            }
        }
    }
}

impl TraceId {
    /// Lowercase hex, as `traceparent` and trace back ends write it.
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(32);
        hex(&mut s, &self.0);
        s
    }
}

impl SpanId {
    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(16);
        hex(&mut s, &self.0);
        s
    }
}

fn hex(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
}

/// `traceparent`'s trace id, parent id and flags; `None` when invalid.
fn parse_traceparent(v: &str) -> Option<(TraceId, SpanId, u8)> {
    let v = v.trim();
    let b = v.as_bytes();
    if b.len() < 55 {
        return None;
    }
    let version = unhex::<1>(&b[0..2])?[0];
    if version == 0xff || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
        return None;
    }
    // Version 00 is exactly 55 characters; a later version may append fields after a dash.
    if (version == 0 && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
        return None;
    }
    let trace = unhex::<16>(&b[3..35])?;
    let span = unhex::<8>(&b[36..52])?;
    let flags = unhex::<1>(&b[53..55])?[0];
    if trace == [0; 16] || span == [0; 8] {
        return None;
    }
    Some((TraceId(trace), SpanId(span), flags))
}

/// `N` bytes from `2N` lowercase hex digits.
fn unhex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0; N];
    for (i, pair) in s.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_read_with_its_state() {
        let c = SpanContext::from_headers(&headers(&[
            (TRACEPARENT, GOOD),
            (TRACESTATE, "congo=t61rcWkgMzE"),
            (TRACESTATE, "rojo=00f067aa0ba902b7"),
        ]))
        .unwrap();
        assert_eq!(c.trace_id.to_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.span_id.to_hex(), "00f067aa0ba902b7");
        assert!(c.sampled);
        assert_eq!(
            c.trace_state.as_deref(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
        assert_eq!(c.traceparent(), GOOD);
    }

    #[test]
    fn invalid_traceparents_are_ignored() {
        for bad in [
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "",
        ] {
            let h = headers(&[(TRACEPARENT, Box::leak(bad.to_owned().into_boxed_str()))]);
            assert_eq!(SpanContext::from_headers(&h), None, "{bad}");
        }
        // Two traceparents: which one holds is unknowable.
        assert_eq!(
            SpanContext::from_headers(&headers(&[(TRACEPARENT, GOOD), (TRACEPARENT, GOOD)])),
            None
        );
    }

    #[test]
    fn a_later_version_is_read_by_the_first_layout() {
        let h = headers(&[(
            TRACEPARENT,
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-comes",
        )]);
        let c = SpanContext::from_headers(&h).unwrap();
        assert!(!c.sampled);
        assert_eq!(c.span_id.to_hex(), "00f067aa0ba902b7");
    }

    #[test]
    fn inject_replaces_the_clients_headers() {
        let mut h = headers(&[(TRACEPARENT, GOOD), (TRACESTATE, "a=1")]);
        let c = SpanContext {
            trace_id: TraceId([7; 16]),
            span_id: SpanId([9; 8]),
            sampled: true,
            trace_state: None,
        };
        c.inject(&mut h);
        assert_eq!(
            h.get(TRACEPARENT).unwrap(),
            "00-07070707070707070707070707070707-0909090909090909-01"
        );
        assert!(h.get(TRACESTATE).is_none());
    }

    proptest! {
        #[test]
        fn what_is_written_reads_back(t in any::<[u8; 16]>(), s in any::<[u8; 8]>(), sampled: bool) {
            prop_assume!(t != [0; 16] && s != [0; 8]);
            let c = SpanContext { trace_id: TraceId(t), span_id: SpanId(s), sampled, trace_state: None };
            let mut h = HeaderMap::new();
            c.inject(&mut h);
            prop_assert_eq!(SpanContext::from_headers(&h), Some(c));
        }

        #[test]
        fn no_header_value_panics_the_reader(v in "[ -~]{0,80}") {
            if let Ok(v) = HeaderValue::from_str(&v) {
                let mut h = HeaderMap::new();
                h.insert(TRACEPARENT, v);
                let _ = SpanContext::from_headers(&h);
            }
        }
    }
}
