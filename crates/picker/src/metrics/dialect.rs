//! Engine dialects: which metric names carry which signal, per model-server engine
//! (`shared/reference/model-servers.md`, "Metrics by engine").

use std::str::FromStr;
use std::time::Duration;

use super::text::{for_each_sample, Limits, Sample};
use crate::endpoint::{LatencyTotals, LoraInfo, ScrapedMetrics};
use crate::error::{ConfigError, ParseError};

/// A model-server engine, which decides the metric names scraped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// vLLM (V1; the pre-0.10 KV name is accepted too).
    Vllm,
    /// SGLang.
    Sglang,
    /// Hugging Face TGI.
    Tgi,
    /// Triton with the TensorRT-LLM backend, or `trtllm-serve`.
    Trtllm,
}

impl FromStr for Engine {
    type Err = ConfigError;
    /// HyperPod's `engineType` values and llm-d's `llm-d.ai/engine-type` label values.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "vllm" => Ok(Engine::Vllm),
            "sglang" => Ok(Engine::Sglang),
            "tgi" => Ok(Engine::Tgi),
            "trtllm-serve" | "triton-tensorrt-llm" => Ok(Engine::Trtllm),
            other => Err(ConfigError::UnknownEngine(other.to_owned())),
        }
    }
}

/// The metric names of one engine. Lists are in order of preference.
struct Dialect {
    waiting: &'static str,
    running: &'static str,
    kv: &'static [&'static str],
    lora: Option<&'static str>,
    /// An info family whose labels carry (block size, block count).
    cache_config: Option<(&'static str, &'static str, &'static str)>,
    /// Gauges carrying block size and block count.
    block_gauges: Option<(&'static str, &'static str)>,
    prefix_queries: &'static [&'static str],
    prefix_hits: &'static [&'static str],
    hit_rate: Option<&'static str>,
    /// Inter-token latency histograms, by family name (`_sum` and `_count` are read).
    itl: &'static [&'static str],
}

const VLLM: Dialect = Dialect {
    waiting: "vllm:num_requests_waiting",
    running: "vllm:num_requests_running",
    kv: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
    lora: Some("vllm:lora_requests_info"),
    cache_config: Some(("vllm:cache_config_info", "block_size", "num_gpu_blocks")),
    block_gauges: None,
    prefix_queries: &[
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
    ],
    prefix_hits: &[
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
    ],
    hit_rate: None,
    itl: &[
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
    ],
};

const SGLANG: Dialect = Dialect {
    waiting: "sglang:num_queue_reqs",
    running: "sglang:num_running_reqs",
    kv: &["sglang:token_usage"],
    lora: None,
    cache_config: Some(("sglang:cache_config_info", "page_size", "num_pages")),
    block_gauges: None,
    prefix_queries: &[],
    prefix_hits: &["sglang:cached_tokens_total"],
    hit_rate: Some("sglang:cache_hit_rate"),
    itl: &["sglang:inter_token_latency_seconds"],
};

const TGI: Dialect = Dialect {
    waiting: "tgi_queue_size",
    running: "tgi_batch_current_size",
    kv: &[],
    lora: None,
    cache_config: None,
    block_gauges: None,
    prefix_queries: &[],
    prefix_hits: &[],
    hit_rate: None,
    itl: &[],
};

const TRTLLM: Dialect = Dialect {
    waiting: "trtllm_num_requests_waiting",
    running: "trtllm_num_requests_running",
    kv: &["trtllm_kv_cache_utilization"],
    lora: None,
    cache_config: None,
    block_gauges: Some((
        "trtllm_kv_cache_tokens_per_block",
        "trtllm_kv_cache_max_blocks",
    )),
    prefix_queries: &[],
    prefix_hits: &[],
    hit_rate: None,
    itl: &[],
};

impl Engine {
    fn dialect(self) -> &'static Dialect {
        match self {
            Engine::Vllm => &VLLM,
            Engine::Sglang => &SGLANG,
            Engine::Tgi => &TGI,
            Engine::Trtllm => &TRTLLM,
        }
    }
}

/// The result of reading one scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct Scrape {
    /// The signals found; the rest are `None`.
    pub metrics: ScrapedMetrics,
    /// Families of the dialect absent from this exposition, for the scraper to log once.
    pub missing: Vec<&'static str>,
}

/// Reads a `/metrics` body of `engine` that landed at `scraped_at`, with default [`Limits`].
pub fn read_metrics(
    engine: Engine,
    body: &[u8],
    scraped_at: Duration,
) -> Result<Scrape, ParseError> {
    read_metrics_with(engine, body, scraped_at, &Limits::default())
}

/// Accumulates one signal over its series: counts add up (several engines or data-parallel ranks
/// behind one endpoint), fractions take the maximum (the fullest rank is the one to fear).
/// Values that are NaN, infinite or negative carry no information and are skipped.
#[derive(Debug, Default, Clone, Copy)]
struct Acc {
    sum: f64,
    max: f64,
    n: u32,
    seen: bool,
    family_present: bool,
}

impl Acc {
    fn add(&mut self, v: f64) {
        self.family_present = true;
        if v.is_finite() && v >= 0.0 {
            self.max = if self.seen { self.max.max(v) } else { v };
            self.sum += v;
            self.n += 1;
            self.seen = true;
        }
    }
    fn count(&self) -> Option<u64> {
        self.seen.then(|| self.sum.round() as u64)
    }
    fn fraction(&self) -> Option<f64> {
        self.seen.then(|| self.max.min(1.0))
    }
    fn mean_fraction(&self) -> Option<f64> {
        self.seen
            .then(|| (self.sum / f64::from(self.n.max(1))).min(1.0))
    }
}

