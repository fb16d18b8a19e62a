//! LoRA adapter residency: `max_loras` GPU slots and an LRU of `max_cpu_loras` in host memory.
//!
//! Invariants:
//! - an adapter used by a running request holds a GPU slot and is never evicted from it;
//! - `gpu` and `cpu` are in least-recently-used-first order, with no duplicates;
//! - loads happen while the scheduler builds a step and their time is added to that step, so
//!   loads on one replica are serialized, as in vLLM's model runner.

use std::time::Duration;

/// An adapter's index in the engine's adapter table.
pub type AdapterId = u32;

/// PCIe 4 ×16 host-to-device throughput reached by adapter copies.
const HOST_TO_GPU_BYTES_PER_SECOND: f64 = 25e9;
/// NVMe read throughput for an adapter not in host memory.
const DISK_BYTES_PER_SECOND: f64 = 3e9;

/// What it costs to bring an adapter to a GPU slot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadCosts {
    /// From host memory (the CPU LRU).
    pub from_host: Duration,
    /// From disk (not in the CPU LRU).
    pub from_disk: Duration,
}

impl LoadCosts {
    /// Costs for an adapter of `bytes` bytes.
    pub fn for_adapter_bytes(bytes: f64) -> LoadCosts {
        LoadCosts {
            from_host: Duration::from_secs_f64(bytes / HOST_TO_GPU_BYTES_PER_SECOND),
            from_disk: Duration::from_secs_f64(
                bytes / DISK_BYTES_PER_SECOND + bytes / HOST_TO_GPU_BYTES_PER_SECOND,
            ),
        }
    }
}

/// The answer to "may a request with this adapter join the batch?".
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SlotDecision {
    /// The adapter is on the GPU already.
    Resident,
    /// It was loaded into a slot; the step pays this much.
    Loaded(Duration),
    /// No slot can be had now: the request waits.
    NoSlot,
}

/// GPU slots and host cache of one replica.
#[derive(Debug, Clone)]
pub struct LoraSlots {
    max_loras: usize,
    max_cpu_loras: usize,
    costs: LoadCosts,
    gpu: Vec<AdapterId>,
    cpu: Vec<AdapterId>,
    /// Running requests per adapter id.
    in_use: Vec<u32>,
    /// Adapters with at least one running request.
    active: usize,
    loads: u64,
}

impl LoraSlots {
    /// Empty slots.
    pub fn new(max_loras: usize, max_cpu_loras: usize, costs: LoadCosts) -> LoraSlots {
        LoraSlots {
            max_loras,
            max_cpu_loras: max_cpu_loras.max(max_loras),
            costs,
            gpu: Vec::new(),
            cpu: Vec::new(),
            in_use: Vec::new(),
            active: 0,
            loads: 0,
        }
    }

    /// GPU slots.
    pub fn max_loras(&self) -> usize {
        self.max_loras
    }

    /// Adapters loaded onto a GPU slot so far.
    pub fn loads(&self) -> u64 {
        self.loads
    }

    /// Adapters now in GPU slots, least recently used first.
    pub fn resident(&self) -> &[AdapterId] {
        &self.gpu
    }

    /// Whether `adapter` can run in a batch that already uses `batch_adapters` distinct
    /// adapters; loads it if a slot is free or evictable.
    pub fn acquire(&mut self, adapter: AdapterId, batch_adapters: usize) -> SlotDecision {
        if let Some(pos) = self.gpu.iter().position(|&a| a == adapter) {
            let a = self.gpu.remove(pos);
            self.gpu.push(a);
            return SlotDecision::Resident;
        }
        if batch_adapters >= self.max_loras {
            return SlotDecision::NoSlot;
        }
        if self.gpu.len() >= self.max_loras {
            let Some(victim) = self.gpu.iter().position(|&a| self.uses(a) == 0) else {
                return SlotDecision::NoSlot;
            };
            self.gpu.remove(victim);
        }
        let cost = match self.cpu.iter().position(|&a| a == adapter) {
            Some(pos) => {
                self.cpu.remove(pos);
                self.costs.from_host
            }
            None => self.costs.from_disk,
        };
        self.cpu.push(adapter);
        if self.cpu.len() > self.max_cpu_loras {
            self.cpu.remove(0);
        }
        self.gpu.push(adapter);
        self.loads += 1;
        SlotDecision::Loaded(cost)
    }

