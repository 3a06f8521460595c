//! The API clients the operator runs with, both on kube's usual stack (kubeconfig or in-cluster
//! credentials): one for the work, under a client-side rate limit so that no loop, however wrong,
//! can flood the API server, and fenced so that it writes only while this replica may lead; and
//! one for the leader Lease alone, so that renewing leadership never waits behind a backlog of
//! throttled work, with a connect timeout and without kube's retries; each renewal round is
//! bounded by the time leadership stays valid (lease.rs), so none hangs past it.

mod fence;
mod throttle;

pub use fence::{Fence, Fenced};
pub use throttle::Throttle;

use crate::config::Config;
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

pub async fn connect(config: &Config) -> kube::Result<Clients> {
    let kubeconfig = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    let fence = Arc::new(Fence::closed());
    // The fence is checked after the rate limit: a write that waited for a token is judged
    // when it goes out, not when it was asked for.
    let work = kube::client::ClientBuilder::try_from(kubeconfig.clone())?
        .with_layer(&fence::layer(&fence))
        .with_layer(&Throttle::layer(config.api_qps, config.api_burst))
        .build();
    let lease = kube::Client::try_from(lease_config(kubeconfig, config))?;
    Ok(Clients { work, lease, fence })
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
