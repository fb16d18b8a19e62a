//! Resuming a stream whose endpoint failed after the client began to receive it: what the
//! client has been sent ([`Transcript`]), the request that asks another endpoint to go on from
//! there ([`Transcript::continuation`]: vLLM's `continue_final_message` for a chat, the prompt
//! extended by the answer so far for a completion), and the continuation's events as the client
//! must see them ([`Splice`]: the first answer's `id` and `created`, no second role chunk, and
//! `usage` that counts what the client received).
//!
//! No I/O: the HTTP front feeds the bytes in and sends what comes out. The client only ever gets
//! whole events ([`EventFramer`]), so a stream cut at any byte leaves it at an event boundary
//! and the continuation's first event follows on cleanly.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The OpenAI API a streamed answer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/chat/completions`: content arrives in `choices[].delta.content`.
    Chat,
    /// `/v1/completions`: text arrives in `choices[].text`.
    Completions,
}

impl Api {
    /// The API of a request path; `None` for paths whose streams are not resumed.
    pub fn of_path(path: &str) -> Option<Api> {
        match path.split('?').next() {
            Some("/v1/chat/completions") => Some(Api::Chat),
            Some("/v1/completions") => Some(Api::Completions),
            _ => None,
        }
    }
}

/// Where the last event boundary (a blank line: `\n\n` or `\n\r\n`) of `bytes` ends.
fn last_boundary(bytes: &[u8]) -> Option<usize> {
    let mut i = bytes.len();
    while i >= 2 {
        if bytes[i - 1] == b'\n' {
            if bytes[i - 2] == b'\n' {
                return Some(i);
            }
            if i >= 3 && bytes[i - 2] == b'\r' && bytes[i - 3] == b'\n' {
                return Some(i);
            }
        }
        i -= 1;
    }
    None
}

/// Lets a stream through in whole server-sent events: each push gives back everything up to the
/// end of the last whole event, and holds the rest until its end arrives.
///
/// Invariant: `held` never contains an event boundary's end.
#[derive(Debug, Default)]
pub struct EventFramer {
    held: BytesMut,
}

impl EventFramer {
    /// The whole events that `data` completes (empty when it completes none).
    pub fn push(&mut self, data: Bytes) -> Bytes {
        if self.held.is_empty() {
            // The usual case: an upstream writes each event whole, and it passes untouched.
            if data.ends_with(b"\n\n") {
                return data;
            }
            return match last_boundary(&data) {
                Some(end) => {
                    self.held.extend_from_slice(&data[end..]);
                    data.slice(..end)
                }
                None => {
                    self.held.extend_from_slice(&data);
                    Bytes::new()
                }
            };
        }
        self.held.extend_from_slice(&data);
        match last_boundary(&self.held) {
            Some(end) => self.held.split_to(end).freeze(),
            None => Bytes::new(),
        }
    }

    /// What is held: an event that has not ended. At the stream's own end it goes as it is.
    pub fn take_held(&mut self) -> Bytes {
        self.held.split().freeze()
    }

    /// Drops what is held (the part of an event that a failed endpoint never finished).
    pub fn discard(&mut self) {
        self.held.clear();
    }
}

