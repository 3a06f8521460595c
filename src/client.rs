//! The API clients the operator runs with, both on kube's usual stack (kubeconfig or in-cluster
//! credentials): one for the work, under a client-side rate limit so that no loop, however wrong,
//! can flood the API server; and one for the leader Lease alone, so that renewing leadership never
//! waits behind a backlog of throttled work (and leadership is not lost because work is busy).

use crate::config::Config;
use std::time::Duration;
use tower::limit::RateLimitLayer;

pub struct Clients {
    /// At most `apiBurst` requests per window of `apiBurst / apiQps` seconds, the windows one
    /// after the other: `apiQps` on average, a burst of `apiBurst` at once (twice that across a
    /// window boundary). Requests over the limit wait; none fail.
    pub work: kube::Client,
    /// A renewal every few seconds; not limited.
    pub lease: kube::Client,
}

pub async fn connect(config: &Config) -> kube::Result<Clients> {
    let kubeconfig = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    let window = Duration::from_secs_f64(f64::from(config.api_burst) / f64::from(config.api_qps));
    let limit = RateLimitLayer::new(u64::from(config.api_burst), window);
    let work = kube::client::ClientBuilder::try_from(kubeconfig.clone())?
        .with_layer(&limit)
        .build();
    let lease = kube::Client::try_from(kubeconfig)?;
    Ok(Clients { work, lease })
}
