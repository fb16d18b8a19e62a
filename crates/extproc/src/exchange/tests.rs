//! The exchange driven message by message over a real data plane (pools, picker, metrics), with
//! endpoints that are never scraped: the picker then picks without metrics, which is all these
//! tests need.

use super::*;
use crate::protocol::Direction;
use envoy_types::pb::envoy::config::core::v3::{HeaderMap as ProtoHeaders, HeaderValue, Metadata};
use envoy_types::pb::envoy::service::ext_proc::v3::body_mutation::Mutation;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request as Msg;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HeaderMutation, HttpBody, HttpHeaders, HttpTrailers,
};
use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{ListValue, Struct, Value};
use infergate_control::{Plane, PlaneOptions};
use infergate_pipeline::pick;

pub(super) const LLAMA: [&str; 3] = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.2:3"];
pub(super) const MISTRAL: &str = "127.0.0.1:4";

pub(super) fn config(bbr: bool, schedulers: &str) -> String {
    format!(
        "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
spec:
  bbr: {{enabled: {bbr}, maxRequestBodyBytes: 300000}}
  schedulers:
{schedulers}
  endpoints:
    - {{address: {}, labels: {{pool: llama}}}}
    - {{address: {}, labels: {{pool: llama}}}}
    - {{address: {}, labels: {{pool: llama}}}}
    - {{address: {MISTRAL}, labels: {{pool: mistral}}}}
",
        LLAMA[0], LLAMA[1], LLAMA[2]
    )
}

pub(super) const TWO_POOLS: &str = "    - {name: llama, modelName: llama, modelSelector: {matchLabels: {pool: llama}}, routeTimeout: 5s}
    - {name: mistral, modelName: mistral, modelSelector: {matchLabels: {pool: mistral}}}";

pub(super) fn start(yaml: &str) -> (Plane, Arc<Processor>) {
    start_with(yaml, false)
}

/// [`start`], with picks explained or not (`--emit-endpoint-scores`).
pub(super) fn start_with(yaml: &str, emit_endpoint_scores: bool) -> (Plane, Arc<Processor>) {
    start_with_options(
        yaml,
        PlaneOptions {
            emit_endpoint_scores,
            ..PlaneOptions::default()
        },
    )
}

/// [`start`] with `options` (the admin listener on a free port).
pub(super) fn start_with_options(yaml: &str, mut options: PlaneOptions) -> (Plane, Arc<Processor>) {
    let config = infergate_config::gateway::load_from_str(yaml)
        .unwrap()
        .resolve()
        .unwrap();
    options.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    let plane = Plane::start(config, &options).unwrap();
    let processor = Arc::new(Processor::new(plane.handle()));
    (plane, processor)
}

pub(super) fn header(k: &str, v: &str) -> HeaderValue {
    HeaderValue {
        key: k.into(),
        value: String::new(),
        raw_value: v.as_bytes().to_vec(),
    }
}

pub(super) fn request_headers(
    method: &str,
    path: &str,
    extra: &[(&str, &str)],
    eos: bool,
) -> ProcessingRequest {
    let mut headers = vec![header(":method", method), header(":path", path)];
    headers.extend(extra.iter().map(|(k, v)| header(k, v)));
    ProcessingRequest {
        request: Some(Msg::RequestHeaders(HttpHeaders {
            headers: Some(ProtoHeaders { headers }),
            end_of_stream: eos,
            ..HttpHeaders::default()
        })),
        ..ProcessingRequest::default()
    }
}

pub(super) fn body(bytes: &[u8], eos: bool, dir: Direction) -> ProcessingRequest {
    let b = HttpBody {
        body: bytes.to_vec(),
        end_of_stream: eos,
        ..HttpBody::default()
    };
    ProcessingRequest {
        request: Some(match dir {
            Direction::Request => Msg::RequestBody(b),
            Direction::Response => Msg::ResponseBody(b),
        }),
        ..ProcessingRequest::default()
    }
}

pub(super) fn with_metadata(
    mut m: ProcessingRequest,
    namespace: &str,
    key: &str,
    v: Value,
) -> ProcessingRequest {
    let mut md = Metadata::default();
    md.filter_metadata.insert(
        namespace.into(),
        Struct {
            fields: [(key.to_owned(), v)].into(),
        },
    );
    m.metadata_context = Some(md);
    m
}

pub(super) fn string(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.into())),
    }
}

