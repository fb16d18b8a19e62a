//! The ext_proc side of the endpoint-picker protocol as pure functions: the keys, the answer to
//! the request headers (destination header, `envoy.lb` metadata, route-cache clearing), bodies
//! sent back in bounded chunks, and refusals as immediate responses.
//!
//! Order on one stream is strict: the request-headers answer, then the request body chunks
//! (the last one carrying `end_of_stream` unless trailers follow), then the trailers answer;
//! the response side repeats the pattern.

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use envoy_types::pb::envoy::config::core::v3::{
    HeaderMap as ProtoHeaders, HeaderValue, HeaderValueOption,
};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;
use envoy_types::pb::envoy::service::ext_proc::v3::body_mutation::Mutation;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    BodyMutation, BodyResponse, CommonResponse, HeaderMutation, HeadersResponse, ImmediateResponse,
    ProcessingResponse, StreamedBodyResponse, TrailersResponse,
};
use hyper::header::{HeaderName, HeaderValue as HttpHeaderValue};
use hyper::HeaderMap;
use infergate_pipeline::pick::Why;
use infergate_pipeline::ApiError;

use crate::metadata;
pub use crate::metadata::DESTINATION;

/// `X-Gateway-Model-Name`, set by body-based routing.
pub const MODEL_NAME: &str = "x-gateway-model-name";
/// `X-Gateway-Base-Model-Name`, set by body-based routing.
pub const BASE_MODEL_NAME: &str = "x-gateway-base-model-name";

/// Largest body chunk sent back to Envoy, the bound the reference endpoint picker uses: a chunk
/// and its framing stay under 64 KiB, so a large body never travels as one oversized gRPC
/// message.
pub const MAX_CHUNK: usize = 62_000;

/// Which half of the exchange a message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to upstream.
    Request,
    /// Upstream to client.
    Response,
}

/// A request or response head as Envoy sends it: the pseudo-headers pulled out, the rest as an
/// HTTP header map.
#[derive(Debug, Default, Clone)]
pub struct Head {
    /// Regular headers (names lower-case, as Envoy sends them).
    pub headers: HeaderMap,
    /// `:method`.
    pub method: String,
    /// `:path`.
    pub path: String,
    /// `:status` (responses).
    pub status: Option<u16>,
}

/// A header's value: Envoy sends `raw_value`; `value` is read when `raw_value` is empty, as an
/// older data plane sends it.
pub fn value_of(h: &HeaderValue) -> &[u8] {
    if h.raw_value.is_empty() {
        h.value.as_bytes()
    } else {
        &h.raw_value
    }
}

/// Reads a head. A header whose name or value is not valid HTTP is skipped: Envoy has already
/// validated what it forwards, so this only drops what no HTTP peer could have sent.
pub fn read_head(proto: Option<&ProtoHeaders>) -> Head {
    let mut head = Head::default();
    for h in proto.map(|p| p.headers.as_slice()).unwrap_or_default() {
        let value = value_of(h);
        match h.key.as_str() {
            ":method" => head.method = String::from_utf8_lossy(value).into_owned(),
            ":path" => head.path = String::from_utf8_lossy(value).into_owned(),
            ":status" => head.status = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok()),
            k if k.starts_with(':') => {}
            k => {
                if let (Ok(name), Ok(v)) = (
                    HeaderName::from_bytes(k.as_bytes()),
                    HttpHeaderValue::from_bytes(value),
                ) {
                    head.headers.append(name, v);
                }
            }
        }
    }
    head
}

/// A header set to `value`, replacing any value it had.
pub fn set_header(name: &str, value: &[u8]) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: name.to_owned(),
            value: String::new(),
            raw_value: value.to_vec(),
        }),
        append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..HeaderValueOption::default()
    }
}

/// The `Content-Length` of the body sent upstream: infergate holds the whole body, so it states
/// the length of what it sends back, and a changed body never travels with a stale length.
/// (Envoy itself drops the length in `FULL_DUPLEX_STREAMED` mode and frames the body chunked;
/// data planes that keep it get the right one.)
pub fn content_length(body_len: usize) -> HeaderValueOption {
    set_header("content-length", body_len.to_string().as_bytes())
}

/// The answer to the request headers once the body is in: the destination header (and
/// `extra` headers) set, `remove` removed (the bearer token, which the model servers never
/// see), the same destination in the `envoy.lb` metadata, and the route cache cleared so Envoy
/// routes on the headers just set.
pub fn route(
    destination: &str,
    why: Option<&Why>,
    extra: Vec<HeaderValueOption>,
    remove: Vec<String>,
) -> ProcessingResponse {
    let mut set_headers = Vec::with_capacity(extra.len() + 1);
    set_headers.push(set_header(DESTINATION, destination.as_bytes()));
    set_headers.extend(extra);
    ProcessingResponse {
        dynamic_metadata: Some(metadata::destination(destination, why)),
        response: Some(Response::RequestHeaders(HeadersResponse {
            response: Some(CommonResponse {
                header_mutation: Some(HeaderMutation {
                    set_headers,
                    remove_headers: remove,
                }),
                clear_route_cache: true,
                ..CommonResponse::default()
            }),
        })),
        ..ProcessingResponse::default()
    }
}

