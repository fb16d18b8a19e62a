//! Trace context through Envoy: a traced request's route answer sets `traceparent` to the span
//! of its way to the model server (the client's trace, a new span); untraced, infergate sets
//! none and Envoy forwards the client's own.

use super::*;

const CLIENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn start_traced(yaml: &str) -> (Plane, Arc<Processor>) {
    // A collector nobody listens on: the spans are dropped and counted; routing is unchanged.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let tracing =
        infergate_trace::TraceSettings::from_lookup(Some(&format!("http://{dead}")), |_| None)
            .unwrap();
    start_with_options(
        yaml,
        PlaneOptions {
            tracing,
            ..PlaneOptions::default()
        },
    )
}

fn route_headers(p: &Arc<Processor>) -> Vec<(String, String)> {
    let mut ex = Exchange::new(Arc::clone(p));
    let payload = chat("llama", 10);
    let len = payload.len().to_string();
    let h = request_headers(
        "POST",
        "/v1/chat/completions",
        &[("content-length", &len), ("traceparent", CLIENT)],
        false,
    );
    assert!(ex.on_message(h).unwrap().is_empty());
    let answers = ex
        .on_message(body(&payload, true, Direction::Request))
        .unwrap();
    set_headers(&answers[0])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_request_names_its_own_span_to_the_model_server() {
    let (_plane, p) = start_traced(&config(true, TWO_POOLS));
    let headers = route_headers(&p);
    let sent = get(&headers, "traceparent").expect("traceparent is set");
    assert!(
        sent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
        "{sent}"
    );
    assert!(sent.ends_with("-01"), "{sent}");
    assert_ne!(sent, CLIENT, "the upstream span's id, not the client's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untraced_infergate_leaves_the_clients_traceparent_alone() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let headers = route_headers(&p);
    assert_eq!(get(&headers, "traceparent"), None);
}
