//! Dynamic metadata both ways: the destination infergate emits under `envoy.lb`, and what
//! Envoy forwards on each message — the subset hint under `envoy.lb.subset_hint` and the
//! endpoint that served under `envoy.lb`.

use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{Struct, Value};
use infergate_pipeline::pick::{self, Why};

/// The destination key: the header and the `envoy.lb` metadata field naming the endpoints
/// (`ip:port`, primary first, comma-separated).
pub const DESTINATION: &str = "x-gateway-destination-endpoint";

/// Namespace of the destination (from infergate) and the served endpoint (from Envoy).
pub const LB_NAMESPACE: &str = "envoy.lb";
/// Namespace of the subset hint.
pub const SUBSET_NAMESPACE: &str = "envoy.lb.subset_hint";
/// Key of the subset hint: the endpoints infergate must choose from.
pub const SUBSET: &str = "x-gateway-destination-endpoint-subset";
/// Key of the endpoint that actually served, after Envoy's retries (Envoy's override-host
/// policy writes it through its `selected_host_key`).
pub const SERVED: &str = "x-gateway-destination-endpoint-served";

fn string(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.to_owned())),
    }
}

/// `{"envoy.lb": {"x-gateway-destination-endpoint": destination}}`: the same string as the
/// destination header, so the two never differ. With `why` (`--emit-endpoint-scores`), beside
/// it llm-d's `x-gateway-destination-endpoint-scores` (a Struct of each scored endpoint's
/// total, keyed `ip:port`) and `x-infergate-pick` (the whole explanation, a JSON string).
pub fn destination(destination: &str, why: Option<&Why>) -> Struct {
    let mut inner = Struct {
        fields: [(DESTINATION.to_owned(), string(destination))].into(),
    };
    if let Some(why) = why {
        let scores = why
            .scores
            .iter()
            .map(|(address, total)| {
                let kind = match total.as_f64() {
                    Some(x) => Kind::NumberValue(x),
                    None => Kind::NullValue(0),
                };
                (address.clone(), Value { kind: Some(kind) })
            })
            .collect();
        inner.fields.insert(
            pick::ENDPOINT_SCORES.to_owned(),
            Value {
                kind: Some(Kind::StructValue(Struct { fields: scores })),
            },
        );
        inner
            .fields
            .insert(pick::PICK_EXPLANATION.to_owned(), string(&why.explanation));
    }
    Struct {
        fields: [(
            LB_NAMESPACE.to_owned(),
            Value {
                kind: Some(Kind::StructValue(inner)),
            },
        )]
        .into(),
    }
}

fn field<'a>(md: Option<&'a Metadata>, namespace: &str, key: &str) -> Option<&'a Value> {
    md?.filter_metadata.get(namespace)?.fields.get(key)
}

/// The subset hint, when the message carries one: its entries, from a list of strings or a
/// comma-separated string, trimmed, empty ones dropped. A hint of any other shape names no
/// endpoint, so it is `Some` and empty: the proxy meant to restrict the choice, and guessing
/// would ignore it.
pub fn subset_hint(md: Option<&Metadata>) -> Option<Vec<String>> {
    let value = field(md, SUBSET_NAMESPACE, SUBSET)?;
    let mut out = Vec::new();
    let mut push = |s: &str| {
        out.extend(
            s.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned),
        )
    };
    match &value.kind {
        Some(Kind::StringValue(s)) => push(s),
        Some(Kind::ListValue(list)) => {
            for v in &list.values {
                if let Some(Kind::StringValue(s)) = &v.kind {
                    push(s);
                }
            }
        }
        _ => {}
    }
    Some(out)
}