/// Calls `each` with every event's `data` payload, in order (its `data:` lines joined by
/// newlines; borrowed when the event has one, as every model server writes them).
fn for_each_payload(events: &[u8], mut each: impl FnMut(&str)) {
    // Checked at full speed; only a stream that is not UTF-8 pays for the lossy copy.
    let text = match std::str::from_utf8(events) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(events),
    };
    let mut lines: Vec<&str> = Vec::new();
    let mut flush = |lines: &mut Vec<&str>| match lines.len() {
        0 => {}
        1 => {
            each(lines[0]);
            lines.clear();
        }
        _ => {
            each(&lines.join("\n"));
            lines.clear();
        }
    };
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            flush(&mut lines);
            continue;
        }
        if let Some(value) = line.strip_prefix("data:") {
            lines.push(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    flush(&mut lines);
}

/// Each event's `data` payload, in order.
fn payloads(events: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for_each_payload(events, |p| out.push(p.to_owned()));
    out
}

/// One chunk of a streamed answer, as much of it as the transcript reads (borrowed from the
/// event: a typed read is several times cheaper than a `Value`).
#[derive(Deserialize)]
struct ChunkIn<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    created: Option<&'a RawValue>,
    #[serde(default, borrow)]
    choices: Vec<ChoiceIn<'a>>,
    #[serde(default)]
    usage: Option<UsageIn>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct UsageIn {
    #[serde(default)]
    completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ChoiceIn<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<DeltaIn<'a>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

/// A chat delta: its text, and what would make the answer more than text.
#[derive(Deserialize)]
struct DeltaIn<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<IgnoredAny>>,
    #[serde(default)]
    function_call: Option<IgnoredAny>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
}

/// Whether the last of `events` is `data: [DONE]`.
fn ends_with_done(events: &[u8]) -> bool {
    let trimmed = events.trim_ascii_end();
    trimmed
        .strip_suffix(b"[DONE]")
        .map(<[u8]>::trim_ascii_end)
        .is_some_and(|before| before.ends_with(b"data:"))
}

/// Whole events the transcript keeps unread before reading them: most answers end before this
/// and are never read at all; a longer one is read in steps of this size.
const UNREAD_LIMIT: usize = 16 * 1024;

/// What the client has been sent of one streamed answer.
///
/// Invariant: `text` and `tokens` cover the events recorded before `unread`; `ended` may be
/// set by a `[DONE]` still unread.
#[derive(Debug)]
pub struct Transcript {
    api: Api,
    unread: Vec<u8>,
    id: Option<String>,
    created: Option<Value>,
    /// The answer's text so far.
    text: String,
    /// Its tokens so far: the last `usage.completion_tokens` seen, else one per event that
    /// carried text (vLLM sends a token per event unless it decodes speculatively).
    tokens: u32,
    counted_events: u32,
    /// The answer ended (a finish reason, `[DONE]` or an error event reached the client).
    ended: bool,
    /// Why it could not be continued, if something it cannot rebuild was sent (tool calls,
    /// reasoning, a second choice).
    cannot: Option<&'static str>,
}

/// Why a stream cannot be resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotResumable(pub String);

/// How a stream goes on after its endpoint failed.
#[derive(Debug)]
pub enum Continuation {
    /// Send `body` to another endpoint and pass its events through `splice`.
    Request {
        /// The continuation request's body.
        body: Bytes,
        /// How its events become the client's.
        splice: Splice,
    },
    /// Every token the request allowed was sent: only the end is missing, and here it is.
    Finish(Bytes),
}

impl Transcript {
    /// An empty transcript of an answer of `api`.
    pub fn new(api: Api) -> Self {
        Self {
            api,
            unread: Vec::new(),
            id: None,
            created: None,
            text: String::new(),
            tokens: 0,
            counted_events: 0,
            ended: false,
            cannot: None,
        }
    }

    /// Records whole events on their way to the client.
    pub fn record(&mut self, events: &[u8]) {
        self.unread.extend_from_slice(events);
        // The usual end, `[DONE]`, is seen here without reading a thing, so that a stream that
        // ends normally is never read at all.
        if ends_with_done(events) {
            self.ended = true;
        }
        if self.unread.len() >= UNREAD_LIMIT {
            self.read();
        }
    }

    fn read(&mut self) {
        let unread = std::mem::take(&mut self.unread);
        for_each_payload(&unread, |payload| self.read_event(payload));
    }

    fn read_event(&mut self, payload: &str) {
        if payload.trim() == "[DONE]" {
            self.ended = true;
            return;
        }
        if !payload.trim_start().starts_with('{') {
            return;
        }
        let chunk: ChunkIn<'_> = match serde_json::from_str(payload) {
            Ok(c) => c,
            Err(_) => {
                self.cannot = Some("an event of the answer could not be read");
                return;
            }
        };
        if chunk.error.is_some() {
            self.ended = true;
            return;
        }
        if self.id.is_none() {
            self.id = chunk.id.map(Cow::into_owned);
            self.created = chunk
                .created
                .and_then(|raw| serde_json::from_str(raw.get()).ok());
        }
        if let Some(n) = chunk.usage.and_then(|u| u.completion_tokens) {
            self.tokens = u32::try_from(n).unwrap_or(u32::MAX);
        }
        for choice in chunk.choices {
            if choice.index.unwrap_or(0) != 0 {
                self.cannot = Some("the answer has more than one choice");
                continue;
            }
            if choice.finish_reason.is_some() {
                self.ended = true;
            }
            let piece = match self.api {
                Api::Chat => {
                    let Some(delta) = choice.delta else {
                        continue;
                    };
                    let nonempty =
                        |v: &Option<Cow<'_, str>>| v.as_deref().is_some_and(|t| !t.is_empty());
                    if delta.tool_calls.is_some_and(|c| !c.is_empty())
                        || delta.function_call.is_some()
                        || nonempty(&delta.reasoning_content)
                        || nonempty(&delta.reasoning)
                    {
                        self.cannot =
                            Some("the answer carries more than text (tool calls or reasoning)");
                    }
                    delta.content
                }
                Api::Completions => choice.text,
            };
            if let Some(piece) = piece.filter(|p| !p.is_empty()) {
                self.text.push_str(&piece);
                self.counted_events += 1;
                self.tokens = self.tokens.max(self.counted_events);
            }
        }
    }

    /// Whether the client has seen the answer end (so a failure now loses nothing). Reads what
    /// is unread only when no `[DONE]` came: an answer may also end by its finish reason.
    pub fn ended(&mut self) -> bool {
        if !self.ended {
            self.read();
        }
        self.ended
    }

    /// How the answer goes on from what the client has, given the client's request `body`.
    pub fn continuation(&mut self, body: &[u8]) -> Result<Continuation, NotResumable> {
        self.read();
        if let Some(why) = self.cannot {
            return Err(NotResumable(why.to_owned()));
        }
        let Ok(Value::Object(mut request)) = serde_json::from_slice::<Value>(body) else {
            return Err(NotResumable("the request body is not a JSON object".into()));
        };
        if request
            .get("n")
            .and_then(Value::as_u64)
            .is_some_and(|n| n != 1)
        {
            return Err(NotResumable(
                "the request asks for more than one choice".into(),
            ));
        }
        for key in ["max_completion_tokens", "max_tokens"] {
            let Some(most) = request.get(key).and_then(Value::as_u64) else {
                continue;
            };
            let left = most.saturating_sub(u64::from(self.tokens));
            if left == 0 {
                return Ok(Continuation::Finish(self.finish_events()));
            }
            request.insert(key.to_owned(), Value::from(left));
        }
        match self.api {
            Api::Chat => continue_chat(&mut request, &self.text)?,
            Api::Completions => continue_completion(&mut request, &self.text)?,
        }
        let body = serde_json::to_vec(&request)
            .map_err(|e| NotResumable(format!("the continuation did not serialise: {e}")))?;
        Ok(Continuation::Request {
            body: Bytes::from(body),
            splice: Splice {
                api: self.api,
                id: self.id.clone(),
                created: self.created.clone(),
                before: self.tokens,
            },
        })
    }

    /// The end of an answer that sent every token it was allowed: a last chunk that says so,
    /// then `[DONE]`.
    fn finish_events(&self) -> Bytes {
        let choice = match self.api {
            Api::Chat => {
                serde_json::json!({"index": 0, "delta": {}, "logprobs": null, "finish_reason": "length"})
            }
            Api::Completions => {
                serde_json::json!({"index": 0, "text": "", "logprobs": null, "finish_reason": "length"})
            }
        };
        let object = match self.api {
            Api::Chat => "chat.completion.chunk",
            Api::Completions => "text_completion",
        };
        let mut chunk = Map::new();
        if let Some(id) = &self.id {
            chunk.insert("id".into(), Value::from(id.as_str()));
        }
        chunk.insert("object".into(), Value::from(object));
        if let Some(created) = &self.created {
            chunk.insert("created".into(), created.clone());
        }
        chunk.insert("choices".into(), Value::Array(vec![choice]));
        Bytes::from(format!(
            "data: {}\n\ndata: [DONE]\n\n",
            Value::Object(chunk)
        ))
    }
}

