//! infergate in Kubernetes: everything that talks to the Kubernetes API, feeding the control
//! plane (`infergate-control`) through its member source and its reload, and nothing a
//! request waits on.
//!
//! | concern | module |
//! |---|---|
//! | which endpoints a Pod gives a pool (pure) | [`pods`] |
//! | the pods of a namespace, watched; each pool's members | [`members`] |
//! | a watch's health: listed once, lost since when | [`watch`] |
//! | the `InferenceGatewayConfig` resource: found, watched, read as a config, Events | [`resource`] |
//! | the status written on it (pure) | [`status`] |
//! | the namespace's ConfigMaps: LoRA adapter maps, `configMapRef` picker configs | [`configmaps`] |
//! | leader election on a Lease (one status writer) | [`lease`] |
//! | `serve --from-cluster`: all of the above, kept in step | [`cluster`] |
//! | `extproc --pool-name`: an InferencePool and its rewrites as the one pool | [`inference_pool`] |

#![forbid(unsafe_code)]

pub mod cluster;
pub mod configmaps;
pub mod inference_pool;
pub mod lease;
pub mod members;
pub mod pods;
pub mod resource;
pub mod status;
pub mod watch;

pub use cluster::{Cluster, ClusterOptions};
pub use members::PodDiscovery;
