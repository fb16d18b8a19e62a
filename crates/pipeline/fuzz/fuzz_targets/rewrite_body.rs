//! The body rewritten for upstream (`set_model` for a canary, `set_priority` for a forwarded
//! band) keeps its documented byte discipline on any body the parser accepts: the member's
//! value is replaced (or the member inserted first), every other byte is kept, and a re-parse
//! of the output names the new model (or the same one) and finds the same prompt bytes.
//!
//! Input: one byte, the target's length; the target (lossy UTF-8); two bytes of priority; the
//! body.
#![no_main]

use infergate_pipeline::parse::{parse, ParsedRequest};
use infergate_pipeline::rewrite::{set_model, set_priority};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The `x-gateway-model-name` every input comes with.
const HEADER: &str = "from-header";

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let Some((target, rest)) = rest.split_at_checked(usize::from(n % 32)) else {
        return;
    };
    let Some((priority, body)) = rest.split_at_checked(2) else {
        return;
    };
    let target = String::from_utf8_lossy(target);
    let priority = i32::from(i16::from_le_bytes([priority[0], priority[1]]));
    // The header names a model, so a body without one is accepted too (and gets one inserted).
    let Ok(before) = parse(body, Some(HEADER)) else {
        return;
    };

    if !target.is_empty() {
        let mut p = before.clone();
        let out = set_model(body, &mut p, &target).expect("a parsed body takes a model");
        assert_eq!(p.model, target);
        let token = serde_json::to_string(target.as_ref()).expect("a string serializes");
        kept_but_member(body, &out, "model", &token);
        reparsed(&before, &p, body, &out);
    }

    let mut p = before.clone();
    match set_priority(body, &mut p, priority) {
        Ok(out) => {
            assert_eq!(p.model, before.model);
            kept_but_member(body, &out, "priority", &priority.to_string());
            reparsed(&before, &p, body, &out);
        }
        // The bodies the parser takes and this refuses, both 400: a repeated `priority`
        // (which of the two counts would be a guess), and a `priority` the parser skipped
        // unchecked that is not JSON at all (`lenient`: bytes that are not UTF-8, say).
        Err(e) => {
            assert_eq!(e.status().as_u16(), 400);
            let strict = serde_json::from_slice::<Value>(body).is_ok();
            assert!(!strict || e.message().contains("duplicate field"), "{e:?}");
        }
    }
});

/// `out` is `body` with the top-level member `name` set to `token`: either an old value
/// replaced in place, or `"name":token` inserted right after the opening brace; nothing else
/// differs, and as JSON the two are equal but for that member.
fn kept_but_member(body: &[u8], out: &[u8], name: &str, token: &str) {
    let common_prefix = body.iter().zip(out).take_while(|(a, b)| a == b).count();
    let common_suffix = body
        .iter()
        .rev()
        .zip(out.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let inserted = [
        format!("\"{name}\":{token},"),
        format!("\"{name}\":{token}"),
    ];
    let fits = |at: usize, new: &[u8]| -> Option<usize> {
        // `body[at..old_end]` is what `new` took the place of.
        let old_end = (at + body.len()).checked_sub(out.len() - new.len().min(out.len()))?;
        (out.get(at..at + new.len()) == Some(new)
            && old_end >= at
            && body.len() - old_end <= common_suffix)
            .then_some(old_end)
    };
    let found = (0..=common_prefix.min(out.len())).find_map(|at| {
        if let Some(end) = fits(at, token.as_bytes()) {
            // A replaced value is one whole JSON value.
            let old = &body[at..end];
            if end > at && (serde_json::from_slice::<Value>(old).is_ok() || lenient(old)) {
                return Some(());
            }
        }
        inserted
            .iter()
            .any(|i| fits(at, i.as_bytes()) == Some(at) && body[..at].ends_with(b"{"))
            .then_some(())
    });
    assert!(
        found.is_some(),
        "{name} not set by replacing one value:\n{}\n{}",
        String::from_utf8_lossy(body),
        String::from_utf8_lossy(out)
    );

    // A body with a skipped member that is not strict JSON (see `lenient`) stays so.
    let (was, now) = (serde_json::from_slice(body), serde_json::from_slice(out));
    let (Ok(mut was), Ok(mut now)) = (was, now) else {
        assert!(
            serde_json::from_slice::<Value>(body).is_err(),
            "the rewrite broke the JSON"
        );
        return;
    };
    let (Some(was), Some(now)) = (
        Value::as_object_mut(&mut was),
        Value::as_object_mut(&mut now),
    ) else {
        panic!("a parsed body is an object, and stays one");
    };
    let want: Value = serde_json::from_str(token).expect("the token is JSON");
    assert_eq!(now.remove(name), Some(want));
    was.remove(name);
    assert_eq!(was, now);
}

/// The output parses again to the request as rewritten, prompt bytes included.
fn reparsed(before: &ParsedRequest, after: &ParsedRequest, body: &[u8], out: &[u8]) {
    // With the header the request came with: a body that named no model still names none
    // after `set_priority`, and one given a model by `set_model` names it over the header.
    let again = parse(out, Some(HEADER)).expect("a rewritten body parses");
    assert_eq!(again.model, after.model);
    assert_eq!(again.stream, before.stream);
    assert_eq!(again.max_tokens, before.max_tokens);
    // The moved range finds the bytes a fresh parse finds, and they are the original prompt.
    assert_eq!(after.prompt.get(out), again.prompt.get(out));
    assert_eq!(after.prompt.get(out), before.prompt.get(body));
}

/// Whether these bytes hold what serde skips unchecked in a member it does not read (see
/// `request_body`): bytes that are not UTF-8, `\u` escapes, or a number JSON's grammar allows
/// but `serde_json::Value` refuses for its range (`93e8471682`: an infinite float).
fn lenient(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_err()
        || bytes.windows(2).any(|w| w == b"\\u")
        || json_number(bytes)
}

/// Whether `bytes` are one number by JSON's grammar (RFC 8259 §6), whatever its magnitude.
fn json_number(bytes: &[u8]) -> bool {
    let digits = |b: &[u8]| b.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut rest = bytes.strip_prefix(b"-").unwrap_or(bytes);
    match rest.first() {
        Some(b'0') => rest = &rest[1..],
        Some(b'1'..=b'9') => rest = &rest[digits(rest)..],
        _ => return false,
    }
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = digits(frac);
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    if let Some(exp) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
        let exp = exp
            .strip_prefix(b"+")
            .or_else(|| exp.strip_prefix(b"-"))
            .unwrap_or(exp);
        let n = digits(exp);
        if n == 0 {
            return false;
        }
        rest = &exp[n..];
    }
    rest.is_empty()
}