/// The endpoint that served, when Envoy reported one: the first entry, should the value be a
/// list.
pub fn served(md: Option<&Metadata>) -> Option<String> {
    let first = |s: &str| {
        s.split(',')
            .map(str::trim)
            .find(|e| !e.is_empty())
            .map(str::to_owned)
    };
    match &field(md, LB_NAMESPACE, SERVED)?.kind {
        Some(Kind::StringValue(s)) => first(s),
        Some(Kind::ListValue(list)) => list.values.iter().find_map(|v| match &v.kind {
            Some(Kind::StringValue(s)) => first(s),
            _ => None,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::ListValue;

    fn md(namespace: &str, key: &str, value: Value) -> Metadata {
        Metadata {
            filter_metadata: [(
                namespace.to_owned(),
                Struct {
                    fields: [(key.to_owned(), value)].into(),
                },
            )]
            .into(),
            ..Metadata::default()
        }
    }

    fn list(items: &[&str]) -> Value {
        Value {
            kind: Some(Kind::ListValue(ListValue {
                values: items.iter().map(|s| string(s)).collect(),
            })),
        }
    }

    #[test]
    fn the_subset_hint_reads_as_a_list_or_a_comma_separated_string() {
        let want = vec!["10.0.0.1:8000".to_owned(), "10.0.0.2".to_owned()];
        let as_list = md(
            SUBSET_NAMESPACE,
            SUBSET,
            list(&["10.0.0.1:8000", " 10.0.0.2 "]),
        );
        assert_eq!(subset_hint(Some(&as_list)), Some(want.clone()));
        let as_string = md(SUBSET_NAMESPACE, SUBSET, string("10.0.0.1:8000, 10.0.0.2,"));
        assert_eq!(subset_hint(Some(&as_string)), Some(want));
    }

    #[test]
    fn an_absent_hint_is_none_and_an_empty_or_odd_one_names_nothing() {
        assert_eq!(subset_hint(None), None);
        let elsewhere = md(LB_NAMESPACE, SUBSET, string("10.0.0.1:8000"));
        assert_eq!(subset_hint(Some(&elsewhere)), None);
        for empty in [
            string(""),
            string(" , "),
            list(&[]),
            Value {
                kind: Some(Kind::NumberValue(3.0)),
            },
        ] {
            let m = md(SUBSET_NAMESPACE, SUBSET, empty.clone());
            assert_eq!(subset_hint(Some(&m)), Some(Vec::new()), "{empty:?}");
        }
    }

    #[test]
    fn the_served_endpoint_is_read_from_envoy_lb() {
        let m = md(LB_NAMESPACE, SERVED, string("10.0.0.3:8000"));
        assert_eq!(served(Some(&m)).as_deref(), Some("10.0.0.3:8000"));
        let l = md(LB_NAMESPACE, SERVED, list(&["[::1]:8000", "10.0.0.1:1"]));
        assert_eq!(served(Some(&l)).as_deref(), Some("[::1]:8000"));
        assert_eq!(served(None), None);
    }

    #[test]
    fn the_destination_metadata_holds_the_header_value() {
        let s = destination("10.0.0.1:8000,10.0.0.2:8000", None);
        let Some(Kind::StructValue(inner)) = &s.fields[LB_NAMESPACE].kind else {
            panic!("{s:?}");
        };
        assert_eq!(
            inner.fields[DESTINATION].kind,
            Some(Kind::StringValue("10.0.0.1:8000,10.0.0.2:8000".into()))
        );
        assert_eq!(s.fields.len(), 1);
        assert_eq!(inner.fields.len(), 1);
    }

    #[test]
    fn an_explained_pick_adds_the_scores_struct_and_the_explanation() {
        let why = Why {
            scores: serde_json::json!({"10.0.0.1:8000": 0.75, "10.0.0.2:8000": 0.5})
                .as_object()
                .unwrap()
                .clone(),
            explanation: r#"{"primary":"10.0.0.1:8000"}"#.into(),
        };
        let s = destination("10.0.0.1:8000,10.0.0.2:8000", Some(&why));
        let Some(Kind::StructValue(inner)) = &s.fields[LB_NAMESPACE].kind else {
            panic!("{s:?}");
        };
        let Some(Kind::StructValue(scores)) = &inner.fields[pick::ENDPOINT_SCORES].kind else {
            panic!("{inner:?}");
        };
        assert_eq!(
            scores.fields["10.0.0.1:8000"].kind,
            Some(Kind::NumberValue(0.75))
        );
        assert_eq!(scores.fields.len(), 2);
        assert_eq!(
            inner.fields[pick::PICK_EXPLANATION].kind,
            Some(Kind::StringValue(why.explanation.clone()))
        );
    }
}
