//! A pick that explains itself picks exactly what a plain one does, and says why: each
//! candidate's total is the sum of its scorers' parts, and the endpoints the filters removed are
//! named with the filter (infergate's stale filter here; upstream's default profile has none).
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

mod common;

use common::*;
use infergate_picker::{Picker, Policy};

#[test]
fn an_explained_pick_is_a_plain_pick_with_its_reasons() {
    let mut p = pool(4);
    scrape(&mut p, 0, ms(0), 3, 0.40);
    scrape(&mut p, 1, ms(0), 0, 0.10);
    scrape(&mut p, 2, ms(0), 1, 0.20);
    // Endpoint 3 was never scraped: the stale filter removes it.
    for policy in ["infergate", "gie-default", "round-robin"] {
        let mut plain = Picker::new(Policy::named(policy).unwrap(), 7);
        let mut explained = Picker::new(Policy::named(policy).unwrap(), 7);
        for i in 0..20 {
            let now = ms(5);
            let req = request(&unique_prompt(i, 300));
            let a = plain.pick(&p, &req, now).unwrap();
            let b = explained.pick_explained(&p, &req, now).unwrap();
            assert_eq!(a.primary, b.primary, "{policy}");
            assert_eq!(a.fallbacks, b.fallbacks, "{policy}");
            assert!(a.explanation.is_none());
            let e = b.explanation.expect("an explanation");
            if policy == "round-robin" {
                assert!(e.scorers.is_empty(), "a baseline has no scorers");
                assert_eq!(e.scored.len(), 4);
                continue;
            }
            assert!(!e.scorers.is_empty(), "{policy}");
            if policy == "infergate" {
                assert_eq!(e.removed, [(id(3), "stale-metrics-filter")]);
                assert_eq!(e.scored.len(), 3);
            } else {
                // Upstream's default profile has no stale filter: the unscraped pod is scored.
                assert!(e.removed.is_empty(), "{policy}: {e:?}");
                assert_eq!(e.scored.len(), 4, "{policy}");
            }
            for s in &e.scored {
                assert_eq!(s.parts.len(), e.scorers.len());
                let sum: f64 = s.parts.iter().sum();
                assert!((sum - s.total).abs() < 1e-12, "{policy}: {s:?}");
            }
            // The primary has the highest total.
            let best = e
                .scored
                .iter()
                .max_by(|x, y| x.total.total_cmp(&y.total))
                .unwrap();
            let primary = e.scored.iter().find(|s| s.id == b.primary).unwrap();
            assert_eq!(primary.total, best.total, "{policy}: {e:?}");
        }
    }
}
