//! A JWKS document, as fetched from the issuer's URL: any bytes give a key set or an error,
//! never a panic; a set is bounded and never empty; and any token checked against any set it
//! yields (keys of any shape `ring` is then handed) is refused or accepted without a panic.
#![no_main]

mod keys;

use infergate_auth::jws::{self, Alg};
use infergate_auth::{KeySet, Refusal, MAX_KEYS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(set) = KeySet::parse(data) else {
        return;
    };
    assert!(!set.keys().is_empty());
    assert!(set.keys().len() + set.skipped().len() <= MAX_KEYS);
    // Parsing is a function of the bytes.
    assert_eq!(KeySet::parse(data).as_ref(), Ok(&set));

    // A token of each algorithm, with and without a `kid` the set may hold, with a signature
    // of the right length for its algorithm.
    let kids = set.keys().iter().filter_map(|k| k.kid()).take(2);
    let kids: Vec<Option<&str>> = [None, Some("ed")]
        .into_iter()
        .chain(kids.map(Some))
        .collect();
    for kid in kids {
        for (alg, sig_len) in [(Alg::EdDsa, 64), (Alg::Es256, 64), (Alg::Rs256, 256)] {
            let mut header = serde_json::json!({"alg": alg.as_str()});
            if let Some(kid) = kid {
                header["kid"] = kid.into();
            }
            let header = keys::b64(header.to_string().as_bytes());
            let token = format!(
                "{header}.{}.{}",
                keys::b64(b"{}"),
                keys::b64(&vec![1; sig_len])
            );
            let parsed = match jws::parse(&token) {
                Ok(parsed) => parsed,
                // A long enough `kid` from the document makes any token too long.
                Err(Refusal::TooLarge(_)) => continue,
                Err(r) => panic!("the probe token is well formed: {r:?}"),
            };
            let _ = set.verify(&parsed);
        }
        // A real signature by the fixture's Ed25519 key, which the set may also hold.
        let header = match kid {
            Some(kid) => serde_json::json!({"alg": "EdDSA", "kid": kid}),
            None => serde_json::json!({"alg": "EdDSA"}),
        };
        let token = keys::sign(header.to_string().as_bytes(), b"{}");
        // (Too long, as above, with a long enough `kid`.)
        if let Ok(parsed) = jws::parse(&token) {
            let _ = set.verify(&parsed);
        }
    }
});
