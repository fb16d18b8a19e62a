//! Subset hints against a pool: which of the pool's endpoints a hint names. An `ip:port` entry
//! names that endpoint; a bare `ip` (IPv6 with or without brackets) names every endpoint of the
//! pool on that address, whatever its port.
//!
//! The index is built once per pool membership (per config), so resolving a hint costs what
//! the hint holds, not what the pool holds.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use infergate_control::routes::Routes;

/// One entry of a hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `ip:port`.
    Socket(SocketAddr),
    /// `ip`: every port.
    Ip(IpAddr),
}

/// Reads one entry; `None` for anything that is not an IP address with or without a port (it
/// then names no endpoint).
pub fn parse_entry(s: &str) -> Option<Entry> {
    let s = s.trim();
    if let Ok(sock) = s.parse::<SocketAddr>() {
        return Some(Entry::Socket(sock));
    }
    let bare = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(s);
    bare.parse::<IpAddr>().ok().map(Entry::Ip)
}

/// A pool's addresses, indexed by socket address and by IP.
#[derive(Debug, Default)]
pub struct AddressIndex {
    addresses: Vec<String>,
    exact: HashMap<SocketAddr, usize>,
    by_ip: HashMap<IpAddr, Vec<usize>>,
}

impl AddressIndex {
    /// Indexes `addresses` (the pool's, as `ip:port`). One that is not `ip:port` is never named
    /// by a hint.
    pub fn new<'a>(addresses: impl IntoIterator<Item = &'a str>) -> Self {
        let mut index = AddressIndex::default();
        for (i, a) in addresses.into_iter().enumerate() {
            index.addresses.push(a.to_owned());
            if let Ok(sock) = a.parse::<SocketAddr>() {
                index.exact.insert(sock, i);
                index.by_ip.entry(sock.ip()).or_default().push(i);
            }
        }
        index
    }

    /// The pool's addresses that `hint` names, each once, in pool order. Empty when it names
    /// none of them.
    pub fn eligible(&self, hint: &[String]) -> Vec<String> {
        let mut picked: Vec<usize> = Vec::new();
        for entry in hint.iter().filter_map(|e| parse_entry(e)) {
            match entry {
                Entry::Socket(s) => picked.extend(self.exact.get(&s)),
                Entry::Ip(ip) => picked.extend(self.by_ip.get(&ip).into_iter().flatten()),
            }
        }
        picked.sort_unstable();
        picked.dedup();
        picked
            .into_iter()
            .filter_map(|i| self.addresses.get(i).cloned())
            .collect()
    }
}

/// The address indexes of every pool of one routing table.
#[derive(Debug)]
struct Indexes {
    routes: Arc<Routes>,
    pools: HashMap<String, AddressIndex>,
}

/// Address indexes, rebuilt when the routing table changes (a reload), built the first time a
/// hint needs them.
#[derive(Debug, Default)]
pub struct SubsetIndexes {
    current: ArcSwapOption<Indexes>,
}

impl SubsetIndexes {
    /// The endpoints of pool `pool` in `routes` that `hint` names.
    pub fn eligible(&self, routes: &Arc<Routes>, pool: &str, hint: &[String]) -> Vec<String> {
        let current = self.current.load_full();
        let indexes = match current {
            Some(i) if Arc::ptr_eq(&i.routes, routes) => i,
            _ => {
                let built = Arc::new(Indexes {
                    routes: Arc::clone(routes),
                    pools: routes
                        .pools
                        .iter()
                        .map(|p| {
                            let snap = p.snapshot();
                            let index = AddressIndex::new(
                                snap.pool.specs().iter().map(|s| s.address.as_str()),
                            );
                            (p.name.clone(), index)
                        })
                        .collect(),
                });
                // Two requests racing after a reload both build; either result is the same.
                self.current.store(Some(Arc::clone(&built)));
                built
            }
        };
        indexes
            .pools
            .get(pool)
            .map(|i| i.eligible(hint))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|e| (*e).to_owned()).collect()
    }

    const POOL: [&str; 5] = [
        "10.0.0.1:8000",
        "10.0.0.1:8001",
        "10.0.0.2:8000",
        "[fd00::1]:8000",
        "[fd00::1]:9000",
    ];

    #[test]
    fn an_ip_port_entry_names_that_endpoint_only() {
        let index = AddressIndex::new(POOL);
        assert_eq!(
            index.eligible(&hint(&["10.0.0.1:8001"])),
            hint(&["10.0.0.1:8001"])
        );
        assert_eq!(
            index.eligible(&hint(&["[fd00::1]:9000"])),
            hint(&["[fd00::1]:9000"])
        );
    }

    #[test]
    fn a_bare_ip_names_every_port_of_that_address() {
        let index = AddressIndex::new(POOL);
        assert_eq!(
            index.eligible(&hint(&["10.0.0.1"])),
            hint(&["10.0.0.1:8000", "10.0.0.1:8001"])
        );
        for v6 in ["fd00::1", "[fd00::1]"] {
            assert_eq!(
                index.eligible(&hint(&[v6])),
                hint(&["[fd00::1]:8000", "[fd00::1]:9000"]),
                "{v6}"
            );
        }
    }

    #[test]
    fn duplicates_and_overlaps_come_out_once_in_pool_order() {
        let index = AddressIndex::new(POOL);
        assert_eq!(
            index.eligible(&hint(&["10.0.0.2:8000", "10.0.0.1", "10.0.0.1:8000"])),
            hint(&["10.0.0.1:8000", "10.0.0.1:8001", "10.0.0.2:8000"])
        );
    }

    #[test]
    fn entries_outside_the_pool_or_unreadable_name_nothing() {
        let index = AddressIndex::new(POOL);
        for none in [
            &["10.0.0.9:8000"][..],
            &["10.0.0.2:9999"],
            &["pod-a.local:8000"],
            &["not an address"],
            &[],
        ] {
            assert!(index.eligible(&hint(none)).is_empty(), "{none:?}");
        }
    }

    #[test]
    fn entries_parse_as_socket_or_ip() {
        assert_eq!(
            parse_entry(" 10.0.0.1:80 "),
            Some(Entry::Socket("10.0.0.1:80".parse().unwrap()))
        );
        assert_eq!(
            parse_entry("[::1]"),
            Some(Entry::Ip("::1".parse().unwrap()))
        );
        assert_eq!(parse_entry("10.0.0.1:"), None);
        assert_eq!(parse_entry("host:80"), None);
    }
}
