//! Gateway API durations (GEP-2257), the format of `routeTimeout` and of infergate's own time
//! fields: one to four `<digits><unit>` parts, each of 1 to 5 digits, units `h`, `m`, `s`, `ms`.
//! `0s` is zero. Examples: `30s`, `500ms`, `1m`, `1h30m`.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::time::Duration;

/// A duration as written, with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GatewayDuration(Duration);

impl GatewayDuration {
    /// The value.
    pub fn get(self) -> Duration {
        self.0
    }

    /// Whether it is zero (for `routeTimeout`: no timeout).
    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }

    /// Wraps a value (for defaults).
    pub const fn from_millis(ms: u64) -> Self {
        GatewayDuration(Duration::from_millis(ms))
    }

    /// A resolved value, to its millisecond (the format's finest unit), for display.
    pub fn from_duration(d: Duration) -> Self {
        Self::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// Parses the GEP-2257 form; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let syntax = || {
            format!(
                "`{text}` is not a duration: write 1 to 4 parts of 1-5 digits and a unit h, m, s \
                 or ms, like `30s`, `500ms`, `1m` or `1h30m`"
            )
        };
        let bytes = text.as_bytes();
        let (mut i, mut parts, mut total_ms) = (0, 0, 0u64);
        while i < bytes.len() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let digits = &text[start..i];
            if digits.is_empty() || digits.len() > 5 {
                return Err(syntax());
            }
            let n: u64 = digits.parse().map_err(|_| syntax())?;
            let rest = &text[i..];
            let (unit_ms, len) = if rest.starts_with("ms") {
                (1, 2)
            } else if rest.starts_with('h') {
                (3_600_000, 1)
            } else if rest.starts_with('m') {
                (60_000, 1)
            } else if rest.starts_with('s') {
                (1_000, 1)
            } else {
                return Err(syntax());
            };
            i += len;
            parts += 1;
            total_ms += n * unit_ms;
        }
        if parts == 0 || parts > 4 {
            return Err(syntax());
        }
        Ok(GatewayDuration(Duration::from_millis(total_ms)))
    }
}

impl fmt::Display for GatewayDuration {
    /// The shortest GEP-2257 spelling of the value, e.g. `1m30s`, `500ms`, `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
            if ms >= size {
                write!(f, "{}{unit}", ms / size)?;
                ms %= size;
            }
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for GatewayDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A visitor, so that the error is raised at the scalar and carries its path.
        struct V;
        impl Visitor<'_> for V {
            type Value = GatewayDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration like `30s`, `500ms` or `1m`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<GatewayDuration, E> {
                GatewayDuration::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> u128 {
        GatewayDuration::parse(text).unwrap().get().as_millis()
    }

    #[test]
    fn the_documented_forms_parse() {
        assert_eq!(ms("30s"), 30_000);
        assert_eq!(ms("500ms"), 500);
        assert_eq!(ms("1m"), 60_000);
        assert_eq!(ms("5m"), 300_000);
        assert_eq!(ms("1h30m"), 5_400_000);
        assert_eq!(ms("1h2m3s4ms"), 3_723_004);
        assert_eq!(ms("0s"), 0);
        assert!(GatewayDuration::parse("0s").unwrap().is_zero());
    }

    #[test]
    fn other_forms_are_refused() {
        for bad in [
            "",
            "30",
            "s",
            "1.5s",
            "-1s",
            "30 s",
            "1d",
            "123456s",
            "1h1m1s1ms1h",
            "30us",
        ] {
            assert!(GatewayDuration::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn display_is_the_shortest_spelling() {
        for (text, shown) in [
            ("90s", "1m30s"),
            ("500ms", "500ms"),
            ("0s", "0s"),
            ("2h", "2h"),
        ] {
            assert_eq!(GatewayDuration::parse(text).unwrap().to_string(), shown);
        }
    }
}
