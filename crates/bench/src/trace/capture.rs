//! infergate's own capture JSONL (`infergate serve --capture`, `docs/capture.md`).

use super::{TraceError, TraceRequest};
use infergate_config::gateway::Band;
use std::path::Path;
use std::time::Duration;

/// One request of an infergate capture (`infergate serve --capture`, `docs/capture.md`): a
/// [`TraceRequest`] with the picker's prefix block hashes and what the replay sends again.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedRequest {
    /// Arrival (relative to the earliest in the file) and lengths.
    pub request: TraceRequest,
    /// Chained hashes of the prompt's leading 64-character blocks (16 simulator tokens each):
    /// equal leading hashes are a shared prefix.
    pub prefix_hashes: Vec<u64>,
    /// The LoRA adapter the request was routed to, if any.
    pub adapter: Option<String>,
    /// Its tenant, if any.
    pub tenant: Option<String>,
    /// Its priority band.
    pub band: Band,
}

/// Tokens per capture prefix hash: 64 characters at the simulator's 4 bytes per token.
pub const CAPTURE_BLOCK_TOKENS: u32 = 16;

/// The capture line format this reader understands (the gateway writes it as `v`).
pub const CAPTURE_FORMAT_VERSION: u32 = 1;

#[derive(serde::Deserialize)]
struct CaptureLine {
    v: u32,
    arrival_ms: f64,
    input_tokens: u32,
    output_tokens: u32,
    prefix_hashes: Vec<String>,
    #[serde(default)]
    adapter: Option<String>,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    priority: Option<String>,
}

/// Reads an infergate capture JSONL. Lines are written as requests complete, so they are
/// sorted here by arrival (ties keep file order), and arrivals made relative to the earliest.
pub fn read_capture_jsonl(path: &Path) -> Result<Vec<CapturedRequest>, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_owned(),
        error: source,
    })?;
    let mut out: Vec<(f64, CapturedRequest)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |reason: String| TraceError::Parse {
            path: path.to_owned(),
            line: i + 1,
            reason,
        };
        let parsed: CaptureLine = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        if parsed.v != CAPTURE_FORMAT_VERSION {
            return Err(bad(format!(
                "capture format v{} (this reader knows v{CAPTURE_FORMAT_VERSION})",
                parsed.v
            )));
        }
        if !parsed.arrival_ms.is_finite() || parsed.arrival_ms < 0.0 {
            return Err(bad(format!("bad arrival_ms {}", parsed.arrival_ms)));
        }
        let prefix_hashes = parsed
            .prefix_hashes
            .iter()
            .map(|h| u64::from_str_radix(h, 16).map_err(|_| bad(format!("bad prefix hash {h:?}"))))
            .collect::<Result<Vec<u64>, _>>()?;
        let band = match parsed.priority.as_deref() {
            None => Band::Standard,
            Some(p) => {
                Band::from_criticality(p).ok_or_else(|| bad(format!("bad priority {p:?}")))?
            }
        };
        out.push((
            parsed.arrival_ms,
            CapturedRequest {
                request: TraceRequest {
                    at: Duration::ZERO,
                    input_tokens: parsed.input_tokens,
                    output_tokens: parsed.output_tokens,
                },
                prefix_hashes,
                adapter: parsed.adapter,
                tenant: parsed.tenant,
                band,
            },
        ));
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first = out.first().map_or(0.0, |(t, _)| *t);
    Ok(out
        .into_iter()
        .map(|(t, mut r)| {
            r.request.at = Duration::from_secs_f64((t - first) / 1e3);
            r
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tests::capture_line;
    use crate::trace::TraceFormat;

    #[test]
    fn a_capture_reads_in_arrival_order_and_a_bad_line_names_its_number() {
        let dir =
            std::env::temp_dir().join(format!("infergate-capture-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("capture.jsonl");
        let late = capture_line(250.5, &["00000000000000ff", "0000000000000001"], "")
            .replace(r#""adapter":null"#, r#""adapter":"sql-lora""#)
            .replace(r#""priority":"Standard""#, r#""priority":"Critical""#)
            .replace(r#""tenant":null"#, r#""tenant":"team-a""#);
        let early = capture_line(100.0, &["00000000000000ff"], r#","future_field":true"#);
        std::fs::write(&file, format!("{late}\n\n{early}\n")).unwrap();
        assert_eq!(
            TraceFormat::detect(&file).unwrap(),
            Some(TraceFormat::CaptureJsonl)
        );
        let trace = read_capture_jsonl(&file).unwrap();
        assert_eq!(trace.len(), 2);
        assert_eq!(trace[0].request.at, Duration::ZERO);
        assert_eq!(trace[0].prefix_hashes, vec![0xff]);
        assert_eq!(trace[0].band, Band::Standard);
        assert_eq!(trace[1].request.at, Duration::from_micros(150_500));
        assert_eq!(trace[1].prefix_hashes, vec![0xff, 1]);
        assert_eq!(trace[1].adapter.as_deref(), Some("sql-lora"));
        assert_eq!(trace[1].tenant.as_deref(), Some("team-a"));
        assert_eq!(trace[1].band, Band::Critical);
        assert_eq!(
            (
                trace[1].request.input_tokens,
                trace[1].request.output_tokens
            ),
            (40, 3)
        );

        let bad_hash = capture_line(1.0, &["xyz"], "");
        std::fs::write(&file, format!("{early}\n{bad_hash}\n")).unwrap();
        let err = read_capture_jsonl(&file).unwrap_err().to_string();
        assert!(err.ends_with(":2: bad prefix hash \"xyz\""), "{err}");
        std::fs::write(&file, format!("{early}\n{early}\n{{\"v\":1}}\n")).unwrap();
        let err = read_capture_jsonl(&file).unwrap_err().to_string();
        assert!(err.contains("capture.jsonl:3: missing field"), "{err}");
        std::fs::write(&file, early.replace(r#""v":1"#, r#""v":2"#)).unwrap();
        let err = read_capture_jsonl(&file).unwrap_err().to_string();
        assert!(
            err.ends_with(":1: capture format v2 (this reader knows v1)"),
            "{err}"
        );
    }
}
