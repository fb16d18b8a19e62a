//! A scenario made from files: a trace to replay and a simulated fleet to replay it on
//! (`infergate bench --trace FILE --fleet FLEET.yaml`). The trace's format is told from its
//! content: the Azure CSV, the Mooncake JSONL or infergate's own capture.

use crate::replay::Recorded;
use crate::scenario::{Lengths, ReplicaKind, Scenario};
use crate::trace::{TraceError, TraceFormat};
use crate::workload::Arrivals;
use infergate_config::gateway::Band;
use infergate_config::FleetFile;
use infergate_engine::EngineConfig;
use std::path::Path;

/// Why a scenario could not be made from the files.
#[derive(Debug, thiserror::Error)]
pub enum CustomError {
    /// The fleet file could not be read.
    #[error("{path}: {error}")]
    Io {
        /// Which file.
        path: String,
        /// What went wrong.
        error: std::io::Error,
    },
    /// The fleet file is not a valid `SimulatedFleet`.
    #[error("{path}: {error}")]
    Fleet {
        /// Which file.
        path: String,
        /// The field and what is wrong with it.
        error: infergate_config::FleetError,
    },
    /// A replica's settings make no engine.
    #[error("{fleet}: {replica}: {reason}")]
    Replica {
        /// The fleet file.
        fleet: String,
        /// Which endpoint.
        replica: String,
        /// The field and what is wrong with it.
        reason: infergate_engine::SettingsError,
    },
    /// The trace's format is not one infergate reads.
    #[error("trace {0}: unknown format (expected an Azure LLM inference CSV with a TIMESTAMP,ContextTokens,GeneratedTokens header, a Mooncake JSONL with hash_ids, or an infergate capture JSONL with prefix_hashes)")]
    TraceFormat(String),
    /// The trace names LoRA adapters the fleet cannot serve.
    #[error("trace {trace} names LoRA adapters ({example}, …) but no endpoint of {fleet} has LoRA slots (sim.maxLoras)")]
    NoLoraSlots {
        /// The trace file.
        trace: String,
        /// The fleet file.
        fleet: String,
        /// One adapter the trace names.
        example: String,
    },
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Lives for the rest of the process. A scenario's names are `'static` because the built-in ones
/// are literals; one made from files is built once per `infergate bench` run, so the few bytes
/// leaked are bounded and freed at exit.
fn forever(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// A scenario replaying `trace` on the fleet of `fleet_yaml` at `load` of the fleet's capacity
/// (time-scaled like the built-in trace scenarios). The trace is read now, so a bad file fails
/// here rather than mid-run.
pub fn from_files(trace: &Path, fleet: &Path, load: f64) -> Result<Scenario, CustomError> {
    if TraceFormat::detect(trace)?.is_none() {
        return Err(CustomError::TraceFormat(trace.display().to_string()));
    }
    let yaml = std::fs::read_to_string(fleet).map_err(|source| CustomError::Io {
        path: fleet.display().to_string(),
        error: source,
    })?;
    let endpoints = FleetFile::parse(&yaml).map_err(|source| CustomError::Fleet {
        path: fleet.display().to_string(),
        error: source,
    })?;
    let mut kinds: Vec<ReplicaKind> = Vec::new();
    for (i, e) in endpoints.iter().enumerate() {
        // Made now, through the conversion the runner uses, so a replica that cannot run fails
        // here, naming it, rather than mid-run.
        EngineConfig::from_settings(&e.settings).map_err(|reason| CustomError::Replica {
            fleet: fleet.display().to_string(),
            replica: format!("spec.endpoints[{i}] ({})", e.address),
            reason,
        })?;
        // Equal replicas become one kind with a count, as the built-in fleets are written.
        match kinds.iter_mut().find(|k| k.settings == e.settings) {
            Some(k) => k.count += 1,
            None => kinds.push(ReplicaKind {
                settings: e.settings.clone(),
                count: 1,
            }),
        }
    }
    let name = format!(
        "{} on {}",
        trace.file_name().map_or_else(
            || trace.display().to_string(),
            |n| n.to_string_lossy().into_owned()
        ),
        fleet.file_name().map_or_else(
            || fleet.display().to_string(),
            |n| n.to_string_lossy().into_owned()
        ),
    );
    let mut scenario = Scenario {
        id: forever(name),
        fleet: kinds,
        arrivals: Arrivals::TraceTimestamps,
        lengths: Lengths::TraceFile(Box::leak(trace.to_path_buf().into_boxed_path())),
        load,
        seed_row: None,
        adapters: None,
        bands: None,
    };
    if let Some(Recorded::Captured(requests)) = scenario.recorded()? {
        let lora = scenario.fleet.iter().any(|k| k.max_loras() > 0);
        if let Some(adapter) = requests.iter().find_map(|r| r.adapter.as_ref()) {
            if !lora {
                return Err(CustomError::NoLoraSlots {
                    trace: trace.display().to_string(),
                    fleet: fleet.display().to_string(),
                    example: adapter.clone(),
                });
            }
        }
        // Bands other than Standard were there to be told apart: replay them through the
        // gateway's flow control, as production served them.
        if requests.iter().any(|r| r.band != Band::Standard) {
            let mut shares = [0.0; 3];
            for r in &requests {
                if let Some(i) = Band::ALL.iter().position(|&b| b == r.band) {
                    shares[i] += 1.0;
                }
            }
            scenario.bands = Some(shares);
        }
    }
    Ok(scenario)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::traces_dir;

    #[test]
    fn a_trace_and_a_fleet_file_make_a_scenario_and_bad_files_are_named() {
        let dir = std::env::temp_dir().join(format!("infergate-custom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fleet = dir.join("fleet.yaml");
        std::fs::write(
            &fleet,
            "apiVersion: infergate.dev/v1alpha1\nkind: SimulatedFleet\nspec:\n  defaults: {model: llama-3.1-8b}\n  endpoints:\n    - {address: 127.0.0.1:9001, sim: {gpu: h100}}\n    - {address: 127.0.0.1:9002, sim: {gpu: h100}}\n    - {address: 127.0.0.1:9003, sim: {gpu: a10g}}\n",
        )
        .unwrap();
        let trace = traces_dir().join("azure-llm-2023-conv.csv");
        let s = from_files(&trace, &fleet, 0.5).unwrap();
        assert_eq!(s.id, "azure-llm-2023-conv.csv on fleet.yaml");
        let counts: Vec<(&str, u32)> = s.fleet.iter().map(|k| (k.gpu(), k.count)).collect();
        assert_eq!(counts, vec![("h100", 2), ("a10g", 1)]);
        let reqs = s
            .requests(10.0, std::time::Duration::from_secs(10), 4_096, 1)
            .unwrap();
        assert!((60..=140).contains(&reqs.len()), "{}", reqs.len());

        let unknown = dir.join("trace.txt");
        std::fs::write(&unknown, "hello\n").unwrap();
        let err = from_files(&unknown, &fleet, 0.5).unwrap_err();
        assert!(err.to_string().contains("unknown format"), "{err}");
        // A capture naming an adapter needs LoRA slots in the fleet.
        let capture = dir.join("capture.log");
        std::fs::write(&capture, r#"{"v":1,"arrival_ms":0,"input_tokens":40,"output_tokens":3,"prefix_hashes":[],"adapter":"sql-lora","priority":"Critical"}"#).unwrap();
        let err = from_files(&capture, &fleet, 0.5).unwrap_err();
        assert!(err.to_string().contains("no endpoint of"), "{err}");
        std::fs::write(
            &fleet,
            "apiVersion: infergate.dev/v1alpha1\nkind: Nope\nspec: {endpoints: []}\n",
        )
        .unwrap();
        let err = from_files(&trace, &fleet, 0.5).unwrap_err();
        assert!(err.to_string().contains("kind"), "{err}");
    }

    #[test]
    fn every_engine_argument_of_a_fleet_file_reaches_the_benchmarks_engine() {
        let dir =
            std::env::temp_dir().join(format!("infergate-custom-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fleet = dir.join("fleet.yaml");
        // Each value differs from vLLM's default for an 8B model on an H100 (1024 sequences, an
        // 8192-token budget, the model's 131072-token length, prefix caching and chunked
        // prefill on), so a dropped field shows.
        std::fs::write(
            &fleet,
            "apiVersion: infergate.dev/v1alpha1\nkind: SimulatedFleet\nspec:\n  defaults: {model: llama-3.1-8b, gpu: h100}\n  endpoints:\n    - address: 127.0.0.1:9001\n      sim: {maxNumSeqs: 64, maxNumBatchedTokens: 16384, maxModelLen: 8192, prefixCaching: false, chunkedPrefill: false}\n",
        )
        .unwrap();
        let trace = traces_dir().join("azure-llm-2023-conv.csv");
        let s = from_files(&trace, &fleet, 0.5).unwrap();
        let engine =
            crate::runner::engine_for(&s.fleet[0], 1, &[], &crate::tuning::Tuning::default())
                .unwrap();
        let c = engine.config();
        assert_eq!(c.max_num_seqs, 64, "maxNumSeqs");
        assert_eq!(c.max_num_batched_tokens, 16_384, "maxNumBatchedTokens");
        assert_eq!(c.max_model_len, 8_192, "maxModelLen");
        assert!(!c.enable_prefix_caching, "prefixCaching");
        assert!(!c.enable_chunked_prefill, "chunkedPrefill");
        // And the offered load is sized to what these replicas take.
        assert_eq!(crate::suite::offered(&s).unwrap().max_model_len, 8_192);

        // A combination vLLM refuses is refused when the file is read, naming the replica.
        std::fs::write(
            &fleet,
            "apiVersion: infergate.dev/v1alpha1\nkind: SimulatedFleet\nspec:\n  endpoints:\n    - address: 127.0.0.1:9001\n      sim: {maxNumSeqs: 512, maxNumBatchedTokens: 256}\n",
        )
        .unwrap();
        let err = from_files(&trace, &fleet, 0.5).unwrap_err().to_string();
        assert!(err.contains("spec.endpoints[0] (127.0.0.1:9001)"), "{err}");
        assert!(err.contains("max_num_batched_tokens (256)"), "{err}");
    }
}
