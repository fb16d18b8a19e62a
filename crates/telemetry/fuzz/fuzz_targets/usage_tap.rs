//! The usage tap on any answer, cut into any chunks: it never panics, and the same bytes cut
//! differently give the same usage and the same count of streamed events — the tap reads what
//! the model server said, not how the network delivered it.
//!
//! Input: one byte (bit 0: SSE or JSON; bits 1..4: how many cuts), the cuts (one byte each, a
//! chunk's length), the body.
#![no_main]

use infergate_telemetry::usage::{Usage, UsageTap};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let Some((cuts, body)) = rest.split_at_checked(usize::from(head >> 1) % 16) else {
        return;
    };
    let content_type = if head & 1 == 1 {
        "text/event-stream"
    } else {
        "application/json; charset=utf-8"
    };

    let read = |chunks: &mut dyn Iterator<Item = &[u8]>| -> (Option<Usage>, u64) {
        let mut tap = UsageTap::for_content_type(Some(content_type));
        for c in chunks {
            tap.feed(c);
        }
        let usage = tap.finish();
        (usage, tap.streamed_events())
    };

    let whole = read(&mut std::iter::once(body));
    let mut rest = body;
    let mut chunks = Vec::new();
    for &c in cuts {
        let (chunk, tail) = rest.split_at(usize::from(c).min(rest.len()));
        chunks.push(chunk);
        rest = tail;
    }
    chunks.push(rest);
    assert_eq!(read(&mut chunks.iter().copied()), whole, "cuts {cuts:?}");
    // The extreme: one byte at a time, empty chunks between.
    let mut bytes = body.chunks(1).flat_map(|b| [b, &[][..]]);
    assert_eq!(read(&mut bytes), whole, "byte by byte");
});
