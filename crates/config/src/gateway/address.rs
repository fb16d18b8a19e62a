//! Static endpoint addresses: `host:port` or a bare `host`, where host is an IP address (IPv6 in
//! brackets when a port follows) or a DNS name. A bare host takes its pool's `targetPort`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use super::selector::is_dns_label;

/// The host part of an endpoint address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// An IP address.
    Ip(IpAddr),
    /// A DNS name, resolved by whoever connects.
    Name(String),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
            Host::Name(name) => f.write_str(name),
        }
    }
}

/// A parsed `spec.endpoints[].address`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointAddress {
    /// Where.
    pub host: Host,
    /// The port, when the address names one; it wins over the pool's `targetPort`.
    pub port: Option<u16>,
}

impl EndpointAddress {
    /// The `host:port` to connect to, with `target_port` filling in a missing port.
    pub fn with_default_port(&self, target_port: u16) -> String {
        format!("{}:{}", self.host, self.port.unwrap_or(target_port))
    }
}

impl fmt::Display for EndpointAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => write!(f, "{}", self.host),
        }
    }
}

impl FromStr for EndpointAddress {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not host:port or host (like 10.0.0.7:8000 or pod-a.local)");
        if let Ok(sock) = s.parse::<SocketAddr>() {
            return Ok(EndpointAddress {
                host: Host::Ip(sock.ip()),
                port: Some(nonzero_port(sock.port(), s)?),
            });
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(EndpointAddress {
                host: Host::Ip(ip),
                port: None,
            });
        }
        if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let ip = inner.parse::<IpAddr>().map_err(|_| bad())?;
            return Ok(EndpointAddress {
                host: Host::Ip(ip),
                port: None,
            });
        }
        let (host, port) = match s.rsplit_once(':') {
            Some((host, port)) => {
                let port: u16 = port
                    .parse()
                    .map_err(|_| format!("`{s}`: port `{port}` is not a number in 1..65535"))?;
                (host, Some(nonzero_port(port, s)?))
            }
            None => (s, None),
        };
        if !is_dns_name(host) {
            return Err(bad());
        }
        Ok(EndpointAddress {
            host: Host::Name(host.to_ascii_lowercase()),
            port,
        })
    }
}

fn nonzero_port(port: u16, s: &str) -> Result<u16, String> {
    if port == 0 {
        Err(format!("`{s}`: port 0 is not a port to connect to"))
    } else {
        Ok(port)
    }
}

/// A DNS name, case-insensitive: dot-separated RFC 1123 labels, at most 253 characters.
fn is_dns_name(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    !lower.is_empty() && lower.len() <= 253 && lower.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> EndpointAddress {
        s.parse().unwrap()
    }

    #[test]
    fn addresses_with_and_without_ports_parse() {
        assert_eq!(parse("127.0.0.1:8001").to_string(), "127.0.0.1:8001");
        assert_eq!(parse("127.0.0.1:8001").port, Some(8001));
        assert_eq!(parse("10.0.0.7").port, None);
        assert_eq!(parse("10.0.0.7").with_default_port(8000), "10.0.0.7:8000");
        assert_eq!(parse("[::1]:9000").to_string(), "[::1]:9000");
        assert_eq!(parse("::1").with_default_port(8000), "[::1]:8000");
        assert_eq!(parse("[::1]").port, None);
        assert_eq!(parse("Pod-A.Local:8002").to_string(), "pod-a.local:8002");
        assert_eq!(parse("localhost").host, Host::Name("localhost".into()));
    }

    #[test]
    fn malformed_addresses_are_refused() {
        for bad in [
            "",
            "http://10.0.0.1:8000",
            "10.0.0.1:0",
            "10.0.0.1:70000",
            "host:port",
            "under_score:80",
            "a..b:80",
            "[::1:80",
        ] {
            assert!(bad.parse::<EndpointAddress>().is_err(), "{bad:?} parsed");
        }
    }
}
