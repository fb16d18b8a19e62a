//! Features: what the picker needs to know about a request, computed once from the parsed
//! body and its identity: prefix block hashes, an estimate of the prompt's tokens, the
//! adapter, and the tenant and priority band.

use std::cell::RefCell;

use infergate_config::gateway::Band;
use infergate_picker::prefix::{HashMemo, PrefixParams};
use infergate_picker::RequestFeatures;

/// Bytes per token in the estimate (upstream's four characters per token).
pub const BYTES_PER_TOKEN: u64 = 4;

thread_local! {
    /// The prompts this thread hashed last ([`HashMemo`]): one per runtime thread, so no lock is
    /// taken, and a conversation's next turn, or another request opening with the same system
    /// prompt, has only its new blocks hashed. At most about 1.2 MB a thread.
    static HASH_MEMO: RefCell<HashMemo> = RefCell::new(HashMemo::default());
}

/// The chained prefix block hashes of `prompt` ([`infergate_picker::prefix::hash_prompt`]).
fn prompt_hashes(model: &str, prompt: &[u8], params: &PrefixParams) -> Vec<u64> {
    let mut hashes = Vec::new();
    HASH_MEMO.with_borrow_mut(|memo| memo.hash_into(model, None, prompt, params, &mut hashes));
    hashes
}

/// What the features are computed from.
#[derive(Debug)]
pub struct Seen<'a> {
    /// The model the request is routed by.
    pub model: &'a str,
    /// The adapter it names, if it is one.
    pub adapter: Option<&'a str>,
    /// The prompt's bytes.
    pub prompt: &'a [u8],
    /// How the pool's policy hashes prefixes.
    pub prefix: &'a PrefixParams,
    /// Its priority band.
    pub band: Band,
    /// Its tenant, when it names one.
    pub tenant: Option<String>,
    /// The most tokens it may generate (`max_completion_tokens` or `max_tokens`), if it says.
    pub max_tokens: Option<u64>,
}

/// The request's features for the picker.
pub fn features(seen: Seen<'_>) -> RequestFeatures {
    let Seen {
        model,
        adapter,
        prompt,
        prefix,
        band,
        tenant,
        max_tokens,
    } = seen;
    let prompt_tokens = (prompt.len() as u64).div_ceil(BYTES_PER_TOKEN);
    RequestFeatures {
        model: model.to_owned(),
        target_adapter: adapter.map(str::to_owned),
        prompt_block_hashes: prompt_hashes(model, prompt, prefix),
        prompt_tokens,
        context_tokens: prompt_tokens.saturating_add(max_tokens.unwrap_or(0)),
        priority: crate::identity::priority(band),
        tenant,
        session: None,
        endpoint_subset: None,
        buffered_response: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_tokens_are_bytes_over_four_and_blocks_are_64_bytes() {
        let prompt = vec![b'x'; 130];
        let f = features(Seen {
            model: "m",
            adapter: Some("a"),
            prompt: &prompt,
            prefix: &PrefixParams::default(),
            band: Band::Critical,
            tenant: None,
            max_tokens: Some(100),
        });
        assert_eq!(f.prompt_tokens, 33);
        assert_eq!(f.context_tokens, 133, "prompt plus what it may generate");
        assert_eq!(f.prompt_block_hashes.len(), 2);
        assert_eq!(f.priority, 1);
        assert_eq!(f.target_adapter.as_deref(), Some("a"));
    }

    #[test]
    fn prompts_hash_as_the_picker_defines_whatever_the_memo_holds() {
        let params = PrefixParams::default();
        let a = vec![b'a'; 1_000];
        let mut b = a.clone();
        b[300] = b'b';
        // The second and third prompts meet the memo holding a prompt that opens like them.
        for prompt in [&a, &b, &a, &b[..700]] {
            let f = features(Seen {
                model: "m",
                adapter: None,
                prompt,
                prefix: &params,
                band: Band::Standard,
                tenant: None,
                max_tokens: None,
            });
            assert_eq!(
                f.prompt_block_hashes,
                infergate_picker::prefix::hash_prompt("m", None, prompt, &params)
            );
        }
    }
}
