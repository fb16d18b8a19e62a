//! The HTTP routes of one replica: vLLM's OpenAI server (`/v1/*`, `/health`, `/metrics`) plus
//! the simulator's own `/sim/faults`.

use crate::answer::Answer;
use crate::body::{self, ResponseBody};
use crate::error::ApiError;
use crate::exposition;
use crate::faults::{FaultState, Faults, MetricsFault, RequestFault};
use crate::replica::{AdapterCard, ReplicaHandle, Submission};
use crate::request::{parse_request, Endpoint};
use crate::spec::ReplicaSpec;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Largest request body read (a 131k-token prompt is about half a megabyte).
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// What outlives a crash: the replica's settings and its faults.
#[derive(Debug)]
pub(crate) struct Shared {
    pub spec: ReplicaSpec,
    pub faults: FaultState,
    /// Unix time the replica first started, for `/v1/models`.
    pub created: u64,
}

impl Shared {
    pub fn new(spec: ReplicaSpec) -> Shared {
        Shared {
            faults: FaultState::new(spec.faults.clone(), spec.seed),
            created: unix_secs(),
            spec,
        }
    }
}

/// One life of a replica, from a (re)start to a crash or shutdown.
#[derive(Debug)]
pub(crate) struct Life {
    pub replica: ReplicaHandle,
    /// `/health` answers 503 and requests are refused until then.
    pub ready_at: Instant,
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The routes, resolved from the path and method before the request is consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Health,
    GetFaults,
    SetFaults,
    Infer(Endpoint),
    Models,
    LoadAdapter,
    UnloadAdapter,
    Metrics,
    Version,
    WrongMethod,
    NotFound,
}

impl Route {
    fn of(path: &str, method: &Method) -> Route {
        let (get, post) = (method == Method::GET, method == Method::POST);
        match path {
            "/health" if get => Route::Health,
            "/sim/faults" if get => Route::GetFaults,
            "/sim/faults" if post => Route::SetFaults,
            "/v1/chat/completions" if post => Route::Infer(Endpoint::ChatCompletions),
            "/v1/completions" if post => Route::Infer(Endpoint::Completions),
            "/v1/models" if get => Route::Models,
            "/v1/load_lora_adapter" if post => Route::LoadAdapter,
            "/v1/unload_lora_adapter" if post => Route::UnloadAdapter,
            "/metrics" if get => Route::Metrics,
            "/version" if get => Route::Version,
            "/health"
            | "/sim/faults"
            | "/v1/chat/completions"
            | "/v1/completions"
            | "/v1/models"
            | "/v1/load_lora_adapter"
            | "/v1/unload_lora_adapter"
            | "/metrics"
            | "/version" => Route::WrongMethod,
            _ => Route::NotFound,
        }
    }

    /// Routes that need a loaded engine, refused while a restarted replica starts up.
    fn needs_engine(self) -> bool {
        matches!(
            self,
            Route::Infer(_)
                | Route::Models
                | Route::LoadAdapter
                | Route::UnloadAdapter
                | Route::Metrics
        )
    }
}

/// Answers one request.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    life: Arc<Life>,
    req: Request<Incoming>,
) -> Response<ResponseBody> {
    let ready = Instant::now() >= life.ready_at;
    let route = Route::of(req.uri().path(), req.method());
    if !ready && route.needs_engine() {
        return ApiError::starting_up().into_response();
    }
    match route {
        Route::Health if ready => body::empty(StatusCode::OK),
        Route::Health => body::empty(StatusCode::SERVICE_UNAVAILABLE),
        Route::GetFaults => faults_json(&shared.faults.get()),
        Route::SetFaults => set_faults(&shared, &life, req).await,
        Route::Infer(endpoint) => infer(&shared, &life, endpoint, req).await,
        Route::Models => models(&shared, &life).await,
        Route::LoadAdapter => load_adapter(&life, req).await,
        Route::UnloadAdapter => unload_adapter(&life, req).await,
        Route::Metrics => metrics(&shared, &life).await,
        Route::Version => body::json(StatusCode::OK, r#"{"version":"0.11.0"}"#),
        Route::WrongMethod => body::json(
            StatusCode::METHOD_NOT_ALLOWED,
            r#"{"detail":"Method Not Allowed"}"#,
        ),
        Route::NotFound => body::json(StatusCode::NOT_FOUND, r#"{"detail":"Not Found"}"#),
    }
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, ApiError> {
    match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "BadRequestError",
            format!("request body larger than {MAX_BODY_BYTES} bytes"),
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "could not read the request body: {e}"
        ))),
    }
}