    /// A running request of `adapter` started.
    pub fn start_use(&mut self, adapter: AdapterId) {
        let i = adapter as usize;
        if self.in_use.len() <= i {
            self.in_use.resize(i + 1, 0);
        }
        if self.in_use[i] == 0 {
            self.active += 1;
        }
        self.in_use[i] += 1;
    }

    /// Distinct adapters with running requests: the adapters a new batch already carries.
    pub fn active_adapters(&self) -> usize {
        self.active
    }

    /// A running request of `adapter` finished or was preempted.
    pub fn end_use(&mut self, adapter: AdapterId) {
        if let Some(n) = self.in_use.get_mut(adapter as usize) {
            if *n == 1 {
                self.active -= 1;
            }
            *n = n.saturating_sub(1);
        }
    }

    /// Running requests using `adapter`.
    pub fn uses(&self, adapter: AdapterId) -> u32 {
        self.in_use.get(adapter as usize).copied().unwrap_or(0)
    }

    /// Forgets an adapter that was unloaded through the API. A slot it holds while in use is
    /// kept until its requests end.
    pub fn forget(&mut self, adapter: AdapterId) {
        if self.uses(adapter) == 0 {
            self.gpu.retain(|&a| a != adapter);
        }
        self.cpu.retain(|&a| a != adapter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(max_loras: usize, max_cpu: usize) -> LoraSlots {
        LoraSlots::new(max_loras, max_cpu, LoadCosts::for_adapter_bytes(84e6))
    }

    #[test]
    fn an_84_mb_adapter_loads_from_host_in_3_to_4_ms_and_from_disk_in_tens() {
        let costs = LoadCosts::for_adapter_bytes(84e6);
        assert!((3.0..=4.0).contains(&(costs.from_host.as_secs_f64() * 1e3)));
        assert!((10.0..=100.0).contains(&(costs.from_disk.as_secs_f64() * 1e3)));
    }

    #[test]
    fn first_load_comes_from_disk_then_from_host() {
        let mut s = slots(1, 4);
        let costs = LoadCosts::for_adapter_bytes(84e6);
        assert_eq!(s.acquire(1, 0), SlotDecision::Loaded(costs.from_disk));
        assert_eq!(s.acquire(1, 0), SlotDecision::Resident);
        assert_eq!(s.acquire(2, 0), SlotDecision::Loaded(costs.from_disk));
        assert_eq!(s.acquire(1, 0), SlotDecision::Loaded(costs.from_host));
        assert_eq!(s.loads(), 3);
    }

    #[test]
    fn an_adapter_in_use_is_never_evicted() {
        let mut s = slots(2, 4);
        assert!(matches!(s.acquire(1, 0), SlotDecision::Loaded(_)));
        s.start_use(1);
        assert!(matches!(s.acquire(2, 1), SlotDecision::Loaded(_)));
        s.start_use(2);
        // Both slots busy: a third adapter waits even in an empty batch.
        assert_eq!(s.acquire(3, 0), SlotDecision::NoSlot);
        s.end_use(1);
        assert!(matches!(s.acquire(3, 1), SlotDecision::Loaded(_)));
        assert_eq!(s.resident(), &[2, 3]);
    }

    #[test]
    fn a_batch_holds_at_most_max_loras_distinct_adapters() {
        let mut s = slots(2, 4);
        assert_eq!(s.acquire(5, 2), SlotDecision::NoSlot);
    }

    #[test]
    fn host_cache_is_an_lru_of_max_cpu_loras() {
        let mut s = slots(1, 2);
        let costs = LoadCosts::for_adapter_bytes(84e6);
        for a in [1, 2, 3] {
            assert_eq!(s.acquire(a, 0), SlotDecision::Loaded(costs.from_disk));
        }
        // 1 fell out of the two-entry host cache; 3 is still there.
        assert_eq!(s.acquire(1, 0), SlotDecision::Loaded(costs.from_disk));
        assert_eq!(s.acquire(3, 0), SlotDecision::Loaded(costs.from_host));
    }
}
