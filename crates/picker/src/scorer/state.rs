//! Learned state that scorers read: the no-hit LRU and the session table.

use std::collections::HashMap;

use crate::endpoint::EndpointId;

/// When each endpoint slot last took a cold request (no prefix hit anywhere).
#[derive(Debug, Clone, Default)]
pub(crate) struct ColdLru {
    /// By slot; 0 means never.
    last: Vec<u64>,
    clock: u64,
}

impl ColdLru {
    pub(crate) fn touch(&mut self, slot: u32) {
        self.clock += 1;
        let i = slot as usize;
        if self.last.len() <= i {
            self.last.resize(i + 1, 0);
        }
        if let Some(l) = self.last.get_mut(i) {
            *l = self.clock;
        }
    }

    pub(crate) fn last(&self, slot: u32) -> u64 {
        self.last.get(slot as usize).copied().unwrap_or(0)
    }

    pub(crate) fn forget(&mut self, slot: u32) {
        if let Some(l) = self.last.get_mut(slot as usize) {
            *l = 0;
        }
    }
}

/// Session id → endpoint its last request went to, bounded.
///
/// Two generations: lookups check both, inserts go to the current one, and when it is full it
/// becomes the old one (dropping the previous old one). O(1) per operation, at most `capacity`
/// entries, and a session used within the last `capacity / 2` inserts is never forgotten.
#[derive(Debug, Clone)]
pub(crate) struct SessionTable {
    current: HashMap<String, EndpointId>,
    old: HashMap<String, EndpointId>,
    half: usize,
}

impl SessionTable {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            current: HashMap::new(),
            old: HashMap::new(),
            half: (capacity / 2).max(1),
        }
    }

    pub(crate) fn get(&self, session: &str) -> Option<EndpointId> {
        self.current
            .get(session)
            .or_else(|| self.old.get(session))
            .copied()
    }

    pub(crate) fn learn(&mut self, session: &str, endpoint: EndpointId) {
        if let Some(e) = self.current.get_mut(session) {
            *e = endpoint;
            return;
        }
        if self.current.len() >= self.half {
            self.old = std::mem::take(&mut self.current);
        }
        self.current.insert(session.to_owned(), endpoint);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.current.len() + self.old.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_table_is_bounded_and_keeps_recent_sessions() {
        let mut t = SessionTable::new(4);
        for i in 0..10u64 {
            t.learn(&format!("s{i}"), EndpointId(i));
            assert!(t.len() <= 4);
        }
        assert_eq!(t.get("s9"), Some(EndpointId(9)));
        assert_eq!(t.get("s8"), Some(EndpointId(8)));
        assert_eq!(t.get("s0"), None);
        t.learn("s9", EndpointId(1));
        assert_eq!(t.get("s9"), Some(EndpointId(1)));
    }

    #[test]
    fn cold_lru_orders_by_recency() {
        let mut c = ColdLru::default();
        assert_eq!(c.last(3), 0);
        c.touch(3);
        c.touch(1);
        assert!(c.last(1) > c.last(3));
        c.forget(1);
        assert_eq!(c.last(1), 0);
    }
}
