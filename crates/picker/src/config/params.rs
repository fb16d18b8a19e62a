//! Plugin parameters (an untyped [`ParamValue`] tree, as the config crate parses them) read
//! through a checker that rejects every parameter a plugin does not take.

use std::collections::BTreeMap;
use std::time::Duration;

use infergate_config::picker::ParamValue;

use crate::error::ConfigError;

/// One plugin's parameters, checked against the names it takes.
pub(crate) struct Params<'a> {
    plugin: &'a str,
    map: Option<&'a BTreeMap<String, ParamValue>>,
}

impl<'a> Params<'a> {
    /// Errors on the first parameter not in `known`.
    pub(crate) fn new(
        plugin: &'a str,
        map: Option<&'a BTreeMap<String, ParamValue>>,
        known: &[&str],
    ) -> Result<Self, ConfigError> {
        if let Some(unknown) = map
            .into_iter()
            .flat_map(|m| m.keys())
            .find(|k| !known.contains(&k.as_str()))
        {
            return Err(ConfigError::UnknownParameter {
                plugin: plugin.to_owned(),
                parameter: unknown.clone(),
            });
        }
        Ok(Self { plugin, map })
    }

    fn get(&self, key: &str) -> Option<&'a ParamValue> {
        self.map.and_then(|m| m.get(key))
    }

    fn invalid(&self, key: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::InvalidParameter {
            plugin: self.plugin.to_owned(),
            parameter: key.to_owned(),
            reason: reason.into(),
        }
    }

    /// A positive integer.
    pub(crate) fn positive(&self, key: &str) -> Result<Option<usize>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(ParamValue::Int(i)) if *i > 0 => usize::try_from(*i)
                .map(Some)
                .map_err(|_| self.invalid(key, "too large")),
            Some(_) => Err(self.invalid(key, "must be a positive integer")),
        }
    }

    /// A finite number, within `range`.
    pub(crate) fn number(
        &self,
        key: &str,
        range: std::ops::RangeInclusive<f64>,
    ) -> Result<Option<f64>, ConfigError> {
        let v = match self.get(key) {
            None => return Ok(None),
            Some(ParamValue::Int(i)) => *i as f64,
            Some(ParamValue::Float(f)) => *f,
            Some(_) => return Err(self.invalid(key, "must be a number")),
        };
        if v.is_finite() && range.contains(&v) {
            Ok(Some(v))
        } else {
            Err(self.invalid(
                key,
                format!(
                    "must be between {} and {}, got {v}",
                    range.start(),
                    range.end()
                ),
            ))
        }
    }

    /// A boolean.
    pub(crate) fn boolean(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(ParamValue::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.invalid(key, "must be true or false")),
        }
    }

    /// A string.
    pub(crate) fn string(&self, key: &str) -> Result<Option<&'a str>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(ParamValue::Str(s)) => Ok(Some(s)),
            Some(_) => Err(self.invalid(key, "must be a string")),
        }
    }

    /// A duration written as `"250ms"`, `"1s"`, `"1.5s"` or `"2m"`.
    pub(crate) fn duration(&self, key: &str) -> Result<Option<Duration>, ConfigError> {
        let Some(s) = self.string(key)? else {
            return Ok(None);
        };
        parse_duration(s).map(Some).ok_or_else(|| {
            self.invalid(
                key,
                format!("{s:?} is not a duration like \"500ms\" or \"1s\""),
            )
        })
    }

    /// A map of strings to strings.
    pub(crate) fn string_map(
        &self,
        key: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ConfigError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let ParamValue::Map(m) = v else {
            return Err(self.invalid(key, "must be a map of strings"));
        };
        m.iter()
            .map(|(k, v)| match v {
                ParamValue::Str(s) => Ok((k.clone(), s.clone())),
                _ => Err(self.invalid(key, format!("value of {k:?} must be a string"))),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }
}

fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        return None;
    };
    let v: f64 = num.trim().parse().ok()?;
    Duration::try_from_secs_f64(v * scale).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("xs"), None);
    }
}