/// A chat goes on as the assistant's last message: appended to the client's own final message
/// when it already asked to continue one, else as a new one.
fn continue_chat(request: &mut Map<String, Value>, text: &str) -> Result<(), NotResumable> {
    let continuing = request
        .get("continue_final_message")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let Some(messages) = request.get_mut("messages").and_then(Value::as_array_mut) else {
        return Err(NotResumable("the request has no messages".into()));
    };
    if continuing {
        let content = messages
            .last_mut()
            .and_then(|m| m.get_mut("content"))
            .ok_or_else(|| NotResumable("the final message has no content".into()))?;
        let Value::String(so_far) = content else {
            return Err(NotResumable(
                "the final message's content is not text".into(),
            ));
        };
        so_far.push_str(text);
    } else {
        messages.push(serde_json::json!({"role": "assistant", "content": text}));
    }
    request.insert("continue_final_message".into(), Value::Bool(true));
    request.insert("add_generation_prompt".into(), Value::Bool(false));
    Ok(())
}

/// A completion goes on from its prompt extended by the text so far (and does not echo it
/// again).
fn continue_completion(request: &mut Map<String, Value>, text: &str) -> Result<(), NotResumable> {
    let prompt = match request.get_mut("prompt") {
        Some(Value::String(p)) => p,
        Some(Value::Array(items)) if items.len() == 1 => match items.first_mut() {
            Some(Value::String(p)) => p,
            _ => return Err(NotResumable("the prompt is token ids".into())),
        },
        _ => return Err(NotResumable("the prompt is not one text".into())),
    };
    prompt.push_str(text);
    if request.get("echo").and_then(Value::as_bool) == Some(true) {
        request.insert("echo".into(), Value::Bool(false));
    }
    Ok(())
}

