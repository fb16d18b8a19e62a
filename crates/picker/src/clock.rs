//! The picker's clock: times are durations since an origin the caller chooses (the process
//! start live, zero in virtual time), stored in atomics and packed arrays as nanoseconds.

use std::time::Duration;

/// Nanoseconds of `d`, saturating below `u64::MAX` (which stays free as a "never" marker).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1)
}