async fn infer(
    shared: &Shared,
    life: &Life,
    endpoint: Endpoint,
    req: Request<Incoming>,
) -> Response<ResponseBody> {
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    match shared.faults.on_request() {
        RequestFault::None => {}
        RequestFault::Error(status) => return ApiError::from_status(status).into_response(),
        // A hung server never answers; a crashing one is torn down by its lifecycle loop,
        // which drops this connection.
        RequestFault::Hang | RequestFault::Crash => std::future::pending().await,
    }
    let request = match parse_request(endpoint, &body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let model = request
        .model
        .clone()
        .unwrap_or_else(|| shared.spec.served_model_name.clone());
    let (events, progress) = mpsc::unbounded_channel();
    let submission = Submission {
        model: request.model,
        prompt: request.prompt,
        max_tokens: request.max_tokens,
        ignore_eos: request.ignore_eos,
        priority: request.priority,
        seed: request.seed,
        written: request.continues.map_or(0, |c| c.written),
        events,
    };
    let admitted = match life.replica.submit(submission).await {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    let answer = Answer::new(
        endpoint,
        model,
        unix_secs(),
        admitted,
        request
            .continues
            .map(|c| c.prefix_tokens.saturating_add(c.written)),
        progress,
        life.replica.clone(),
    );
    if request.stream {
        return body::sse(answer.into_stream(request.include_usage));
    }
    match answer.collect().await {
        Some(json) => body::json(StatusCode::OK, json),
        None => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableError",
            "The engine stopped.",
        )
        .into_response(),
    }
}

async fn models(shared: &Shared, life: &Life) -> Response<ResponseBody> {
    let Some(adapters) = life.replica.adapters().await else {
        return ApiError::starting_up().into_response();
    };
    let spec = &shared.spec;
    let max_model_len = spec.engine.max_model_len;
    let card = |id: &str, root: &str, parent: Option<&str>| {
        json!({
            "id": id,
            "object": "model",
            "created": shared.created,
            "owned_by": "vllm",
            "root": root,
            "parent": parent,
            "max_model_len": max_model_len,
            "permission": [{
                "id": format!("modelperm-{id}"),
                "object": "model_permission",
                "created": shared.created,
                "allow_create_engine": false,
                "allow_sampling": true,
                "allow_logprobs": true,
                "allow_search_indices": false,
                "allow_view": true,
                "allow_fine_tuning": false,
                "organization": "*",
                "group": null,
                "is_blocking": false,
            }],
        })
    };
    let served = spec.served_model_name.as_str();
    let mut data = vec![card(served, spec.engine.profile.model.served_name, None)];
    data.extend(
        adapters
            .iter()
            .map(|a| card(&a.name, &a.path, Some(served))),
    );
    body::json(
        StatusCode::OK,
        json!({"object": "list", "data": data}).to_string(),
    )
}

#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
struct LoadAdapterBody {
    lora_name: Option<String>,
    lora_path: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
struct UnloadAdapterBody {
    lora_name: Option<String>,
}

async fn json_body<T: serde::de::DeserializeOwned>(req: Request<Incoming>) -> Result<T, ApiError> {
    let bytes = read_body(req).await?;
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    de.end()
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))?;
    Ok(value)
}

async fn load_adapter(life: &Life, req: Request<Incoming>) -> Response<ResponseBody> {
    let result = async {
        let b: LoadAdapterBody = json_body(req).await?;
        let card = AdapterCard {
            name: b.lora_name.unwrap_or_default(),
            path: b.lora_path.unwrap_or_default(),
        };
        let name = card.name.clone();
        life.replica.load_adapter(card).await?;
        Ok::<_, ApiError>(format!(
            "Success: LoRA adapter '{name}' added successfully."
        ))
    };
    match result.await {
        Ok(text) => body::full(StatusCode::OK, "text/plain; charset=utf-8", text),
        Err(e) => e.into_response(),
    }
}

async fn unload_adapter(life: &Life, req: Request<Incoming>) -> Response<ResponseBody> {
    let result = async {
        let b: UnloadAdapterBody = json_body(req).await?;
        let name = b.lora_name.unwrap_or_default();
        life.replica.unload_adapter(name.clone()).await?;
        Ok::<_, ApiError>(format!(
            "Success: LoRA adapter '{name}' removed successfully."
        ))
    };
    match result.await {
        Ok(text) => body::full(StatusCode::OK, "text/plain; charset=utf-8", text),
        Err(e) => e.into_response(),
    }
}

async fn render_metrics(shared: &Shared, life: &Life) -> Option<Bytes> {
    let snapshot = life.replica.snapshot().await?;
    let spec = &shared.spec;
    Some(Bytes::from(exposition::render(
        spec.dialect,
        &spec.served_model_name,
        &spec.engine,
        &snapshot,
    )))
}

async fn metrics(shared: &Shared, life: &Life) -> Response<ResponseBody> {
    let body = match shared.faults.metrics() {
        (MetricsFault::Hang, _) => std::future::pending().await,
        (MetricsFault::Stale, Some(frozen)) => Some(frozen),
        (fault, None | Some(_)) => {
            let fresh = render_metrics(shared, life).await;
            if let (MetricsFault::Stale, Some(body)) = (fault, &fresh) {
                shared.faults.freeze_metrics(body.clone());
            }
            fresh
        }
    };
    match body {
        Some(text) => body::full(StatusCode::OK, exposition::CONTENT_TYPE, text),
        None => ApiError::starting_up().into_response(),
    }
}

fn faults_json(faults: &Faults) -> Response<ResponseBody> {
    match serde_json::to_vec(faults) {
        Ok(v) => body::json(StatusCode::OK, v),
        Err(e) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            e.to_string(),
        )
        .into_response(),
    }
}

async fn set_faults(
    shared: &Shared,
    life: &Life,
    req: Request<Incoming>,
) -> Response<ResponseBody> {
    let faults: Faults = match json_body(req).await {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    if let Err(message) = faults.validate() {
        return ApiError::bad_request(message).into_response();
    }
    let before = shared.faults.get();
    // A stale `/metrics` shows the figures of the moment the fault began.
    let frozen = match (before.metrics, faults.metrics) {
        (MetricsFault::Stale, MetricsFault::Stale) => shared.faults.metrics().1,
        (_, MetricsFault::Stale) => render_metrics(shared, life).await,
        _ => None,
    };
    if before.slowdown != faults.slowdown {
        life.replica.set_slowdown(faults.slowdown).await;
    }
    shared.faults.set(faults.clone(), frozen);
    tracing::info!(model = %shared.spec.served_model_name, ?faults, "faults set");
    faults_json(&faults)
}
