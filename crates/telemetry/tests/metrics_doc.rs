//! `docs/metrics.md` and the families the gateway registers name the same families with the
//! same types, both ways: a family added without a row fails, and so does a row whose family
//! is gone. (That the documented labels are the exported ones is checked against a running
//! gateway in `crates/infergate/tests/metrics_doc.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use infergate_telemetry::Metrics;

/// The documented families: name → (type, labels), from the tables' rows.
fn documented() -> BTreeMap<String, (String, Vec<String>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_owned();
        let labels = cells[3]
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_owned())
            .filter(|l| !l.is_empty() && l != "—")
            .collect();
        assert!(
            out.insert(name.clone(), (cells[2].to_owned(), labels))
                .is_none(),
            "{name} has two rows"
        );
    }
    out
}

#[test]
fn every_registered_family_has_a_row_and_every_row_a_family() {
    let docs = documented();
    let metrics = Metrics::new();
    let mut problems = Vec::new();
    for f in metrics.catalog() {
        match docs.get(&f.name) {
            None => problems.push(format!(
                "undocumented: | `{}` | {} | … | {} |",
                f.name, f.kind, f.help
            )),
            Some((kind, _)) if kind != f.kind => {
                problems.push(format!("{}: documented as {kind}, is {}", f.name, f.kind))
            }
            Some(_) => {}
        }
    }
    for name in docs.keys() {
        if !metrics.catalog().iter().any(|f| &f.name == name) {
            problems.push(format!("documented but not exported: {name}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
