//! Request bodies come from the network: any bytes must give a request or a 400 whose body is
//! OpenAI-shaped JSON, never a panic.

#![no_main]

use infergate_simserver::{parse_request, Endpoint};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for endpoint in [Endpoint::ChatCompletions, Endpoint::Completions] {
        match parse_request(endpoint, data) {
            Ok(request) => assert_eq!(request.endpoint, endpoint),
            Err(e) => {
                assert_eq!(e.status().as_u16(), 400, "{e}");
                let body: serde_json::Value =
                    serde_json::from_slice(&e.body()).expect("error bodies are JSON");
                assert_eq!(body["error"]["code"], 400);
            }
        }
    }
});
