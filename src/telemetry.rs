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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabel {
    pub action: &'static str,
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
    ready: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut metrics = Metrics {
            registry: Registry::with_prefix("flotilla"),
            reconciles: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            managed_namespaces: Gauge::default(),
            objects: Family::default(),
            api_errors: Family::default(),
            fenced_writes: Counter::default(),
            is_leader: Gauge::default(),
            ready: AtomicBool::new(false),
        };
        metrics.registry.register(
            "reconciles",
            "Namespace reconciles by result",
            metrics.reconciles.clone(),
        );
        metrics.registry.register(
            "reconcile_duration_seconds",
            "Time to reconcile one namespace",
            metrics.reconcile_duration.clone(),
        );
        metrics.registry.register(
            "managed_namespaces",
            "Opted-in namespaces with a NamespaceWorker",
            metrics.managed_namespaces.clone(),
        );
        metrics.registry.register(
            "objects",
            "Writes to stamped objects by action",
            metrics.objects.clone(),
        );
        metrics.registry.register(
            "api_errors",
            "Failed API requests by status code and verb",
            metrics.api_errors.clone(),
        );
        metrics.registry.register(
            "fenced_writes",
            "Writes not sent because this replica's leadership was not certain",
            metrics.fenced_writes.clone(),
        );
        metrics.registry.register(
            "is_leader",
            "1 while this replica holds the leader lease",
            metrics.is_leader.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: crate::version::VERSION,
                commit: crate::version::COMMIT,
            })
            .set(1);
        metrics.registry.register(
            "build_info",
            "The version and git commit of this binary (always 1)",
            build_info,
        );
        metrics
    }
}

impl Metrics {
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Counts `result` if it is a failed request (`verb` as the API server's audit log names
    /// it), and hands it on.
    pub fn count<T>(&self, verb: &'static str, result: kube::Result<T>) -> kube::Result<T> {
        if let Err(error) = &result {
            self.api_error(verb, error);
        }
        result
    }

    pub fn api_error(&self, verb: &'static str, error: &kube::Error) {
        let code = match error {
            kube::Error::Api(status) => status.code.to_string(),
            kube::Error::Service(e) if e.is::<crate::client::Fenced>() => {
                self.fenced_writes.inc();
                return;
            }
            _ => "none".into(),
        };
        self.api_errors
            .get_or_create(&ApiErrorLabels { code, verb })
            .inc();
    }

    /// Counts a watch's failed request (the watch retries by itself).
    pub fn watch_error(&self, error: &kube::runtime::watcher::Error) {
        use kube::runtime::watcher::Error;
        match error {
            Error::InitialListFailed(e) => self.api_error("list", e),
            Error::WatchStartFailed(e) | Error::WatchFailed(e) => self.api_error("watch", e),
            Error::WatchError(status) => {
                let code = status.code.to_string();
                let labels = ApiErrorLabels {
                    code,
                    verb: "watch",
                };
                self.api_errors.get_or_create(&labels).inc();
            }
            Error::NoResourceVersion => {
                let code = "none".to_string();
                let labels = ApiErrorLabels {
                    code,
                    verb: "watch",
                };
                self.api_errors.get_or_create(&labels).inc();
            }
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

/// What the admin server holds open at most, and for how long it waits for a request.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// Connections served at once; one more waits in the listen backlog until one ends.
    connections: usize,
    /// A connection that has not sent a whole request head by then is closed (idle keep-alive
    /// connections too), so slow or silent clients cannot hold every slot for long.
    header_timeout: Duration,
}

/// Probes and a scraper need a handful of connections; 64 leaves room and bounds the tasks and
/// file descriptors a flood of connections can take.
const LIMITS: Limits = Limits {
    connections: 64,
    header_timeout: Duration::from_secs(5),
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
    let accept = move || async move { listener.accept().await.map(|(stream, _)| stream) };
    serve_with(accept, metrics, LIMITS).await;
}

async fn serve_with<S, A, F>(mut accept: A, metrics: Arc<Metrics>, limits: Limits)
where
    A: FnMut() -> F,
    F: Future<Output = std::io::Result<S>>,
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.connections));
    let mut retry: Option<Duration> = None;
    loop {
        // Accepted only once a slot is free: until then a new connection waits in the backlog.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let stream = match accept().await {
            Ok(stream) => {
                retry = None;
                stream
            }
            Err(error) => {
                let wait = retry.map_or(ACCEPT_RETRY_FIRST, |w| (w * 2).min(ACCEPT_RETRY_MAX));
                retry = Some(wait);
                tracing::warn!(%error, retry_in = ?wait, "cannot accept a connection to the admin endpoints");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let response = metrics.respond(request.uri().path());
                    async move { Ok::<_, Infallible>(response) }
                });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(io, service)
                .await;
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests;
