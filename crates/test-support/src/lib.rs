//! What infergate's tests share, so each set-up is written once: JWT signing keys made in the
//! test and tokens signed with them ([`jwt`]).
//!
//! A dev-dependency only. Nothing here is product code, so it may panic on a broken set-up:
//! a test that cannot set up should fail loudly.

#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod jwt;
