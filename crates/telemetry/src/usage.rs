//! Token usage read from responses on their way through, without holding the stream back.
//!
//! Streaming answers (SSE) carry `usage` in one of the last events (with
//! `stream_options.include_usage`); the tap looks at complete `data:` lines only, carrying the
//! unfinished last line of a chunk over to the next. Buffered JSON answers carry `usage` at the
//! end of the document; the tap keeps a bounded copy and parses it when the body ends. Either
//! way the client's bytes are forwarded untouched the moment they arrive.

use serde::Deserialize;

/// Longest SSE line read (whole or carried between chunks), and longest JSON body copied, for
/// usage. Past this the tap gives up on usage rather than grow.
const MAX_COPY: usize = 1 << 20;

/// Tokens counted by the model server for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u64,
}

#[derive(Deserialize)]
struct UsageBody {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<Details>,
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WithUsage {
    #[serde(default)]
    usage: Option<UsageBody>,
}

impl From<UsageBody> for Usage {
    fn from(u: UsageBody) -> Self {
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
        }
    }
}

/// Watches a response body for `usage`.
#[derive(Debug)]
pub enum UsageTap {
    /// An SSE stream: the unfinished line so far.
    Sse {
        /// Bytes after the last newline seen.
        carry: Vec<u8>,
        /// The line being carried grew past [`MAX_COPY`]: its rest is skipped up to the next
        /// newline, not read as a line of its own.
        skipping: bool,
        /// The last usage found.
        found: Option<Usage>,
        /// `data:` events that carried generated tokens: every one but `[DONE]` and a
        /// usage-only event (`"choices":[]`).
        events: u64,
    },
    /// A JSON body: a copy, until it grows past the bound.
    Json {
        /// The body so far; `None` once past [`MAX_COPY`].
        copy: Option<Vec<u8>>,
    },
    /// Neither: nothing to read.
    Off,
}

impl UsageTap {
    /// A tap for a response with this content type.
    pub fn for_content_type(content_type: Option<&str>) -> Self {
        let ct = content_type.unwrap_or("").to_ascii_lowercase();
        if ct.starts_with("text/event-stream") {
            UsageTap::Sse {
                carry: Vec::new(),
                skipping: false,
                found: None,
                events: 0,
            }
        } else if ct.starts_with("application/json") {
            UsageTap::Json {
                copy: Some(Vec::new()),
            }
        } else {
            UsageTap::Off
        }
    }

    /// Looks at one chunk as it passes.
    pub fn feed(&mut self, chunk: &[u8]) {
        match self {
            UsageTap::Sse {
                carry,
                skipping,
                found,
                events,
            } => {
                let mut rest = chunk;
                while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
                    let (line, tail) = rest.split_at(nl);
                    rest = &tail[1..];
                    // A line longer than the bound is skipped whether it arrived whole or in
                    // pieces, so the usage does not depend on where the network cut it.
                    if std::mem::take(skipping) || carry.len() + line.len() > MAX_COPY {
                        carry.clear();
                    } else if carry.is_empty() {
                        sse_line(line, found, events);
                    } else {
                        carry.extend_from_slice(line);
                        sse_line(carry, found, events);
                        carry.clear();
                    }
                }
                if !*skipping {
                    if carry.len() + rest.len() <= MAX_COPY {
                        carry.extend_from_slice(rest);
                    } else {
                        carry.clear();
                        *skipping = true;
                    }
                }
            }
            UsageTap::Json { copy } => {
                if let Some(buf) = copy {
                    if buf.len() + chunk.len() <= MAX_COPY {
                        buf.extend_from_slice(chunk);
                    } else {
                        *copy = None;
                    }
                }
            }
            UsageTap::Off => {}
        }
    }

    /// The usage found, once the body has ended.
    pub fn finish(&mut self) -> Option<Usage> {
        match self {
            UsageTap::Sse {
                carry,
                skipping: _,
                found,
                events,
            } => {
                // A skipped line was cleared, so what is carried is a line within the bound.
                if !carry.is_empty() {
                    let line = std::mem::take(carry);
                    sse_line(&line, found, events);
                }
                *found
            }
            UsageTap::Json { copy } => {
                let body = copy.take()?;
                let parsed: WithUsage = serde_json::from_slice(&body).ok()?;
                parsed.usage.map(Usage::from)
            }
            UsageTap::Off => None,
        }
    }
}

