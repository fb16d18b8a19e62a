use super::*;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use envoy_types::pb::google::protobuf::value::Kind;
use hyper::StatusCode;
use infergate_pipeline::DROPPED_REASON;

/// The streamed chunks of body answers, with their end-of-stream flags.
fn streamed(msgs: &[ProcessingResponse], dir: Direction) -> Vec<(Vec<u8>, bool)> {
    msgs.iter()
        .map(|m| {
            let answer = match (&m.response, dir) {
                (Some(Response::RequestBody(b)), Direction::Request)
                | (Some(Response::ResponseBody(b)), Direction::Response) => b,
                other => panic!("not a {dir:?} body answer: {other:?}"),
            };
            let mutation = answer
                .response
                .as_ref()
                .and_then(|c| c.body_mutation.as_ref())
                .and_then(|b| b.mutation.as_ref());
            match mutation {
                Some(Mutation::StreamedResponse(s)) => (s.body.clone(), s.end_of_stream),
                other => panic!("not a streamed response: {other:?}"),
            }
        })
        .collect()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn a_large_body_goes_back_in_order_in_chunks_of_at_most_62000_bytes() {
    let body = pattern(200_000);
    let chunks = streamed(
        &body_chunks(Direction::Request, &body, true),
        Direction::Request,
    );
    let sizes: Vec<usize> = chunks.iter().map(|(c, _)| c.len()).collect();
    assert_eq!(sizes, vec![62_000, 62_000, 62_000, 14_000]);
    let flags: Vec<bool> = chunks.iter().map(|(_, e)| *e).collect();
    assert_eq!(flags, vec![false, false, false, true]);
    assert_eq!(chunks.concat_bytes(), body);

    // Trailers follow: no chunk ends the stream.
    let open = streamed(
        &body_chunks(Direction::Request, &body, false),
        Direction::Request,
    );
    assert!(open.iter().all(|(_, e)| !e));
    // Exactly one chunk's worth is one message.
    assert_eq!(
        body_chunks(Direction::Request, &pattern(MAX_CHUNK), true).len(),
        1
    );
    assert_eq!(
        body_chunks(Direction::Request, &pattern(MAX_CHUNK + 1), true).len(),
        2
    );
}

trait Concat {
    fn concat_bytes(&self) -> Vec<u8>;
}

impl Concat for Vec<(Vec<u8>, bool)> {
    fn concat_bytes(&self) -> Vec<u8> {
        self.iter().flat_map(|(c, _)| c.iter().copied()).collect()
    }
}

#[test]
fn an_empty_body_says_its_end_once_and_otherwise_nothing() {
    let end = streamed(
        &body_chunks(Direction::Request, &[], true),
        Direction::Request,
    );
    assert_eq!(end, vec![(Vec::new(), true)]);
    assert!(body_chunks(Direction::Request, &[], false).is_empty());
    assert!(pass_through(Direction::Response, Vec::new(), false).is_empty());
    let end = streamed(
        &pass_through(Direction::Response, Vec::new(), true),
        Direction::Response,
    );
    assert_eq!(end, vec![(Vec::new(), true)]);
}

#[test]
fn response_chunks_pass_through_unchanged_and_split_when_too_large() {
    let small = b"data: {\"x\":1}\n\n".to_vec();
    let one = streamed(
        &pass_through(Direction::Response, small.clone(), false),
        Direction::Response,
    );
    assert_eq!(one, vec![(small, false)]);
    let big = pattern(130_000);
    let parts = streamed(
        &pass_through(Direction::Response, big.clone(), true),
        Direction::Response,
    );
    assert_eq!(parts.len(), 3);
    assert!(parts.iter().all(|(c, _)| c.len() <= MAX_CHUNK));
    assert_eq!(parts.concat_bytes(), big);
    assert_eq!(parts.iter().filter(|(_, e)| *e).count(), 1);
    assert!(parts.last().is_some_and(|(_, e)| *e));
}

fn set_headers(m: &ProcessingResponse) -> Vec<(String, Vec<u8>, i32)> {
    let common = match &m.response {
        Some(Response::RequestHeaders(h)) | Some(Response::ResponseHeaders(h)) => {
            h.response.as_ref()
        }
        other => panic!("not a headers answer: {other:?}"),
    };
    common
        .and_then(|c| c.header_mutation.as_ref())
        .map(|h| {
            h.set_headers
                .iter()
                .map(|o| {
                    let h = o.header.as_ref().unwrap();
                    (h.key.clone(), h.raw_value.clone(), o.append_action)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_route_answer_sets_header_and_metadata_to_one_value_and_clears_the_route_cache() {
    let dest = "10.0.0.1:8000,10.0.0.2:8000,[fd00::1]:8000";
    let m = route(
        dest,
        None,
        vec![set_header(MODEL_NAME, b"llama")],
        Vec::new(),
    );
    let Some(Response::RequestHeaders(h)) = &m.response else {
        panic!("{m:?}");
    };
    let common = h.response.as_ref().unwrap();
    assert!(common.clear_route_cache);
    let overwrite = HeaderAppendAction::OverwriteIfExistsOrAdd as i32;
    assert_eq!(
        set_headers(&m),
        vec![
            (DESTINATION.to_owned(), dest.as_bytes().to_vec(), overwrite),
            (MODEL_NAME.to_owned(), b"llama".to_vec(), overwrite),
        ]
    );
    let md = m.dynamic_metadata.as_ref().unwrap();
    let Some(Kind::StructValue(lb)) = &md.fields[metadata::LB_NAMESPACE].kind else {
        panic!("{md:?}");
    };
    assert_eq!(
        lb.fields[DESTINATION].kind,
        Some(Kind::StringValue(dest.to_owned()))
    );
}

#[test]
fn content_length_states_the_length_sent() {
    for len in [0, 10, 200_000] {
        let h = content_length(len).header.unwrap();
        assert_eq!(h.key, "content-length");
        assert_eq!(h.raw_value, len.to_string().into_bytes());
    }
}

fn immediate_of(m: &ProcessingResponse) -> &ImmediateResponse {
    match &m.response {
        Some(Response::ImmediateResponse(i)) => i,
        other => panic!("not an immediate response: {other:?}"),
    }
}

fn header_of(i: &ImmediateResponse, name: &str) -> Option<String> {
    i.headers.as_ref()?.set_headers.iter().find_map(|o| {
        let h = o.header.as_ref()?;
        (h.key == name).then(|| String::from_utf8_lossy(&h.raw_value).into_owned())
    })
}

#[test]
fn a_shed_request_is_refused_with_429_retry_after_and_the_dropped_reason() {
    let err = ApiError::saturated("llama", 7);
    let m = refusal(&err);
    let i = immediate_of(&m);
    assert_eq!(i.status.unwrap().code, 429);
    assert_eq!(header_of(i, "retry-after").as_deref(), Some("7"));
    assert_eq!(
        header_of(i, DROPPED_REASON).as_deref(),
        Some("rejected-saturated")
    );
    assert_eq!(
        header_of(i, "content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(i.body, err.body().to_vec());
    let v: serde_json::Value = serde_json::from_slice(&i.body).unwrap();
    assert_eq!(v["error"]["code"], "pool_saturated");
}

#[test]
fn other_refusals_carry_their_status_and_no_dropped_reason() {
    for (err, status) in [
        (ApiError::unknown_model(), StatusCode::NOT_FOUND),
        (ApiError::no_model(), StatusCode::BAD_REQUEST),
        (
            ApiError::no_endpoint("p", "empty subset"),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        (ApiError::too_large(10), StatusCode::PAYLOAD_TOO_LARGE),
    ] {
        let m = refusal(&err);
        let i = immediate_of(&m);
        assert_eq!(i.status.unwrap().code, i32::from(status.as_u16()));
        assert_eq!(header_of(i, DROPPED_REASON), None, "{err}");
        assert_eq!(header_of(i, "retry-after"), None, "{err}");
        assert_eq!(i.details, err.code());
    }
}

#[test]
fn a_head_reads_pseudo_headers_and_prefers_raw_values() {
    let h = |k: &str, v: &str, raw: &str| HeaderValue {
        key: k.into(),
        value: v.into(),
        raw_value: raw.as_bytes().to_vec(),
    };
    let proto = ProtoHeaders {
        headers: vec![
            h(":method", "", "POST"),
            h(":path", "", "/v1/chat/completions"),
            h(":authority", "", "gw"),
            h("x-gateway-inference-objective", "", "Critical"),
            h("x-old", "from-value", ""),
            h(":status", "", "503"),
            h("bad header", "", "x"),
        ],
    };
    let head = read_head(Some(&proto));
    assert_eq!(head.method, "POST");
    assert_eq!(head.path, "/v1/chat/completions");
    assert_eq!(head.status, Some(503));
    assert_eq!(head.headers["x-gateway-inference-objective"], "Critical");
    assert_eq!(head.headers["x-old"], "from-value");
    assert_eq!(head.headers.len(), 2);
    assert!(read_head(None).headers.is_empty());
}