/// Turns a continuation's events into the client's: the first answer's `id` and `created`, no
/// role chunk (the client had one), and `usage` that counts the tokens sent before as
/// completion tokens rather than prompt ones.
#[derive(Debug, Clone)]
pub struct Splice {
    api: Api,
    id: Option<String>,
    created: Option<Value>,
    /// Tokens the client had before the continuation began.
    before: u32,
}

impl Splice {
    /// The client's version of the continuation's whole `events`.
    pub fn rewrite(&self, events: &[u8]) -> Bytes {
        let mut out = Vec::with_capacity(events.len() + 64);
        for payload in payloads(events) {
            if let Some(chunk) = self.rewrite_event(&payload) {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(chunk.as_bytes());
                out.extend_from_slice(b"\n\n");
            }
        }
        Bytes::from(out)
    }

    /// One event's payload as the client gets it; `None` drops it.
    fn rewrite_event(&self, payload: &str) -> Option<String> {
        let Ok(Value::Object(mut chunk)) = serde_json::from_str::<Value>(payload) else {
            return Some(payload.to_owned());
        };
        if chunk.contains_key("error") {
            return Some(payload.to_owned());
        }
        if let (Some(id), Some(slot)) = (&self.id, chunk.get_mut("id")) {
            *slot = Value::from(id.as_str());
        }
        if let (Some(created), Some(slot)) = (&self.created, chunk.get_mut("created")) {
            *slot = created.clone();
        }
        let usage = chunk
            .get_mut("usage")
            .and_then(Value::as_object_mut)
            .map(|u| self.fix_usage(u))
            .is_some();
        let mut said_something = false;
        if let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) {
            for choice in choices.iter_mut() {
                let finished = choice.get("finish_reason").is_some_and(|f| !f.is_null());
                let text = match self.api {
                    Api::Chat => {
                        choice
                            .get_mut("delta")
                            .and_then(Value::as_object_mut)
                            .map(|delta| {
                                delta.remove("role");
                                delta.iter().any(|(_, v)| {
                                    !(v.is_null() || v.as_str().is_some_and(str::is_empty))
                                })
                            })
                    }
                    Api::Completions => choice
                        .get("text")
                        .and_then(Value::as_str)
                        .map(|t| !t.is_empty()),
                };
                said_something |= finished || text.unwrap_or(false);
            }
            // The continuation's opening chunk (vLLM's role and empty content) says nothing
            // the client has not had.
            if !said_something && !usage && !choices.is_empty() {
                return None;
            }
        }
        Some(Value::Object(chunk).to_string())
    }

    fn fix_usage(&self, usage: &mut Map<String, Value>) {
        let before = u64::from(self.before);
        let get = |u: &Map<String, Value>, k: &str| u.get(k).and_then(Value::as_u64);
        let (Some(prompt), Some(completion)) =
            (get(usage, "prompt_tokens"), get(usage, "completion_tokens"))
        else {
            return;
        };
        // The continuation's prompt held the answer so far: those tokens were the client's
        // completion, not its prompt.
        let prompt = prompt.saturating_sub(before);
        let completion = completion + before;
        usage.insert("prompt_tokens".into(), Value::from(prompt));
        usage.insert("completion_tokens".into(), Value::from(completion));
        usage.insert("total_tokens".into(), Value::from(prompt + completion));
        if let Some(details) = usage
            .get_mut("prompt_tokens_details")
            .and_then(Value::as_object_mut)
        {
            if let Some(cached) = details.get("cached_tokens").and_then(Value::as_u64) {
                details.insert("cached_tokens".into(), Value::from(cached.min(prompt)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(v: &Value) -> String {
        format!("data: {v}\n\n")
    }

    fn chat_chunk(content: &str) -> Value {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m",
               "choices": [{"index": 0, "delta": {"content": content}, "logprobs": null, "finish_reason": null}]})
    }

    fn role_chunk(id: &str, created: u64) -> Value {
        json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": "m",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]})
    }

    #[test]
    fn the_framer_lets_through_whole_events_only_wherever_the_bytes_are_cut() {
        let stream = format!(
            "{}{}data: [DONE]\r\n\r\n",
            event(&chat_chunk("a")),
            event(&chat_chunk("b"))
        );
        for cut in 0..stream.len() {
            let mut f = EventFramer::default();
            let first = f.push(Bytes::copy_from_slice(&stream.as_bytes()[..cut]));
            let second = f.push(Bytes::copy_from_slice(&stream.as_bytes()[cut..]));
            assert!(first.is_empty() || first.ends_with(b"\n\n"), "cut {cut}");
            assert_eq!([first, second].concat(), stream.as_bytes(), "cut {cut}");
            assert!(f.take_held().is_empty());
        }
        let mut f = EventFramer::default();
        assert!(f.push(Bytes::from_static(b"data: {\"par")).is_empty());
        f.discard();
        assert_eq!(
            f.push(Bytes::from_static(b"data: [DONE]\n\n")),
            "data: [DONE]\n\n"
        );
    }

    #[test]
    fn a_chat_continues_as_the_final_assistant_message_with_fewer_tokens_left() {
        let mut t = Transcript::new(Api::Chat);
        t.record(event(&role_chunk("chatcmpl-1", 7)).as_bytes());
        for piece in ["the", " model", " server"] {
            t.record(event(&chat_chunk(piece)).as_bytes());
        }
        assert!(!t.ended());
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                          "stream": true, "max_tokens": 10, "seed": 3});
        let Continuation::Request { body, splice } =
            t.continuation(body.to_string().as_bytes()).unwrap()
        else {
            panic!("a request")
        };
        let sent: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            sent["messages"][1],
            json!({"role": "assistant", "content": "the model server"})
        );
        assert_eq!(sent["continue_final_message"], true);
        assert_eq!(sent["add_generation_prompt"], false);
        assert_eq!(sent["max_tokens"], 7);
        assert_eq!(sent["seed"], 3);

        // The continuation's events: its role chunk goes, ids become the first answer's, and
        // the usage counts the three tokens sent before as completion.
        let mut end = chat_chunk("");
        end["id"] = json!("chatcmpl-2");
        end["choices"][0]["finish_reason"] = json!("stop");
        let usage = json!({"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 9,
            "model": "m", "choices": [], "usage": {"prompt_tokens": 13, "completion_tokens": 7,
            "total_tokens": 20, "prompt_tokens_details": {"cached_tokens": 12}}});
        let mut more = chat_chunk(" routes");
        more["id"] = json!("chatcmpl-2");
        let events = format!(
            "{}{}{}{}data: [DONE]\n\n",
            event(&role_chunk("chatcmpl-2", 9)),
            event(&more),
            event(&end),
            event(&usage)
        );
        let out = String::from_utf8(splice.rewrite(events.as_bytes()).to_vec()).unwrap();
        let chunks: Vec<String> = payloads(out.as_bytes());
        assert_eq!(chunks.len(), 4, "{out}");
        let first: Value = serde_json::from_str(&chunks[0]).unwrap();
        assert_eq!(first["id"], "chatcmpl-1");
        assert_eq!(first["created"], 7);
        assert_eq!(first["choices"][0]["delta"], json!({"content": " routes"}));
        let last: Value = serde_json::from_str(&chunks[2]).unwrap();
        assert_eq!(
            last["usage"],
            json!({"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20,
                   "prompt_tokens_details": {"cached_tokens": 10}})
        );
        assert_eq!(chunks[3], "[DONE]");
    }

    #[test]
    fn a_completion_continues_from_its_prompt_and_the_text_so_far() {
        let mut t = Transcript::new(Api::Completions);
        for piece in ["Once", " upon"] {
            let chunk = json!({"id": "cmpl-1", "object": "text_completion", "created": 1,
                "choices": [{"index": 0, "text": piece, "finish_reason": null}]});
            t.record(event(&chunk).as_bytes());
        }
        let body = json!({"prompt": ["Tell me: "], "stream": true, "echo": true,
                          "max_completion_tokens": 2});
        // Both tokens allowed were sent: only the end is missing.
        let Continuation::Finish(end) = t.continuation(body.to_string().as_bytes()).unwrap() else {
            panic!("the end")
        };
        let chunks: Vec<String> = payloads(&end);
        let last: Value = serde_json::from_str(&chunks[0]).unwrap();
        assert_eq!(last["id"], "cmpl-1");
        assert_eq!(last["choices"][0]["finish_reason"], "length");
        assert_eq!(chunks[1], "[DONE]");

        let body = json!({"prompt": "Tell me: ", "stream": true, "echo": true});
        let Continuation::Request { body, .. } =
            t.continuation(body.to_string().as_bytes()).unwrap()
        else {
            panic!("a request")
        };
        let sent: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(sent["prompt"], "Tell me: Once upon");
        assert_eq!(sent["echo"], false);
    }

    #[test]
    fn what_cannot_be_rebuilt_is_not_resumed_and_an_ended_answer_needs_nothing() {
        let mut tools = Transcript::new(Api::Chat);
        let mut call = chat_chunk("");
        call["choices"][0]["delta"] =
            json!({"tool_calls": [{"index": 0, "function": {"name": "f"}}]});
        tools.record(event(&call).as_bytes());
        let body = json!({"messages": [{"role": "user", "content": "x"}], "stream": true});
        assert!(tools.continuation(body.to_string().as_bytes()).is_err());

        let mut tokens = Transcript::new(Api::Completions);
        let body = json!({"prompt": [1, 2, 3], "stream": true});
        assert!(tokens.continuation(body.to_string().as_bytes()).is_err());

        let mut done = Transcript::new(Api::Chat);
        let mut end = chat_chunk("x");
        end["choices"][0]["finish_reason"] = json!("stop");
        done.record(event(&end).as_bytes());
        assert!(done.ended());
    }

    #[test]
    fn an_answer_that_ends_with_done_is_known_to_have_ended_without_being_read() {
        let mut t = Transcript::new(Api::Chat);
        t.record(event(&chat_chunk("a")).as_bytes());
        assert!(!t.ended());
        t.record(b"data: [DONE]\n\n");
        assert!(t.ended());
        assert!(!t.unread.is_empty(), "nothing was read");
    }

    #[test]
    fn a_long_answer_is_read_in_steps_and_its_text_kept_whole() {
        let mut t = Transcript::new(Api::Chat);
        let mut expected = String::new();
        for i in 0..5_000 {
            let piece = format!(" w{i}");
            expected.push_str(&piece);
            t.record(event(&chat_chunk(&piece)).as_bytes());
        }
        assert!(t.unread.len() < UNREAD_LIMIT);
        t.read();
        assert_eq!(t.text, expected);
        assert_eq!(t.tokens, 5_000);
    }
}