impl UsageTap {
    /// `data:` events with generated tokens so far (0 for a body that is not SSE): the output
    /// length the trace capture records when an answer carries no `usage`.
    pub fn streamed_events(&self) -> u64 {
        match self {
            UsageTap::Sse { events, .. } => *events,
            _ => 0,
        }
    }
}

/// Reads `usage` from one SSE line, when it is a `data:` line that carries one, and counts the
/// line in `events` when it carries tokens. Most lines carry no usage, so a cheap byte search
/// comes before any parsing.
fn sse_line(line: &[u8], found: &mut Option<Usage>, events: &mut u64) {
    let Some(data) = line.strip_prefix(b"data:") else {
        return;
    };
    let data = data.trim_ascii();
    if data != b"[DONE]" && !contains(data, b"\"choices\":[]") {
        *events += 1;
    }
    if !contains(data, b"\"prompt_tokens\"") {
        return;
    }
    if let Ok(WithUsage { usage: Some(u) }) = serde_json::from_slice::<WithUsage>(data) {
        *found = Some(u.into());
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAST: &str = "data: {\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":15,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n";

    #[test]
    fn sse_usage_is_found_across_chunk_boundaries() {
        let stream = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"hi\"}}}}],\"usage\":null}}\n\n{LAST}data: [DONE]\n\n"
        );
        for cut in 0..stream.len() {
            let mut tap = UsageTap::for_content_type(Some("text/event-stream"));
            tap.feed(&stream.as_bytes()[..cut]);
            tap.feed(&stream.as_bytes()[cut..]);
            assert_eq!(
                tap.finish(),
                Some(Usage {
                    prompt_tokens: 12,
                    completion_tokens: 3,
                    cached_tokens: 8
                }),
                "cut at {cut}"
            );
            // One event with text; neither the usage-only event nor [DONE] counts.
            assert_eq!(tap.streamed_events(), 1, "cut at {cut}");
        }
    }

    #[test]
    fn a_line_past_the_bound_is_skipped_however_it_is_cut() {
        // A data line past the bound, then the usage event: the long line is neither read nor
        // counted, whether it came whole or cut (it used to be read or not by where the cuts
        // fell).
        let long = format!("data: {{\"pad\":\"{}\"}}\n", "x".repeat(MAX_COPY));
        let stream = format!("{long}{LAST}");
        let read = |cuts: &[usize]| {
            let mut tap = UsageTap::for_content_type(Some("text/event-stream"));
            let mut from = 0;
            for &to in cuts.iter().chain([&stream.len()]) {
                tap.feed(&stream.as_bytes()[from..to]);
                from = to;
            }
            (tap.finish().map(|u| u.prompt_tokens), tap.streamed_events())
        };
        assert_eq!(read(&[]), (Some(12), 0));
        for cuts in [
            &[10][..],
            &[MAX_COPY + 5],
            &[100, MAX_COPY + 5],
            &[long.len() - 1],
        ] {
            assert_eq!(read(cuts), (Some(12), 0), "cut at {cuts:?}");
        }
        // The rest of a long line cut short is not a line: a `data:` inside it reads nothing
        // (it used to be read as an event of its own).
        let mut tap = UsageTap::for_content_type(Some("text/event-stream"));
        tap.feed(format!("data: {}", "y".repeat(MAX_COPY)).as_bytes());
        tap.feed(b"data: {\"usage\":{\"prompt_tokens\":9}}\n");
        assert_eq!(tap.finish(), None);
        assert_eq!(tap.streamed_events(), 0);
    }

    #[test]
    fn json_usage_is_read_at_the_end_and_other_types_are_ignored() {
        let mut tap = UsageTap::for_content_type(Some("application/json"));
        tap.feed(br#"{"object":"chat.completion","usage":{"prompt_tokens":5,"#);
        tap.feed(br#""completion_tokens":7}}"#);
        assert_eq!(
            tap.finish(),
            Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 7,
                cached_tokens: 0
            })
        );
        let mut off = UsageTap::for_content_type(Some("text/plain"));
        off.feed(b"usage");
        assert_eq!(off.finish(), None);
    }
}
