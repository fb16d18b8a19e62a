//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several replicas (all of
//! which serve) exactly one writes the resource's status. client-go's timings: a lease lasts
//! 15 s, the holder renews every 2 s, and a standby takes over once it has seen the same
//! record, unrenewed, for a whole lease duration — measured on its own clock, so clock skew
//! between replicas does not matter. Every write carries the `resourceVersion` it read, so two
//! replicas racing for one lease cannot both win.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a lease lasts without renewal.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the holder renews and a standby looks.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// A running election: whether this replica leads now, and the task that keeps it.
#[derive(Debug)]
pub struct Election {
    leading: watch::Receiver<bool>,
    task: JoinHandle<()>,
    api: Api<Lease>,
    name: String,
    identity: String,
}

impl Drop for Election {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a standby remembers of the lease it watches.
struct Seen {
    record: (Option<String>, Option<MicroTime>),
    at: Instant,
}

impl Election {
    /// Starts competing for the Lease `name` in `namespace` as `identity`. Must run inside a
    /// tokio runtime.
    pub fn start(client: Client, namespace: &str, name: &str, identity: &str) -> Self {
        let api: Api<Lease> = Api::namespaced(client, namespace);
        let (tx, leading) = watch::channel(false);
        let (lease_api, lease_name, lease_identity) =
            (api.clone(), name.to_owned(), identity.to_owned());
        let name = name.to_owned();
        let identity = identity.to_owned();
        let task = tokio::spawn(async move {
            let mut seen: Option<Seen> = None;
            loop {
                let lead = match try_lead(&api, &name, &identity, &mut seen).await {
                    Ok(lead) => lead,
                    Err(e) => {
                        tracing::warn!(lease = %name, error = %e, "lease not renewed");
                        false
                    }
                };
                if *tx.borrow() != lead {
                    tracing::info!(lease = %name, identity = %identity, leading = lead, "leadership changed");
                }
                tx.send_replace(lead);
                tokio::time::sleep(RETRY_PERIOD).await;
            }
        });
        Self {
            leading,
            task,
            api: lease_api,
            name: lease_name,
            identity: lease_identity,
        }
    }

    /// Stops competing and, when this replica holds the lease, gives it up (an empty holder),
    /// so a standby takes over on its next look instead of after a whole lease duration.
    pub async fn release(&self) {
        self.task.abort();
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.renew_time = Some(now());
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.name, "lease released"),
            Err(e) => {
                tracing::warn!(lease = %self.name, error = %e, "lease not released; a standby takes over when it expires")
            }
        }
    }

    /// Whether this replica holds the lease now (never after [`Election::release`]).
    pub fn is_leader(&self) -> bool {
        !self.task.is_finished() && *self.leading.borrow()
    }
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX)
}

/// One round: create, renew or take over the lease when it is ours to have; whether this
/// replica leads after it.
async fn try_lead(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
    seen: &mut Option<Seen>,
) -> Result<bool, kube::Error> {
    let Some(mut lease) = api.get_opt(name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(identity.to_owned()),
                lease_duration_seconds: Some(seconds(LEASE_DURATION)),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            // Another replica created it first.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let record = (holder.clone(), spec.renew_time.clone());
    let ours = holder.as_deref() == Some(identity);
    if !ours && holder.is_some() {
        let unchanged_for = match seen.as_ref() {
            Some(s) if s.record == record => s.at.elapsed(),
            _ => {
                *seen = Some(Seen {
                    record,
                    at: Instant::now(),
                });
                Duration::ZERO
            }
        };
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(LEASE_DURATION, Duration::from_secs);
        if unchanged_for < duration {
            return Ok(false);
        }
        tracing::info!(lease = name, previous = ?holder, "lease expired: taking over");
    }
    if !ours {
        spec.holder_identity = Some(identity.to_owned());
        spec.acquire_time = Some(now());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.lease_duration_seconds = Some(seconds(LEASE_DURATION));
    spec.renew_time = Some(now());
    // Replace carries the resourceVersion read above: a replica that raced us gets 409.
    match api.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
