//! The answer renamed back: a rewritten request's response names the model the client asked
//! for — in a JSON answer and in every SSE `data:` event — and is otherwise byte for byte what
//! the model server sent.
//!
//! Nothing is buffered. A small state machine reads the bytes as they pass, tracking SSE lines
//! and, inside an event's data (or the one JSON document), just enough JSON (nesting depth,
//! strings, escapes, which strings are keys) to find the top-level `model` member. Only that
//! member's value is held back, from its opening quote to its closing one, and replaced by the
//! client's name; so a chunk boundary anywhere, even inside the name, changes nothing. `model`
//! members nested deeper (in a tool call's arguments, say) are left alone.
//!
//! SSE follows the WHATWG rules: lines end with `\n`, `\r\n` or `\r`; a `data:` line's value
//! starts after one optional space; the data lines of one event are one document (so a JSON
//! object split over several `data:` lines is read whole); a blank line ends the event.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::BoxError;

/// Longest `model` value held back. A longer value is not a model name: it is given back
/// unchanged and the stream read on.
const MAX_VALUE: usize = 4096;

const DATA: &[u8] = b"data:";
const MODEL: &[u8] = b"model";

/// What the scanner expects next inside the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Key,
    Colon,
    Value,
    Comma,
}

/// Where the scanner is in one JSON document.
#[derive(Debug, Clone)]
struct Json {
    depth: u32,
    /// Nothing more to find: the model is renamed, or the document is not an object.
    done: bool,
    /// Inside a string; `Some(true)` when it is a top-level key.
    string: Option<bool>,
    escaped: bool,
    expect: Expect,
    /// How much of `model` the top-level key being read matches; `None` once it differs.
    key_match: Option<usize>,
    /// The last top-level key read was `model`.
    model_key: bool,
}

impl Json {
    fn new() -> Json {
        Json {
            depth: 0,
            done: false,
            string: None,
            escaped: false,
            expect: Expect::Key,
            key_match: None,
            model_key: false,
        }
    }

    /// Reads one byte; `true` when it is the opening quote of the top-level `model` value.
    fn step(&mut self, b: u8) -> bool {
        if self.done {
            return false;
        }
        if let Some(key) = self.string {
            if self.escaped {
                self.escaped = false;
                // An escaped key is not compared (servers do not escape `model`).
                self.key_match = None;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.string = None;
                if key {
                    self.model_key = self.key_match == Some(MODEL.len());
                    self.expect = Expect::Colon;
                } else if self.depth == 1 {
                    self.expect = Expect::Comma;
                }
            } else if key {
                self.key_match = self
                    .key_match
                    .filter(|&n| MODEL.get(n) == Some(&b))
                    .map(|n| n + 1);
            }
            return false;
        }
        let top = self.depth == 1;
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'{' if self.depth == 0 => {
                self.depth = 1;
                self.expect = Expect::Key;
            }
            _ if self.depth == 0 => self.done = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth -= 1;
                if self.depth == 0 {
                    self.done = true;
                } else if self.depth == 1 {
                    self.expect = Expect::Comma;
                }
            }
            b'"' => {
                let key = top && self.expect == Expect::Key;
                self.string = Some(key);
                if key {
                    self.key_match = Some(0);
                }
                return top && self.expect == Expect::Value && self.model_key;
            }
            b':' if top && self.expect == Expect::Colon => self.expect = Expect::Value,
            b',' if top => {
                self.expect = Expect::Key;
                self.model_key = false;
            }
            _ if top && self.expect == Expect::Value => self.expect = Expect::Comma,
            _ => {}
        }
        false
    }

    /// The held `model` value ended with its closing quote.
    fn value_replaced(&mut self) {
        self.string = None;
        self.expect = Expect::Comma;
        self.done = true;
    }
}

/// Where an SSE line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// At the start, with this many bytes of `data:` matched.
    Start(usize),
    /// Right after `data:`, where one space may come.
    Space,
    /// In a `data:` value.
    Data,
    /// In any other line.
    Other,
}

/// What to do with a byte.
#[derive(Debug)]
enum Act {
    /// Pass it on.
    Pass,
    /// Hold it back (part of the model value).
    Hold,
    /// It closed the model value: send the client's name in place of the held bytes.
    Replace,
    /// Give back these held bytes unchanged, then pass this byte on.
    Release(Vec<u8>),
}

/// Renames the top-level `model` of a JSON answer or of each SSE event, chunk by chunk.
#[derive(Debug)]
pub struct Restore {
    /// The client's model as a JSON string.
    token: Bytes,
    /// `None` for one JSON document.
    line: Option<Line>,
    /// The previous byte was `\r` (so a `\n` now ends no line).
    cr: bool,
    json: Json,
    /// The `model` value read so far, held back.
    held: Option<Vec<u8>>,
}

