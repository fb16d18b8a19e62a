//! Starting the replicas of `infergate sim` and running them until Ctrl-C or SIGTERM.

use anyhow::Context;
use infergate_config::fleet::{SimEndpoint, SimSettings};
use infergate_engine::EngineConfig;
use infergate_simserver::{Dialect, Faults, ReplicaSpec, DEFAULT_MEAN_OUTPUT_TOKENS};

/// Builds one server spec per endpoint (every spec checked before anything binds), binds them
/// all, prints where each listens, and serves until a shutdown signal.
pub fn serve(endpoints: Vec<SimEndpoint>, faults: Faults) -> anyhow::Result<()> {
    let mut specs = Vec::with_capacity(endpoints.len());
    for endpoint in &endpoints {
        let s = &endpoint.settings;
        let engine = engine_config(s).with_context(|| format!("replica {}", endpoint.address))?;
        let mut spec = ReplicaSpec::new(engine);
        if let Some(name) = &s.served_model_name {
            spec.served_model_name = name.clone();
        }
        if let Some(engine) = &s.engine {
            spec.dialect = engine.parse::<Dialect>()?;
        }
        spec.time_scale = s.time_scale.unwrap_or(1.0);
        spec.seed = s.seed.unwrap_or(0);
        spec.lora_adapters = s.loras.clone().unwrap_or_default();
        spec.mean_output_tokens = s
            .mean_output_tokens
            .map_or(DEFAULT_MEAN_OUTPUT_TOKENS, f64::from);
        spec.faults = faults.clone();
        spec.validate()
            .with_context(|| format!("replica {}", endpoint.address))?;
        specs.push(spec);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut replicas = Vec::with_capacity(specs.len());
        for (spec, endpoint) in specs.into_iter().zip(&endpoints) {
            let listener = tokio::net::TcpListener::bind(endpoint.address)
                .await
                .with_context(|| format!("binding {}", endpoint.address))?;
            println!(
                "simulating {} ({}, max_model_len {}) at http://{}",
                spec.served_model_name,
                spec.engine.profile,
                spec.engine.max_model_len,
                listener.local_addr()?
            );
            replicas.push((spec, listener));
        }
        infergate_simserver::serve_fleet(replicas, crate::serve::shutdown_signal()).await?;
        Ok(())
    })
}

/// Builds a replica's engine configuration from its settings, through the one conversion the
/// benchmark's fleet files use too ([`EngineConfig::from_settings`]); unset fields keep vLLM's
/// defaults for the profile.
pub fn engine_config(settings: &SimSettings) -> anyhow::Result<EngineConfig> {
    let mut config = EngineConfig::from_settings(settings)?;
    config.report_every_token = true;
    Ok(config)
}
