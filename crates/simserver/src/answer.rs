//! Writing an admitted request's answer: OpenAI server-sent events as tokens arrive, or one JSON
//! document at the end.
//!
//! Stream chunks are written by hand into one reused buffer (the hot path: one chunk per token
//! per client); everything that happens once per request goes through `serde_json`.

use crate::generation::Words;
use crate::replica::{Admitted, Progress, ReplicaHandle};
use crate::request::Endpoint;
use bytes::{BufMut, Bytes, BytesMut};
use hyper::body::{Body, Frame, SizeHint};
use infergate_engine::tokens::mix;
use infergate_engine::{FinishReason, RequestId, Usage};
use serde::Serialize;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Cancels the engine request if the answer is dropped before it finished: the client went away.
#[derive(Debug)]
struct AbortGuard {
    replica: ReplicaHandle,
    id: RequestId,
    finished: bool,
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.replica.abort(self.id);
        }
    }
}

/// An admitted request waiting for its tokens.
#[derive(Debug)]
pub(crate) struct Answer {
    endpoint: Endpoint,
    /// `data: {"id":…,"object":…,"created":…,"model":…,` — the part every chunk shares.
    head: String,
    id: String,
    created: u64,
    model: String,
    admitted: Admitted,
    words: Words,
    /// The prompt's tokens as `usage` reports them, when the engine's count is not it (a
    /// continued answer's words so far count as the tokens they were).
    prompt_tokens: Option<u32>,
    events: mpsc::UnboundedReceiver<Progress>,
    guard: AbortGuard,
}

impl Answer {
    pub fn new(
        endpoint: Endpoint,
        model: String,
        created: u64,
        admitted: Admitted,
        prompt_tokens: Option<u32>,
        events: mpsc::UnboundedReceiver<Progress>,
        replica: ReplicaHandle,
    ) -> Answer {
        let prefix = match endpoint {
            Endpoint::ChatCompletions => "chatcmpl",
            Endpoint::Completions => "cmpl",
        };
        let id = format!(
            "{prefix}-{:016x}{:016x}",
            admitted.seed,
            mix(admitted.id.as_u64())
        );
        let object = match endpoint {
            Endpoint::ChatCompletions => "chat.completion.chunk",
            Endpoint::Completions => "text_completion",
        };
        let model_json = serde_json::Value::from(model.as_str()).to_string();
        let head = format!(
            "data: {{\"id\":\"{id}\",\"object\":\"{object}\",\"created\":{created},\"model\":{model_json},"
        );
        Answer {
            endpoint,
            head,
            id,
            created,
            model,
            words: Words::from_word(admitted.seed, admitted.first_word),
            prompt_tokens,
            admitted,
            events,
            guard: AbortGuard {
                replica,
                id: admitted.id,
                finished: false,
            },
        }
    }

    /// `usage` as the answer reports it.
    fn reported(&self, mut usage: Usage) -> Usage {
        if let Some(prompt) = self.prompt_tokens {
            usage.prompt_tokens = prompt;
            usage.cached_tokens = usage.cached_tokens.min(prompt);
        }
        usage
    }

    /// The answer as a stream of server-sent events.
    pub fn into_stream(self, include_usage: bool) -> SseBody {
        SseBody {
            answer: self,
            include_usage,
            buf: BytesMut::with_capacity(1024),
            done: false,
            finish_sent: false,
        }
    }

    /// Waits for the last token and returns the whole answer as JSON. `None` if the engine
    /// stopped before finishing it.
    pub async fn collect(mut self) -> Option<Bytes> {
        let (reason, usage) = loop {
            match self.events.recv().await? {
                Progress::Token { .. } => {}
                Progress::Finished { reason, usage } => break (reason, self.reported(usage)),
            }
        };
        self.guard.finished = true;
        let text = self.words.text(usage.completion_tokens);
        let finish_reason = reason.as_str();
        let (object, choice) = match self.endpoint {
            Endpoint::ChatCompletions => (
                "chat.completion",
                Choice::Chat {
                    index: 0,
                    message: Message {
                        role: "assistant",
                        content: text,
                        tool_calls: [],
                    },
                    logprobs: None,
                    finish_reason,
                    stop_reason: None,
                },
            ),
            Endpoint::Completions => (
                "text_completion",
                Choice::Text {
                    index: 0,
                    text,
                    logprobs: None,
                    finish_reason,
                    stop_reason: None,
                    prompt_logprobs: None,
                },
            ),
        };
        let body = Completion {
            id: &self.id,
            object,
            created: self.created,
            model: &self.model,
            choices: [choice],
            usage: UsageBody::from(usage),
        };
        serde_json::to_vec(&body).ok().map(Bytes::from)
    }
}

/// A non-streamed answer, fields in vLLM's order.
#[derive(Serialize)]
struct Completion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [Choice; 1],
    usage: UsageBody,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Choice {
    Chat {
        index: u32,
        message: Message,
        logprobs: Option<()>,
        finish_reason: &'static str,
        stop_reason: Option<()>,
    },
    Text {
        index: u32,
        text: String,
        logprobs: Option<()>,
        finish_reason: &'static str,
        stop_reason: Option<()>,
        prompt_logprobs: Option<()>,
    },
}

