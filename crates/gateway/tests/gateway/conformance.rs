//! HTTP/2 conformance of the listener, by h2spec (built with Go by `tests/h2spec/h2spec`; CI
//! builds it): every case of RFC 7540, RFC 7541 (HPACK) and the generic suite passes, over
//! cleartext HTTP/2 (prior knowledge) and over TLS with ALPN `h2`, except the few named below
//! with why. And sslyze finds the TLS listener compliant with Mozilla's intermediate
//! configuration.

use std::process::Stdio;

use crate::common::*;

/// Cases h2spec fails on the listener every time, each with why; anything else failing fails
/// the test, and a case here that starts to pass must be taken off.
const KNOWN: &[(&str, &str)] = &[(
    "http2/3.5 ",
    "the listener tells HTTP/1.1 from HTTP/2 by a connection's first bytes (hyper-util's auto \
     builder), so a wrong preface is read as HTTP/1.1 and refused with 400, not a GOAWAY",
)];

/// Cases that pass or fail from run to run, and why; allowed either way. Each sends frames on
/// a stream after the request's headers, and the gateway answers `GET /v1/models` without
/// waiting for the rest: whether the h2 crate then resets the stream with the error h2spec
/// expects (PROTOCOL_ERROR, a connection error) or as already closed depends on which of the
/// answer and the bad frame comes first.
const RACING: &[&str] = &[
    "http2/5.1 ",
    "http2/6.9.1 ",
    "http2/8.1 ",
    "http2/8.1.2.1 ",
    "http2/8.1.2.6 ",
];

/// Where the tester is (built on first use).
fn h2spec() -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/h2spec/h2spec");
    let out = std::process::Command::new(script)
        .arg("path")
        .stderr(Stdio::inherit())
        .output()
        .expect("tests/h2spec/h2spec runs (it needs Go)");
    assert!(out.status.success(), "building h2spec failed");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Runs h2spec against `port` (over TLS with `tls`); returns its summary line and the failed
/// cases' ids (`http2/6.5.3/1`, …).
async fn run(port: u16, tls: bool) -> (String, Vec<String>) {
    let report = TempDir::new("h2spec");
    let junit = report.path().join("report.xml");
    let mut cmd = tokio::process::Command::new(h2spec());
    cmd.args([
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-P",
        "/v1/models",
    ])
    .args(["-o", "3", "-j"])
    .arg(&junit)
    .kill_on_drop(true);
    if tls {
        cmd.args(["-t", "-k"]);
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(300), cmd.output())
        .await
        .expect("h2spec ran within 5 minutes")
        .expect("h2spec started");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let summary = stdout
        .lines()
        .rev()
        .find(|l| l.contains("tests,") && l.contains("passed"))
        .unwrap_or_else(|| panic!("no summary in h2spec's output:\n{stdout}"))
        .trim()
        .to_owned();
    let xml = std::fs::read_to_string(&junit).expect("h2spec wrote its report");
    (summary, failed_cases(&xml))
}

/// The ids of the failed cases of a JUnit report: each `<testcase>` holding a `<failure>`,
/// named by its package (`http2/6.5.3`) and its place in it.
fn failed_cases(xml: &str) -> Vec<String> {
    let mut failed = Vec::new();
    for case in xml.split("<testcase").skip(1) {
        let end = case.find("</testcase>").unwrap_or(case.len());
        if !case[..end].contains("<failure") && !case[..end].contains("<error") {
            continue;
        }
        let attr = |name: &str| {
            let key = format!("{name}=\"");
            case.find(&key).map(|i| {
                let rest = &case[i + key.len()..];
                rest[..rest.find('"').unwrap_or(rest.len())].to_owned()
            })
        };
        failed.push(format!(
            "{} {}",
            attr("package")
                .or_else(|| attr("classname"))
                .unwrap_or_default(),
            attr("name").unwrap_or_default()
        ));
    }
    failed
}

fn judge(front: &str, summary: &str, failed: &[String]) {
    eprintln!("h2spec over {front}: {summary}");
    let unknown: Vec<&String> = failed
        .iter()
        .filter(|f| !KNOWN.iter().any(|(id, _)| f.starts_with(id)))
        .filter(|f| !RACING.iter().any(|id| f.starts_with(id)))
        .collect();
    assert!(
        unknown.is_empty(),
        "h2spec over {front} ({summary}) failed cases not known to fail: {unknown:#?}"
    );
    for (id, why) in KNOWN {
        assert!(
            failed.iter().any(|f| f.starts_with(id)),
            "{id} ({why}) now passes over {front}: take it off the list"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2spec_passes_over_cleartext_http2() {
    let replica = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(replica.addr, "")).await;
    let (summary, failed) = run(gw.addr.port(), false).await;
    judge("h2c", &summary, &failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2spec_passes_over_tls_with_alpn_h2() {
    let replica = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(replica.addr, "  tls: {}\n")).await;
    let (summary, failed) = run(gw.addr.port(), true).await;
    judge("TLS", &summary, &failed);
}

/// Today's date as (year, month, day), from the system clock (days since 1970 to the civil
/// calendar).
fn today() -> (i32, u8, u8) {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    (year, month, day)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslyze_finds_the_listener_compliant_with_mozillas_intermediate_configuration() {
    // Certificates as an operator would bring them: a CA, and a leaf it signed for
    // `localhost`, ECDSA P-256, valid for 90 days; sslyze trusts the CA.
    let (year, month, day) = today();
    let from =
        rcgen::date_time_ymd(year, month, day.min(28)) - std::time::Duration::from_secs(86_400);
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "infergate test CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = from;
    ca_params.not_after = from + std::time::Duration::from_secs(365 * 86_400);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    params.not_before = from;
    params.not_after = from + std::time::Duration::from_secs(90 * 86_400);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let dir = TempDir::new("sslyze");
    let (cert_file, key_file, ca_file) = (
        dir.path().join("cert.pem"),
        dir.path().join("key.pem"),
        dir.path().join("ca.pem"),
    );
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let replica = Replica::start(instant()).await;
    let extra = format!(
        "  tls: {{certFile: {}, keyFile: {}}}\n",
        cert_file.display(),
        key_file.display()
    );
    let gw = TestGateway::ready(&llama_yaml(replica.addr, &extra)).await;
    let scan = tokio::process::Command::new("python3")
        .args([
            "-m",
            "sslyze",
            "--mozilla_config=intermediate",
            "--certinfo_ca_file",
        ])
        .arg(&ca_file)
        .arg(format!("localhost:{}{{127.0.0.1}}", gw.addr.port()))
        .env("HF_HUB_OFFLINE", "1")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(240), scan)
        .await
        .expect("sslyze finished within 4 minutes")
        .expect("sslyze runs (pip install -r tests/python/requirements.txt; .ci/run does)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let verdict = stdout
        .lines()
        .skip_while(|l| !l.contains("COMPLIANCE AGAINST"))
        .collect::<Vec<_>>()
        .join("\n");
    eprintln!("{verdict}");
    assert!(
        out.status.success() && verdict.contains("OK - Compliant"),
        "sslyze: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
