//! Readers for the production traces the benchmark replays.

mod capture;

pub use capture::{
    read_capture_jsonl, CapturedRequest, CAPTURE_BLOCK_TOKENS, CAPTURE_FORMAT_VERSION,
};

use std::path::{Path, PathBuf};
use std::time::Duration;

/// One request of a trace: when it arrived (from the trace's start) and its lengths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRequest {
    /// Arrival, relative to the first request.
    pub at: Duration,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Generated tokens.
    pub output_tokens: u32,
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("{path}: {error}")]
    Io {
        /// Which file.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// A line did not parse.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// Which file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A replay of the trace yields no request (an empty trace, or one whose timestamps give it
    /// no rate): nothing would be measured.
    #[error("the replay yields no request: {0}")]
    NothingToReplay(String),
}

/// Where the shared traces live: `$INFERGATE_TRACES`, else the first of `shared/traces`,
/// `../shared/traces`, … that exists from the working directory or from this crate's source (a
/// checkout sits beside the project's shared folder).
pub fn traces_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("INFERGATE_TRACES") {
        return PathBuf::from(dir);
    }
    let beside_checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    if beside_checkout.is_dir() {
        return beside_checkout;
    }
    for candidate in [
        "shared/traces",
        "../shared/traces",
        "../../shared/traces",
        "../../../shared/traces",
    ] {
        if Path::new(candidate).is_dir() {
            return PathBuf::from(candidate);
        }
    }
    PathBuf::from("../shared/traces")
}

/// Reads the Azure LLM inference CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`), timestamps like
/// `2023-11-16 18:15:46.6805900`.
pub fn read_azure_csv(path: &Path) -> Result<Vec<TraceRequest>, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_owned(),
        error: source,
    })?;
    let mut out = Vec::new();
    let mut first: Option<(i64, f64)> = None;
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |reason: &str| TraceError::Parse {
            path: path.to_owned(),
            line: i + 1,
            reason: reason.to_owned(),
        };
        let mut fields = line.split(',');
        let (Some(ts), Some(ctx), Some(gen)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(bad("expected TIMESTAMP,ContextTokens,GeneratedTokens"));
        };
        let (day, seconds) = day_and_seconds(ts).ok_or_else(|| bad("bad timestamp"))?;
        let (first_day, first_seconds) = *first.get_or_insert((day, seconds));
        // Days apart first, then seconds: a trace that crosses midnight keeps its order, and
        // the sub-second digits are not lost to an epoch-sized number.
        let since_start = (day - first_day) as f64 * 86_400.0 + (seconds - first_seconds);
        let input_tokens = ctx.trim().parse().map_err(|_| bad("bad ContextTokens"))?;
        let output_tokens = gen.trim().parse().map_err(|_| bad("bad GeneratedTokens"))?;
        out.push(TraceRequest {
            at: Duration::from_secs_f64(since_start.max(0.0)),
            input_tokens,
            output_tokens,
        });
    }
    Ok(out)
}

/// One request of the Mooncake trace: a [`TraceRequest`] and the ids of its 512-token prompt
/// blocks (equal ids at equal positions are a shared prefix).
#[derive(Debug, Clone, PartialEq)]
pub struct MooncakeRequest {
    /// Arrival and lengths.
    pub request: TraceRequest,
    /// One id per 512-token block of the prompt, the last one possibly partial.
    pub hash_ids: Vec<u64>,
}

/// Tokens per Mooncake `hash_id` block.
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

#[derive(serde::Deserialize)]
struct MooncakeLine {
    timestamp: u64,
    input_length: u32,
    output_length: u32,
    hash_ids: Vec<u64>,
}

/// Reads the Mooncake JSONL trace (`{"timestamp" (ms), "input_length", "output_length",
/// "hash_ids"}` per line), arrivals relative to the first line.
pub fn read_mooncake_jsonl(path: &Path) -> Result<Vec<MooncakeRequest>, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_owned(),
        error: source,
    })?;
    let mut out = Vec::new();
    let mut first: Option<u64> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: MooncakeLine = serde_json::from_str(line).map_err(|e| TraceError::Parse {
            path: path.to_owned(),
            line: i + 1,
            reason: e.to_string(),
        })?;
        let start = *first.get_or_insert(parsed.timestamp);
        out.push(MooncakeRequest {
            request: TraceRequest {
                at: Duration::from_millis(parsed.timestamp.saturating_sub(start)),
                input_tokens: parsed.input_length,
                output_tokens: parsed.output_length,
            },
            hash_ids: parsed.hash_ids,
        });
    }
    Ok(out)
}

/// A trace file's format, told from its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// The Azure LLM inference CSV.
    AzureCsv,
    /// The Mooncake JSONL (`hash_ids`).
    MooncakeJsonl,
    /// infergate's own capture JSONL (`prefix_hashes`).
    CaptureJsonl,
}

impl TraceFormat {
    /// The format of the file at `path`, from its first non-empty line: a CSV header naming
    /// `ContextTokens`, or a JSON object with `hash_ids` (Mooncake) or `prefix_hashes`
    /// (capture). `None` when it is none of these.
    pub fn detect(path: &Path) -> Result<Option<TraceFormat>, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.to_owned(),
            error: source,
        })?;
        let Some(first) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
            return Ok(None);
        };
        if first.starts_with('{') {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(first) else {
                return Ok(None);
            };
            return Ok(if v.get("prefix_hashes").is_some() {
                Some(TraceFormat::CaptureJsonl)
            } else if v.get("hash_ids").is_some() {
                Some(TraceFormat::MooncakeJsonl)
            } else {
                None
            });
        }
        Ok(first
            .contains("ContextTokens")
            .then_some(TraceFormat::AzureCsv))
    }
}

