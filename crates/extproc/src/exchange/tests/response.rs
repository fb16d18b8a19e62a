//! The response side of the exchange: the served endpoint, accounting to the end, the route
//! timeout, and protocol violations.

use super::*;

pub(super) fn response_headers(
    status: &str,
    content_type: &str,
    served: Option<&str>,
    eos: bool,
) -> ProcessingRequest {
    let m = ProcessingRequest {
        request: Some(Msg::ResponseHeaders(HttpHeaders {
            headers: Some(ProtoHeaders {
                headers: vec![
                    header(":status", status),
                    header("content-type", content_type),
                ],
            }),
            end_of_stream: eos,
            ..HttpHeaders::default()
        })),
        ..ProcessingRequest::default()
    };
    match served {
        Some(s) => with_metadata(m, metadata::LB_NAMESPACE, metadata::SERVED, string(s)),
        None => m,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_endpoint_holds_the_in_flight_count_until_the_response_ends() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let mut ex = Exchange::new(Arc::clone(&p));
    let answers = post(&mut ex, &chat("llama", 100), Vec::new());
    let dest = destination(&answers);
    let primary = dest.split(',').next().unwrap().to_owned();
    let fallback = dest.split(',').nth(1).unwrap().to_owned();
    assert_eq!(in_flight(&p, "llama", &primary), 1);

    // Envoy says the first fallback served (the primary failed before answering).
    let answers = ex
        .on_message(response_headers(
            "200",
            "text/event-stream",
            Some(&fallback),
            false,
        ))
        .unwrap();
    assert_eq!(answers.len(), 1);
    assert_eq!(
        get(&set_headers(&answers[0]), protocol::DESTINATION),
        Some(fallback.as_str())
    );
    assert_eq!(in_flight(&p, "llama", &primary), 0);
    assert_eq!(in_flight(&p, "llama", &fallback), 1);

    let first = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
    let answers = ex
        .on_message(body(first, false, Direction::Response))
        .unwrap();
    assert_eq!(answers.len(), 1);
    assert_eq!(streamed(&answers[0]), (&first[..], false));
    assert_eq!(in_flight(&p, "llama", &fallback), 1);
    let last = b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
    let answers = ex
        .on_message(body(last, true, Direction::Response))
        .unwrap();
    assert_eq!(streamed(&answers[0]), (&last[..], true));
    assert_eq!(in_flight(&p, "llama", &fallback), 0);
    assert!(ex.is_done());

    let metrics = p.handle.metrics().encode();
    for line in [
        format!(
            r#"infergate_requests_total{{model="llama",pool="llama",endpoint="{fallback}",status="200"}} 1"#
        ),
        r#"infergate_prompt_tokens_total{model="llama",pool="llama"} 12"#.to_owned(),
        r#"infergate_completion_tokens_total{model="llama",pool="llama"} 3"#.to_owned(),
        format!(r#"infergate_routing_decisions_total{{pool="llama",endpoint="{primary}"}} 1"#),
        format!(r#"infergate_routing_decisions_total{{pool="llama",endpoint="{fallback}"}} 1"#),
    ] {
        assert!(metrics.contains(&line), "{line} not in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_without_a_served_report_is_the_primarys() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let mut ex = Exchange::new(Arc::clone(&p));
    let answers = post(&mut ex, &chat("llama", 1), Vec::new());
    let primary = destination(&answers).split(',').next().unwrap().to_owned();
    let answers = ex
        .on_message(response_headers("200", "application/json", None, true))
        .unwrap();
    assert_eq!(
        get(&set_headers(&answers[0]), protocol::DESTINATION),
        Some(primary.as_str())
    );
    assert_eq!(
        in_flight(&p, "llama", &primary),
        0,
        "a body-less response ends at its headers"
    );
    assert!(ex.is_done());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_out_of_order_are_a_protocol_error() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let mut ex = Exchange::new(Arc::clone(&p));
    let err = ex
        .on_message(response_headers("200", "application/json", None, true))
        .unwrap_err();
    assert!(err.to_string().contains("response_headers"), "{err}");
    let mut ex = Exchange::new(p);
    ex.on_message(request_headers("POST", "/v1/completions", &[], false))
        .unwrap();
    assert!(ex
        .on_message(request_headers("POST", "/v1/completions", &[], false))
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_timeout_becomes_a_504() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let mut ex = Exchange::new(Arc::clone(&p));
    assert_eq!(ex.deadline(), None);
    let before = Instant::now();
    post(&mut ex, &chat("llama", 1), Vec::new());
    let deadline = ex.deadline().unwrap();
    assert!(
        deadline <= before + Duration::from_secs(5) && deadline > before + Duration::from_secs(4)
    );
    let answers = ex.on_deadline();
    assert_eq!(immediate_status(&answers), 504);
    assert!(ex.is_done());
    assert_eq!(ex.deadline(), None);
    // mistral has no routeTimeout.
    let mut ex = Exchange::new(p);
    post(&mut ex, &chat("mistral", 1), Vec::new());
    assert_eq!(ex.deadline(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pools_recent_requests_count_each_end_and_a_successful_first_token() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let recent = || p.handle.routes().pool("llama").unwrap().recent().summary();
    assert_eq!(recent().requests, 0);

    // A stream that answers: counted once, its first chunk is the pool's TTFT.
    let mut ex = Exchange::new(Arc::clone(&p));
    post(&mut ex, &chat("llama", 1), Vec::new());
    ex.on_message(response_headers("200", "text/event-stream", None, false))
        .unwrap();
    let chunk = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
    ex.on_message(body(chunk, true, Direction::Response))
        .unwrap();
    let s = recent();
    assert_eq!((s.requests, s.failed, s.first_tokens), (1, 0, 1));
    assert!(s.ttft_p99.is_some());

    // Envoy's 503 for an upstream it could not reach: a failure, and no first token.
    let mut ex = Exchange::new(Arc::clone(&p));
    post(&mut ex, &chat("llama", 1), Vec::new());
    ex.on_message(response_headers("503", "text/plain", None, false))
        .unwrap();
    ex.on_message(body(b"upstream connect error", true, Direction::Response))
        .unwrap();
    // The route timeout, the exchange's own 504: a failure too.
    let mut ex = Exchange::new(Arc::clone(&p));
    post(&mut ex, &chat("llama", 1), Vec::new());
    assert_eq!(immediate_status(&ex.on_deadline()), 504);
    let s = recent();
    assert_eq!((s.requests, s.failed, s.first_tokens), (3, 2, 1));
    assert!((s.error_rate() - 2.0 / 3.0).abs() < 1e-9);
}
