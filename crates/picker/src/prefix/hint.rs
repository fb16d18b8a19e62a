//! Where the last match of a prompt's first block found its drops: split points for the next
//! match of a prompt that starts the same way.
//!
//! Requests that share a first block usually share more: a system prompt, the earlier turns of a
//! conversation. Their matches then end at the same few depths (the end of the system prompt on
//! the endpoints that learned only that, the end of the conversation so far on the one that
//! served it). [`PrefixIndex::match_into`](super::PrefixIndex::match_into) bisects for those
//! depths with lookups in a large map, each a likely cache miss; trying the depths the previous
//! match found first finds them in one round of lookups when they have not moved, and leaves
//! shorter intervals to bisect when they have.
//!
//! A hint is only ever a choice of where to look: the match is exact whatever the hint says, so
//! a wrong, stale or colliding hint costs a few lookups and never a wrong answer.

/// Hints kept: a direct-mapped table, 16 bytes an entry (64 KiB), small enough to stay in the
/// CPU's cache next to the request's hashes.
const ENTRIES: usize = 4096;

/// Drop depths remembered per first block.
pub(super) const DEPTHS: usize = 4;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    /// The first block's hash; 0 marks an unused entry (a real hash of 0 is never hinted).
    first: u64,
    /// Match lengths (blocks) at which the last match saw some endpoint's match end, ascending;
    /// 0 marks an unused depth.
    depths: [u16; DEPTHS],
}

/// Drop depths by first block hash.
#[derive(Debug, Clone)]
pub(super) struct DropHints {
    entries: Vec<Entry>,
}

impl Default for DropHints {
    fn default() -> Self {
        Self {
            entries: vec![Entry::default(); ENTRIES],
        }
    }
}

impl DropHints {
    /// The depths the last match of a prompt starting with `first` ended at (none known: empty).
    pub(super) fn get(&self, first: u64) -> &[u16] {
        match self.entries.get(slot(first)) {
            Some(e) if e.first == first && first != 0 => {
                let n = e.depths.iter().take_while(|&&d| d != 0).count();
                e.depths.get(..n).unwrap_or(&[])
            }
            _ => &[],
        }
    }

    /// Remembers the match lengths of a match of a prompt starting with `first`: its distinct
    /// lengths, the deepest [`DEPTHS`] of them (deep drops cost the most lookups to find).
    pub(super) fn remember(&mut self, first: u64, lengths: impl Iterator<Item = u32>) {
        if first == 0 {
            return;
        }
        let mut depths = [0u16; DEPTHS];
        for len in lengths {
            let Ok(len) = u16::try_from(len) else {
                continue;
            };
            if len == 0 || depths.contains(&len) {
                continue;
            }
            // Keep the deepest: replace the shallowest (an unused 0 first) when it is shallower.
            if let Some(min) = depths.iter_mut().min() {
                if *min < len {
                    *min = len;
                }
            }
        }
        // Ascending, the unused zeros last.
        depths.sort_unstable_by_key(|&d| (d == 0, d));
        if let Some(e) = self.entries.get_mut(slot(first)) {
            *e = Entry { first, depths };
        }
    }
}

/// The entry of `first`: its high bits (the hash is already uniform; the low bits also pick the
/// index map's buckets, so the high ones keep the two independent).
fn slot(first: u64) -> usize {
    (first >> 52) as usize % ENTRIES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_deepest_distinct_lengths_ascending() {
        let mut h = DropHints::default();
        assert!(h.get(7).is_empty());
        h.remember(7, [125, 3, 125, 250, 0, 1, 9].into_iter());
        assert_eq!(h.get(7), &[3, 9, 125, 250]);
        h.remember(7, [2].into_iter());
        assert_eq!(h.get(7), &[2]);
        // Another first block in the same entry replaces it; the old one is then unknown.
        let other = 7 + (1 << 40);
        assert_eq!(slot(other), slot(7));
        h.remember(other, [5].into_iter());
        assert_eq!(h.get(other), &[5]);
        assert!(h.get(7).is_empty());
        // 0 is never a key, and lengths past u16 are not depths.
        h.remember(0, [4].into_iter());
        assert!(h.get(0).is_empty());
        h.remember(9, [70_000, 4].into_iter());
        assert_eq!(h.get(9), &[4]);
    }
}