pub(super) fn chat(model: &str, pad: usize) -> Vec<u8> {
    format!(
        r#"{{"model":"{model}","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(pad)
    )
    .into_bytes()
}

/// Sends a whole POST with `payload` in two chunks; returns the answers to the last message.
pub(super) fn post(
    ex: &mut Exchange,
    payload: &[u8],
    extra: Vec<ProcessingRequest>,
) -> Vec<ProcessingResponse> {
    let len = payload.len().to_string();
    let h = request_headers(
        "POST",
        "/v1/chat/completions",
        &[("content-length", &len)],
        false,
    );
    assert!(ex.on_message(h).unwrap().is_empty());
    for m in extra {
        assert!(ex.on_message(m).unwrap().is_empty());
    }
    let (a, b) = payload.split_at(payload.len() / 2);
    assert!(ex
        .on_message(body(a, false, Direction::Request))
        .unwrap()
        .is_empty());
    ex.on_message(body(b, true, Direction::Request)).unwrap()
}

/// The header mutation of a request- or response-headers answer.
pub(super) fn mutation(m: &ProcessingResponse) -> Option<&HeaderMutation> {
    let h = match &m.response {
        Some(Response::RequestHeaders(h)) | Some(Response::ResponseHeaders(h)) => h,
        other => panic!("not a headers answer: {other:?}"),
    };
    h.response.as_ref().and_then(|c| c.header_mutation.as_ref())
}