/// Seconds since midnight of `YYYY-MM-DD HH:MM:SS.fffffff` (the trace spans one day).
/// `YYYY-MM-DD hh:mm:ss.fffffff` as (days since 1970-01-01, seconds into that day).
fn day_and_seconds(ts: &str) -> Option<(i64, f64)> {
    let mut halves = ts.trim().split(' ');
    let (date, time) = (halves.next()?, halves.next()?);
    let mut ymd = date.split('-');
    let y: i64 = ymd.next()?.parse().ok()?;
    let mo: i64 = ymd.next()?.parse().ok()?;
    let d: i64 = ymd.next()?.parse().ok()?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || ymd.next().is_some() {
        return None;
    }
    let mut parts = time.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some((days_from_civil(y, mo, d), h * 3600.0 + m * 60.0 + s))
}

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn an_azure_trace_across_midnight_keeps_its_order_and_gaps() {
        let dir = std::env::temp_dir().join(format!("azure-midnight-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.csv");
        std::fs::write(
            &path,
            "TIMESTAMP,ContextTokens,GeneratedTokens\n\
             2023-12-31 23:59:59.5000000,10,2\n\
             2024-01-01 00:00:00.2500000,11,3\n\
             2024-03-01 00:00:00.0000000,12,4\n",
        )
        .unwrap();
        let trace = read_azure_csv(&path).unwrap();
        let at: Vec<f64> = trace.iter().map(|r| r.at.as_secs_f64()).collect();
        assert!((at[1] - 0.75).abs() < 1e-6, "{at:?}");
        // 2024 is a leap year: Jan 31 + Feb 29 days after New Year's Day, less half a second.
        assert!((at[2] - (60.0 * 86_400.0 + 0.5)).abs() < 1e-6, "{at:?}");
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert!(day_and_seconds("2023-13-01 00:00:00").is_none());
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn the_azure_trace_reads_whole() {
        let path = traces_dir().join("azure-llm-2023-conv.csv");
        let trace = read_azure_csv(&path).unwrap();
        assert_eq!(trace.len(), 19_366);
        assert_eq!(
            trace[0],
            TraceRequest {
                at: Duration::ZERO,
                input_tokens: 374,
                output_tokens: 44
            }
        );
        let mean_in =
            trace.iter().map(|r| f64::from(r.input_tokens)).sum::<f64>() / trace.len() as f64;
        assert!((mean_in - 1154.7).abs() < 1.0, "{mean_in}");
        assert!(trace.windows(2).all(|w| w[0].at <= w[1].at));
    }

    #[test]
    fn the_mooncake_trace_reads_whole_and_shares_prefixes() {
        let trace = read_mooncake_jsonl(&traces_dir().join("mooncake-conversation.jsonl")).unwrap();
        assert_eq!(trace.len(), 12_031);
        assert_eq!(trace[0].request.input_tokens, 6_758);
        assert_eq!(trace[0].hash_ids.len(), 14);
        // Every prompt's blocks cover it: ⌈input / 512⌉ ids.
        assert!(trace
            .iter()
            .all(|r| r.hash_ids.len() as u32
                == r.request.input_tokens.div_ceil(MOONCAKE_BLOCK_TOKENS)));
        // The first five requests share their first block.
        assert!(trace[..5].iter().all(|r| r.hash_ids[0] == 0));
        assert!(trace.windows(2).all(|w| w[0].request.at <= w[1].request.at));
        let last = trace.last().unwrap().request.at.as_secs_f64();
        assert!((last - 3_537.0).abs() < 1.0, "{last}");
    }

    pub(super) fn capture_line(arrival: f64, hashes: &[&str], extra: &str) -> String {
        let hashes: Vec<String> = hashes.iter().map(|h| format!("{h:?}")).collect();
        format!(
            r#"{{"v":1,"start_unix_ms":5,"arrival_ms":{arrival},"model":"m","routed_model":"m","adapter":null,"endpoint":"e","tenant":null,"priority":"Standard","status":200,"input_tokens":40,"output_tokens":3,"tokens_from":"usage","prefix_hashes":[{}]{extra}}}"#,
            hashes.join(",")
        )
    }

    #[test]
    fn formats_are_told_by_content_not_extension() {
        let dir = std::env::temp_dir().join(format!("infergate-detect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            (
                "a.txt",
                "TIMESTAMP,ContextTokens,GeneratedTokens\n",
                Some(TraceFormat::AzureCsv),
            ),
            (
                "b.log",
                "{\"timestamp\":0,\"input_length\":1,\"output_length\":1,\"hash_ids\":[0]}\n",
                Some(TraceFormat::MooncakeJsonl),
            ),
            (
                "c.jsonl",
                &*capture_line(0.0, &[], ""),
                Some(TraceFormat::CaptureJsonl),
            ),
            ("d.jsonl", "{\"something\":1}\n", None),
            ("e.csv", "a,b,c\n", None),
        ];
        for (name, text, want) in cases {
            let file = dir.join(name);
            std::fs::write(&file, text).unwrap();
            assert_eq!(TraceFormat::detect(&file).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn a_bad_line_names_its_number() {
        let dir = std::env::temp_dir().join("infergate-trace-test");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad.csv");
        std::fs::write(
            &file,
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,12,x\n",
        )
        .unwrap();
        let err = read_azure_csv(&file).unwrap_err().to_string();
        assert!(err.ends_with(":2: bad GeneratedTokens"), "{err}");
    }
}
