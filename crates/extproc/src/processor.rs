//! What every exchange shares: the control plane and the subset indexes of its pools.

use infergate_control::PlaneHandle;

use crate::subset::SubsetIndexes;

/// What every exchange shares: the gateway's data plane and the subset indexes of its pools.
#[derive(Debug)]
pub struct Processor {
    /// The data plane: routes, pools, metrics, clock.
    pub handle: PlaneHandle,
    /// Pool addresses by IP, for subset hints.
    pub subsets: SubsetIndexes,
}

impl Processor {
    /// A processor over the data plane of `handle`.
    pub fn new(handle: PlaneHandle) -> Self {
        Self {
            handle,
            subsets: SubsetIndexes::default(),
        }
    }
}
