//! The response's way back: the endpoint that served (Envoy reports it after its retries), the
//! in-flight guard moved there when it is not the primary, and the gateway's accounting (TTFT,
//! usage, end-to-end latency, the flow-control permit) fed with each chunk until the response
//! ends.

use std::sync::Arc;

use infergate_gateway::account::Accounting;
use infergate_gateway::metrics::EndpointLabels;
use infergate_gateway::usage::UsageTap;
use infergate_gateway::GatewayHandle;
use tokio::time::Instant;

use crate::decide::Routed;

/// One response's accounting. Dropping it ends the accounting (the in-flight guard goes), so a
/// stream that breaks off still releases its endpoint.
#[derive(Debug)]
pub struct Answer {
    accounting: Accounting,
}

/// When the request started and when it was handed to Envoy.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    /// Its headers reached infergate.
    pub started: Instant,
    /// The destination went back to Envoy: the dispatch, as far as infergate can see it.
    pub dispatched: Instant,
}

impl Answer {
    /// Starts accounting for the response to `routed`, served by `served` (as Envoy reported
    /// it; the primary when it did not). Returns the address that served.
    ///
    /// When Envoy moved on to a fallback, the fallback is dispatched (it learns the prefix and
    /// is counted in flight) and the primary's guard is released. A served address outside the
    /// pool keeps the primary's dispatch: there is nothing else to credit.
    pub fn start(
        handle: &GatewayHandle,
        routed: Routed,
        served: Option<&str>,
        content_type: Option<&str>,
        times: Times,
    ) -> (Self, String) {
        let Routed {
            target,
            snap,
            features,
            model,
            primary,
            dispatch,
            permit,
            ..
        } = routed;
        let pool = &target.pool;
        let primary_address = snap.pool.address(primary).unwrap_or_default().to_owned();
        let served_id = served
            .and_then(|a| snap.pool.position_of_address(a))
            .and_then(|pos| snap.pool.spec(pos))
            .map(|s| (s.id, s.address.clone()));
        let (dispatch, endpoint) = match served_id {
            Some((id, address)) if id != primary => {
                match pool.dispatch(&snap, id, &features, handle.clock().now()) {
                    Ok(d) => {
                        handle
                            .metrics()
                            .routing_decisions
                            .get_or_create(&EndpointLabels {
                                pool: pool.name.clone(),
                                endpoint: address.clone(),
                            })
                            .inc();
                        (d, address)
                    }
                    Err(_) => (dispatch, primary_address),
                }
            }
            _ => (dispatch, primary_address),
        };
        let sse =
            content_type.is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"));
        let mut accounting = Accounting::new(
            Arc::clone(handle.metrics()),
            Arc::clone(pool),
            &model,
            times.started,
            times.dispatched,
            dispatch.ticket,
            dispatch.guard,
            sse,
            UsageTap::for_content_type(content_type),
        );
        accounting.hold(permit);
        (Self { accounting }, endpoint)
    }

    /// A response chunk on its way to the client.
    pub fn on_data(&mut self, chunk: &[u8]) {
        self.accounting.on_data(chunk);
    }

    /// The response ended. Runs once; later calls do nothing.
    pub fn finish(&mut self) {
        self.accounting.finish();
    }
}