/// Reads a `/metrics` body with explicit limits.
pub fn read_metrics_with(
    engine: Engine,
    body: &[u8],
    scraped_at: Duration,
    limits: &Limits,
) -> Result<Scrape, ParseError> {
    let d = engine.dialect();
    let (mut waiting, mut running) = (Acc::default(), Acc::default());
    let mut kv = [Acc::default(); 2];
    let mut queries = [Acc::default(); 2];
    let mut hits = [Acc::default(); 2];
    let (mut hit_rate, mut block_size, mut blocks) =
        (Acc::default(), Acc::default(), Acc::default());
    // Per ITL family, its `_sum` and its `_count`.
    let mut itl = [[Acc::default(); 2]; 2];
    let mut lora: Option<(f64, LoraInfo)> = None;
    let (mut lora_present, mut config_present) = (false, false);
    let mut config: (Option<u32>, Option<u64>) = (None, None);
    for_each_sample(body, limits, |s| {
        let name = s.name;
        let position = |list: &[&str]| list.iter().position(|n| *n == name);
        if name == d.waiting {
            waiting.add(s.value);
        } else if name == d.running {
            running.add(s.value);
        } else if let Some(i) = position(d.kv) {
            if let Some(a) = kv.get_mut(i) {
                a.add(s.value);
            }
        } else if let Some(i) = position(d.prefix_queries) {
            if let Some(a) = queries.get_mut(i) {
                a.add(s.value);
            }
        } else if let Some(i) = position(d.prefix_hits) {
            if let Some(a) = hits.get_mut(i) {
                a.add(s.value);
            }
        } else if let Some((family, part)) = histogram_part(d.itl, name) {
            if let Some(a) = itl.get_mut(family).and_then(|f| f.get_mut(part)) {
                a.add(s.value);
            }
        } else if Some(name) == d.hit_rate {
            hit_rate.add(s.value);
        } else if Some(name) == d.lora {
            lora_present = true;
            read_lora(&s, &mut lora);
        } else if let Some((_, bs, nb)) = d.cache_config.filter(|c| c.0 == name) {
            config_present = true;
            config.0 = config
                .0
                .or_else(|| s.label(bs).and_then(|v| v.trim().parse().ok()));
            config.1 = config
                .1
                .or_else(|| s.label(nb).and_then(|v| v.trim().parse().ok()));
        } else if let Some((bs, nb)) = d.block_gauges {
            if name == bs {
                block_size.add(s.value);
            } else if name == nb {
                blocks.add(s.value);
            }
        }
    })?;
    let first = |accs: &[Acc], f: fn(&Acc) -> Option<u64>| accs.iter().find_map(f);
    let metrics = ScrapedMetrics {
        scraped_at,
        waiting: waiting.count(),
        running: running.count(),
        kv_usage: kv.iter().find_map(Acc::fraction),
        lora: lora.map(|(_, info)| info),
        block_size: config
            .0
            .or_else(|| block_size.count().and_then(|b| u32::try_from(b).ok())),
        num_gpu_blocks: config.1.or_else(|| blocks.count()),
        prefix_cache_queries: first(&queries, Acc::count),
        prefix_cache_hits: first(&hits, Acc::count),
        prefix_cache_hit_rate: hit_rate.mean_fraction(),
        // Not a metric: the scraper reads it from `/v1/models`.
        max_model_len: None,
        inter_token_latency: itl.iter().find_map(|[sum, count]| {
            Some(LatencyTotals {
                seconds: sum.seen.then_some(sum.sum)?,
                count: count.count()?,
            })
        }),
        body_fingerprint: Some(xxhash_rust::xxh64::xxh64(body, 0)),
    };
    let mut missing = Vec::new();
    if !waiting.family_present {
        missing.push(d.waiting);
    }
    if !running.family_present {
        missing.push(d.running);
    }
    if !d.kv.is_empty() && !kv.iter().any(|a| a.family_present) {
        missing.extend(d.kv.first());
    }
    if let Some(l) = d.lora.filter(|_| !lora_present) {
        missing.push(l);
    }
    if let Some((c, _, _)) = d.cache_config.filter(|_| !config_present) {
        missing.push(c);
    }
    Ok(Scrape { metrics, missing })
}

/// Which of `families` the series `name` is the `_sum` (0) or `_count` (1) of.
fn histogram_part(families: &[&str], name: &str) -> Option<(usize, usize)> {
    families.iter().enumerate().find_map(|(i, family)| {
        let suffix = name.strip_prefix(family)?;
        match suffix {
            "_sum" => Some((i, 0)),
            "_count" => Some((i, 1)),
            _ => None,
        }
    })
}

/// `vllm:lora_requests_info`: each label combination is its own series whose value is the Unix
/// time it was last set; the newest (largest value) describes the current residency.
fn read_lora(s: &Sample<'_>, best: &mut Option<(f64, LoraInfo)>) {
    if !s.value.is_finite() || best.as_ref().is_some_and(|(t, _)| *t >= s.value) {
        return;
    }
    let Some(max_lora) = s
        .label("max_lora")
        .and_then(|v| v.trim().parse::<u32>().ok())
    else {
        return;
    };
    let list = |label: &str| -> Vec<String> {
        s.label(label)
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    };
    *best = Some((
        s.value,
        LoraInfo {
            max_lora,
            running: list("running_lora_adapters"),
            waiting: list("waiting_lora_adapters"),
        },
    ));
}
