//! `infergate serve` and `infergate check` as a user runs them: a config file over a simulated
//! replica, readiness, a request, a SIGHUP reload, a SIGTERM drain; and a refused config.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{infergate, instant_replica, terminate, wait_for, TempDir};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn request(port: u16, method: &str, path: &str, body: &str) -> Option<String> {
    common::http(
        &format!("127.0.0.1:{port}"),
        method,
        path,
        body,
        Duration::from_secs(10),
    )
}

fn config(model: &str, replica: u16) -> String {
    common::one_pool_config(model, replica, "", "")
}

/// A simulated replica serving `llama`, and a config file routing to it in a directory of its
/// own (named after `test`).
struct Setup {
    _sim: common::Running,
    replica: u16,
    dir: TempDir,
    file: std::path::PathBuf,
}

fn setup(test: &str) -> Setup {
    let (sim, replica) = instant_replica("llama");
    let dir = TempDir::new(&format!("serve-{test}"));
    let file = dir.path().join("gateway.yaml");
    std::fs::write(&file, config("llama", replica)).unwrap();
    Setup {
        _sim: sim,
        replica,
        dir,
        file,
    }
}

fn chat(model: &str) -> String {
    format!(
        r#"{{"model": "{model}", "max_tokens": 3, "messages": [{{"role": "user", "content": "hi"}}]}}"#
    )
}

#[test]
fn serve_answers_reloads_on_sighup_and_drains_on_sigterm() {
    let Setup {
        _sim,
        replica,
        dir: _dir,
        file,
    } = setup("plain");
    let (mut child, port) = start_serve(&file, None, &[]);
    let pid = child.0.id();
    let r = request(port, "POST", "/v1/chat/completions", &chat("llama")).unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");

    // The pool's model is renamed; SIGHUP makes it so.
    std::fs::write(&file, config("llama-renamed", replica)).unwrap();
    let hup = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    // The replica still serves `llama` only, so the renamed model reaches it and gets vLLM's
    // 404; the gateway's own 404 says "no matching model".
    wait_for("the renamed model to route", || {
        request(port, "POST", "/v1/chat/completions", &chat("llama-renamed"))
            .is_some_and(|r| r.contains("does not exist"))
    });
    let old = request(port, "POST", "/v1/chat/completions", &chat("llama")).unwrap();
    assert!(
        old.starts_with("HTTP/1.1 404") && old.contains("no matching model"),
        "{old}"
    );

    let status = terminate(&mut child.0, "serve");
    assert!(status.success(), "{status}");
}

/// On one CPU `serve` runs a current-thread runtime (accept loop, connections, scrapers and
/// upstream connections on one thread): it must answer concurrent clients and drain the same.
/// Needs `taskset` (util-linux).
#[test]
fn serve_confined_to_one_cpu_answers_concurrent_clients_and_drains() {
    let Setup {
        _sim,
        dir: _dir,
        file,
        ..
    } = setup("1cpu");
    let (mut child, port) = start_serve(&file, Some(0), &[]);
    let clients: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                (0..25)
                    .map(|_| request(port, "POST", "/v1/chat/completions", &chat("llama")))
                    .filter(|r| r.as_deref().is_some_and(|r| r.starts_with("HTTP/1.1 200")))
                    .count()
            })
        })
        .collect();
    let answered: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(answered, 100);

    let status = terminate(&mut child.0, "serve");
    assert!(status.success(), "{status}");
}

#[test]
fn check_prints_the_report_and_refuses_a_bad_config_naming_the_field() {
    let dir = TempDir::new("check");
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, config("llama", 8000)).unwrap();
    let out = infergate()
        .arg("check")
        .arg("--config")
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("llama"), "{text}");

    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        config("llama", 8000).replace(
            "bbr: {enabled: true}",
            "bbr: {enabled: true, maxRequestBodyBytes: 0}",
        ),
    )
    .unwrap();
    let out = infergate()
        .arg("check")
        .arg("--config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("spec.bbr.maxRequestBodyBytes"), "{err}");
}

/// CPU time (user + system) `pid` has used, from `/proc/PID/stat` (in clock ticks of 10 ms).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses: utime and stime are the
    // 12th and 13th of them.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn busy_poll_keeps_the_idle_gateway_polling_and_still_serves_and_drains() {
    let Setup {
        _sim,
        dir: _dir,
        file,
        ..
    } = setup("busy");
    // One gateway of each kind on one CPU (the current-thread runtime). The plain one starts
    // first, so that its start does not share the CPU with the busy one's polling.
    let (mut plain, _) = start_serve(&file, Some(0), &[]);
    let (mut busy, busy_port) = start_serve(&file, Some(0), &["--busy-poll"]);
    for _ in 0..20 {
        let answer = request(busy_port, "POST", "/v1/chat/completions", &chat("llama")).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }

    // Idle, the busy-polling gateway keeps using CPU; the plain one sleeps between scrapes. Wait
    // for a whole second of the busy one's CPU (however long a loaded machine takes to give it),
    // then compare with what the plain one used meanwhile.
    let (busy0, plain0) = (cpu_ticks(busy.0.id()), cpu_ticks(plain.0.id()));
    let idle = Instant::now();
    wait_for(
        "the idle busy-polling gateway to use a second of CPU",
        || cpu_ticks(busy.0.id()) - busy0 >= 100,
    );
    let busy_used = cpu_ticks(busy.0.id()) - busy0;
    let plain_used = cpu_ticks(plain.0.id()) - plain0;
    assert!(
        busy_used >= 10 * plain_used,
        "idle for {:?}: the busy-polling gateway used {busy_used} ticks, the plain one {plain_used}",
        idle.elapsed()
    );

    // The polling task does not hold the drain up.
    let status = terminate(&mut busy.0, "serve");
    assert!(status.success(), "serve --busy-poll: {status}");
    let _ = terminate(&mut plain.0, "serve");
}

/// `infergate serve --config file flags…`, confined to one CPU by `taskset` (util-linux) when
/// `cpu` names one, once `/readyz` answers 200: the process (killed if the test fails before it
/// stops it) and its listener's port. Started on free ports and again on fresh ones if another
/// process took a port first (`start_on_free_ports`), so that a lost race for a port is not
/// read as a gateway that never became ready.
fn start_serve(file: &std::path::Path, cpu: Option<u32>, flags: &[&str]) -> (common::Running, u16) {
    let spawn = |[port, admin]: [u16; 2]| {
        let mut cmd = match cpu {
            Some(cpu) => {
                let mut taskset = Command::new("taskset");
                taskset
                    .args(["-c", &cpu.to_string()])
                    .arg(infergate().get_program());
                taskset
            }
            None => infergate(),
        };
        cmd.args(["serve", "--config"])
            .arg(file)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the gateway starts (taskset, from util-linux, confines it to one CPU)")
    };
    let ready = |[_, admin]: [u16; 2]| {
        request(admin, "GET", "/readyz", "").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
    };
    let (child, [port, _]) = common::start_on_free_ports("serve's /readyz", spawn, ready);
    (child, port)
}
