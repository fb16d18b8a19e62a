//! The answer renamed back: JSON and SSE, any chunking, byte-exact elsewhere.

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::HeaderMap;
use infergate_picker::SplitMix64;
use proptest::prelude::*;

use crate::rewrite::restore::{Restore, RestoreBody};
use crate::BoxError;

const SSE: Option<&str> = Some("text/event-stream; charset=utf-8");
const JSON: Option<&str> = Some("application/json");

/// Feeds `input` in chunks of the sizes in `cuts` (cycled), then finishes.
fn run(input: &[u8], cuts: &[usize], content_type: Option<&str>) -> Vec<u8> {
    let mut r = Restore::new(content_type, "llama").unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    for size in cuts.iter().cycle() {
        if at >= input.len() {
            break;
        }
        let end = at.saturating_add(*size.max(&1)).min(input.len());
        out.extend_from_slice(&r.feed(&Bytes::copy_from_slice(&input[at..end])));
        at = end;
    }
    out.extend_from_slice(&r.finish());
    out
}

fn whole(input: &str, content_type: Option<&str>) -> String {
    String::from_utf8(run(input.as_bytes(), &[usize::MAX], content_type)).unwrap()
}

#[test]
fn a_json_answer_names_the_client_model_at_the_top_level_only() {
    let body = r#"{"id":"cmpl-1","object":"chat.completion","model" : "llama-canary","choices":[{"message":{"content":"{\"model\": \"llama-canary\"}","tool_calls":[{"model":"llama-canary"}]}}],"usage":{"prompt_tokens":3}}"#;
    let want = body.replacen(r#""llama-canary""#, r#""llama""#, 1);
    assert_eq!(whole(body, JSON), want);
    // At every single cut.
    for cut in 0..=body.len() {
        let got = run(body.as_bytes(), &[cut.max(1), usize::MAX], JSON);
        assert_eq!(String::from_utf8(got).unwrap(), want, "cut at {cut}");
    }
}

#[test]
fn what_is_not_a_top_level_model_string_passes_untouched() {
    for body in [
        r#"{"model":null,"x":1}"#,
        r#"{"model":{"name":"x"},"y":"model"}"#,
        r#"[{"model":"x"}]"#,
        r#""model""#,
        r#"{"meta":{"model":"x"},"models":"x","mode":"x","Model":"x"}"#,
        r#"{"a":"b\"model\":\"x","c":["model","x"]}"#,
        r#"{"error":{"message":"The model `llama-canary` does not exist."}}"#,
        "not json at all, model: x",
    ] {
        assert_eq!(whole(body, JSON), body, "{body}");
    }
    // Types that are neither JSON nor SSE get no renamer.
    assert!(Restore::new(Some("text/plain"), "llama").is_none());
    assert!(Restore::new(None, "llama").is_none());
    assert!(Restore::new(Some("Application/JSON"), "llama").is_some());
}

#[test]
fn escapes_in_either_name_are_read_and_written_as_json() {
    let body = r#"{"model":"ll\"a\\ma\u002dx","n":1}"#;
    assert_eq!(whole(body, JSON), r#"{"model":"llama","n":1}"#);
    let mut r = Restore::new(JSON, "a\"b").unwrap();
    let out = r.feed(&Bytes::from_static(br#"{"model":"x"}"#));
    assert_eq!(&out[..], br#"{"model":"a\"b"}"#.as_slice());
}

#[test]
fn an_overlong_or_unclosed_value_is_given_back_as_it_came() {
    let long = format!(r#"{{"model":"{}","n":1}}"#, "x".repeat(10_000));
    assert_eq!(whole(&long, JSON), long);
    let cut = r#"{"id":1,"model":"llama-can"#;
    assert_eq!(whole(cut, JSON), cut);
    // In SSE a line cannot end inside a string: the line is given back, the next event renamed.
    let broken = "data: {\"model\":\"llama-\ncanary\"}\n\ndata: {\"model\":\"x\"}\n\n";
    assert_eq!(
        whole(broken, SSE),
        "data: {\"model\":\"llama-\ncanary\"}\n\ndata: {\"model\":\"llama\"}\n\n"
    );
}

#[test]
fn every_sse_event_is_renamed_and_everything_else_kept() {
    let stream = concat!(
        ": keep-alive\r\n",
        "event: message\r\n",
        "id: 7\r\n",
        "data: {\"id\":\"c\",\"model\":\"llama-canary\",\"choices\":[{\"delta\":{\"content\":\"model\"}}]}\r\n",
        "\r\n",
        "data:{\"model\":\"llama-canary\"}\r\r",
        "data: {\"id\":\"c\",\r\n",
        "data:  \"model\": \"llama-canary\"}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1},\"model\":\"llama-canary\"}\n\n",
        "data: [DONE]\n\n",
    );
    let want = stream.replace("\"llama-canary\"", "\"llama\"");
    assert_eq!(whole(stream, SSE), want);
    for cut in 1..stream.len() {
        let got = run(stream.as_bytes(), &[cut, usize::MAX], SSE);
        assert_eq!(String::from_utf8(got).unwrap(), want, "cut at {cut}");
    }
    // A `model` member after the event's object closed, or in a line that is not data, stays.
    let other = "event: {\"model\":\"x\"}\n: {\"model\":\"x\"}\ndata: {}{\"model\":\"x\"}\n\n";
    assert_eq!(whole(other, SSE), other);
}

/// Text for a JSON string's inside: escapes, braces and the word `model` included.
fn text(rng: &mut SplitMix64) -> String {
    const PIECES: [&str; 10] = [
        "hi", " ", "\\\"", "\\\\", "{", "}", "model", ":", "é", "\\n",
    ];
    (0..rng.below(6))
        .map(|_| PIECES[rng.below(PIECES.len())])
        .collect()
}

/// The served model's name as the server might write it.
fn served(rng: &mut SplitMix64) -> &'static str {
    [
        "\"llama-canary\"",
        "\"llama-v2\"",
        "\"ll\\u0061ma\"",
        "\"x\\\"y\"",
        "\"\"",
    ][rng.below(5)]
}

/// A chunk event's JSON with `\0` where the top-level model value goes; `sep` is put between
/// members sometimes (to split the object over several `data:` lines).
fn event_json(rng: &mut SplitMix64, sep: &str) -> String {
    let ws = |rng: &mut SplitMix64| if rng.below(3) == 0 { " " } else { "" };
    let mut members = vec![
        format!("\"id\":\"chatcmpl-{}\"", rng.below(1000)),
        "\"object\":\"chat.completion.chunk\"".to_owned(),
        format!("\"created\":{}", rng.below(1 << 30)),
        format!(
            "\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}},\"model\":\"inner\"}}]",
            text(rng)
        ),
        [
            "\"usage\":null",
            "\"usage\":{\"prompt_tokens\":5,\"model\":\"inner\"}",
        ][rng.below(2)]
        .to_owned(),
    ];
    let at = rng.below(members.len() + 1);
    members.insert(at, format!("\"model\"{}:{}\0", ws(rng), ws(rng)));
    let mut out = String::from("{");
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
            if rng.below(4) == 0 {
                out.push_str(sep);
            }
        }
        out.push_str(ws(rng));
        out.push_str(m);
    }
    out.push('}');
    out
}

/// A random SSE stream and what the client must receive.
fn sse_stream(seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut rng = SplitMix64::new(seed);
    let nl = ["\n", "\r\n", "\r"][rng.below(3)];
    let mut input = String::new();
    let mut want = String::new();
    for _ in 0..1 + rng.below(8) {
        let event = match rng.below(6) {
            0 => format!(": keep-alive{nl}"),
            1 => format!("event: message{nl}data: [DONE]{nl}"),
            2 => format!("data:{}{nl}", event_json(&mut rng, &format!("{nl}data:"))),
            _ => format!("data: {}{nl}", event_json(&mut rng, &format!("{nl}data: "))),
        };
        let name = served(&mut rng);
        input.push_str(&event.replace('\0', name));
        want.push_str(&event.replace('\0', "\"llama\""));
        input.push_str(nl);
        want.push_str(nl);
    }
    (input.into_bytes(), want.into_bytes())
}

proptest! {
    #[test]
    fn any_chunking_of_an_sse_stream_renames_identically(
        seed in any::<u64>(),
        cuts in prop::collection::vec(1usize..48, 1..64),
    ) {
        let (input, want) = sse_stream(seed);
        let got = run(&input, &cuts, SSE);
        prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
    }

    #[test]
    fn any_chunking_of_a_json_answer_renames_identically(
        seed in any::<u64>(),
        cuts in prop::collection::vec(1usize..32, 1..64),
    ) {
        let mut rng = SplitMix64::new(seed);
        let doc = event_json(&mut rng, "\n");
        let input = doc.replace('\0', served(&mut rng));
        let want = doc.replace('\0', "\"llama\"");
        let got = run(input.as_bytes(), &cuts, JSON);
        prop_assert_eq!(String::from_utf8_lossy(&got), want);
    }
}

#[tokio::test]
async fn the_body_renames_as_frames_pass_and_sends_held_bytes_before_trailers() {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let frames: Vec<Result<Frame<Bytes>, BoxError>> = vec![
        Ok(Frame::data(Bytes::from_static(b"data: {\"model\":\"lla"))),
        Ok(Frame::data(Bytes::from_static(
            b"ma-canary\"}\n\ndata: {\"mo",
        ))),
        Ok(Frame::data(Bytes::from_static(b"del\":\"llama-can"))),
        Ok(Frame::trailers(trailers.clone())),
    ];
    let body = RestoreBody::new(
        StreamBody::new(futures_util::stream::iter(frames)),
        Restore::new(SSE, "llama").unwrap(),
    );
    let collected = body.collect().await.unwrap();
    assert_eq!(collected.trailers(), Some(&trailers));
    assert_eq!(
        &collected.to_bytes()[..],
        b"data: {\"model\":\"llama\"}\n\ndata: {\"model\":\"llama-can".as_slice()
    );
}

#[tokio::test]
async fn an_upstream_error_ends_the_renamed_body_with_that_error() {
    let frames: Vec<Result<Frame<Bytes>, BoxError>> = vec![
        Ok(Frame::data(Bytes::from_static(b"{\"model\":\"x\","))),
        Err("reset".into()),
    ];
    let mut body = RestoreBody::new(
        StreamBody::new(futures_util::stream::iter(frames)),
        Restore::new(JSON, "llama").unwrap(),
    );
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&first[..], b"{\"model\":\"llama\",".as_slice());
    let err = body.frame().await.unwrap().unwrap_err();
    assert_eq!(err.to_string(), "reset");
}