pub(super) fn set_headers(m: &ProcessingResponse) -> Vec<(String, String)> {
    mutation(m)
        .map(|hm| {
            hm.set_headers
                .iter()
                .filter_map(|o| o.header.as_ref())
                .map(|h| {
                    (
                        h.key.clone(),
                        String::from_utf8_lossy(&h.raw_value).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn get<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

pub(super) fn destination(answers: &[ProcessingResponse]) -> String {
    get(&set_headers(&answers[0]), protocol::DESTINATION)
        .unwrap()
        .to_owned()
}

pub(super) fn streamed(m: &ProcessingResponse) -> (&[u8], bool) {
    let b = match &m.response {
        Some(Response::RequestBody(b)) | Some(Response::ResponseBody(b)) => b,
        other => panic!("not a body answer: {other:?}"),
    };
    match b
        .response
        .as_ref()
        .and_then(|c| c.body_mutation.as_ref())
        .and_then(|m| m.mutation.as_ref())
    {
        Some(Mutation::StreamedResponse(s)) => (&s.body, s.end_of_stream),
        other => panic!("not streamed: {other:?}"),
    }
}

pub(super) fn immediate_status(answers: &[ProcessingResponse]) -> i32 {
    assert_eq!(answers.len(), 1, "{answers:?}");
    match &answers[0].response {
        Some(Response::ImmediateResponse(i)) => i.status.unwrap().code,
        other => panic!("not an immediate response: {other:?}"),
    }
}

pub(super) fn in_flight(p: &Processor, pool: &str, address: &str) -> u64 {
    let routes = p.handle.routes();
    let snap = routes.pool(pool).unwrap().snapshot();
    let pos = snap.pool.position_of_address(address).unwrap();
    let id = snap.pool.spec(pos).unwrap().id;
    snap.pool.local_load(id).unwrap().in_flight_requests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_is_held_until_its_end_then_routed_and_streamed_back_in_order() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let mut ex = Exchange::new(Arc::clone(&p));
    let payload = chat("llama", 200_000);
    let answers = post(&mut ex, &payload, Vec::new());

    let headers = set_headers(&answers[0]);
    let Some(Response::RequestHeaders(h)) = &answers[0].response else {
        panic!()
    };
    assert!(h.response.as_ref().unwrap().clear_route_cache);
    let dest = destination(&answers);
    let mut entries: Vec<&str> = dest.split(',').collect();
    assert_eq!(entries.len(), 3, "primary and two fallbacks: {dest}");
    entries.sort_unstable();
    let mut all = LLAMA.to_vec();
    all.sort_unstable();
    assert_eq!(entries, all);
    let md = answers[0].dynamic_metadata.as_ref().unwrap();
    let Some(Kind::StructValue(lb)) = &md.fields["envoy.lb"].kind else {
        panic!()
    };
    assert_eq!(
        lb.fields[protocol::DESTINATION].kind,
        Some(Kind::StringValue(dest.clone()))
    );
    assert_eq!(get(&headers, protocol::MODEL_NAME), Some("llama"));
    assert_eq!(get(&headers, protocol::BASE_MODEL_NAME), Some("llama"));
    // The length of the body sent on, as Envoy drops the client's.
    assert_eq!(
        get(&headers, "content-length"),
        Some(payload.len().to_string().as_str())
    );

    let chunks: Vec<(&[u8], bool)> = answers[1..].iter().map(streamed).collect();
    assert!(chunks.iter().all(|(c, _)| c.len() <= protocol::MAX_CHUNK));
    assert_eq!(chunks.iter().filter(|(_, e)| *e).count(), 1);
    assert!(chunks.last().unwrap().1);
    assert_eq!(chunks.concat_body(), payload);
    let primary = dest.split(',').next().unwrap();
    assert_eq!(in_flight(&p, "llama", primary), 1);
    drop(ex);
    assert_eq!(
        in_flight(&p, "llama", primary),
        0,
        "a dropped stream releases its endpoint"
    );
}

trait ConcatBody {
    fn concat_body(&self) -> Vec<u8>;
}

impl ConcatBody for Vec<(&[u8], bool)> {
    fn concat_body(&self) -> Vec<u8> {
        self.iter().flat_map(|(c, _)| c.iter().copied()).collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailers_end_the_body_and_are_answered_after_it() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let mut ex = Exchange::new(p);
    let payload = chat("mistral", 10);
    assert!(ex
        .on_message(request_headers("POST", "/v1/completions", &[], false))
        .unwrap()
        .is_empty());
    assert!(ex
        .on_message(body(&payload, false, Direction::Request))
        .unwrap()
        .is_empty());
    let trailers = ProcessingRequest {
        request: Some(Msg::RequestTrailers(HttpTrailers::default())),
        ..ProcessingRequest::default()
    };
    let answers = ex.on_message(trailers).unwrap();
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(destination(&answers), MISTRAL);
    // Trailers need a chunked body: no length is stated.
    assert_eq!(get(&set_headers(&answers[0]), "content-length"), None);
    assert_eq!(streamed(&answers[1]), (&payload[..], false));
    assert!(matches!(
        answers[2].response,
        Some(Response::RequestTrailers(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subset_hint_restricts_the_destination_in_both_encodings() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let hint = |v: Value| {
        with_metadata(
            request_headers("POST", "/v1/chat/completions", &[], false),
            metadata::SUBSET_NAMESPACE,
            metadata::SUBSET,
            v,
        )
    };
    let list = Value {
        kind: Some(Kind::ListValue(ListValue {
            values: vec![string(LLAMA[2])],
        })),
    };
    let mut ex = Exchange::new(Arc::clone(&p));
    let answers = ex.on_message(hint(list)).unwrap();
    assert!(answers.is_empty());
    let answers = ex
        .on_message(body(&chat("llama", 5), true, Direction::Request))
        .unwrap();
    assert_eq!(destination(&answers), LLAMA[2]);

    // A bare IP names every port on it.
    let mut ex = Exchange::new(Arc::clone(&p));
    let answers = post(
        &mut ex,
        &chat("llama", 5),
        vec![body(b"", false, Direction::Request)],
    );
    assert_eq!(
        destination(&answers).split(',').count(),
        3,
        "no hint: the whole pool"
    );
    let mut ex = Exchange::new(Arc::clone(&p));
    ex.on_message(hint(string("127.0.0.1"))).unwrap();
    let answers = ex
        .on_message(body(&chat("llama", 5), true, Direction::Request))
        .unwrap();
    let dest = destination(&answers);
    let mut got: Vec<&str> = dest.split(',').collect();
    got.sort_unstable();
    assert_eq!(got, vec![LLAMA[0], LLAMA[1]]);

    // Empty, or naming only another pool's endpoint: 503.
    for nothing in [string(""), string(MISTRAL)] {
        let mut ex = Exchange::new(Arc::clone(&p));
        ex.on_message(hint(nothing)).unwrap();
        let answers = ex
            .on_message(body(&chat("llama", 5), true, Direction::Request))
            .unwrap();
        assert_eq!(immediate_status(&answers), 503);
        assert!(ex.is_done());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_immediate_responses_with_their_status() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let mut ex = Exchange::new(Arc::clone(&p));
    assert_eq!(
        immediate_status(&post(&mut ex, &chat("gpt-9", 1), Vec::new())),
        404
    );
    let mut ex = Exchange::new(Arc::clone(&p));
    assert_eq!(
        immediate_status(&post(&mut ex, b"{not json", Vec::new())),
        400
    );

    // Over bbr.maxRequestBodyBytes, counted across chunks.
    let mut ex = Exchange::new(Arc::clone(&p));
    ex.on_message(request_headers("POST", "/v1/completions", &[], false))
        .unwrap();
    assert!(ex
        .on_message(body(&[b' '; 200_000], false, Direction::Request))
        .unwrap()
        .is_empty());
    let answers = ex
        .on_message(body(&[b' '; 200_000], false, Direction::Request))
        .unwrap();
    assert_eq!(immediate_status(&answers), 413);
    assert!(ex
        .on_message(body(b"", true, Direction::Request))
        .unwrap()
        .is_empty());

    // No body: the model header routes it, and only the headers are answered.
    let mut ex = Exchange::new(Arc::clone(&p));
    let answers = ex
        .on_message(request_headers(
            "POST",
            "/v1/x",
            &[("x-gateway-model-name", "mistral")],
            true,
        ))
        .unwrap();
    assert_eq!(answers.len(), 1);
    assert_eq!(destination(&answers), MISTRAL);
    let mut ex = Exchange::new(Arc::clone(&p));
    let answers = ex
        .on_message(request_headers("POST", "/v1/x", &[], true))
        .unwrap();
    assert_eq!(immediate_status(&answers), 400);

    // The model list, as the standalone gateway serves it.
    let mut ex = Exchange::new(Arc::clone(&p));
    let answers = ex
        .on_message(request_headers("GET", "/v1/models", &[], true))
        .unwrap();
    assert_eq!(immediate_status(&answers), 200);
    let Some(Response::ImmediateResponse(i)) = &answers[0].response else {
        panic!()
    };
    let v: serde_json::Value = serde_json::from_slice(&i.body).unwrap();
    assert_eq!(v["data"][0]["id"], "llama");
    let metrics = p.handle.metrics().encode();
    // An unknown model is counted under model="" (labels stay bounded by the config).
    let line = r#"infergate_requests_total{model="",pool="",endpoint="",status="404"} 1"#;
    assert!(metrics.contains(line), "{line} not in\n{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explained_pick_puts_the_scores_and_the_explanation_beside_the_destination() {
    for emit in [false, true] {
        let (_plane, p) = start_with(&config(true, TWO_POOLS), emit);
        let mut ex = Exchange::new(p);
        let answers = post(&mut ex, &chat("llama", 10), Vec::new());
        let dest = destination(&answers);
        let md = answers[0].dynamic_metadata.as_ref().unwrap();
        let Some(Kind::StructValue(lb)) = &md.fields["envoy.lb"].kind else {
            panic!()
        };
        if !emit {
            assert_eq!(lb.fields.len(), 1, "only the destination: {lb:?}");
            continue;
        }
        let Some(Kind::StructValue(scores)) = &lb.fields[pick::ENDPOINT_SCORES].kind else {
            panic!("{lb:?}")
        };
        // No endpoint was ever scraped, so every one is a candidate (the stale filter fails
        // open) and has a total.
        let mut scored: Vec<&str> = scores.fields.keys().map(String::as_str).collect();
        scored.sort_unstable();
        let mut all = LLAMA.to_vec();
        all.sort_unstable();
        assert_eq!(scored, all);
        let Some(Kind::StringValue(why)) = &lb.fields[pick::PICK_EXPLANATION].kind else {
            panic!("{lb:?}")
        };
        let why: serde_json::Value = serde_json::from_str(why).unwrap();
        assert_eq!(why["primary"], dest.split(',').next().unwrap(), "{why}");
        assert_eq!(why["candidates"].as_array().unwrap().len(), 3, "{why}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_bbr_off_no_model_headers_are_set() {
    let one = "    - {name: llama, modelName: llama, modelSelector: {matchLabels: {pool: llama}}}";
    let (_plane, p) = start(&config(false, one));
    let mut ex = Exchange::new(p);
    // BBR off: every model goes to the one pool.
    let answers = post(&mut ex, &chat("anything", 1), Vec::new());
    let headers = set_headers(&answers[0]);
    assert_eq!(get(&headers, protocol::MODEL_NAME), None);
    assert_eq!(get(&headers, protocol::BASE_MODEL_NAME), None);
    assert!(get(&headers, protocol::DESTINATION).is_some());
}

mod response;
mod tenancy;
mod tracing;
