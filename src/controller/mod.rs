//! The operator loop: watches feed a work queue of namespace names; workers reconcile them.

mod events;
mod queue;
mod reconcile;
mod watches;
mod worker;

use crate::config::Config;
use crate::kinds::Kind;
use crate::object::{ObjectKey, Stamped};
use crate::render::Renderer;
use crate::status::WorkerStatus;
use queue::WorkQueue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use watches::Stores;

pub use reconcile::Outcome;

/// Everything a reconcile needs. Nothing global.
pub struct Context {
    client: kube::Client,
    config: Config,
    renderer: Renderer,
    stores: Stores,
    events: events::Events,
    /// Objects known to match their rendered content at a given resourceVersion. While the
    /// watch still shows that version and the hash is unchanged, no request is needed at all.
    verified: Mutex<HashMap<ObjectKey, Verified>>,
    /// The status last written per namespace: fresher than the watch right after a write.
    statuses: Mutex<HashMap<String, WorkerStatus>>,
}

struct Verified {
    resource_version: String,
    hash: String,
    /// The live object, kept for workloads (their status decides the worker's health).
    workload: Option<Arc<serde_json::Value>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a panic mid-insert into a plain map; the map is still usable.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Context {
    /// `Some(live workload or None)` if the object is known to be in sync, without a request.
    fn verified_workload(&self, object: &Stamped) -> Option<Option<Arc<serde_json::Value>>> {
        let rv = self.stores.resource_version(&object.key)?;
        let verified = lock(&self.verified);
        let entry = verified.get(&object.key)?;
        (entry.resource_version == rv && entry.hash == object.hash).then(|| entry.workload.clone())
    }

    fn verified(&self, object: &Stamped, live: Option<Arc<serde_json::Value>>) {
        let Some(rv) = live
            .as_ref()
            .and_then(|l| l["metadata"]["resourceVersion"].as_str())
        else {
            return;
        };
        let workload = (object.key.kind == Kind::Deployment)
            .then(|| live.clone())
            .flatten();
        let entry = Verified {
            resource_version: rv.to_string(),
            hash: object.hash.clone(),
            workload,
        };
        lock(&self.verified).insert(object.key.clone(), entry);
    }

    fn forget(&self, key: &ObjectKey) {
        lock(&self.verified).remove(key);
    }

    fn previous_status(&self, namespace: &str) -> Option<WorkerStatus> {
        lock(&self.statuses)
            .get(namespace)
            .cloned()
            .or_else(|| self.stores.worker(namespace)?.status.clone())
    }

    fn remember_status(&self, namespace: &str, status: &WorkerStatus) {
        lock(&self.statuses).insert(namespace.to_string(), status.clone());
    }

    fn forget_status(&self, namespace: &str) {
        lock(&self.statuses).remove(namespace);
    }
}

/// Runs until SIGTERM or Ctrl-C. An interrupted reconcile is safe to redo: applies are
/// idempotent and the labels on stamped objects are the only state.
pub async fn run(config: Config, renderer: Renderer, client: kube::Client) -> anyhow::Result<()> {
    let queue = Arc::new(WorkQueue::default());
    let (stores, _watches) = Stores::start(&client, &config.instance, &queue);
    tracing::info!("waiting for the watch caches to sync");
    stores.wait_until_ready().await;
    for name in stores.all_namespaces() {
        queue.add(&name);
    }
    tracing::info!(revision = renderer.revision(), "caches synced; reconciling");
    let resync = Duration::from_secs(config.resync_seconds);
    let workers = config.concurrency;
    let ctx = Arc::new(Context {
        client: client.clone(),
        config,
        renderer,
        stores,
        events: events::Events::new(client.clone()),
        verified: Mutex::default(),
        statuses: Mutex::default(),
    });
    for _ in 0..workers {
        tokio::spawn(worker(Arc::clone(&ctx), Arc::clone(&queue)));
    }
    tokio::spawn(resync_every(resync, Arc::clone(&ctx), Arc::clone(&queue)));
    tokio::spawn(report_initial_sync(Arc::clone(&queue)));
    shutdown_signal().await?;
    tracing::info!("shutting down");
    Ok(())
}

async fn worker(ctx: Arc<Context>, queue: Arc<WorkQueue>) {
    let failures: Mutex<HashMap<String, u32>> = Mutex::default();
    loop {
        let name = queue.next().await;
        let result = reconcile::reconcile(&ctx, &name).await;
        let mut failures = failures.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(outcome) => {
                failures.remove(&name);
                if let Some(delay) = outcome.recheck {
                    queue.add_after(name.clone(), delay);
                }
                if outcome.wrote() || outcome.conflicts > 0 {
                    tracing::info!(namespace = %name, %outcome, "reconciled");
                } else {
                    tracing::debug!(namespace = %name, "in sync");
                }
            }
            Err(e) => {
                let n = failures.entry(name.clone()).or_insert(0);
                *n = n.saturating_add(1);
                let delay = backoff(*n);
                tracing::warn!(namespace = %name, error = %e, retry_in = ?delay, "reconcile failed");
                queue.add_after(name.clone(), delay);
            }
        }
        queue.done(&name);
    }
}

/// 0.5 s doubling per consecutive failure, at most 5 minutes.
fn backoff(failures: u32) -> Duration {
    let millis = 500u64.saturating_mul(1 << failures.saturating_sub(1).min(10));
    Duration::from_millis(millis).min(Duration::from_secs(300))
}

async fn resync_every(period: Duration, ctx: Arc<Context>, queue: Arc<WorkQueue>) {
    let mut tick = tokio::time::interval(period);
    tick.tick().await;
    loop {
        tick.tick().await;
        for name in ctx.stores.all_namespaces() {
            queue.add(&name);
        }
    }
}

async fn report_initial_sync(queue: Arc<WorkQueue>) {
    let started = std::time::Instant::now();
    while !queue.is_idle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tracing::info!(elapsed = ?started.elapsed(), "initial sync complete");
}

async fn shutdown_signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(4));
        assert_eq!(backoff(40), Duration::from_secs(300));
    }
}