#[derive(Serialize)]
struct Message {
    role: &'static str,
    content: String,
    tool_calls: [(); 0],
}

#[derive(Serialize)]
struct UsageBody {
    prompt_tokens: u32,
    total_tokens: u32,
    completion_tokens: u32,
    prompt_tokens_details: PromptTokensDetails,
}

#[derive(Serialize)]
struct PromptTokensDetails {
    cached_tokens: u32,
}

impl From<Usage> for UsageBody {
    fn from(u: Usage) -> UsageBody {
        UsageBody {
            prompt_tokens: u.prompt_tokens,
            total_tokens: u.prompt_tokens + u.completion_tokens,
            completion_tokens: u.completion_tokens,
            prompt_tokens_details: PromptTokensDetails {
                cached_tokens: u.cached_tokens,
            },
        }
    }
}

/// The streaming body: OpenAI SSE chunks, then `data: [DONE]`.
#[derive(Debug)]
pub(crate) struct SseBody {
    answer: Answer,
    include_usage: bool,
    buf: BytesMut,
    done: bool,
    finish_sent: bool,
}

impl SseBody {
    fn write_token(&mut self, index: u32) {
        let a = &self.answer;
        let (space, word) = a.words.token(index);
        let last = index + 1 >= a.admitted.output.tokens;
        let finish = if last {
            Some(a.admitted.output.finish)
        } else {
            None
        };
        let buf = &mut self.buf;
        if index == 0 && a.endpoint == Endpoint::ChatCompletions {
            // vLLM sends the role with the first output, so a client's first chunk marks TTFT.
            buf.put_slice(a.head.as_bytes());
            buf.put_slice(
                b"\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\
                  \"logprobs\":null,\"finish_reason\":null}]}\n\n",
            );
        }
        buf.put_slice(a.head.as_bytes());
        match a.endpoint {
            Endpoint::ChatCompletions => {
                buf.put_slice(b"\"choices\":[{\"index\":0,\"delta\":{\"content\":\"")
            }
            Endpoint::Completions => buf.put_slice(b"\"choices\":[{\"index\":0,\"text\":\""),
        }
        buf.put_slice(space.as_bytes());
        buf.put_slice(word.as_bytes());
        match a.endpoint {
            Endpoint::ChatCompletions => buf.put_slice(b"\"},\"logprobs\":null,\"finish_reason\":"),
            Endpoint::Completions => buf.put_slice(b"\",\"logprobs\":null,\"finish_reason\":"),
        }
        put_finish(buf, finish);
        match a.endpoint {
            Endpoint::ChatCompletions => buf.put_slice(b"}]}\n\n"),
            Endpoint::Completions => buf.put_slice(b",\"stop_reason\":null}]}\n\n"),
        }
        self.finish_sent |= last;
    }

    fn write_end(&mut self, reason: FinishReason, usage: Usage) {
        let a = &self.answer;
        let buf = &mut self.buf;
        if !self.finish_sent {
            buf.put_slice(a.head.as_bytes());
            match a.endpoint {
                Endpoint::ChatCompletions => buf.put_slice(
                    b"\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":",
                ),
                Endpoint::Completions => buf.put_slice(
                    b"\"choices\":[{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":",
                ),
            }
            put_finish(buf, Some(reason));
            match a.endpoint {
                Endpoint::ChatCompletions => buf.put_slice(b"}]}\n\n"),
                Endpoint::Completions => buf.put_slice(b",\"stop_reason\":null}]}\n\n"),
            }
        }
        if self.include_usage {
            buf.put_slice(a.head.as_bytes());
            // Writing into a BytesMut cannot fail.
            let _ = write!(
                buf,
                "\"choices\":[],\"usage\":{{\"prompt_tokens\":{},\"total_tokens\":{},\"completion_tokens\":{},\
                 \"prompt_tokens_details\":{{\"cached_tokens\":{}}}}}}}\n\n",
                usage.prompt_tokens,
                usage.prompt_tokens + usage.completion_tokens,
                usage.completion_tokens,
                usage.cached_tokens,
            );
        }
        buf.put_slice(b"data: [DONE]\n\n");
        self.done = true;
        self.answer.guard.finished = true;
    }
}

fn put_finish(buf: &mut BytesMut, finish: Option<FinishReason>) {
    match finish {
        None => buf.put_slice(b"null"),
        Some(reason) => {
            buf.put_u8(b'"');
            buf.put_slice(reason.as_str().as_bytes());
            buf.put_u8(b'"');
        }
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        // Everything that is ready goes out in one frame: one write per wake-up, not per token.
        while !this.done {
            match this.answer.events.poll_recv(cx) {
                Poll::Ready(Some(Progress::Token { index })) => this.write_token(index),
                Poll::Ready(Some(Progress::Finished { reason, usage })) => {
                    let usage = this.answer.reported(usage);
                    this.write_end(reason, usage)
                }
                // The engine stopped (shutdown or crash): end the body without `[DONE]`.
                Poll::Ready(None) => this.done = true,
                Poll::Pending => break,
            }
        }
        if !this.buf.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(this.buf.split().freeze()))));
        }
        if this.done {
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.buf.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
