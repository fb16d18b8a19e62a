//! What the picker needs to know about a request, computed once from the parsed body and the
//! headers: prefix block hashes, an estimate of the prompt's tokens, the adapter, and the
//! tenant and priority band.

use std::cell::RefCell;

use hyper::HeaderMap;
use infergate_config::gateway::{Band, Identity, ResolvedTenancy};
use infergate_picker::prefix::{HashMemo, PrefixParams};
use infergate_picker::RequestFeatures;

/// Bytes per token in the estimate (upstream's four characters per token).
const BYTES_PER_TOKEN: u64 = 4;

/// A band's priority as the picker reads it: negative is sheddable.
pub fn priority(band: Band) -> i32 {
    match band {
        Band::Critical => 1,
        Band::Standard => 0,
        Band::Sheddable => -1,
    }
}

/// The band a request asks for in its criticality header (a band name or an upstream
/// priority integer, [`Band::from_criticality`]); the default band when it names neither.
pub fn band(headers: &HeaderMap, tenancy: &ResolvedTenancy) -> Band {
    let default = tenancy.default_criticality.value;
    let Identity::Header(name) = &tenancy.criticality.value else {
        return default;
    };
    headers
        .get(name.as_str())
        .and_then(|v| v.to_str().ok())
        .and_then(Band::from_criticality)
        .unwrap_or(default)
}

/// The tenant named in the fairness header, when tenancy comes from headers.
pub fn tenant(headers: &HeaderMap, tenancy: &ResolvedTenancy) -> Option<String> {
    let Identity::Header(name) = &tenancy.tenant.value else {
        return None;
    };
    headers
        .get(name.as_str())
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

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

/// The request's features for the picker.
pub fn features(
    model: &str,
    adapter: Option<&str>,
    prompt: &[u8],
    params: &PrefixParams,
    band: Band,
    tenant: Option<String>,
) -> RequestFeatures {
    RequestFeatures {
        model: model.to_owned(),
        target_adapter: adapter.map(str::to_owned),
        prompt_block_hashes: prompt_hashes(model, prompt, params),
        prompt_tokens: (prompt.len() as u64).div_ceil(BYTES_PER_TOKEN),
        priority: priority(band),
        tenant,
        session: None,
        endpoint_subset: None,
        buffered_response: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn tenancy() -> ResolvedTenancy {
        infergate_config::gateway::load_from_str(
            "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {enabled: true}\n  schedulers:\n    - name: a\n      modelName: m\n      modelSelector: {matchLabels: {app: a}}\n",
        )
        .unwrap()
        .resolve()
        .unwrap()
        .tenancy
    }

    #[test]
    fn band_and_tenant_come_from_the_headers() {
        let t = tenancy();
        let mut h = HeaderMap::new();
        assert_eq!(band(&h, &t), Band::Standard);
        h.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("Sheddable"),
        );
        h.insert(
            "x-gateway-inference-fairness-id",
            HeaderValue::from_static("team-a"),
        );
        assert_eq!(band(&h, &t), Band::Sheddable);
        assert_eq!(tenant(&h, &t).as_deref(), Some("team-a"));
        // Upstream priorities: above zero Critical, below zero Sheddable.
        h.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("2"),
        );
        assert_eq!(band(&h, &t), Band::Critical);
        h.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("-1"),
        );
        assert_eq!(band(&h, &t), Band::Sheddable);
        h.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("urgent"),
        );
        assert_eq!(band(&h, &t), Band::Standard);
    }

    #[test]
    fn prompt_tokens_are_bytes_over_four_and_blocks_are_64_bytes() {
        let prompt = vec![b'x'; 130];
        let f = features(
            "m",
            Some("a"),
            &prompt,
            &PrefixParams::default(),
            Band::Critical,
            None,
        );
        assert_eq!(f.prompt_tokens, 33);
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
            let f = features("m", None, prompt, &params, Band::Standard, None);
            assert_eq!(
                f.prompt_block_hashes,
                infergate_picker::prefix::hash_prompt("m", None, prompt, &params)
            );
        }
    }
}
