//! Parsing OpenAI request bodies (`/v1/chat/completions`, `/v1/completions`) into what the
//! simulator honours, with vLLM's 400 answers for everything else.
//!
//! Fields the simulation has no use for (temperature, top_p, seed, user, stop, tools, …) are
//! accepted and ignored, as by a real server whose sampling does not change how long a step
//! takes; their types are still checked where vLLM checks them. What would change the answer's
//! shape and cannot be honoured (`n > 1`, batched prompts, non-text content) is refused, naming
//! the field.

use crate::error::ApiError;
use crate::generation::Words;
use crate::prompt::{render_chat_ending, ChatEnding, ChatMessage, ROLES};
use infergate_engine::tokens::count_tokens;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

/// Which OpenAI endpoint a body was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /v1/completions`.
    Completions,
}

/// The prompt as text (a rendered chat or a completion prompt) or as token ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Text to tokenize.
    Text(String),
    /// Token ids given by the client.
    Tokens(Vec<u32>),
}

/// What the simulator takes from a request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferenceRequest {
    /// The endpoint the body was parsed for.
    pub endpoint: Endpoint,
    /// The model asked for; `None` means the served model.
    pub model: Option<String>,
    /// The prompt (a chat is already rendered through the template).
    pub prompt: Prompt,
    /// Stream the answer as server-sent events.
    pub stream: bool,
    /// `stream_options.include_usage`: end the stream with a usage chunk.
    pub include_usage: bool,
    /// `max_completion_tokens`, else `max_tokens`.
    pub max_tokens: Option<u32>,
    /// Generate exactly `max_tokens` tokens.
    pub ignore_eos: bool,
    /// vLLM's `priority` (lower is served first; 0 when absent). The engine refuses a non-zero
    /// value unless it runs the priority scheduling policy.
    pub priority: i32,
    /// `seed`: the answer (its words and, unless `ignore_eos`, its length) is a function of it,
    /// as a seeded sampler's is.
    pub seed: Option<u64>,
    /// The answer this request goes on with, when it continues one.
    pub continues: Option<Continuation>,
}

/// Where an answer a request continues left off: vLLM's `continue_final_message` (the final
/// assistant message is the answer so far), or a completion prompt that ends with the words the
/// request's `seed` writes (the simulated model knows its own answer, as a real one goes on
/// with its own text). The simulated model writes one word per token, so the words so far are
/// the tokens so far, and they count as such in the answer's `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Continuation {
    /// Tokens of the answer already written.
    pub written: u32,
    /// Tokens of the prompt before the answer so far.
    pub prefix_tokens: u32,
}

#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
struct Body {
    model: Option<String>,
    messages: Option<Vec<Message>>,
    prompt: Option<Value>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    ignore_eos: Option<bool>,
    priority: Option<i32>,
    seed: Option<i64>,
    continue_final_message: Option<bool>,
    add_generation_prompt: Option<bool>,
    n: Option<u32>,
    best_of: Option<u32>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    // Checked for type only, like vLLM's schema does.
    #[allow(dead_code)]
    top_k: Option<i64>,
    #[allow(dead_code)]
    min_p: Option<f64>,
    #[allow(dead_code)]
    presence_penalty: Option<f64>,
    #[allow(dead_code)]
    frequency_penalty: Option<f64>,
    #[allow(dead_code)]
    repetition_penalty: Option<f64>,
    #[allow(dead_code)]
    user: Option<String>,
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
    #[allow(dead_code)]
    continuous_usage_stats: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(expecting = "a message object")]
struct Message {
    role: String,
    content: Option<Content>,
}

/// Message content: a string or an array of text parts, flattened to one string.
#[derive(Debug)]
struct Content(String);

#[derive(Debug, Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Content, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                Ok(Content(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
                Ok(Content(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut text = String::new();
                while let Some(part) = seq.next_element::<ContentPart>()? {
                    match (part.kind.as_str(), part.text) {
                        ("text", Some(t)) => {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(&t);
                        }
                        ("text", None) => return Err(de::Error::missing_field("text")),
                        (other, _) => {
                            return Err(de::Error::custom(format!(
                                "content part type `{other}` is not supported (only `text`)"
                            )))
                        }
                    }
                }
                Ok(Content(text))
            }
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

/// Parses a request body sent to `endpoint`. Never panics: any input gives a request or a 400.
pub fn parse_request(endpoint: Endpoint, body: &[u8]) -> Result<InferenceRequest, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: Body = match serde_path_to_error::deserialize(&mut de) {
        Ok(b) => b,
        Err(e) => return Err(describe(e)),
    };
    if let Err(e) = de.end() {
        return Err(ApiError::bad_request(format!("malformed JSON body: {e}")));
    }
    validate(endpoint, parsed)
}