impl Restore {
    /// A renamer to `model` for an answer of this content type; `None` for types other than
    /// SSE and JSON, which are passed on untouched.
    pub fn new(content_type: Option<&str>, model: &str) -> Option<Restore> {
        let ct = content_type?.trim_start().to_ascii_lowercase();
        let line = if ct.starts_with("text/event-stream") {
            Some(Line::Start(0))
        } else if ct.starts_with("application/json") {
            None
        } else {
            return None;
        };
        Some(Restore {
            token: Bytes::from(serde_json::to_string(model).ok()?),
            line,
            cr: false,
            json: Json::new(),
            held: None,
        })
    }

    /// The bytes to send now for `chunk` (possibly none, while a value is held back).
    pub fn feed(&mut self, chunk: &Bytes) -> Bytes {
        if self.line.is_none() && self.json.done && self.held.is_none() {
            return chunk.clone();
        }
        let mut out: Option<Vec<u8>> = None;
        let mut from = 0;
        for (i, &b) in chunk.iter().enumerate() {
            let act = self.step(b);
            if matches!(act, Act::Pass) {
                continue;
            }
            let buf = out.get_or_insert_with(|| Vec::with_capacity(chunk.len() + 64));
            buf.extend_from_slice(&chunk[from..i]);
            from = i + 1;
            match act {
                Act::Pass | Act::Hold => {}
                Act::Replace => buf.extend_from_slice(&self.token),
                Act::Release(held) => {
                    buf.extend_from_slice(&held);
                    from = i;
                }
            }
        }
        match out {
            None => chunk.clone(),
            Some(mut buf) => {
                buf.extend_from_slice(&chunk[from..]);
                Bytes::from(buf)
            }
        }
    }

    /// The body ended: whatever is still held back, unchanged (a value that never closed).
    pub fn finish(&mut self) -> Bytes {
        self.held.take().map(Bytes::from).unwrap_or_default()
    }

    fn step(&mut self, b: u8) -> Act {
        let Some(line) = self.line else {
            return self.json_byte(b);
        };
        let after_cr = std::mem::replace(&mut self.cr, b == b'\r');
        if b == b'\n' && after_cr {
            return Act::Pass;
        }
        if b == b'\n' || b == b'\r' {
            let act = match self.held.take() {
                // A line cannot end inside a JSON string: the document is broken, so it is
                // given back as it came.
                Some(held) => {
                    self.json.done = true;
                    Act::Release(held)
                }
                None => Act::Pass,
            };
            if line == Line::Start(0) {
                self.json = Json::new();
            }
            self.line = Some(Line::Start(0));
            return act;
        }
        match line {
            Line::Start(n) => {
                self.line = Some(match DATA.get(n) {
                    Some(&d) if d == b && n + 1 == DATA.len() => Line::Space,
                    Some(&d) if d == b => Line::Start(n + 1),
                    _ => Line::Other,
                });
                Act::Pass
            }
            Line::Space => {
                self.line = Some(Line::Data);
                if b == b' ' {
                    Act::Pass
                } else {
                    self.json_byte(b)
                }
            }
            Line::Data => self.json_byte(b),
            Line::Other => Act::Pass,
        }
    }

    fn json_byte(&mut self, b: u8) -> Act {
        let Some(held) = self.held.as_mut() else {
            if self.json.step(b) {
                self.held = Some(vec![b]);
                return Act::Hold;
            }
            return Act::Pass;
        };
        if held.len() >= MAX_VALUE {
            let held = self.held.take().unwrap_or_default();
            // Read on as an ordinary string; this byte is inside it.
            self.json.model_key = false;
            self.json.step(b);
            return Act::Release(held);
        }
        held.push(b);
        if self.json.escaped {
            self.json.escaped = false;
        } else if b == b'\\' {
            self.json.escaped = true;
        } else if b == b'"' {
            self.held = None;
            self.json.value_replaced();
            return Act::Replace;
        }
        Act::Hold
    }
}

/// A response body with its model renamed on the way through.
#[derive(Debug)]
pub struct RestoreBody<B> {
    inner: B,
    restore: Restore,
    /// Trailers that arrived while bytes were held, sent after them.
    trailers: Option<Frame<Bytes>>,
    ended: bool,
}

impl<B> RestoreBody<B> {
    /// Renames `inner`'s model with `restore`. Its length changes with the name, so the
    /// response must not carry the upstream `Content-Length`.
    pub fn new(inner: B, restore: Restore) -> Self {
        Self {
            inner,
            restore,
            trailers: None,
            ended: false,
        }
    }
}

impl<B> Body for RestoreBody<B>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(t) = this.trailers.take() {
            return Poll::Ready(Some(Ok(t)));
        }
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(f))) => f,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    this.ended = true;
                    let rest = this.restore.finish();
                    if rest.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(rest))));
                }
            };
            match frame.into_data() {
                Ok(data) => {
                    let out = this.restore.feed(&data);
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
                Err(trailers) => {
                    let rest = this.restore.finish();
                    if rest.is_empty() {
                        return Poll::Ready(Some(Ok(trailers)));
                    }
                    this.trailers = Some(trailers);
                    return Poll::Ready(Some(Ok(Frame::data(rest))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        // The length changes with the name.
        SizeHint::default()
    }
}
