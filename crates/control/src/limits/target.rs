//! Where the shared store is: a `redis://[user[:password]@]host[:port][/db]` URL, parsed once,
//! and printed without its password wherever it appears.

/// Where Redis is, from a `redis://[user[:password]@]host[:port][/db]` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) db: u32,
    pub(super) user: Option<String>,
    pub(super) password: Option<String>,
}

impl std::fmt::Debug for Target {
    /// Without the password, which never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "redis://{}:{}/{}", self.host, self.port, self.db)
    }
}

impl Target {
    /// Parses a `redis://` URL; `rediss://` (TLS) is refused, as this client speaks plain TCP.
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("redis://")
            .ok_or_else(|| format!("`{}` is not a redis:// URL", redact(url)))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(u) => match u.split_once(':') {
                Some((name, pw)) => (Some(decode(name)?), Some(decode(pw)?)),
                // `user@host`: a user with no password has nothing to authenticate with.
                None => (Some(decode(u)?), None),
            },
        };
        let user = user.filter(|u| !u.is_empty());
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| "an IPv6 host without its closing `]`".to_owned())?;
            (h, after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err("the URL names no host".to_owned());
        }
        let port = match port {
            None => 6379,
            Some(p) => p
                .parse()
                .map_err(|_| format!("`{p}` is not a port number"))?,
        };
        let db = match path {
            "" => 0,
            d => d
                .parse()
                .map_err(|_| format!("`/{d}` is not a database number"))?,
        };
        Ok(Target {
            host: host.to_owned(),
            port,
            db,
            user,
            password,
        })
    }
}

/// The URL with any password replaced, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_owned(),
    }
}

/// Percent-decoding of a URL's user or password.
fn decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "a bad %-escape in the URL's credentials".to_owned())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the URL's credentials are not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_host_port_db_and_credentials() {
        let t = Target::parse("redis://user:p%40ss@cache.internal:6380/2").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.db), ("cache.internal", 6380, 2));
        assert_eq!(
            (t.user.as_deref(), t.password.as_deref()),
            (Some("user"), Some("p@ss"))
        );
        // Neither form of printing shows the password.
        assert_eq!(t.to_string(), "redis://cache.internal:6380/2");
        assert!(!format!("{t:?}").contains("p@ss"));
        let t = Target::parse("redis://:secret@[::1]").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.db), ("::1", 6379, 0));
        assert_eq!((t.user, t.password.as_deref()), (None, Some("secret")));
        let t = Target::parse("redis://someone@h").unwrap();
        assert_eq!((t.user.as_deref(), t.password), (Some("someone"), None));
        for bad in [
            "rediss://:pw@h",
            "redis://",
            "redis://h:port",
            "redis://h/x",
            "redis://u:%zz@h",
            "redis://[::1",
        ] {
            let e = Target::parse(bad).unwrap_err();
            assert!(!e.contains("pw") && !e.contains("%zz"), "{e}");
        }
        assert_eq!(redact("redis://u:pw@h:1"), "redis://***@h:1");
    }
}
