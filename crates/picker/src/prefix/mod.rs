//! The approximate prefix index: which endpoint probably holds which prompt prefix in its KV
//! cache, learned from where requests were sent (upstream `approx-prefix-cache-producer`).

mod hash;
mod hint;
mod index;
mod lru;
mod memo;

pub use hash::{hash_prompt, hash_prompt_into, PrefixParams};
pub use index::{IndexStats, PrefixIndex};
pub use memo::{HashMemo, DEFAULT_MEMO_SLOTS};
