//! Redis replies (RESP2), as the shared rate-limit store reads them off its connection: any
//! bytes give a reply, "need more", or an error — never a panic — and the answer is the one a
//! connection reading the same bytes in pieces would reach.
#![no_main]

use infergate_control::limits::resp::{parse, Value, MAX_ARRAY, MAX_BULK, MAX_DEPTH};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(Some((value, used))) = parse(data) else {
        return;
    };
    assert!(0 < used && used <= data.len());
    within_bounds(&value, 0);
    // A reply is decided by its own bytes: what follows it changes nothing...
    assert_eq!(parse(&data[..used]), Ok(Some((value.clone(), used))));
    // ...and it is not decided before its last byte arrived, so a connection that reads it in
    // pieces keeps reading (an error or a shorter reply here would drop or misread it).
    let cuts = (0..used).step_by(1.max(used / 64));
    for cut in cuts.chain([used - 1]) {
        assert_eq!(
            parse(&data[..cut]),
            Ok(None),
            "{used}-byte reply decided at {cut}"
        );
    }
    // The next reply starts where this one ended.
    let _ = parse(&data[used..]);
});

fn within_bounds(v: &Value, depth: usize) {
    match v {
        Value::Bulk(Some(b)) => assert!(b.len() <= MAX_BULK),
        Value::Array(Some(items)) => {
            assert!(items.len() <= MAX_ARRAY && depth <= MAX_DEPTH);
            for i in items {
                within_bounds(i, depth + 1);
            }
        }
        _ => {}
    }
}
