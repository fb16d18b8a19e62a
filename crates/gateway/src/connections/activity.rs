//! One connection's activity, written by its I/O wrapper and its requests, read by its
//! watchdog. Times are milliseconds on the listener's clock, stored plus one so that zero can
//! mean "not set" in an atomic.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};
use infergate_telemetry::connections::CloseReason;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::verdict::{verdict, Snapshot, Timeouts, Verdict};

/// What protocol the connection speaks, once known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Not known yet (before the first bytes, or during a TLS handshake).
    Unknown = 0,
    /// HTTP/1.x: its request heads are timed.
    Http1 = 1,
    /// HTTP/2: frames of many streams interleave, so there is no head to time; the idle
    /// timeout and pings bound it.
    Http2 = 2,
}

/// The connection preface every HTTP/2 client sends first (RFC 9113, section 3.4).
const H2_PREFACE_START: &[u8] = b"PRI ";

/// One connection's activity.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    accepted: u64,
    bytes_read: AtomicU64,
    in_flight: AtomicU32,
    idle_since: AtomicU64,
    head_started: AtomicU64,
    write_blocked_since: AtomicU64,
    protocol: AtomicU8,
    evicted: AtomicBool,
    changed: Notify,
}

impl Activity {
    /// A connection accepted now, on the clock that starts at `epoch`.
    pub fn new(epoch: Instant) -> Activity {
        let a = Activity {
            epoch,
            accepted: 0,
            bytes_read: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            idle_since: AtomicU64::new(0),
            head_started: AtomicU64::new(0),
            write_blocked_since: AtomicU64::new(0),
            protocol: AtomicU8::new(Protocol::Unknown as u8),
            evicted: AtomicBool::new(false),
            changed: Notify::new(),
        };
        let now = a.now();
        Activity {
            accepted: now,
            idle_since: AtomicU64::new(now),
            ..a
        }
    }

    /// Milliseconds since the epoch, plus one (never zero).
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    /// What the protocol is, once a TLS handshake's ALPN says so.
    pub fn set_protocol(&self, protocol: Protocol) {
        self.protocol.store(protocol as u8, Relaxed);
        if protocol == Protocol::Http1 {
            // The handshake is done; the head comes next and is timed from here.
            self.start_head();
        }
    }

    fn protocol(&self) -> Protocol {
        match self.protocol.load(Relaxed) {
            1 => Protocol::Http1,
            2 => Protocol::Http2,
            _ => Protocol::Unknown,
        }
    }

    fn start_head(&self) {
        if self.in_flight.load(Relaxed) == 0
            && self
                .head_started
                .compare_exchange(0, self.now(), Relaxed, Relaxed)
                .is_ok()
        {
            // A new, earlier deadline: the watchdog must look again.
            self.changed.notify_one();
        }
    }

    /// Bytes read from the client; `first` is the buffer they were read into, looked at to
    /// tell the protocol when `detect` (plain TCP, where no ALPN says it).
    pub(super) fn read(&self, n: usize, first: &[u8], detect: bool) {
        let before = self.bytes_read.fetch_add(n as u64, Relaxed);
        if before == 0 && detect {
            let p = if first.starts_with(H2_PREFACE_START) {
                Protocol::Http2
            } else {
                Protocol::Http1
            };
            self.protocol.store(p as u8, Relaxed);
        }
        if self.protocol() == Protocol::Http1 {
            self.start_head();
        }
    }

    /// A write the client's socket would not take.
    pub(super) fn write_blocked(&self) {
        if self
            .write_blocked_since
            .compare_exchange(0, self.now(), Relaxed, Relaxed)
            .is_ok()
        {
            self.changed.notify_one();
        }
    }

    /// A write the client's socket took.
    pub(super) fn wrote(&self) {
        self.write_blocked_since.store(0, Relaxed);
    }

    /// A request's head was read: the head clock stops and the idle clock is held until the
    /// returned guard (kept by the response body) is dropped.
    pub fn request_started(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Relaxed);
        self.head_started.store(0, Relaxed);
        InFlight(Arc::clone(self))
    }

    /// Closes the connection at the watchdog's next look: idle, and its slot is wanted.
    pub(super) fn evict(&self) {
        self.evicted.store(true, Relaxed);
        self.changed.notify_one();
    }

    /// Whether it has no request in flight.
    pub(super) fn is_idle(&self) -> bool {
        self.in_flight.load(Relaxed) == 0
    }

    /// Since when it has been idle (milliseconds, plus one).
    pub(super) fn idle_since(&self) -> u64 {
        self.idle_since.load(Relaxed)
    }

    fn snapshot(&self) -> Snapshot {
        let set = |v: u64| (v != 0).then_some(v);
        Snapshot {
            accepted_ms: self.accepted,
            bytes_read: self.bytes_read.load(Relaxed),
            in_flight: self.in_flight.load(Relaxed),
            idle_since_ms: self.idle_since.load(Relaxed),
            head_started_ms: set(self.head_started.load(Relaxed)),
            write_blocked_since_ms: set(self.write_blocked_since.load(Relaxed)),
        }
    }

    /// Resolves with the reason once the connection must close: a timeout ran out, or it was
    /// evicted. Wakes at the earliest deadline and whenever the activity brings one nearer.
    pub async fn watch(&self, timeouts: Timeouts) -> CloseReason {
        loop {
            // Registered before the snapshot, so a change between the two is not missed.
            let changed = self.changed.notified();
            if self.evicted.load(Relaxed) {
                return CloseReason::Evicted;
            }
            match verdict(&self.snapshot(), &timeouts, self.now()) {
                Verdict::Close(reason) => return reason,
                Verdict::CheckAt(at) => {
                    let wake = self.epoch + std::time::Duration::from_millis(at.saturating_sub(1));
                    tokio::select! {
                        () = changed => {}
                        () = tokio::time::sleep_until(wake) => {}
                    }
                }
                Verdict::Wait => changed.await,
            }
        }
    }
}

/// A request in flight on its connection; dropped when its response ends (or is dropped).
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        a.idle_since.store(a.now(), Relaxed);
        if a.in_flight.fetch_sub(1, Relaxed) == 1 {
            // Idle now: the idle clock starts, a deadline the watchdog did not have.
            a.changed.notify_one();
        }
    }
}

/// A response body that keeps its request counted in flight until it ends.
#[derive(Debug)]
pub struct Tracked<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B> Tracked<B> {
    /// `body`, with the request counted until it is dropped.
    pub fn new(body: B, in_flight: InFlight) -> Self {
        Tracked {
            body,
            _in_flight: in_flight,
        }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
