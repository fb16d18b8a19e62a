//! How traces are exported: OpenTelemetry's standard environment variables, with the CLI's
//! `--otlp-endpoint` above them.
//!
//! Tracing is on when an endpoint is named: `--otlp-endpoint`, else
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL export requests go to), else
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL; `/v1/traces` is appended for HTTP).
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off unless the flag is
//! given. A setting that cannot be honoured is an error at start-up, never a silent default.

use std::time::Duration;

use hyper::header::{HeaderName, HeaderValue};
use hyper::Uri;

use crate::sampler::Sampler;

/// The wire an export request travels by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP, protobuf body (`http/protobuf`, the default).
    HttpProtobuf,
    /// OTLP/gRPC over plain-text HTTP/2 (`grpc`).
    Grpc,
}

/// Where and how spans are exported.
#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// Where each export request goes (for gRPC, with the service's method path).
    pub endpoint: Uri,
    /// How.
    pub protocol: Protocol,
    /// Sent with each export request (`OTEL_EXPORTER_OTLP_HEADERS`: an API key, a tenant).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// How long one export request may take.
    pub timeout: Duration,
    /// Which traces are recorded.
    pub sampler: Sampler,
    /// The resource's attributes, `service.name` first.
    pub resource: Vec<(String, String)>,
    /// Finished spans waiting for export beyond this many are dropped (and counted).
    pub max_queue: usize,
    /// The most spans one export request holds.
    pub max_batch: usize,
    /// The longest a finished span waits before its batch is sent.
    pub delay: Duration,
}

/// A tracing setting that cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {problem}")]
pub struct SettingsError {
    /// The variable (or flag) at fault.
    pub variable: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

fn error(variable: &'static str, problem: impl Into<String>) -> SettingsError {
    SettingsError {
        variable,
        problem: problem.into(),
    }
}

/// The gRPC method spans are exported to.
const GRPC_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

impl TraceSettings {
    /// The settings the process environment and `--otlp-endpoint` give; `None` when tracing is
    /// off.
    pub fn from_env(flag: Option<&str>) -> Result<Option<Self>, SettingsError> {
        Self::from_lookup(flag, |k| std::env::var(k).ok())
    }

