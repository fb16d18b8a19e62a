//! The engine's seeded random source: the house's one generator, [`infergate_rng::SplitMix64`].
//!
//! `Rng` is the name the engine, the benchmark and the simulated server have always used; it is
//! the same type, so their draws are the picker's and every run replays from its seed.

pub use infergate_rng::SplitMix64 as Rng;
