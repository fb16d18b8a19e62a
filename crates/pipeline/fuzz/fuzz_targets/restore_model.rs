//! The answer renamed back (`rewrite::restore::Restore`), on any bytes split into any chunks:
//! the output does not depend on where the chunks were cut; every byte but a renamed `model`
//! value passes through unchanged (a held value is either replaced whole by the client's name
//! or given back as it came); and on a plain JSON object (and the same object as an SSE event)
//! exactly the top-level `model` string is renamed.
//!
//! Input: one byte (bit 0: SSE or JSON; the rest: the model's length), the model (lossy
//! UTF-8), one byte (how many cuts), the cuts (one byte each, a chunk's length), the body.
#![no_main]

use bytes::Bytes;
use infergate_pipeline::rewrite::restore::Restore;
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let Some((model, rest)) = rest.split_at_checked(usize::from(head >> 1) % 24) else {
        return;
    };
    let Some((&cuts, rest)) = rest.split_first() else {
        return;
    };
    let Some((cuts, body)) = rest.split_at_checked(usize::from(cuts % 8)) else {
        return;
    };
    let model = String::from_utf8_lossy(model);
    let sse = head & 1 == 1;
    let content_type = if sse {
        "text/event-stream; charset=utf-8"
    } else {
        "application/json"
    };
    let new = || Restore::new(Some(content_type), &model).expect("SSE and JSON are renamed");
    let token = serde_json::to_string(model.as_ref()).expect("a string serializes");

    let whole = {
        let mut r = new();
        let mut out = r.feed(&Bytes::copy_from_slice(body)).to_vec();
        out.extend_from_slice(&r.finish());
        out
    };

    // Cut anywhere, the same bytes come out.
    let mut r = new();
    let mut split = Vec::new();
    let mut rest = body;
    for &c in cuts {
        let (chunk, tail) = rest.split_at(usize::from(c).min(rest.len()));
        split.extend_from_slice(&r.feed(&Bytes::copy_from_slice(chunk)));
        rest = tail;
    }
    split.extend_from_slice(&r.feed(&Bytes::copy_from_slice(rest)));
    split.extend_from_slice(&r.finish());
    assert_eq!(split, whole, "chunk cuts {cuts:?} changed the output");

    // One byte at a time, what each byte does can be seen: passed on, held back (from an
    // opening quote), or, when a held run ends, the run replaced whole by the name at its
    // closing quote or given back unchanged.
    let mut r = new();
    let mut rebuilt = Vec::new();
    let mut held: Option<usize> = None;
    let mut renamed = 0usize;
    for (i, &b) in body.iter().enumerate() {
        let out = r.feed(&Bytes::copy_from_slice(&[b]));
        match held {
            None if out.is_empty() => {
                assert_eq!(b, b'"', "only a string is held back");
                held = Some(i);
            }
            None => assert_eq!(&out[..], &[b], "byte {i} changed"),
            Some(_) if out.is_empty() => {}
            Some(from) => {
                let run = &body[from..=i];
                if out[..] != *run {
                    assert_eq!(
                        &out[..],
                        token.as_bytes(),
                        "byte {i} ended a held run badly"
                    );
                    assert!(b == b'"' && i > from, "a renamed value is a whole string");
                    renamed += 1;
                }
                held = None;
            }
        }
        rebuilt.extend_from_slice(&out);
    }
    let tail = r.finish();
    assert_eq!(&tail[..], held.map_or(&[][..], |from| &body[from..]));
    rebuilt.extend_from_slice(&tail);
    assert_eq!(rebuilt, whole, "byte by byte differs from all at once");
    if !sse {
        assert!(renamed <= 1, "one JSON document has one top-level model");
    }

    if !sse {
        plain_object(body, &whole, &model, &token);
    }
});

#[derive(Deserialize)]
struct ModelField<'a> {
    #[serde(borrow)]
    model: Option<&'a RawValue>,
}

/// A JSON object with no escapes and at most one top-level `model`: exactly that member is
/// renamed when it is a string; as an SSE event (when it fits on one line), the same.
fn plain_object(body: &[u8], out: &[u8], model: &str, token: &str) {
    if body.contains(&b'\\') || body.len() > 2048 {
        // Escaped keys are not compared (servers do not escape `model`), and a value longer
        // than the hold bound is not a model name; neither is this target's to judge.
        return;
    }
    let Ok(Value::Object(mut was)) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    // A repeated `model` is refused here, so the one in `was` is the one on the wire.
    let Ok(field) = serde_json::from_slice::<ModelField<'_>>(body) else {
        return;
    };
    let string = field.model.is_some_and(|m| m.get().starts_with('"'));
    if !string {
        assert_eq!(out, body, "no model string, nothing renamed");
    } else {
        let Ok(Value::Object(mut now)) = serde_json::from_slice::<Value>(out) else {
            panic!("renamed JSON is not JSON: {}", String::from_utf8_lossy(out));
        };
        assert_eq!(now.remove("model"), Some(Value::String(model.to_owned())));
        was.remove("model");
        assert_eq!(now, was);
    }

    if body.contains(&b'\n') || body.contains(&b'\r') {
        return;
    }
    let mut r = Restore::new(Some("text/event-stream"), model).expect("SSE is renamed");
    let event = [b"data: ", body, b"\n\n"].concat();
    let mut got = r.feed(&Bytes::from(event)).to_vec();
    got.extend_from_slice(&r.finish());
    assert_eq!(got, [b"data: ", out, b"\n\n"].concat(), "token {token}");
}
