//! `docs/global.md`'s metrics table and the families the global tier registers name the same
//! families with the same types and labels, both ways.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use infergate_telemetry::global::GlobalMetrics;

/// The rows of the page's "## Metrics" section: name → (type, labels).
fn documented() -> BTreeMap<String, (String, Vec<String>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/global.md");
    let text = std::fs::read_to_string(path).unwrap();
    let section = text
        .split("\n## Metrics\n")
        .nth(1)
        .expect("a Metrics section");
    let section = section.split("\n## ").next().unwrap();
    let mut out = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let labels = cells[3]
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_owned())
            .filter(|l| !l.is_empty() && l != "—")
            .collect();
        let name = cells[1].trim_matches('`').to_owned();
        assert!(
            out.insert(name.clone(), (cells[2].to_owned(), labels))
                .is_none(),
            "{name} twice"
        );
    }
    out
}

#[test]
fn every_global_family_has_a_row_and_every_row_a_family() {
    let docs = documented();
    let metrics = GlobalMetrics::new(&["a".to_owned()]);
    let mut problems = Vec::new();
    for f in metrics.catalog() {
        match docs.get(&f.name) {
            None => problems.push(format!("undocumented: {} ({})", f.name, f.kind)),
            Some((kind, _)) if kind != f.kind => {
                problems.push(format!("{}: documented as {kind}, is {}", f.name, f.kind));
            }
            Some(_) => {}
        }
    }
    for name in docs.keys() {
        if !metrics.catalog().iter().any(|f| &f.name == name) {
            problems.push(format!("documented but not exported: {name}"));
        }
    }
    // The labels each exported series carries are the documented ones.
    metrics.sent(0);
    metrics.first_byte(0, std::time::Duration::from_millis(3));
    metrics.answered(200, std::time::Duration::from_millis(4));
    metrics.set_member(
        0,
        infergate_telemetry::global::MemberGauges {
            up: true,
            status_age: Some(std::time::Duration::from_millis(300)),
            ramp_weight: 1.0,
            score: Some([0.9, 1.0, 1.0, 1.0, 0.5]),
        },
    );
    let text = metrics.encode();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap();
        let family = name
            .strip_suffix("_bucket")
            .or_else(|| name.strip_suffix("_sum"))
            .or_else(|| name.strip_suffix("_count"))
            .filter(|base| docs.contains_key(*base))
            .unwrap_or(name);
        let Some((_, labels)) = docs.get(family) else {
            problems.push(format!("series of no documented family: {line}"));
            continue;
        };
        let mut found: Vec<String> = line
            .split_once('{')
            .map(|(_, rest)| rest.split_once('}').unwrap().0)
            .unwrap_or("")
            .split(',')
            .filter(|kv| !kv.is_empty())
            .map(|kv| kv.split('=').next().unwrap().to_owned())
            .filter(|k| k != "le")
            .collect();
        found.sort();
        let mut want = labels.clone();
        want.sort();
        if found != want {
            problems.push(format!("{line}: labels {found:?}, documented {want:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
