//! The process's file-descriptor limit, which bounds the connections the listener can hold.
//! Each proxied request holds two descriptors (the client's and the upstream's), and the
//! gateway keeps a reserve for everything else (the admin listener and its probes, scrapes of
//! every endpoint, Redis, the OTLP exporter, config and key files), so that a flood of client
//! connections runs into the connection limit, not into `accept` failing for every listener.

/// Descriptors kept for everything but client connections and their upstreams.
const RESERVED: u64 = 256;

/// Raises the soft descriptor limit to the hard one (as the Go runtime does at start) and
/// returns the soft limit in effect; `None` where the platform has no such limit or it cannot
/// be read.
pub fn raise_limit() -> Option<u64> {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => Some(n),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise the file-descriptor limit");
            None
        }
    }
}

/// The connections `nofile` descriptors allow, at least one.
pub fn connection_cap(nofile: Option<u64>) -> u32 {
    match nofile {
        None => u32::MAX,
        Some(n) => u32::try_from(n.saturating_sub(RESERVED) / 2)
            .unwrap_or(u32::MAX)
            .max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_the_reserve_and_a_descriptor_for_each_upstream() {
        assert_eq!(connection_cap(Some(600)), 172);
        assert_eq!(connection_cap(Some(1_048_576)), 524_160);
        assert_eq!(connection_cap(Some(100)), 1);
        assert_eq!(connection_cap(None), u32::MAX);
    }
}
