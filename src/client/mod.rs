//! The API clients the operator runs with, both on kube's usual stack (kubeconfig or in-cluster
//! credentials): one for the work, under a client-side rate limit so that no loop, however wrong,
//! can flood the API server, fenced so that it writes only while this replica may lead, and
//! counting its failed requests; and
//! one for the leader Lease alone, so that renewing leadership never waits behind a backlog of
//! throttled work, with a connect timeout and without kube's retries; each renewal round is
//! bounded by the time leadership stays valid (lease.rs), so none hangs past it.
//!
//! Neither client has kube's retry layer. kube places it under every layer added to its stack,
//! so the fence would judge a write once and kube would resend it on a 429, 503 or 504 up to 15
//! times over minutes, long after leadership could have passed to another replica. A failed
//! request is tried again by whoever made it: a reconcile with its namespace's backoff, the
//! rollout at its next step, a watch with kube-runtime's backoff; each write is fenced again
//! then.

mod errors;
mod fence;
mod throttle;

pub use fence::{Fence, Fenced, TimedOut};
pub use throttle::Throttle;

use crate::config::Config;
use crate::telemetry::Metrics;
use std::sync::Arc;
use std::time::Duration;

pub struct Clients {
    /// Under a token bucket, as client-go's QPS and burst: `apiBurst` requests at once, then
    /// `apiQps` a second. Requests over the limit wait; none fail. Writes pass only while
    /// `fence` is open.
    pub work: kube::Client,
    /// A renewal every few seconds; not limited.
    pub lease: kube::Client,
    /// Opened by leader election for as long as this replica's leadership is certain.
    pub fence: Arc<Fence>,
}

/// The clients for `config`; the work client counts its failed requests in `metrics`.
pub async fn connect(config: &Config, metrics: &Arc<Metrics>) -> kube::Result<Clients> {
    let kubeconfig = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    let fence = Arc::new(Fence::closed());
    let work = work_client(kubeconfig.clone(), &fence, config, metrics)?;
    let lease = kube::Client::try_from(lease_config(kubeconfig, config))?;
    Ok(Clients { work, lease, fence })
}

/// The work client: throttled, then fenced, without kube's retries. The fence is checked after
/// the rate limit: a write that waited for a token is judged when it goes out, not when it was
/// asked for. Failed requests are counted around both, so that a fenced write is counted too.
fn work_client(
    mut kubeconfig: kube::Config,
    fence: &Arc<Fence>,
    config: &Config,
    metrics: &Arc<Metrics>,
) -> kube::Result<kube::Client> {
    kubeconfig.default_retry = false;
    Ok(kube::client::ClientBuilder::try_from(kubeconfig)?
        .with_layer(&fence::layer(fence, write_timeout(config)))
        .with_layer(&Throttle::layer(config.api_qps, config.api_burst))
        .with_layer(&errors::layer(metrics))
        .build())
}

/// How long a write may take before it is abandoned: half the fence's margin. The fence closes
/// two thirds of a lease after the last renewal began, and no other replica can take over
/// before the lease has run out, a third later; a write sent just before the fence closes is
/// given up well before then.
fn write_timeout(config: &Config) -> Duration {
    Duration::from_secs(config.leader_election.lease_duration_seconds) / 6
}

/// The Lease client's settings: a connect timeout well within the renew deadline, and no
/// retries (kube retries 429 and 5xx by default; a renewal that fails is simply tried again on
/// the next round, while it can still count). No read or write timeout: kube sets those on the
/// connection, not the request, so an idle pooled connection dies one timeout after its last
/// read, and with renewals a period apart that is when the next renewal is on it (the renewal
/// then fails). lease.rs bounds each round instead.
fn lease_config(mut kubeconfig: kube::Config, config: &Config) -> kube::Config {
    let timeout = Duration::from_secs(config.leader_election.lease_duration_seconds) / 5;
    kubeconfig.connect_timeout = Some(timeout);
    kubeconfig.read_timeout = None;
    kubeconfig.write_timeout = None;
    kubeconfig.default_retry = false;
    kubeconfig
}

#[cfg(test)]
mod tests;
