//! infergate's benchmark: workloads, trace readers, and a virtual-time runner that drives
//! simulated replicas (`infergate-engine`) through the real picker (`infergate-picker`), with
//! metrics scraped at their real interval and staleness, so every policy is measured on the same
//! arrivals, side by side, thousands of times faster than real time.

pub mod ablation;
pub mod custom;
mod event_loop;
pub mod gate;
mod gateway;
pub mod global;
pub mod outcome;
pub mod plot;
pub mod replay;
mod replica;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod suite;
pub mod trace;
pub mod tune;
pub mod tuning;
pub mod workload;
