//! [`Setting`]: a resolved value that remembers whether the config wrote it, so that
//! `infergate check` can mark defaults. Its own module because the sections that resolve
//! themselves (connections, outlier detection) and the resolver all use it.

use std::fmt::{self, Display, Formatter};

/// A value and whether it came from the defaults rather than the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting<T> {
    /// The value in effect.
    pub value: T,
    /// Taken from [`super::defaults`].
    pub is_default: bool,
}

impl<T> Setting<T> {
    /// Written in the config.
    pub fn set(value: T) -> Self {
        Setting {
            value,
            is_default: false,
        }
    }

    /// Taken from the defaults.
    pub fn default_value(value: T) -> Self {
        Setting {
            value,
            is_default: true,
        }
    }

    /// `written`, else `default`.
    pub fn or(written: Option<T>, default: T) -> Self {
        match written {
            Some(v) => Setting::set(v),
            None => Setting::default_value(default),
        }
    }

    /// The value borrowed, marked the same.
    pub(crate) fn as_ref(&self) -> Setting<&T> {
        Setting {
            value: &self.value,
            is_default: self.is_default,
        }
    }

    /// The value turned into another (for display), marked the same.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Setting<U> {
        Setting {
            value: f(self.value),
            is_default: self.is_default,
        }
    }
}

impl<T: Display> Display for Setting<T> {
    /// The value, followed by ` (default)` when it came from the defaults.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mark = if self.is_default { " (default)" } else { "" };
        write!(f, "{}{mark}", self.value)
    }
}
