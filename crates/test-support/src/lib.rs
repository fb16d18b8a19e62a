//! What infergate's tests share, so each set-up is written once:
//!
//! - [`jwt`]: signing keys made in the test, their JWKs, tokens signed with them;
//! - [`ports`]: free loopback ports; [`process`]: children that die with the test, started on
//!   free ports despite the race for them; [`dir`]: temporary directories;
//! - [`http`]: plain blocking HTTP/1.1; [`client`]: a small async HTTP/1.1 client;
//!   [`wait`]: waiting with a deadline;
//! - [`replicas`]: simulated vLLM replicas in the test's runtime;
//! - [`redis`]: a real `redis-server`; [`envoy`]: a real Envoy; [`jaeger`]: a real Jaeger; [`kube`]: a real
//!   kube-apiserver and etcd, with `kubectl`; [`netns`]: network namespaces as hosts, and
//!   black holes on their links.
//!
//! A dev-dependency only. Nothing here is product code, so it may panic on a broken set-up:
//! a test that cannot set up should fail loudly. It depends on no front and no control plane
//! (they dev-depend on it), so their types exist once in a test.

#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod client;
pub mod dir;
pub mod envoy;
pub mod http;
pub mod jaeger;
pub mod jwt;
pub mod kube;
pub mod netns;
pub mod ports;
pub mod process;
pub mod redis;
pub mod replicas;
pub mod wait;
