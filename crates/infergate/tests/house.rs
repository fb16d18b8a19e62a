//! The house's dependency rules (docs/architecture.md, "Crates and what each may depend on"),
//! checked on every test run: each crate's normal `[dependencies]` on other infergate crates
//! go only to lower layers, the pure crates depend on pure crates only, and no front depends
//! on another front. A new crate must be given its layer here, or this test fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

/// Each crate's layer: a crate may depend (normally) only on crates of a lower layer.
fn layer(name: &str) -> Option<u8> {
    Some(match name {
        // Pure decision code: no I/O, no async runtime, no clock of its own.
        "infergate-config" | "infergate-rng" => 0,
        "infergate-picker" | "infergate-flow" | "infergate-auth" | "infergate-engine" => 1,
        // Vocabulary shared by everything async: the client's error, the metrics.
        "infergate-api-error" | "infergate-telemetry" | "infergate-trace" => 2,
        "infergate-global-picker" => 2,
        // The simulated model server and the virtual-time bench sit on the pure crates.
        "infergate-simserver" => 2,
        // The virtual-time bench runs both tiers' decision code, the global picker included.
        "infergate-bench" => 3,
        "infergate-control" => 3,
        "infergate-pipeline" | "infergate-kubernetes" => 4,
        // The fronts: same layer, so neither may depend on the other.
        "infergate-gateway" | "infergate-extproc" | "infergate-global-gateway" => 5,
        "infergate-live" => 6,
        "infergate-infergate" | "infergate" => 7,
        _ => return None,
    })
}

const PURE: [&str; 7] = [
    "infergate-config",
    "infergate-rng",
    "infergate-picker",
    "infergate-flow",
    "infergate-auth",
    "infergate-engine",
    "infergate-global-picker",
];

/// Crates that only tests may use; they must not depend on what depends on them.
const TEST_ONLY: &str = "infergate-test-support";

/// `name` and the infergate crates of `[dependencies]` of one Cargo.toml.
fn read_manifest(text: &str) -> (String, Vec<String>) {
    let mut name = String::new();
    let mut deps = Vec::new();
    let mut table = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            table = line.trim_matches(['[', ']']).to_owned();
            continue;
        }
        if table == "package" {
            if let Some(v) = line.strip_prefix("name = ") {
                name = v.trim_matches('"').to_owned();
            }
        }
        if table == "dependencies" {
            let key = line.split(['=', '.', ' ']).next().unwrap_or_default();
            if key.starts_with("infergate-") {
                deps.push(key.to_owned());
            }
        }
    }
    (name, deps)
}

fn manifests() -> BTreeMap<String, Vec<String>> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let (name, deps) = read_manifest(&text);
        out.insert(name, deps);
    }
    out
}

#[test]
fn every_crate_depends_only_on_lower_layers() {
    let all = manifests();
    assert!(all.len() >= 15, "found only {:?}", all.keys());
    let mut broken = Vec::new();
    for (name, deps) in &all {
        if name == TEST_ONLY {
            for d in deps {
                if layer(d).is_none_or(|l| l >= 3) {
                    broken.push(format!(
                        "{name} → {d}: test support cannot depend on what uses it"
                    ));
                }
            }
            continue;
        }
        let Some(own) = layer(name) else {
            broken.push(format!(
                "{name} has no layer: give it one in tests/house.rs"
            ));
            continue;
        };
        for d in deps {
            match layer(d) {
                Some(l) if l < own => {}
                Some(_) => broken.push(format!("{name} → {d}: not a lower layer")),
                None => broken.push(format!("{name} → {d}: unknown crate")),
            }
            if PURE.contains(&name.as_str()) && !PURE.contains(&d.as_str()) {
                broken.push(format!(
                    "{name} → {d}: a pure crate depends on pure crates only"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_manifest_reader_sees_dependencies_and_only_them() {
    let (name, deps) = read_manifest(
        "[package]\nname = \"infergate-x\"\n[dependencies]\ninfergate-config.workspace = true\ninfergate-picker = { path = \"p\" }\nserde = \"1\"\n[dev-dependencies]\ninfergate-gateway.workspace = true\n",
    );
    assert_eq!(name, "infergate-x");
    assert_eq!(deps, ["infergate-config", "infergate-picker"]);
}

#[test]
fn the_fronts_do_not_depend_on_each_other() {
    let all = manifests();
    for (front, other) in [
        ("infergate-gateway", "infergate-extproc"),
        ("infergate-extproc", "infergate-gateway"),
    ] {
        let deps = &all[front];
        assert!(
            !deps.iter().any(|d| d == other),
            "{front} depends on {other}"
        );
    }
}

#[test]
fn every_path_the_architecture_page_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let page = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let named: Vec<&str> = page
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.starts_with("crates/"))
        .collect();
    assert!(
        named.len() > 30,
        "the page names only {} paths",
        named.len()
    );
    let missing: Vec<&&str> = named.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names missing paths: {missing:?}"
    );
}
