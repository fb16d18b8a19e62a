//! Bounded label values: the first `limit` distinct values of a label are reported as they are,
//! every later one as `other`, so a client that invents model names or tenants cannot grow the
//! metrics without bound. Pinned values (the models a config names) never fold and do not count
//! toward the limit.

use std::collections::HashSet;
use std::sync::{PoisonError, RwLock};

/// The value a folded label reads.
pub const OTHER: &str = "other";

/// Distinct values of models, and of tenants, reported before they fold into `other` (llm-d's
/// caps).
pub const DEFAULT_LIMIT: usize = 1000;

/// One label's bounded set of values.
#[derive(Debug)]
pub struct LabelCap {
    limit: usize,
    values: RwLock<Values>,
}

#[derive(Debug, Default)]
struct Values {
    pinned: HashSet<String>,
    seen: HashSet<String>,
}

impl LabelCap {
    /// A cap of `limit` distinct unpinned values.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            values: RwLock::new(Values::default()),
        }
    }

    /// Pins `value`: it is always reported as itself.
    pub fn pin(&self, value: &str) {
        let mut v = self.write();
        v.seen.remove(value);
        v.pinned.insert(value.to_owned());
    }

    /// The label value to report for `value`: itself while pinned, already seen or under the
    /// limit (then it is remembered); `other` beyond it. The empty value (unknown) is never
    /// counted. Every request folds its labels, so a value already known (nearly always) takes
    /// only a shared lock.
    pub fn fold(&self, value: &str) -> String {
        if value.is_empty() {
            return String::new();
        }
        {
            let v = self.read();
            if v.pinned.contains(value) || v.seen.contains(value) {
                return value.to_owned();
            }
            if v.seen.len() >= self.limit {
                return OTHER.to_owned();
            }
        }
        // Looked at again under the write lock: another request may have got here first.
        let mut v = self.write();
        if v.pinned.contains(value) {
            return value.to_owned();
        }
        if v.seen.contains(value) || v.seen.len() < self.limit {
            v.seen.insert(value.to_owned());
            return value.to_owned();
        }
        OTHER.to_owned()
    }

    // Sets of strings: a panic while inserting cannot leave them unusable.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Values> {
        self.values.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Values> {
        self.values.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for LabelCap {
    fn default() -> Self {
        Self::new(DEFAULT_LIMIT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_beyond_the_limit_fold_and_pinned_ones_never_do() {
        let cap = LabelCap::new(2);
        cap.pin("llama");
        assert_eq!(cap.fold("a"), "a");
        assert_eq!(cap.fold("b"), "b");
        assert_eq!(cap.fold("c"), OTHER);
        assert_eq!(
            cap.fold("a"),
            "a",
            "a value seen before the limit stays itself"
        );
        assert_eq!(cap.fold("llama"), "llama", "pinned values do not count");
        assert_eq!(cap.fold(""), "");
        cap.pin("c");
        assert_eq!(cap.fold("c"), "c");
    }
}
