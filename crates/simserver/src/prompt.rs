//! From a request's text to what the engine schedules: the chat template, token counts and the
//! prefix-cache block hashes.
//!
//! Every replica renders and tokenizes alike, so equal text prefixes give equal block hashes on
//! every replica — the property prefix-aware routing depends on.

use infergate_engine::blocks::BlockHash;
use infergate_engine::tokens;

/// One chat message, its content already flattened to text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, `tool` or `developer`.
    pub role: String,
    /// The text (content parts joined; empty when the message had none).
    pub content: String,
}

/// Roles the chat template knows.
pub(crate) const ROLES: &[&str] = &["system", "user", "assistant", "tool", "developer"];

/// Renders `messages` through a fixed Llama-3-style chat template, with the generation prompt
/// for the assistant's answer at the end.
pub fn render_chat(messages: &[ChatMessage]) -> String {
    render_chat_ending(messages, ChatEnding::GenerationPrompt)
}

/// How a rendered chat ends (vLLM's `add_generation_prompt` and `continue_final_message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatEnding {
    /// Every message closed, then the header that opens the assistant's answer.
    GenerationPrompt,
    /// Every message closed, nothing after.
    Closed,
    /// The last message left open, so that the model goes on writing it.
    ContinueLast,
}

const BEGIN: &str = "<|begin_of_text|>";
const HEADER: (&str, &str) = ("<|start_header_id|>", "<|end_header_id|>\n\n");
const END: &str = "<|eot_id|>";

/// Renders `messages` through the template, ending as `ending` says.
pub fn render_chat_ending(messages: &[ChatMessage], ending: ChatEnding) -> String {
    let size = messages
        .iter()
        .map(|m| HEADER.0.len() + m.role.len() + HEADER.1.len() + m.content.len() + END.len())
        .sum::<usize>();
    let mut out = String::with_capacity(BEGIN.len() + size + 64);
    out.push_str(BEGIN);
    for (i, m) in messages.iter().enumerate() {
        out.push_str(HEADER.0);
        out.push_str(&m.role);
        out.push_str(HEADER.1);
        out.push_str(&m.content);
        if !(ending == ChatEnding::ContinueLast && i + 1 == messages.len()) {
            out.push_str(END);
        }
    }
    if ending == ChatEnding::GenerationPrompt {
        out.push_str(HEADER.0);
        out.push_str("assistant");
        out.push_str(HEADER.1);
    }
    out
}

/// A prompt as the engine needs it: its length and the hashes of its full blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenizedPrompt {
    pub tokens: u32,
    pub block_hashes: Vec<BlockHash>,
}

/// Tokenizes `text` with the engine's deterministic tokenizer and hashes its blocks under the
/// adapter's key.
pub(crate) fn tokenize_text(text: &str, vocab: u32, hash_key: u64) -> TokenizedPrompt {
    tokenize_ids(&tokens::tokenize(text, vocab), hash_key)
}

/// Hashes token ids given directly by the client (`prompt: [1, 2, 3]`).
pub(crate) fn tokenize_ids(ids: &[u32], hash_key: u64) -> TokenizedPrompt {
    TokenizedPrompt {
        tokens: u32::try_from(ids.len()).unwrap_or(u32::MAX),
        block_hashes: tokens::block_hashes(ids, hash_key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    #[test]
    fn the_template_wraps_each_message_and_opens_the_answer() {
        let text = render_chat(&[msg("system", "Be brief."), msg("user", "Hi")]);
        assert_eq!(
            text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        );
    }

    #[test]
    fn a_continued_chat_leaves_its_last_message_open_where_the_answer_began() {
        let messages = [msg("user", "Hi"), msg("assistant", "Hello there")];
        let open = render_chat_ending(&messages, ChatEnding::ContinueLast);
        let fresh = render_chat(&messages[..1]);
        assert_eq!(open, format!("{fresh}Hello there"));
        let closed = render_chat_ending(&messages, ChatEnding::Closed);
        assert_eq!(closed, format!("{fresh}Hello there<|eot_id|>"));
    }

    #[test]
    fn a_shared_system_prompt_gives_shared_leading_blocks() {
        let system = msg("system", &"You are a helpful assistant. ".repeat(20));
        let a = render_chat(&[system.clone(), msg("user", "What is a router?")]);
        let b = render_chat(&[system, msg("user", "Tell me about GPUs.")]);
        let (pa, pb) = (tokenize_text(&a, 128_256, 0), tokenize_text(&b, 128_256, 0));
        assert!(pa.block_hashes.len() >= 8);
        assert_eq!(pa.block_hashes[..8], pb.block_hashes[..8]);
        assert_ne!(
            tokenize_text(&a, 128_256, 1).block_hashes[0],
            pa.block_hashes[0]
        );
    }
}