/// The answer to the response headers, setting `set` on the response and removing `remove`
/// (the `Content-Length` of a body whose model is renamed on the way back).
pub fn response_headers(set: Vec<HeaderValueOption>, remove: Vec<String>) -> ProcessingResponse {
    ProcessingResponse {
        response: Some(Response::ResponseHeaders(HeadersResponse {
            response: Some(CommonResponse {
                header_mutation: (!set.is_empty() || !remove.is_empty()).then_some(
                    HeaderMutation {
                        set_headers: set,
                        remove_headers: remove,
                    },
                ),
                ..CommonResponse::default()
            }),
        })),
        ..ProcessingResponse::default()
    }
}

fn body_message(dir: Direction, body: Vec<u8>, end_of_stream: bool) -> ProcessingResponse {
    let answer = BodyResponse {
        response: Some(CommonResponse {
            body_mutation: Some(BodyMutation {
                mutation: Some(Mutation::StreamedResponse(StreamedBodyResponse {
                    body,
                    end_of_stream,
                    ..StreamedBodyResponse::default()
                })),
            }),
            ..CommonResponse::default()
        }),
    };
    ProcessingResponse {
        response: Some(match dir {
            Direction::Request => Response::RequestBody(answer),
            Direction::Response => Response::ResponseBody(answer),
        }),
        ..ProcessingResponse::default()
    }
}

/// `body` as streamed body messages of at most [`MAX_CHUNK`] bytes, in order; only the last
/// carries `end_of_stream`. An empty body that ends the stream is one empty message, so the
/// end is still said; an empty body that does not is no message.
pub fn body_chunks(dir: Direction, body: &[u8], end_of_stream: bool) -> Vec<ProcessingResponse> {
    if body.is_empty() {
        return if end_of_stream {
            vec![body_message(dir, Vec::new(), true)]
        } else {
            Vec::new()
        };
    }
    let count = body.len().div_ceil(MAX_CHUNK);
    body.chunks(MAX_CHUNK)
        .enumerate()
        .map(|(i, c)| body_message(dir, c.to_vec(), end_of_stream && i + 1 == count))
        .collect()
}

/// A chunk Envoy sent, passed back unchanged: moved when it fits in one message, split
/// otherwise.
pub fn pass_through(dir: Direction, body: Vec<u8>, end_of_stream: bool) -> Vec<ProcessingResponse> {
    if body.len() <= MAX_CHUNK {
        if body.is_empty() && !end_of_stream {
            return Vec::new();
        }
        return vec![body_message(dir, body, end_of_stream)];
    }
    body_chunks(dir, &body, end_of_stream)
}

/// The answer to trailers: unchanged.
pub fn trailers(dir: Direction) -> ProcessingResponse {
    let answer = TrailersResponse::default();
    ProcessingResponse {
        response: Some(match dir {
            Direction::Request => Response::RequestTrailers(answer),
            Direction::Response => Response::ResponseTrailers(answer),
        }),
        ..ProcessingResponse::default()
    }
}

/// A locally made response with `status`, `headers` and `body`.
pub fn immediate(
    status: u16,
    headers: Vec<HeaderValueOption>,
    body: Bytes,
    details: &str,
) -> ProcessingResponse {
    ProcessingResponse {
        response: Some(Response::ImmediateResponse(ImmediateResponse {
            status: Some(HttpStatus {
                code: i32::from(status),
            }),
            headers: Some(HeaderMutation {
                set_headers: headers,
                remove_headers: Vec::new(),
            }),
            body: body.to_vec(),
            details: details.to_owned(),
            ..ImmediateResponse::default()
        })),
        ..ProcessingResponse::default()
    }
}

/// A refusal as the client sees it: the OpenAI-shaped error body with its status and headers
/// (`Retry-After` on a 429, `x-llm-d-request-dropped-reason` where flow control dropped it),
/// the same bytes and headers the standalone gateway answers.
pub fn refusal(err: &ApiError) -> ProcessingResponse {
    let resp = err.clone().into_response();
    let headers: Vec<HeaderValueOption> = resp
        .headers()
        .iter()
        .map(|(k, v)| set_header(k.as_str(), v.as_bytes()))
        .collect();
    immediate(err.status().as_u16(), headers, err.body(), err.code())
}

#[cfg(test)]
mod tests;
