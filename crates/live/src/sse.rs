//! Reading an OpenAI streaming answer: server-sent events split out of arbitrary byte chunks,
//! and what each event says (a token, the usage, the end, an error).
//!
//! A proxy may split or merge the server's writes, so an event can arrive over several chunks or
//! several events in one; the reader keeps the incomplete rest between chunks.

use serde_json::Value;

/// Splits a byte stream into the `data` payloads of its events.
#[derive(Debug, Default)]
pub struct SseReader {
    /// Bytes after the last complete line.
    pending: Vec<u8>,
    /// `data` lines of the event being read.
    data: Vec<String>,
}

impl SseReader {
    /// Feeds `bytes` and appends the payload of every event they complete to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<String>) {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(nl) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let end = start + nl;
            let line = &self.pending[start..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(value) = line.strip_prefix(b"data:") {
                let value = value.strip_prefix(b" ").unwrap_or(value);
                self.data.push(String::from_utf8_lossy(value).into_owned());
            }
            // Other fields (event, id, retry) and comments carry nothing a completion needs.
            start = end + 1;
        }
        self.pending.drain(..start);
    }
}

/// What one event of a completion stream says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// A chunk with generated text (completions `text` or chat `delta.content`, non-empty),
    /// possibly with usage too.
    Token {
        /// `usage.completion_tokens`, when the chunk carries it.
        usage: Option<u32>,
    },
    /// A chunk without text: the chat role chunk, or the final usage chunk.
    Empty {
        /// `usage.completion_tokens`, when the chunk carries it.
        usage: Option<u32>,
    },
    /// `[DONE]`.
    Done,
    /// An error object in the stream, or a payload that is not JSON.
    Error(String),
}

/// Interprets one event payload.
pub fn interpret(data: &str) -> StreamEvent {
    if data.trim() == "[DONE]" {
        return StreamEvent::Done;
    }
    let Ok(v) = serde_json::from_str::<Value>(data) else {
        return StreamEvent::Error(format!("not JSON: {}", clip(data)));
    };
    if let Some(e) = v.get("error") {
        return StreamEvent::Error(clip(&e.to_string()));
    }
    let usage = v
        .pointer("/usage/completion_tokens")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok());
    let choice = v.pointer("/choices/0");
    let text = choice
        .and_then(|c| c.get("text").or_else(|| c.pointer("/delta/content")))
        .and_then(Value::as_str);
    match text {
        Some(t) if !t.is_empty() => StreamEvent::Token { usage },
        _ => StreamEvent::Empty { usage },
    }
}

fn clip(s: &str) -> String {
    s.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut reader = SseReader::default();
        let mut out = Vec::new();
        for c in chunks {
            reader.push(c, &mut out);
        }
        out
    }

    #[test]
    fn events_split_across_chunks_and_merged_in_one_are_read_alike() {
        let stream = b"data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\n: comment\n\ndata: [DONE]\n\n";
        let whole = events(&[stream]);
        assert_eq!(whole, vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(events(&bytes), whole);
        let (a, b) = stream.split_at(9);
        assert_eq!(events(&[a, b]), whole);
    }

    #[test]
    fn an_unfinished_event_is_held_back() {
        assert!(events(&[b"data: {\"a\":1}\n"]).is_empty());
        assert_eq!(events(&[b"data: x\ndata: y\n", b"\n"]), vec!["x\ny"]);
    }

    #[test]
    fn tokens_usage_done_and_errors_are_told_apart() {
        let text = r#"{"choices":[{"index":0,"text":" word","finish_reason":null}]}"#;
        assert_eq!(interpret(text), StreamEvent::Token { usage: None });
        let role = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
        assert_eq!(interpret(role), StreamEvent::Empty { usage: None });
        let chat = r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#;
        assert_eq!(interpret(chat), StreamEvent::Token { usage: None });
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":7}}"#;
        assert_eq!(interpret(usage), StreamEvent::Empty { usage: Some(7) });
        assert_eq!(interpret(" [DONE]"), StreamEvent::Done);
        assert!(matches!(
            interpret(r#"{"error":{"message":"boom"}}"#),
            StreamEvent::Error(m) if m.contains("boom")
        ));
        assert!(matches!(interpret("<html>"), StreamEvent::Error(_)));
    }
}