fn describe(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if matches!(inner.classify(), serde_json::error::Category::Data) {
        if path == "." {
            ApiError::bad_request(inner.to_string())
        } else {
            ApiError::bad_request(format!("{path}: {inner}"))
        }
    } else {
        ApiError::bad_request(format!("malformed JSON body: {inner}"))
    }
}

fn validate(endpoint: Endpoint, body: Body) -> Result<InferenceRequest, ApiError> {
    if let Some(n) = body.n {
        if n != 1 {
            return Err(ApiError::bad_request(format!(
                "n: only n=1 is supported, got {n}"
            )));
        }
    }
    if let Some(best_of) = body.best_of {
        if best_of != 1 {
            return Err(ApiError::bad_request(format!(
                "best_of: only best_of=1 is supported, got {best_of}"
            )));
        }
    }
    if let Some(t) = body.temperature {
        if !(t.is_finite() && t >= 0.0) {
            return Err(ApiError::bad_request(format!(
                "temperature must be non-negative, got {t}."
            )));
        }
    }
    if let Some(p) = body.top_p {
        if !(p > 0.0 && p <= 1.0) {
            return Err(ApiError::bad_request(format!(
                "top_p must be in (0, 1], got {p}."
            )));
        }
    }
    let max_tokens = body.max_completion_tokens.or(body.max_tokens);
    if max_tokens == Some(0) {
        return Err(ApiError::bad_request(
            "max_tokens must be at least 1, got 0.",
        ));
    }
    let stream = body.stream.unwrap_or(false);
    if body.stream_options.is_some() && !stream {
        return Err(ApiError::bad_request(
            "Stream options can only be defined when `stream=True`.",
        ));
    }
    let include_usage = body
        .stream_options
        .and_then(|o| o.include_usage)
        .unwrap_or(false);
    // vLLM takes any integer and folds it to 64 bits.
    let seed = body.seed.map(|s| s as u64);
    let (prompt, continues) = match endpoint {
        Endpoint::ChatCompletions => {
            if body.prompt.is_some() {
                return Err(ApiError::bad_request(
                    "prompt: not a chat completion field (use messages)",
                ));
            }
            let continuing = body.continue_final_message.unwrap_or(false);
            let ending = match (continuing, body.add_generation_prompt.unwrap_or(true)) {
                (true, true) => return Err(ApiError::bad_request(
                    "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                )),
                (true, false) => ChatEnding::ContinueLast,
                (false, true) => ChatEnding::GenerationPrompt,
                (false, false) => ChatEnding::Closed,
            };
            chat_prompt(body.messages, ending)?
        }
        Endpoint::Completions => {
            if body.messages.is_some() {
                return Err(ApiError::bad_request(
                    "messages: not a completion field (use prompt)",
                ));
            }
            let prompt = completion_prompt(body.prompt)?;
            let continues = match (&prompt, seed) {
                (Prompt::Text(text), Some(seed)) => own_words_at_the_end(text, seed),
                _ => None,
            };
            (prompt, continues)
        }
    };
    Ok(InferenceRequest {
        endpoint,
        model: body.model,
        prompt,
        stream,
        include_usage,
        max_tokens,
        ignore_eos: body.ignore_eos.unwrap_or(false),
        priority: body.priority.unwrap_or(0),
        seed,
        continues,
    })
}

/// The longest answer a completion prompt is searched for (far more than a stream's resumes
/// ever send back).
const MAX_CONTINUED_WORDS: usize = 16_384;

/// The longest run of the words `seed` writes (from its first) that `text` ends with, as a
/// continuation; `None` when it ends with none of them.
fn own_words_at_the_end(text: &str, seed: u64) -> Option<Continuation> {
    let words = Words::new(seed);
    let last = text.split_whitespace().next_back()?;
    // No more words than the text has: each written word is at least one word of text.
    let most = text.split_whitespace().count().min(MAX_CONTINUED_WORDS) as u32;
    let answer = words.text(most);
    let mut ends = Vec::with_capacity(most as usize);
    let mut len = 0;
    for i in 0..most {
        let (space, word) = words.token(i);
        len += space.len() + word.len();
        ends.push(len);
    }
    // Only answers that end with the text's last word can match: compare those alone.
    (1..=most)
        .rev()
        .filter(|&k| words.token(k - 1).1 == last)
        .find_map(|k| {
            let so_far = &answer[..ends[k as usize - 1]];
            text.strip_suffix(so_far).map(|prefix| Continuation {
                written: k,
                prefix_tokens: u32::try_from(count_tokens(prefix)).unwrap_or(u32::MAX),
            })
        })
}

fn chat_prompt(
    messages: Option<Vec<Message>>,
    ending: ChatEnding,
) -> Result<(Prompt, Option<Continuation>), ApiError> {
    let messages = messages.ok_or_else(|| ApiError::bad_request("missing field `messages`"))?;
    if messages.is_empty() {
        return Err(ApiError::bad_request("messages: must not be empty"));
    }
    let mut chat = Vec::with_capacity(messages.len());
    for (i, m) in messages.into_iter().enumerate() {
        if !ROLES.contains(&m.role.as_str()) {
            return Err(ApiError::bad_request(format!(
                "messages[{i}].role: unknown role `{}` (expected one of {})",
                m.role,
                ROLES.join(", ")
            )));
        }
        chat.push(ChatMessage {
            role: m.role,
            content: m.content.map(|c| c.0).unwrap_or_default(),
        });
    }
    let text = render_chat_ending(&chat, ending);
    // Continuing an assistant message: its words are the answer so far.
    let continues = match chat.last() {
        Some(last) if ending == ChatEnding::ContinueLast && last.role == "assistant" => {
            let written = u32::try_from(last.content.split_whitespace().count()).unwrap_or(0);
            let prefix = &text[..text.len() - last.content.len()];
            Some(Continuation {
                written,
                prefix_tokens: u32::try_from(count_tokens(prefix)).unwrap_or(u32::MAX),
            })
        }
        _ => None,
    };
    Ok((Prompt::Text(text), continues))
}

fn completion_prompt(prompt: Option<Value>) -> Result<Prompt, ApiError> {
    const SHAPE: &str =
        "prompt: expected a string, an array of one string, or an array of token ids";
    let prompt = prompt.ok_or_else(|| ApiError::bad_request("missing field `prompt`"))?;
    let prompt = match prompt {
        Value::String(text) => Prompt::Text(text),
        Value::Array(mut items) => {
            if items.iter().all(Value::is_number) && !items.is_empty() {
                Prompt::Tokens(token_ids(&items)?)
            } else if items.len() == 1 {
                match items.pop() {
                    Some(Value::String(text)) => Prompt::Text(text),
                    Some(Value::Array(ids)) if !ids.is_empty() => Prompt::Tokens(token_ids(&ids)?),
                    _ => return Err(ApiError::bad_request(SHAPE)),
                }
            } else if items.len() > 1 {
                return Err(ApiError::bad_request(
                    "prompt: batched prompts are not supported; send one prompt per request",
                ));
            } else {
                return Err(ApiError::bad_request("prompt: must not be empty"));
            }
        }
        _ => return Err(ApiError::bad_request(SHAPE)),
    };
    match &prompt {
        Prompt::Text(t) if t.is_empty() => Err(ApiError::bad_request("prompt: must not be empty")),
        _ => Ok(prompt),
    }
}

fn token_ids(items: &[Value]) -> Result<Vec<u32>, ApiError> {
    items
        .iter()
        .map(|v| {
            v.as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| {
                    ApiError::bad_request(format!("prompt: token id {v} is not a valid token id"))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;

    fn chat(body: &str) -> Result<InferenceRequest, ApiError> {
        parse_request(Endpoint::ChatCompletions, body.as_bytes())
    }

    fn completion(body: &str) -> Result<InferenceRequest, ApiError> {
        parse_request(Endpoint::Completions, body.as_bytes())
    }

    fn message_of(r: Result<InferenceRequest, ApiError>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{e}");
        e.message().to_owned()
    }

    #[test]
    fn a_full_chat_request_parses_and_ignores_sampling_fields() {
        let r = chat(
            r#"{"model":"m","messages":[{"role":"system","content":"Be brief."},
                {"role":"user","content":[{"type":"text","text":"Hi"}],"name":"bob"}],
                "stream":true,"stream_options":{"include_usage":true},"max_tokens":5,
                "temperature":0.7,"top_p":0.9,"seed":1,"user":"u","n":1,"ignore_eos":true,
                "tools":[],"logprobs":false,"stop":["\n"]}"#,
        )
        .unwrap();
        assert_eq!(r.model.as_deref(), Some("m"));
        assert!(r.stream && r.include_usage && r.ignore_eos);
        assert_eq!(r.max_tokens, Some(5));
        let Prompt::Text(text) = r.prompt else {
            panic!("text prompt")
        };
        assert!(text.contains("Be brief.") && text.contains("Hi"));
    }

    #[test]
    fn a_chat_continues_its_final_assistant_message_as_vllm_does() {
        let body = |extra: &str| {
            format!(
                r#"{{"messages":[{{"role":"user","content":"Hi"}},
                {{"role":"assistant","content":"the model server"}}],"seed":5{extra}}}"#
            )
        };
        let r = chat(&body(
            r#","continue_final_message":true,"add_generation_prompt":false"#,
        ))
        .unwrap();
        assert_eq!(r.seed, Some(5));
        let Prompt::Text(text) = &r.prompt else {
            panic!("text prompt")
        };
        assert!(text.ends_with("assistant<|end_header_id|>\n\nthe model server"));
        let c = r.continues.unwrap();
        assert_eq!(c.written, 3);
        assert_eq!(
            c.prefix_tokens as usize,
            count_tokens(&text[..text.len() - "the model server".len()])
        );
        assert!(message_of(chat(&body(r#","continue_final_message":true"#)))
            .contains("Cannot set both"));
        assert_eq!(chat(&body("")).unwrap().continues, None);
    }

    #[test]
    fn a_completion_that_ends_with_its_seeds_words_continues_them() {
        let words = Words::new(11);
        let prompt = format!("Once upon a time{}", words.text(4));
        let r = completion(&format!(
            r#"{{"prompt":{},"seed":11}}"#,
            Value::from(prompt)
        ))
        .unwrap();
        assert_eq!(
            r.continues,
            Some(Continuation {
                written: 4,
                prefix_tokens: count_tokens("Once upon a time") as u32
            })
        );
        let other = completion(r#"{"prompt":"Once upon a time","seed":11}"#).unwrap();
        assert_eq!(other.continues, None);
        let unseeded = completion(&format!(r#"{{"prompt":"x{}"}}"#, words.text(4))).unwrap();
        assert_eq!(unseeded.continues, None);
    }

    #[test]
    fn max_completion_tokens_wins_over_max_tokens() {
        let r = chat(
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":9,"max_completion_tokens":3}"#,
        );
        assert_eq!(r.unwrap().max_tokens, Some(3));
    }

    #[test]
    fn completions_take_text_or_token_ids() {
        let r = completion(r#"{"model":"m","prompt":"Once upon"}"#).unwrap();
        assert_eq!(r.prompt, Prompt::Text("Once upon".into()));
        let r = completion(r#"{"prompt":[1,2,3]}"#).unwrap();
        assert_eq!(r.prompt, Prompt::Tokens(vec![1, 2, 3]));
        let r = completion(r#"{"prompt":[[4,5]]}"#).unwrap();
        assert_eq!(r.prompt, Prompt::Tokens(vec![4, 5]));
        let r = completion(r#"{"prompt":["only"]}"#).unwrap();
        assert_eq!(r.prompt, Prompt::Text("only".into()));
    }

    #[test]
    fn bad_bodies_get_400_naming_the_field() {
        assert!(message_of(chat("{not json")).contains("malformed JSON"));
        assert!(message_of(chat("")).contains("malformed JSON"));
        assert!(message_of(chat("[]")).contains("a JSON object"));
        assert!(message_of(chat("{}")).contains("messages"));
        assert!(message_of(chat(r#"{"messages":"hi"}"#)).starts_with("messages"));
        assert!(message_of(chat(r#"{"messages":[]}"#)).contains("messages"));
        assert!(message_of(chat(r#"{"messages":[{"content":"x"}]}"#)).contains("role"));
        assert!(
            message_of(chat(r#"{"messages":[{"role":"wizard","content":"x"}]}"#)).contains("role")
        );
        assert!(
            message_of(chat(r#"{"messages":[{"role":"user","content":5}]}"#)).contains("content")
        );
        let image =
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}"#;
        assert!(message_of(chat(image)).contains("image_url"));
        let ok = r#""messages":[{"role":"user","content":"x"}]"#;
        assert!(message_of(chat(&format!("{{{ok},\"max_tokens\":-1}}"))).starts_with("max_tokens"));
        assert!(
            message_of(chat(&format!("{{{ok},\"max_tokens\":\"7\"}}"))).starts_with("max_tokens")
        );
        assert!(message_of(chat(&format!("{{{ok},\"max_tokens\":0}}"))).contains("at least 1"));
        assert!(message_of(chat(&format!("{{{ok},\"n\":2}}"))).starts_with("n:"));
        assert!(message_of(chat(&format!("{{{ok},\"stream\":\"yes\"}}"))).starts_with("stream"));
        assert!(message_of(chat(&format!("{{{ok},\"temperature\":-1}}"))).contains("temperature"));
        assert!(message_of(chat(&format!(
            "{{{ok},\"stream_options\":{{\"include_usage\":true}}}}"
        )))
        .contains("stream=True"));
        assert!(message_of(chat(&format!("{{{ok},\"model\":7}}"))).starts_with("model"));
        assert!(message_of(chat(&format!("{{{ok}}} trailing"))).contains("malformed JSON"));
        assert!(message_of(completion("{}")).contains("prompt"));
        assert!(message_of(completion(r#"{"prompt":""}"#)).contains("empty"));
        assert!(message_of(completion(r#"{"prompt":["a","b"]}"#)).contains("batched"));
        assert!(message_of(completion(r#"{"prompt":[-1]}"#)).contains("token id"));
        assert!(message_of(completion(r#"{"prompt":{"a":1}}"#)).starts_with("prompt"));
    }
}
