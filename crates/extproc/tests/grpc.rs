//! The server over real gRPC, in-process on loopback: health follows readiness on both
//! listeners, and a `Process` stream is answered in the protocol's order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request as Msg;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response as Answer;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    body_mutation::Mutation, HttpBody, HttpHeaders, ProcessingRequest,
};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use infergate_extproc::{ExtProc, ExtProcOptions};
use infergate_test_support::ports::free_addr;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// A replica's `/metrics` on `addr`, serving until the task is dropped.
fn metrics_server(addr: SocketAddr) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let svc = service_fn(|_req| async {
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(
                        "vllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.1\n",
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    })
}

async fn status(client: &mut HealthClient<Channel>, service: &str) -> Result<i32, tonic::Code> {
    client
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .map(|r| r.into_inner().status)
        .map_err(|s| s.code())
}

const EXT_PROC: &str = "envoy.service.ext_proc.v3.ExternalProcessor";
const SERVING: i32 = ServingStatus::Serving as i32;
const NOT_SERVING: i32 = ServingStatus::NotServing as i32;

fn headers(pairs: &[(&str, &str)], eos: bool, response: bool) -> ProcessingRequest {
    let h = HttpHeaders {
        headers: Some(HeaderMap {
            headers: pairs
                .iter()
                .map(|(k, v)| HeaderValue {
                    key: (*k).into(),
                    value: String::new(),
                    raw_value: v.as_bytes().to_vec(),
                })
                .collect(),
        }),
        end_of_stream: eos,
        ..HttpHeaders::default()
    };
    ProcessingRequest {
        request: Some(if response {
            Msg::ResponseHeaders(h)
        } else {
            Msg::RequestHeaders(h)
        }),
        ..ProcessingRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_readiness_and_a_stream_is_answered_in_order() {
    let replica = free_addr();
    let yaml = format!(
        "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
spec:
  bbr: {{enabled: true}}
  schedulers:
    - {{name: llama, modelName: llama, modelSelector: {{matchLabels: {{app: a}}}}}}
  endpoints:
    - {{address: \"{replica}\", labels: {{app: a}}}}
"
    );
    let config = infergate_config::gateway::load_from_str(&yaml)
        .unwrap()
        .resolve()
        .unwrap();
    let any = Some("127.0.0.1:0".parse().unwrap());
    let options = ExtProcOptions {
        listen: any,
        admin_listen: any,
        health_listen: any,
        ..ExtProcOptions::default()
    };
    let server = ExtProc::bind(config, options).await.unwrap();
    let (addr, health_addr) = (server.local_addr(), server.health_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel.clone());
    // Nothing scraped yet: alive (static endpoints are synced from the start), not ready.
    assert_eq!(status(&mut health, "").await, Ok(NOT_SERVING));
    assert_eq!(status(&mut health, "liveness").await, Ok(SERVING));
    assert_eq!(
        status(&mut health, "inference-extension").await,
        Ok(SERVING)
    );
    assert_eq!(status(&mut health, "readiness").await, Ok(NOT_SERVING));
    assert_eq!(status(&mut health, EXT_PROC).await, Ok(NOT_SERVING));
    assert_eq!(
        status(&mut health, "nope").await,
        Err(tonic::Code::NotFound)
    );

    // The replica comes up and is scraped: ready, on both listeners.
    let _metrics = metrics_server(replica);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while status(&mut health, "readiness").await != Ok(SERVING) {
        assert!(tokio::time::Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status(&mut health, EXT_PROC).await, Ok(SERVING));
    assert_eq!(status(&mut health, "").await, Ok(SERVING));
    let health_only = Channel::from_shared(format!("http://{health_addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut probe = HealthClient::new(health_only);
    assert_eq!(status(&mut probe, "readiness").await, Ok(SERVING));
    assert_eq!(status(&mut probe, "liveness").await, Ok(SERVING));

    // One request through a Process stream.
    let body = format!(
        r#"{{"model":"llama","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "y".repeat(150_000)
    );
    let (tx, mut rx) = tokio::sync::mpsc::channel::<ProcessingRequest>(8);
    let outbound = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let mut client = ExternalProcessorClient::new(channel);
    tx.send(headers(
        &[(":method", "POST"), (":path", "/v1/chat/completions")],
        false,
        false,
    ))
    .await
    .unwrap();
    tx.send(ProcessingRequest {
        request: Some(Msg::RequestBody(HttpBody {
            body: body.clone().into_bytes(),
            end_of_stream: true,
            ..HttpBody::default()
        })),
        ..ProcessingRequest::default()
    })
    .await
    .unwrap();
    let mut answers = client.process(outbound).await.unwrap().into_inner();
    let first = answers.message().await.unwrap().unwrap();
    let Some(Answer::RequestHeaders(h)) = &first.response else {
        panic!("headers are answered first: {first:?}");
    };
    let set = &h
        .response
        .as_ref()
        .unwrap()
        .header_mutation
        .as_ref()
        .unwrap()
        .set_headers;
    let dest = set
        .iter()
        .filter_map(|o| o.header.as_ref())
        .find(|h| h.key == "x-gateway-destination-endpoint")
        .unwrap();
    assert_eq!(dest.raw_value, replica.to_string().into_bytes());
    let mut echoed = Vec::new();
    loop {
        let m = answers.message().await.unwrap().unwrap();
        let Some(Answer::RequestBody(b)) = m.response else {
            panic!("body chunks follow the headers: {m:?}");
        };
        let Some(Mutation::StreamedResponse(s)) =
            b.response.unwrap().body_mutation.unwrap().mutation
        else {
            panic!("streamed");
        };
        assert!(s.body.len() <= 62_000);
        echoed.extend_from_slice(&s.body);
        if s.end_of_stream {
            break;
        }
    }
    assert_eq!(echoed, body.into_bytes());
    tx.send(headers(&[(":status", "200")], true, true))
        .await
        .unwrap();
    let m = answers.message().await.unwrap().unwrap();
    assert!(
        matches!(m.response, Some(Answer::ResponseHeaders(_))),
        "{m:?}"
    );
    // The exchange is over: the server ends the stream.
    assert!(answers.message().await.unwrap().is_none());

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the server stops")
        .unwrap();
}
