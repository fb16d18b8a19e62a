//! What the picker needs to know about one request, computed once when the body is parsed.

/// A request's features: everything a filter or scorer may read about it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestFeatures {
    /// The model named in the request body.
    pub model: String,
    /// The LoRA adapter the request targets, when `model` names an adapter rather than the base.
    pub target_adapter: Option<String>,
    /// Chained prefix block hashes of the prompt (see [`crate::prefix::hash_prompt`]).
    pub prompt_block_hashes: Vec<u64>,
    /// Estimated prompt length in tokens.
    pub prompt_tokens: u64,
    /// Context the request needs on a server: its prompt plus the most tokens it may generate
    /// (`max_tokens`); 0 counts as `prompt_tokens`. Endpoints whose `max_model_len` is smaller
    /// are not candidates.
    pub context_tokens: u64,
    /// Priority band value; negative means sheddable.
    pub priority: i32,
    /// Tenant (fairness id), when known.
    pub tenant: Option<String>,
    /// Session id for session affinity, when the client sent one.
    pub session: Option<String>,
    /// Endpoint subset hint (addresses) from the caller, e.g. Envoy's
    /// `x-gateway-destination-endpoint-subset`; `None` means every endpoint of the pool.
    pub endpoint_subset: Option<Vec<String>>,
    /// The response is not streamed, so the caller cannot report the first token: the request's
    /// prefill is then not counted as pending work at its endpoint (it would stay counted for the
    /// whole generation and make the endpoint look busier than it is).
    pub buffered_response: bool,
}

impl RequestFeatures {
    /// A request for `model` with `prompt_tokens` tokens and no prefix hashes.
    pub fn new(model: impl Into<String>, prompt_tokens: u64) -> Self {
        Self {
            model: model.into(),
            prompt_tokens,
            ..Self::default()
        }
    }
}
