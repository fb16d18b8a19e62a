//! Arbitrary bytes as request bodies over HTTP: never a panic or a dropped connection, always a
//! JSON error or a success.

use crate::common::{fast_spec, send, Replica};
use hyper::Method;
use infergate_simserver::{parse_request, Endpoint};
use proptest::prelude::*;
use serde_json::Value;

fn bodies() -> impl Strategy<Value = (bool, Vec<u8>)> {
    let field = prop::sample::select(vec![
        "model",
        "messages",
        "prompt",
        "max_tokens",
        "stream",
        "n",
        "stream_options",
        "ignore_eos",
    ]);
    let value = prop::sample::select(vec![
        "null",
        "1",
        "-1",
        "0",
        "\"x\"",
        "[]",
        "{}",
        "[{\"role\":\"user\"}]",
        "[1,2]",
        "true",
        "1e99",
    ]);
    prop_oneof![
        (
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..256)
        ),
        // Near-valid JSON reaches the field checks.
        (any::<bool>(), field, value).prop_map(|(chat, k, v)| {
            let base = if chat {
                r#""messages":[{"role":"user","content":"hi"}]"#
            } else {
                r#""prompt":"p""#
            };
            (
                chat,
                format!("{{{base},\"max_tokens\":3,\"{k}\":{v}}}").into_bytes(),
            )
        }),
    ]
}

#[test]
fn arbitrary_bodies_get_json_errors_or_answers() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(Replica::start(fast_spec(1000.0)));
    let addr = server.addr;
    let config = ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |((chat, body) in bodies())| {
        let path = if chat { "/v1/chat/completions" } else { "/v1/completions" };
        let (status, bytes) = runtime.block_on(send(addr, Method::POST, path, Some(body))).unwrap();
        if status.is_success() && bytes.starts_with(b"data: ") {
            prop_assert!(bytes.ends_with(b"data: [DONE]\n\n"));
            return Ok(());
        }
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        if status.is_success() {
            prop_assert!(v["choices"].is_array());
        } else {
            prop_assert!(status.is_client_error(), "{}", status);
            prop_assert!(v["error"]["message"].is_string());
            prop_assert_eq!(v["error"]["code"].as_u64(), Some(u64::from(status.as_u16())));
        }
    });
    drop(server);
}

/// Arbitrary JSON documents, biased towards the request's own field names.
fn json_values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z ]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            prop::sample::select(vec![
                "model",
                "messages",
                "prompt",
                "role",
                "content",
                "type",
                "text",
                "max_tokens",
                "max_completion_tokens",
                "stream",
                "stream_options",
                "include_usage",
                "n",
                "ignore_eos",
                "temperature",
                "top_p",
            ])
            .prop_map(str::to_owned),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::btree_map(key, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_parser_answers_any_bytes_with_a_request_or_a_400(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        for endpoint in [Endpoint::ChatCompletions, Endpoint::Completions] {
            if let Err(e) = parse_request(endpoint, &bytes) {
                prop_assert_eq!(e.status().as_u16(), 400);
                let body: Value = serde_json::from_slice(&e.body()).unwrap();
                prop_assert!(body["error"]["message"].is_string());
            }
        }
    }

    #[test]
    fn the_parser_answers_any_json_with_a_request_or_a_400(value in json_values()) {
        let bytes = value.to_string().into_bytes();
        for endpoint in [Endpoint::ChatCompletions, Endpoint::Completions] {
            if let Err(e) = parse_request(endpoint, &bytes) {
                prop_assert_eq!(e.status().as_u16(), 400);
                prop_assert!(!e.message().is_empty());
            }
        }
    }
}
