//! One line of the capture file: what a completed request was, never what it said.
//!
//! The format is a contract with `infergate bench --trace` (its reader lives in the bench crate
//! and a test reads what this writes); `docs/capture.md` documents it field by field.

use serde::{Serialize, Serializer};

/// Version of the line format, written in every line as `v`.
pub const FORMAT_VERSION: u32 = 1;

/// Where a record's token counts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TokensFrom {
    /// The response's `usage`, as the model server counted them.
    Usage,
    /// The gateway: its estimate of the prompt (bytes / 4), and the streamed token events it
    /// counted (none for a buffered answer without `usage`).
    Gateway,
}

/// One completed request, as written to the capture file.
///
/// Invariant: no field carries prompt or completion text; the prompt is present only as the
/// picker's prefix block hashes, which cannot be inverted to text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaptureRecord {
    /// [`FORMAT_VERSION`].
    pub v: u32,
    /// When the capture started, in Unix milliseconds; the same in every line of a file, so
    /// each line stands alone even when others were dropped.
    pub start_unix_ms: u64,
    /// When the request arrived, in milliseconds since the capture started (microsecond
    /// resolution). Lines are written as requests complete, so they are not in arrival order.
    pub arrival_ms: f64,
    /// The model the client asked for.
    pub model: String,
    /// The model the request was sent as (differs from `model` after a canary rewrite).
    pub routed_model: String,
    /// The LoRA adapter `routed_model` names, if it is one.
    pub adapter: Option<String>,
    /// The endpoint that answered.
    pub endpoint: String,
    /// The tenant (fairness id), if the request had one.
    pub tenant: Option<String>,
    /// `Critical`, `Standard` or `Sheddable`.
    pub priority: &'static str,
    /// The endpoint's HTTP status.
    pub status: u16,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Where the two counts above came from.
    pub tokens_from: TokensFrom,
    /// The picker's prefix block hashes: chained xxhash64 of the prompt's 64-character chunks,
    /// at most the picker's block limit, as 16 hex digits each (JSON numbers past 2^53 lose
    /// precision in many readers).
    #[serde(serialize_with = "hex_hashes")]
    pub prefix_hashes: Vec<u64>,
    /// Why the picker chose the endpoint, when picks are explained (`--emit-endpoint-scores`):
    /// the `x-infergate-pick` object. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pick: Option<serde_json::Value>,
}

/// The band name of a picker priority (above zero Critical, below zero Sheddable).
pub fn band_name(priority: i32) -> &'static str {
    match priority {
        p if p > 0 => "Critical",
        0 => "Standard",
        _ => "Sheddable",
    }
}

fn hex_hashes<S: Serializer>(hashes: &[u64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(hashes.iter().map(|h| format!("{h:016x}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_one_json_line_with_hex_hashes() {
        let r = CaptureRecord {
            v: FORMAT_VERSION,
            start_unix_ms: 1_700_000_000_000,
            arrival_ms: 12.5,
            model: "m".into(),
            routed_model: "sql-lora".into(),
            adapter: Some("sql-lora".into()),
            endpoint: "10.0.0.1:8000".into(),
            tenant: None,
            priority: band_name(-3),
            status: 200,
            input_tokens: 40,
            output_tokens: 7,
            tokens_from: TokensFrom::Gateway,
            prefix_hashes: vec![1, u64::MAX],
            pick: None,
        };
        let line = serde_json::to_string(&r).unwrap();
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["prefix_hashes"][0], "0000000000000001");
        assert_eq!(v["prefix_hashes"][1], "ffffffffffffffff");
        assert_eq!(v["priority"], "Sheddable");
        assert_eq!(v["tokens_from"], "gateway");
        assert_eq!(v["tenant"], serde_json::Value::Null);
        assert_eq!(band_name(1), "Critical");
        assert_eq!(band_name(0), "Standard");
    }
}
