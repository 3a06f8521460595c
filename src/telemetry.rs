//! Prometheus metrics and the admin HTTP endpoints: `/healthz` (the process serves),
//! `/readyz` (the watch caches are synced) and `/metrics`.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;

mod fleet;
mod process;
#[cfg(test)]
mod queries;

pub use fleet::FleetGauges;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabel {
    pub action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiErrorLabels {
    /// The HTTP status, or `none` when no response came.
    pub code: String,
    pub verb: &'static str,
}

/// The labels of `flotilla_build_info`, whose value is always 1 (the usual `*_build_info`
/// convention: a query joins on it to tell which build a replica runs).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
}

pub struct Metrics {
    registry: Registry,
    /// Reconciles by result: `ok`, `error`, `render_failed`.
    pub reconciles: Family<ResultLabel, Counter>,
    pub reconcile_duration: Histogram,
    /// Namespaces with a NamespaceWorker kept by this instance.
    pub managed_namespaces: Gauge,
    /// Object writes by action: `created`, `updated`, `drift_repaired`, `pruned`, `reaped`.
    pub objects: Family<ActionLabel, Counter>,
    /// Failed API requests, each one, by HTTP status code and verb.
    pub api_errors: Family<ApiErrorLabels, Counter>,
    /// Writes not sent because this replica's leadership was not certain.
    pub fenced_writes: Counter,
    pub is_leader: Gauge,
    /// 1 for the installed admission policy's standing against the config in force
    /// (`in_step`, `missing`, `stale`, `unreadable`), 0 for the others.
    admission_policy: Family<StateLabel, Gauge>,
    /// The fleet and its rollout as the leader sees them.
    pub fleet: FleetGauges,
    /// Sleeping controllers woken, by what woke them (the `Asleep` condition's reason).
    pub wakes: Family<ReasonLabel, Counter>,
    /// From a wake to the controller available again.
    pub wake_duration: Histogram,
    ready: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut metrics = Metrics {
            registry: Registry::default(),
            reconciles: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            managed_namespaces: Gauge::default(),
            objects: Family::default(),
            api_errors: Family::default(),
            fenced_writes: Counter::default(),
            is_leader: Gauge::default(),
            admission_policy: Family::default(),
            fleet: FleetGauges::default(),
            wakes: Family::default(),
            wake_duration: Histogram::new(exponential_buckets(0.25, 2.0, 10)),
            ready: AtomicBool::new(false),
        };
        metrics
            .registry
            .register_collector(Box::new(process::ResidentMemory));
        let registry = metrics.registry.sub_registry_with_prefix("flotilla");
        registry.register(
            "reconciles",
            "Namespace reconciles by result",
            metrics.reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time to reconcile one namespace",
            metrics.reconcile_duration.clone(),
        );
        registry.register(
            "managed_namespaces",
            "Opted-in namespaces with a NamespaceWorker",
            metrics.managed_namespaces.clone(),
        );
        registry.register(
            "objects",
            "Writes to stamped objects by action",
            metrics.objects.clone(),
        );
        registry.register(
            "api_errors",
            "Failed API requests by status code and verb",
            metrics.api_errors.clone(),
        );
        registry.register(
            "fenced_writes",
            "Writes not sent because this replica's leadership was not certain",
            metrics.fenced_writes.clone(),
        );
        registry.register(
            "wakes",
            "Sleeping controllers woken, by what woke them",
            metrics.wakes.clone(),
        );
        registry.register(
            "wake_duration_seconds",
            "Time from waking a sleeping controller to its Deployment available",
            metrics.wake_duration.clone(),
        );
        registry.register(
            "is_leader",
            "1 while this replica holds the leader lease",
            metrics.is_leader.clone(),
        );
        registry.register(
            "admission_policy",
            "1 for the installed admission policy's standing against the config in force: in_step, missing, stale or unreadable",
            metrics.admission_policy.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: crate::version::VERSION,
                commit: crate::version::COMMIT,
            })
            .set(1);
        registry.register(
            "build_info",
            "The version and git commit of this binary (always 1)",
            build_info,
        );
        metrics.fleet.register(registry);
        metrics
    }
}

