//! What keeping a stream resumable costs per event, for counting with callgrind: the same
//! vLLM-shaped streams are passed through with nothing kept (`pass`), through the event framer
//! and the transcript as the HTTP front does for every resumable stream (`keep`), and, for
//! `resume`, then turned into their continuation requests as at a failure. Each stream ends
//! with `[DONE]`, and is asked whether it ended, as the front asks. The difference in
//! instructions between two modes, over the events, is the cost per event.
//!
//! ```text
//! cargo build --release -p infergate-pipeline --example resume_cost
//! for mode in pass keep resume; do   # a second argument sets the tokens per stream (256)
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/resume_cost $mode 2>&1 | grep Collected
//! done
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use infergate_pipeline::resume::{Api, EventFramer, Transcript};

/// Streams, and the tokens of each unless the second argument says.
const STREAMS: usize = 100;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "keep".into());
    let tokens: usize = std::env::args()
        .nth(2)
        .map_or(256, |t| t.parse().expect("a number of tokens"));
    // One stream's frames, one event each, as vLLM writes them.
    let frames: Vec<Bytes> = (0..tokens)
        .map(|i| {
            Bytes::from(format!(
                "data: {{\"id\":\"chatcmpl-0123456789abcdef\",\"object\":\"chat.completion.chunk\",\"created\":1796422332,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" w{i}\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
            ))
        })
        .chain(std::iter::once(Bytes::from_static(b"data: [DONE]\n\n")))
        .collect();
    let request = br#"{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"user","content":"Tell me about routers."}],"stream":true,"max_tokens":512}"#;
    let mut passed = 0usize;
    for _ in 0..STREAMS {
        let mut framer = EventFramer::default();
        let mut transcript = Transcript::new(Api::Chat);
        for frame in &frames {
            let frame = frame.clone();
            match mode.as_str() {
                "pass" => passed += std::hint::black_box(frame).len(),
                _ => {
                    let whole = framer.push(frame);
                    transcript.record(&whole);
                    passed += whole.len();
                }
            }
        }
        // As the HTTP front asks when the upstream's body ends.
        if mode != "pass" {
            assert!(transcript.ended());
        }
        if mode == "resume" {
            let c = transcript.continuation(request).expect("resumable");
            std::hint::black_box(c);
        }
        std::hint::black_box(&transcript);
    }
    println!(
        "{mode}: {STREAMS} streams of {tokens} events, {passed} bytes, {} events",
        STREAMS * tokens
    );
}
