//! Status pulls: one task per member reads its `/status/member` every `status.interval`,
//! jittered by up to a tenth either way (so a tier's replicas do not pull in step), within
//! `status.timeout`, and hands the result to the member's state.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{AUTHORIZATION, HOST};
use hyper::{Method, Request};
use infergate_global_picker::{MemberStatus, MEMBER_STATUS_PATH};
use infergate_rng::SplitMix64;

use crate::tier::{MemberAddress, MemberClient, Tier};

/// A status document larger than this is refused (a pool list of a few kilobytes is normal).
const MAX_STATUS_BYTES: usize = 1 << 20;

/// Pulls member `index`'s status until the task is aborted.
pub(crate) async fn pull_forever(tier: Arc<Tier>, index: usize, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let interval = tier.config.status.interval.value;
    loop {
        let result = pull_once(&tier, index).await;
        let now = tier.now();
        {
            let mut table = tier.table();
            let settings = &tier.settings;
            if let Some(member) = table.members.get_mut(index) {
                match result {
                    Ok(doc) => member.state.on_pull(doc, now, settings),
                    Err(e) => {
                        tracing::debug!(member = %member.name, error = %e, "status pull failed");
                        tier.metrics.status_pull_failed(index);
                        member.state.on_pull_failed(settings);
                    }
                }
            }
        }
        let jitter = 0.9 + 0.2 * rng.next_f64();
        tokio::time::sleep(interval.mul_f64(jitter)).await;
    }
}

/// One pull: the document, or why there is none.
async fn pull_once(tier: &Tier, index: usize) -> Result<MemberStatus, String> {
    let address = &tier.addresses[index];
    fetch(
        &address.status_client,
        address,
        tier.config.status.timeout.value,
    )
    .await
}

/// Reads `address`'s status document once within `timeout`.
pub(crate) async fn fetch(
    client: &MemberClient,
    address: &MemberAddress,
    timeout: Duration,
) -> Result<MemberStatus, String> {
    let mut req = Request::builder()
        .method(Method::GET)
        .uri(format!("http://{}{MEMBER_STATUS_PATH}", address.admin))
        .header(HOST, address.admin.as_str());
    if let Some(auth) = &address.authorization {
        req = req.header(AUTHORIZATION, auth.as_ref());
    }
    let req = req
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("building the pull: {e}"))?;
    let pulled = tokio::time::timeout(timeout, async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| format!("unreachable: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("answered {}", resp.status()));
        }
        let body = Limited::new(resp.into_body(), MAX_STATUS_BYTES)
            .collect()
            .await
            .map_err(|e| format!("reading the document: {e}"))?
            .to_bytes();
        MemberStatus::parse(&body)
    })
    .await;
    pulled.unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")))
}