    /// As [`TraceSettings::from_env`], reading variables through `var`.
    pub fn from_lookup(
        flag: Option<&str>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, SettingsError> {
        let var = |k: &str| {
            var(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if flag.is_none() {
            if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
                return Ok(None);
            }
            match var("OTEL_TRACES_EXPORTER").as_deref() {
                None | Some("otlp") => {}
                Some("none") => return Ok(None),
                Some(other) => {
                    return Err(error(
                        "OTEL_TRACES_EXPORTER",
                        format!("{other:?} is not supported (otlp or none)"),
                    ))
                }
            }
        }
        let protocol_var = if var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").is_some() {
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
        } else {
            "OTEL_EXPORTER_OTLP_PROTOCOL"
        };
        let protocol = match var(protocol_var).as_deref() {
            None | Some("http/protobuf") => Protocol::HttpProtobuf,
            Some("grpc") => Protocol::Grpc,
            Some(other) => {
                return Err(error(
                    protocol_var,
                    format!("{other:?} is not supported (http/protobuf or grpc)"),
                ))
            }
        };
        // The flag and the generic variable name a base; the traces variable the whole URL.
        let (variable, url, full) = if let Some(f) = flag {
            ("--otlp-endpoint", f.to_owned(), false)
        } else if let Some(u) = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", u, true)
        } else if let Some(u) = var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            ("OTEL_EXPORTER_OTLP_ENDPOINT", u, false)
        } else {
            return Ok(None);
        };
        let endpoint = export_uri(variable, &url, full, protocol)?;
        let headers = match var("OTEL_EXPORTER_OTLP_TRACES_HEADERS") {
            Some(h) => parse_headers("OTEL_EXPORTER_OTLP_TRACES_HEADERS", &h)?,
            None => match var("OTEL_EXPORTER_OTLP_HEADERS") {
                Some(h) => parse_headers("OTEL_EXPORTER_OTLP_HEADERS", &h)?,
                None => Vec::new(),
            },
        };
        let number =
            |name: &'static str, default: u64| -> Result<u64, SettingsError> {
                match var(name) {
                    None => Ok(default),
                    Some(v) => v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        error(name, format!("{v:?} is not a positive whole number"))
                    }),
                }
            };
        let timeout_ms = match var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
            Some(_) => number("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10_000)?,
            None => number("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000)?,
        };
        let sampler = match var("OTEL_TRACES_SAMPLER") {
            None => Sampler::default(),
            Some(name) => {
                let arg = var("OTEL_TRACES_SAMPLER_ARG");
                Sampler::named(&name, arg.as_deref()).ok_or_else(|| {
                    error(
                        "OTEL_TRACES_SAMPLER",
                        format!(
                            "{name:?} with argument {arg:?} is not a sampler this build knows \
                             (always_on, always_off, traceidratio, parentbased_always_on, \
                             parentbased_always_off, parentbased_traceidratio; a ratio is 0 to 1)"
                        ),
                    )
                })?
            }
        };
        let mut resource: Vec<(String, String)> = match var("OTEL_RESOURCE_ATTRIBUTES") {
            Some(list) => pairs("OTEL_RESOURCE_ATTRIBUTES", &list)?,
            None => Vec::new(),
        };
        let from_attributes = resource
            .iter()
            .position(|(k, _)| k == "service.name")
            .map(|i| resource.remove(i).1);
        let service = var("OTEL_SERVICE_NAME")
            .or(from_attributes)
            .unwrap_or_else(|| "infergate".to_owned());
        resource.insert(0, ("service.name".to_owned(), service));
        if !resource.iter().any(|(k, _)| k == "service.version") {
            resource.push((
                "service.version".to_owned(),
                env!("CARGO_PKG_VERSION").to_owned(),
            ));
        }
        let max_queue = number("OTEL_BSP_MAX_QUEUE_SIZE", 2048)? as usize;
        let max_batch = (number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)? as usize).min(max_queue);
        Ok(Some(Self {
            endpoint,
            protocol,
            headers,
            timeout: Duration::from_millis(timeout_ms),
            sampler,
            resource,
            max_queue,
            max_batch,
            delay: Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", 5_000)?),
        }))
    }
}

/// The URL export requests go to, from `url` as `variable` gave it (`full`: already the whole
/// URL, else a base to append the signal's path to).
fn export_uri(
    variable: &'static str,
    url: &str,
    full: bool,
    protocol: Protocol,
) -> Result<Uri, SettingsError> {
    let uri: Uri = url
        .parse()
        .map_err(|e| error(variable, format!("{url:?} is not a URL: {e}")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(error(
                variable,
                "TLS to the collector is not supported: export to a collector (or agent) on \
                 the node or in the pod over plain HTTP, and let it forward with TLS",
            ))
        }
        _ => return Err(error(variable, format!("{url:?} must start with http://"))),
    }
    let authority = uri
        .authority()
        .ok_or_else(|| error(variable, format!("{url:?} names no host")))?
        .clone();
    let path = match protocol {
        Protocol::Grpc => GRPC_EXPORT.to_owned(),
        Protocol::HttpProtobuf if full => uri.path().to_owned(),
        Protocol::HttpProtobuf => format!("{}/v1/traces", uri.path().trim_end_matches('/')),
    };
    Uri::builder()
        .scheme("http")
        .authority(authority)
        .path_and_query(path)
        .build()
        .map_err(|e| error(variable, e.to_string()))
}

/// `key=value,key=value`, values percent-decoded (W3C Baggage's octets, as the specification
/// writes these lists).
fn pairs(variable: &'static str, list: &str) -> Result<Vec<(String, String)>, SettingsError> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| error(variable, format!("{item:?} is not key=value")))?;
        let v = percent_decode(v.trim())
            .ok_or_else(|| error(variable, format!("{item:?}: bad percent-encoding")))?;
        out.push((k.trim().to_owned(), v));
    }
    Ok(out)
}