impl Metrics {
    /// The installed admission policy's standing is now `state`.
    pub fn admission_policy(&self, state: &'static str) {
        for each in ["in_step", "missing", "stale", "unreadable"] {
            let value = i64::from(each == state);
            self.admission_policy
                .get_or_create(&StateLabel { state: each })
                .set(value);
        }
    }

    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Counts a failed request (`verb` as the API server's audit log names it; `code` the HTTP
    /// status, or `none` when no response came). The work client counts each of its own
    /// (client/errors.rs).
    pub fn api_error(&self, verb: &'static str, code: &str) {
        self.api_errors
            .get_or_create(&ApiErrorLabels {
                code: code.to_string(),
                verb,
            })
            .inc();
    }

    /// Counts what fails in a watch's stream once its request was answered: the client counts
    /// the requests themselves (a refused list or watch).
    pub fn watch_error(&self, error: &kube::runtime::watcher::Error) {
        use kube::runtime::watcher::Error;
        match error {
            Error::InitialListFailed(_) | Error::WatchStartFailed(_) => {}
            Error::WatchError(status) => self.api_error("watch", &status.code.to_string()),
            Error::WatchFailed(_) | Error::NoResourceVersion => self.api_error("watch", "none"),
        }
    }

    fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    fn respond(&self, path: &str) -> Response<Full<Bytes>> {
        let (status, body) = match path {
            "/healthz" | "/livez" => (StatusCode::OK, "ok\n".to_string()),
            "/readyz" if self.ready.load(Ordering::Relaxed) => (StatusCode::OK, "ok\n".to_string()),
            "/readyz" => (
                StatusCode::SERVICE_UNAVAILABLE,
                "caches not synced\n".to_string(),
            ),
            "/metrics" => (StatusCode::OK, self.encode()),
            _ => (StatusCode::NOT_FOUND, "not found\n".to_string()),
        };
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response
    }
}

/// What the admin server holds open at most, and for how long.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// Connections served at once; one more waits in the listen backlog until one ends.
    connections: usize,
    /// Connections served at once from one address: one client (say one that pipelines
    /// requests and never reads the answers) cannot take every slot from the probes.
    per_client: usize,
    /// A connection that has not sent a whole request head by then is closed (idle keep-alive
    /// connections too), so slow or silent clients cannot hold every slot for long.
    header_timeout: Duration,
    /// Every connection is closed after this long, whatever it is doing: one whose answers
    /// are never read would otherwise hold its slot for ever.
    lifetime: Duration,
}

/// Probes and a scraper need a handful of connections; 64 leaves room and bounds the tasks and
/// file descriptors a flood of connections can take. A scrape takes milliseconds.
const LIMITS: Limits = Limits {
    connections: 64,
    per_client: 8,
    header_timeout: Duration::from_secs(5),
    lifetime: Duration::from_secs(10),
};

/// After a failed `accept` (out of file descriptors, EMFILE, and the like, which retrying at
/// once would only repeat in a busy loop) the server waits, as Go's net/http does: 5 ms,
/// doubling, at most 1 s; reset by the next success.
const ACCEPT_RETRY_FIRST: Duration = Duration::from_millis(5);
const ACCEPT_RETRY_MAX: Duration = Duration::from_secs(1);

/// Serves the admin endpoints until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "serving /healthz, /readyz and /metrics");
    }
    let listener = &listener;
    let accept = move || async move {
        let (stream, peer) = listener.accept().await?;
        Ok((stream, Some(peer.ip())))
    };
    serve_with(accept, metrics, LIMITS).await;
}

async fn serve_with<S, A, F>(mut accept: A, metrics: Arc<Metrics>, limits: Limits)
where
    A: FnMut() -> F,
    F: Future<Output = std::io::Result<(S, Option<std::net::IpAddr>)>>,
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.connections));
    let clients = Arc::new(Clients::default());
    let mut retry: Option<Duration> = None;
    loop {
        // Accepted only once a slot is free: until then a new connection waits in the backlog.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let (stream, peer) = match accept().await {
            Ok(accepted) => {
                retry = None;
                accepted
            }
            Err(error) => {
                let wait = retry.map_or(ACCEPT_RETRY_FIRST, |w| (w * 2).min(ACCEPT_RETRY_MAX));
                retry = Some(wait);
                tracing::warn!(%error, retry_in = ?wait, "cannot accept a connection to the admin endpoints");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        // Closed at once (its slot with it) when its address holds its share already.
        let Some(client) = Clients::enter(&clients, peer, limits.per_client) else {
            continue;
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let response = metrics.respond(request.uri().path());
                    async move { Ok::<_, Infallible>(response) }
                });
            let io = hyper_util::rt::TokioIo::new(stream);
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(io, service);
            let _ = tokio::time::timeout(limits.lifetime, connection).await;
            drop((slot, client));
        });
    }
}

/// Connections open per client address.
#[derive(Default)]
struct Clients(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

/// One connection counted for its address until dropped.
struct Client {
    clients: Arc<Clients>,
    peer: std::net::IpAddr,
}

impl Clients {
    /// Counts a connection from `peer`, unless it holds `limit` already. A connection without
    /// an address (not TCP) is not counted.
    fn enter(
        clients: &Arc<Clients>,
        peer: Option<std::net::IpAddr>,
        limit: usize,
    ) -> Option<Option<Client>> {
        let Some(peer) = peer else {
            return Some(None);
        };
        let mut open = crate::sync::lock(&clients.0);
        let count = open.entry(peer).or_default();
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(Some(Client {
            clients: Arc::clone(clients),
            peer,
        }))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let mut open = crate::sync::lock(&self.clients.0);
        if let Some(count) = open.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests;
