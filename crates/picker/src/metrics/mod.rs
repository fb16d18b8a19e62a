//! Metrics input: the Prometheus text exposition format and the engine dialects that map it onto
//! [`crate::ScrapedMetrics`]. Pure: the scraper hands in the bytes and the time they landed.

mod dialect;
mod text;

pub use dialect::{read_metrics, read_metrics_with, Engine, Scrape};
pub use text::{for_each_sample, parse, Limits, Sample};
