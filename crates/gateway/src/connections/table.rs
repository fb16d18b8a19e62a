//! Admission at accept: the listener's connection limit, each source address's share of it,
//! and room made at the limit by closing the connection idle the longest — so a flood of
//! connections that send nothing cannot keep a real client out, and one address cannot take
//! every slot.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use infergate_telemetry::connections::CloseReason;
use infergate_telemetry::Metrics;
use tokio::time::Instant;

use super::activity::Activity;

/// The connections open now.
#[derive(Debug)]
pub struct ConnectionTable {
    epoch: Instant,
    metrics: Arc<Metrics>,
    inner: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    next_id: u64,
    by_id: HashMap<u64, (IpAddr, Arc<Activity>)>,
    per_source: HashMap<IpAddr, u32>,
}

impl Open {
    fn remove(&mut self, id: u64) -> bool {
        let Some((ip, _)) = self.by_id.remove(&id) else {
            return false;
        };
        if let Some(n) = self.per_source.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&ip);
            }
        }
        true
    }
}

/// A connection's slot, given back when dropped (when its task ends).
#[derive(Debug)]
pub struct Lease {
    table: Arc<ConnectionTable>,
    id: u64,
    /// What the connection does, for its watchdog.
    pub activity: Arc<Activity>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let open = {
            let mut open = self.table.lock();
            open.remove(self.id);
            open.by_id.len()
        };
        self.table.metrics.connections.open.set(open as i64);
    }
}

impl ConnectionTable {
    /// An empty table whose clock starts now.
    pub fn new(metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(ConnectionTable {
            epoch: Instant::now(),
            metrics,
            inner: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        // Every critical section leaves the maps consistent, so a panic elsewhere does not
        // make them unusable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a connection from `source`, or says why not. At `limit` the connection idle the
    /// longest (none of its requests in flight) is evicted to make room; with none idle the new
    /// one is refused. A source holding `per_source` already is refused.
    pub fn admit(
        self: &Arc<Self>,
        source: IpAddr,
        limit: u32,
        per_source: u32,
    ) -> Result<Lease, CloseReason> {
        let (lease, open) = {
            let mut open = self.lock();
            if open.per_source.get(&source).copied().unwrap_or(0) >= per_source {
                return Err(CloseReason::RefusedPerSource);
            }
            if open.by_id.len() >= limit as usize {
                let victim = open
                    .by_id
                    .iter()
                    .filter(|(_, (_, a))| a.is_idle())
                    .min_by_key(|(_, (_, a))| a.idle_since())
                    .map(|(id, (_, a))| (*id, Arc::clone(a)));
                let Some((id, activity)) = victim else {
                    return Err(CloseReason::RefusedAtLimit);
                };
                open.remove(id);
                activity.evict();
            }
            open.next_id += 1;
            let id = open.next_id;
            let activity = Arc::new(Activity::new(self.epoch));
            open.by_id.insert(id, (source, Arc::clone(&activity)));
            *open.per_source.entry(source).or_insert(0) += 1;
            let lease = Lease {
                table: Arc::clone(self),
                id,
                activity,
            };
            (lease, open.by_id.len())
        };
        self.metrics.connections.open.set(open as i64);
        Ok(lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[tokio::test]
    async fn a_source_at_its_share_is_refused_while_others_get_in() {
        let table = ConnectionTable::new(Arc::new(Metrics::new()));
        let _a = table.admit(ip(1), 4, 2).unwrap();
        let _b = table.admit(ip(1), 4, 2).unwrap();
        assert_eq!(
            table.admit(ip(1), 4, 2).unwrap_err(),
            CloseReason::RefusedPerSource
        );
        let _c = table.admit(ip(2), 4, 2).unwrap();
    }

    #[tokio::test]
    async fn at_the_limit_the_longest_idle_yields_and_a_busy_one_never_does() {
        let table = ConnectionTable::new(Arc::new(Metrics::new()));
        let busy = table.admit(ip(1), 2, 2).unwrap();
        let _req = busy.activity.request_started();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let idle = table.admit(ip(2), 2, 2).unwrap();
        let newcomer = table.admit(ip(3), 2, 2).unwrap();
        assert!(
            matches!(
                tokio::time::timeout(
                    std::time::Duration::from_secs(1),
                    idle.activity.watch(Default::default())
                )
                .await,
                Ok(CloseReason::Evicted)
            ),
            "the idle connection is told to close"
        );
        // Both remaining are busy or new-and-idle; make the newcomer busy too.
        let _req2 = newcomer.activity.request_started();
        assert_eq!(
            table.admit(ip(4), 2, 2).unwrap_err(),
            CloseReason::RefusedAtLimit
        );
        // The evicted one's lease going away does not free a second slot.
        drop(idle);
        assert_eq!(
            table.admit(ip(4), 2, 2).unwrap_err(),
            CloseReason::RefusedAtLimit
        );
        drop(busy);
        let _e = table.admit(ip(4), 2, 2).unwrap();
    }
}
