//! The member status document: what `infergate serve` publishes on its admin listener at
//! `/status/member` and the global tier pulls every second. One home for its shape: the member
//! writes it with these types and the tier reads it with them. `docs/global.md` describes each
//! field.

use serde::{Deserialize, Serialize};

/// The document's `kind`.
pub const MEMBER_STATUS_KIND: &str = "MemberStatus";

/// The document's `apiVersion`.
pub const MEMBER_STATUS_API_VERSION: &str = "infergate.dev/v1alpha1";

/// Where the admin listener serves it.
pub const MEMBER_STATUS_PATH: &str = "/status/member";

/// One member gateway's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// `infergate.dev/v1alpha1`.
    pub api_version: String,
    /// [`MEMBER_STATUS_KIND`].
    pub kind: String,
    /// Advances each time the member's control plane refreshes its view of the pools, not per
    /// read: a member whose control plane froze while its listener still answers shows the same
    /// sequence, and the tier counts that as a missed pull. A restarted member starts again
    /// lower; the tier counts any change as progress.
    pub sequence: u64,
    /// The member's wall clock when it built the document, Unix milliseconds (informative: the
    /// tier judges age by its own receipt time, so skew between clocks does not matter).
    pub clock_unix_ms: u64,
    /// Its pools.
    pub pools: Vec<PoolStatus>,
}

/// One pool of a member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The pool's name.
    pub name: String,
    /// Every model name the member routes to this pool (base models and aliases).
    pub models: Vec<String>,
    /// LoRA adapters it serves.
    #[serde(default)]
    pub adapters: Vec<String>,
    /// Endpoints eligible for picks now.
    pub ready_endpoints: u32,
    /// Endpoints known.
    pub endpoints: u32,
    /// 1 − mean KV-cache use over ready endpoints, in [0, 1]; 0 with none ready.
    pub kv_headroom: f64,
    /// Requests waiting, in the model servers and in the member's own queue.
    pub queue_depth: u64,
    /// Share of the pool's recent requests that failed, in [0, 1].
    pub error_rate: f64,
    /// P99 time to first token over the same recent window; `None` without requests.
    #[serde(default)]
    pub ttft_p99_seconds: Option<f64>,
    /// The member's flow-control saturation of the pool (1: at Standard's ceiling).
    pub saturation: f64,
    /// How the pool picks, in one line (scheduler, metric dialect, the picker's weights or
    /// policy): the same pool in two clusters should say the same. Absent from a gateway that
    /// does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<String>,
}

impl PoolStatus {
    /// Whether the pool serves `model`, as a model name or an adapter.
    pub fn serves(&self, model: &str) -> bool {
        self.models.iter().any(|m| m == model) || self.adapters.iter().any(|a| a == model)
    }
}

impl MemberStatus {
    /// The document's JSON.
    pub fn to_json(&self) -> String {
        // Strings, integers and floats: serialising cannot fail (a non-finite float is written
        // as null, which `parse` then refuses, so the writer keeps them finite).
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a pulled document; the error says what is wrong with it.
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let doc: MemberStatus =
            serde_json::from_slice(body).map_err(|e| format!("not a member status: {e}"))?;
        if doc.kind != MEMBER_STATUS_KIND {
            return Err(format!("kind `{}`, not {MEMBER_STATUS_KIND}", doc.kind));
        }
        for p in &doc.pools {
            let finite = [p.kv_headroom, p.error_rate, p.saturation]
                .iter()
                .all(|v| v.is_finite() && *v >= 0.0);
            if !finite {
                return Err(format!("pool {}: a negative or non-finite figure", p.name));
            }
        }
        Ok(doc)
    }

    /// The pool serving `model`, if any (the first, should two claim it).
    pub fn pool_for(&self, model: &str) -> Option<&PoolStatus> {
        self.pools.iter().find(|p| p.serves(model))
    }
}
