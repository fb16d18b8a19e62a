//! `serve --busy-poll`: the data plane's threads poll for I/O without ever sleeping.
//!
//! A thread that waits for I/O sleeps in the kernel, and the CPU under it may go idle. Waking it
//! again costs little on bare metal but a lot on a virtual machine, where an idle vCPU is handed
//! back to the hypervisor and must be scheduled again before the thread runs: on the 2-vCPU
//! machine the overhead benchmark runs on, that wake-up is a large share of the latency the
//! gateway adds to each request (docs/benchmarks.md). Busy polling trades a whole CPU per data
//! plane thread, idle or not, for never paying it — HAProxy's `busy-polling` makes the same
//! trade. Off by default.
//!
//! How: one task per runtime thread that does nothing but yield. A yielding task is woken only
//! after the scheduler has polled its I/O driver, and a scheduler with a task to run polls the
//! driver with a zero timeout instead of blocking; so while the task exists, every thread checks
//! for I/O in a loop and never parks. Real work is never delayed by it: a yield puts the task
//! behind every task that is ready.

/// Starts the polling tasks on the current runtime, one per thread of a runtime with
/// `threads` threads. They end with the runtime.
pub fn start(threads: usize) {
    for _ in 0..threads.max(1) {
        tokio::spawn(keep_polling());
    }
}

async fn keep_polling() {
    loop {
        tokio::task::yield_now().await;
    }
}
