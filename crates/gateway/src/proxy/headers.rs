//! Headers on the way up and down: hop-by-hop headers stay on their own hop, the client may not
//! choose the endpoint, and the upstream learns the model and base model that routing decided.

use hyper::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, EXPECT, HOST};
use hyper::HeaderMap;
use infergate_pipeline::pick::{self, Why};

/// `X-Gateway-Model-Name`: the model the request named.
pub const MODEL_NAME: HeaderName = HeaderName::from_static("x-gateway-model-name");
/// `X-Gateway-Base-Model-Name`: the base model of an adapter, the name itself for a base model.
pub const BASE_MODEL_NAME: HeaderName = HeaderName::from_static("x-gateway-base-model-name");
/// The endpoint chosen. A client's own value is dropped (it would let a client pick the pod);
/// the gateway sets it on the response so a client can see where it was served.
pub const DESTINATION_ENDPOINT: HeaderName =
    HeaderName::from_static("x-gateway-destination-endpoint");

/// Sets the explanation of the pick on a response (`--emit-endpoint-scores`): the totals under
/// llm-d's header name, the whole explanation beside it. Replaces any value the model server
/// sent under those names.
pub fn explain(headers: &mut HeaderMap, why: &Why) {
    let scores = serde_json::Value::Object(why.scores.clone()).to_string();
    for (name, value) in [
        (pick::ENDPOINT_SCORES, scores.as_str()),
        (pick::PICK_EXPLANATION, why.explanation.as_str()),
    ] {
        // JSON of addresses, names and numbers is visible ASCII: always a valid header value.
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
}

/// RFC 9110 §7.6.1 connection-specific headers, plus the legacy `proxy-connection`.
const HOP_BY_HOP: [HeaderName; 9] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-authenticate"),
    HeaderName::from_static("proxy-authorization"),
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("te"),
    HeaderName::from_static("trailer"),
    HeaderName::from_static("transfer-encoding"),
    HeaderName::from_static("upgrade"),
];

/// Removes hop-by-hop headers, including those the `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// The headers sent upstream: the client's, less hop-by-hop ones, `Host` and `Content-Length`
/// (the client sets both for the forwarded body), any destination the client named and the
/// model rewrite the gateway has applied, plus the routing headers.
pub fn upstream(client: &HeaderMap, model: &str, base_model: &str) -> HeaderMap {
    let mut h = client.clone();
    strip_hop_by_hop(&mut h);
    h.remove(HOST);
    h.remove(CONTENT_LENGTH);
    // The gateway met the expectation itself (hyper sent `100 Continue` when the body was read);
    // the body goes up whole, so the upstream has nothing to expect.
    h.remove(EXPECT);
    h.remove(DESTINATION_ENDPOINT);
    h.remove(infergate_control::routes::rewrites::MODEL_NAME_REWRITE);
    h.remove(MODEL_NAME);
    h.remove(BASE_MODEL_NAME);
    // A name routing accepted is one of the config's (or the default backend's); one that is
    // not a valid header value is simply not forwarded.
    if let Ok(v) = HeaderValue::from_str(model) {
        h.insert(MODEL_NAME, v);
    }
    if let Ok(v) = HeaderValue::from_str(base_model) {
        h.insert(BASE_MODEL_NAME, v);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_client_destination_are_dropped_and_routing_headers_set() {
        let mut c = HeaderMap::new();
        c.insert(CONNECTION, HeaderValue::from_static("keep-alive, x-custom"));
        c.insert(EXPECT, HeaderValue::from_static("100-continue"));
        c.insert("x-custom", HeaderValue::from_static("1"));
        c.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        c.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        c.insert(
            DESTINATION_ENDPOINT,
            HeaderValue::from_static("10.0.0.9:8000"),
        );
        c.insert("authorization", HeaderValue::from_static("Bearer x"));
        c.insert(HOST, HeaderValue::from_static("gw"));
        c.insert(
            infergate_control::routes::rewrites::MODEL_NAME_REWRITE,
            HeaderValue::from_static("sql-lora"),
        );
        let h = upstream(&c, "sql-lora", "llama");
        for gone in [
            "connection",
            "x-custom",
            "keep-alive",
            "transfer-encoding",
            "host",
            "expect",
            "x-gateway-model-name-rewrite",
        ] {
            assert!(!h.contains_key(gone), "{gone}");
        }
        assert!(!h.contains_key(DESTINATION_ENDPOINT));
        assert_eq!(h["authorization"], "Bearer x");
        assert_eq!(h[MODEL_NAME], "sql-lora");
        assert_eq!(h[BASE_MODEL_NAME], "llama");
    }
}