fn parse_headers(
    variable: &'static str,
    list: &str,
) -> Result<Vec<(HeaderName, HeaderValue)>, SettingsError> {
    pairs(variable, list)?
        .into_iter()
        .map(|(k, v)| {
            let name = HeaderName::try_from(k.as_str())
                .map_err(|_| error(variable, format!("{k:?} is not a header name")))?;
            let value = HeaderValue::try_from(v.as_str()).map_err(|_| {
                error(
                    variable,
                    format!("the value of {k:?} is not a header value"),
                )
            })?;
            Ok((name, value))
        })
        .collect()
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(
        flag: Option<&str>,
        vars: &[(&str, &str)],
    ) -> Result<Option<TraceSettings>, SettingsError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        TraceSettings::from_lookup(flag, |k| vars.get(k).cloned())
    }

    #[test]
    fn off_without_an_endpoint_and_defaults_with_one() {
        assert!(settings(None, &[]).unwrap().is_none());
        assert!(settings(None, &[("OTEL_SERVICE_NAME", "x")])
            .unwrap()
            .is_none());
        let s = settings(Some("http://127.0.0.1:4318"), &[])
            .unwrap()
            .unwrap();
        assert_eq!(s.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
        assert_eq!(s.sampler, Sampler::default());
        assert_eq!(s.resource[0], ("service.name".into(), "infergate".into()));
        assert_eq!((s.max_queue, s.max_batch), (2048, 512));
        assert_eq!(s.delay, Duration::from_secs(5));
        assert_eq!(s.timeout, Duration::from_secs(10));
    }

    #[test]
    fn the_variables_are_read_as_opentelemetry_defines_them() {
        let s = settings(
            None,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/base/"),
                ("OTEL_SERVICE_NAME", "gw-eu"),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "service.name=ignored,deployment.environment=prod%20eu",
                ),
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=abc%3D"),
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.1"),
                ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.endpoint, "http://collector:4318/base/v1/traces");
        assert_eq!(s.resource[0].1, "gw-eu");
        assert!(s
            .resource
            .contains(&("deployment.environment".into(), "prod eu".into())));
        assert_eq!(s.headers[0].1, "abc=");
        assert_eq!(
            s.sampler,
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatio(0.1)))
        );
        assert_eq!(s.delay, Duration::from_millis(200));
        // The traces variable is the whole URL; gRPC goes to the service's method.
        let full = settings(
            None,
            &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:9/custom")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(full.endpoint, "http://c:9/custom");
        let grpc = settings(
            Some("http://c:4317"),
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            grpc.endpoint,
            "http://c:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        );
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_name() {
        let refused = |flag, vars: &[(&str, &str)]| settings(flag, vars).unwrap_err().variable;
        assert_eq!(refused(Some("https://c:4318"), &[]), "--otlp-endpoint");
        assert_eq!(refused(Some("c:4318"), &[]), "--otlp-endpoint");
        let e = Some("http://c:4318");
        assert_eq!(
            refused(e, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]),
            "OTEL_EXPORTER_OTLP_PROTOCOL"
        );
        assert_eq!(
            refused(
                e,
                &[
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "2")
                ]
            ),
            "OTEL_TRACES_SAMPLER"
        );
        assert_eq!(
            refused(e, &[("OTEL_BSP_MAX_QUEUE_SIZE", "0")]),
            "OTEL_BSP_MAX_QUEUE_SIZE"
        );
        assert_eq!(
            refused(e, &[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")]),
            "OTEL_EXPORTER_OTLP_HEADERS"
        );
        assert_eq!(
            refused(None, &[("OTEL_TRACES_EXPORTER", "zipkin")]),
            "OTEL_TRACES_EXPORTER"
        );
    }

    #[test]
    fn disabling_variables_yield_to_the_flag() {
        let off = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert!(settings(None, &off).unwrap().is_none());
        assert!(settings(None, &[off[0], ("OTEL_TRACES_EXPORTER", "none")])
            .unwrap()
            .is_none());
        assert!(settings(Some("http://c:4318"), &off).unwrap().is_some());
    }
}
