//! Whole-document tests: the reference's and upstream's examples, every validation rule with
//! the field path it names, routing, and what resolution shows.

mod examples;
mod reporting;
mod rewrites;
mod routing;
mod rules;
mod standalone;

use super::*;

/// The upstream example from `reference/gateway-config.md`, verbatim.
const REFERENCE_EXAMPLE: &str = r#"
apiVersion: inference.sagemaker.aws.amazon.com/v1alpha1
kind: InferenceGatewayConfig
metadata:
  name: my-gateway
spec:
  tls: {}
  bbr:
    enabled: true
  schedulers:
    - name: llama-70b
      modelName: "llama-3.1-70b"
      modelSelector:
        matchLabels:
          app: vllm-llama
      targetPort: 8000
      scheduler: llm-d
"#;

/// HyperPod's documented examples.
const HYPERPOD_MULTI_MODEL: &str = r#"
apiVersion: inference.sagemaker.aws.amazon.com/v1alpha1
kind: InferenceGatewayConfig
metadata:
  name: inference-gateway-demo
  namespace: inference-gateway
spec:
  bbr:
    enabled: true
  tls: {}                       # Auto-issue a certificate via cert-manager and import to ACM.
  schedulers:
    - name: llama
      modelName: "meta-llama/Llama-3.2-1B-Instruct"
      modelSelector:
        matchLabels:
          app: vllm-llama
      targetPort: 8000
      scheduler: llm-d
"#;

const HYPERPOD_SGLANG: &str = r#"
apiVersion: inference.sagemaker.aws.amazon.com/v1alpha1
kind: InferenceGatewayConfig
metadata: {name: sglang}
spec:
  bbr:
    enabled: true
  schedulers:
    - name: qwen7b
      modelName: "Qwen/Qwen2.5-7B-Instruct"
      modelSelector:
        matchLabels:
          app: sglang-qwen7b
      targetPort: 8000
      scheduler: epp
      engineType: sglang
      logLevel: 4
      weights:
        kvCache: 2
        prefix: 3
        runningRequests: 2
"#;

/// A standalone config the rule tests mutate.
const BASE: &str = r#"
apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
metadata: {name: test}
spec:
  bbr: {enabled: true}
  schedulers:
    - name: llama
      modelName: llama-3.1-8b
      modelSelector: {matchLabels: {app: llama}}
      loraAdapters: [sql-lora]
    - name: qwen
      modelName: qwen3-32b
      modelSelector: {matchLabels: {app: qwen}}
      targetPort: 9000
  endpoints:
    - address: 10.0.0.1:8001
      labels: {app: llama, gpu: h100}
    - address: 10.0.0.2
      labels: {app: llama, gpu: a10g}
    - address: 10.0.0.3
      labels: {app: qwen}
"#;

fn base() -> InferenceGatewayConfig {
    load_from_str(BASE).unwrap()
}

fn auth() -> Auth {
    Auth {
        jwt: Jwt {
            provider: JwtProvider {
                name: "idp".into(),
                issuer: "https://idp.example.com".into(),
                remote_jwks: Some(RemoteJwks {
                    uri: "https://idp.example.com/jwks.json".into(),
                }),
                local_jwks: None,
                audiences: vec!["infergate".into()],
                required_claims: vec![],
            },
        },
    }
}

fn claim(name: &str) -> RequiredClaim {
    RequiredClaim {
        name: name.into(),
        value_type: ClaimValueType::String,
        values: vec!["yes".into()],
    }
}

fn rewrite(model: &str, targets: &[(&str, Option<u32>)]) -> ModelRewrite {
    ModelRewrite {
        name: None,
        matches: vec![RewriteMatch {
            model: ModelMatch {
                match_type: Some(MatchType::Exact),
                value: model.into(),
            },
        }],
        targets: targets
            .iter()
            .map(|(m, w)| RewriteTarget {
                model_rewrite: (*m).into(),
                weight: *w,
            })
            .collect(),
        stickiness: None,
    }
}

fn sch(c: &mut InferenceGatewayConfig, i: usize) -> &mut SchedulerSpec {
    &mut c.spec.schedulers[i]
}

/// Resolves `c` and returns the error's field path and message.
fn refused(c: &InferenceGatewayConfig) -> (String, String) {
    let err = resolve(c).expect_err("config was accepted");
    let field = err.field().expect("a rule error names a field").to_owned();
    let message = err.to_string();
    assert!(message.starts_with(&format!("{field}: ")), "{message}");
    (field, message)
}
