//! The process around reconcile: watches and caches, leader election, workers, periodic
//! resync, the admin endpoints, and shutdown.

use super::Context;
use super::events::Events;
use super::execute;
use super::memory::Memory;
use super::queue::WorkQueue;
use super::reconcile;
use super::report::Outcome;
use super::stores::Stores;
use crate::client::Clients;
use crate::config::Config;
use crate::lease::{self, LeaseConfig};
use crate::render::Renderer;
use crate::telemetry::{self, ActionLabel, Metrics, ResultLabel};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What differs per process rather than per fleet.
pub struct RunOptions {
    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    pub http_address: SocketAddr,
    /// This replica's name in the leader Lease.
    pub identity: String,
    /// The config file, followed while flotilla runs.
    pub config_path: std::path::PathBuf,
}

/// Runs until SIGTERM or Ctrl-C. An interrupted reconcile is safe to redo: applies are
/// idempotent and the labels on stamped objects are the only state.
pub async fn run(
    config: Config,
    renderer: Renderer,
    clients: Clients,
    metrics: Arc<Metrics>,
    options: RunOptions,
) -> anyhow::Result<()> {
    // Taken first: a change from here on, while the caches sync, is followed.
    let files = super::follow::fingerprint(&options.config_path, &config.templates_dir);
    let (client, fence) = (clients.work, clients.fence);
    let listener = tokio::net::TcpListener::bind(options.http_address)
        .await
        .map_err(|e| anyhow::anyhow!("cannot serve on {}: {e}", options.http_address))?;
    tokio::spawn(telemetry::serve(listener, Arc::clone(&metrics)));

    let queue = WorkQueue::start();
    let memory = Arc::new(Memory::default());
    let (stores, _watches) = Stores::start(&client, &config.instance, &queue, &memory, &metrics);
    tracing::info!("waiting for the watch caches to sync");
    stores.wait_until_ready().await;
    let workflows = super::workflow_watch::Workflows::start(
        super::workflow_watch::WorkflowTally::default(),
        &client,
        &queue,
        &stores,
    );
    let crons = super::cron_watch::CronWorkflows::start(
        super::cron_watch::CronTally::default(),
        &client,
        &queue,
        &stores,
    );
    workflows.wait_until_known().await;
    crons.wait_until_known().await;
    metrics.set_ready();
    tracing::info!(revision = renderer.revision(), "caches synced");

    // Leadership gates writes only: a standby watches and keeps its caches warm.
    let (leader_tx, leader_rx) = watch::channel(!config.leader_election.enabled);
    let (stop_tx, mut stop_rx) = watch::channel(false);
    // Without an election this replica always leads. Its sender lives as long as `run`: a
    // closed channel tells the workers that leadership can never come again, i.e. shutdown.
    let mut always_leading = None;
    let election = if !config.leader_election.enabled {
        fence.open_for_ever();
        always_leading = Some(leader_tx);
        None
    } else {
        let api = kube::Api::namespaced(clients.lease, &config.namespace);
        let lease = LeaseConfig {
            name: config.instance.clone(),
            identity: options.identity.clone(),
            duration: Duration::from_secs(config.leader_election.lease_duration_seconds),
        };
        tracing::info!(lease = %lease.name, identity = %lease.identity, "waiting for leadership");
        Some(tokio::spawn(async move {
            let stop = async move {
                let _ = stop_rx.wait_for(|stop| *stop).await;
            };
            lease::run(api, lease, leader_tx, &fence, stop).await;
        }))
    };

    let resync = Duration::from_secs(config.resync_seconds);
    let reconcilers = config.concurrency;
    let ctx = Arc::new(Context {
        client: client.clone(),
        history: super::history::History::new(&config),
        rollout: super::rollout_task::Rollout::default(),
        brake: crate::rollout::Brake::default(),
        in_force: super::in_force::InForce::new(config.clone(), renderer),
        config,
        stores,
        memory,
        events: Events::start(client),
        metrics,
        workflows,
        crons,
        budget: Default::default(),
    });
    for _ in 0..reconcilers {
        tokio::spawn(reconciler(
            Arc::clone(&ctx),
            Arc::clone(&queue),
            leader_rx.clone(),
        ));
    }
    tokio::spawn(on_leadership(
        Arc::clone(&ctx),
        Arc::clone(&queue),
        leader_rx.clone(),
    ));
    tokio::spawn(super::rollout_task::run(
        Arc::clone(&ctx),
        Arc::clone(&queue),
        leader_rx.clone(),
    ));
    tokio::spawn(super::budget_task::run(
        Arc::clone(&ctx),
        Arc::clone(&queue),
        leader_rx.clone(),
    ));
    tokio::spawn(super::follow::follow(
        Arc::clone(&ctx),
        Arc::clone(&queue),
        options.config_path.clone(),
        files,
    ));
    tokio::spawn(super::admission::follow(
        Arc::clone(&ctx),
        leader_rx.clone(),
    ));
    tokio::spawn(super::resync::every(
        resync,
        Arc::clone(&ctx),
        Arc::clone(&queue),
    ));
    tokio::spawn(report_initial_sync(Arc::clone(&queue), leader_rx));
    shutdown_signal().await?;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    if let Some(election) = election {
        // Releasing the lease lets a standby take over at once instead of after it expires.
        let _ = tokio::time::timeout(Duration::from_secs(5), election).await;
    }
    drop(always_leading);
    Ok(())
}

/// Waits until this replica leads; `false` once it never can again (the process is stopping).
async fn leading(leader: &mut watch::Receiver<bool>) -> bool {
    leader.wait_for(|leads| *leads).await.is_ok()
}

/// Waits until this replica no longer leads; `false` if the process is stopping instead.
async fn not_leading(leader: &mut watch::Receiver<bool>) -> bool {
    leader.wait_for(|leads| !*leads).await.is_ok()
}

/// On every gain of leadership, look at every namespace: the standby may have missed nothing,
/// but the previous leader may have died mid-reconcile.
async fn on_leadership(
    ctx: Arc<Context>,
    queue: Arc<WorkQueue>,
    mut leader: watch::Receiver<bool>,
) {
    while leading(&mut leader).await {
        ctx.metrics.is_leader.set(1);
        tracing::info!("leading: reconciling every namespace");
        for name in ctx.stores.all_namespaces() {
            queue.add_resync(&name);
        }
        if !not_leading(&mut leader).await {
            return;
        }
        ctx.metrics.is_leader.set(0);
        tracing::warn!("lost leadership: no more writes until it is regained");
    }
}

/// Takes namespaces off the queue one at a time, while this replica leads.
async fn reconciler(ctx: Arc<Context>, queue: Arc<WorkQueue>, mut leader: watch::Receiver<bool>) {
    while leading(&mut leader).await {
        // Nothing is rendered before the rollout knows which revision each namespace is at.
        tokio::select! {
            () = ctx.rollout.loaded() => {}
            leads_no_more = not_leading(&mut leader) => if leads_no_more { continue } else { return },
        }
        let name = tokio::select! {
            name = queue.next() => name,
            // Lost leadership while waiting: take no new work.
            leads_no_more = not_leading(&mut leader) => if leads_no_more { continue } else { return },
        };
        let started = Instant::now();
        let result = reconcile::reconcile(&ctx, &name).await;
        ctx.metrics
            .reconcile_duration
            .observe(started.elapsed().as_secs_f64());
        record(&ctx.metrics, &result);
        match result {
            Ok(outcome) if outcome.refused => {
                let delay = retry_delay(ctx.memory.failed(&name));
                tracing::warn!(namespace = %name, %outcome, retry_in = ?delay, "refused by the API server");
                queue.add_after(name.clone(), delay);
            }
            Ok(outcome) => {
                ctx.memory.succeeded(&name);
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
                let delay = retry_delay(ctx.memory.failed(&name));
                tracing::warn!(namespace = %name, error = %e, retry_in = ?delay, "reconcile failed");
                queue.add_after(name.clone(), delay);
            }
        }
        ctx.metrics
            .managed_namespaces
            .set(i64::try_from(ctx.stores.worker_count()).unwrap_or(i64::MAX));
        queue.done(&name);
    }
}

fn record(metrics: &Metrics, result: &Result<Outcome, execute::Error>) {
    let label = match result {
        Ok(outcome) if outcome.render_failed => "render_failed",
        Ok(outcome) if outcome.refused => "refused",
        Ok(_) => "ok",
        Err(_) => "error",
    };
    metrics
        .reconciles
        .get_or_create(&ResultLabel { result: label })
        .inc();
    // A failed reconcile's requests were counted as they failed (client/errors.rs).
    if let Ok(outcome) = result {
        for (action, n) in [
            ("created", outcome.created),
            ("updated", outcome.updated),
            ("drift_repaired", outcome.drift_repaired),
            ("pruned", outcome.pruned),
            ("reaped", outcome.reaped),
        ] {
            if n > 0 {
                metrics
                    .objects
                    .get_or_create(&ActionLabel { action })
                    .inc_by(n as u64);
            }
        }
    }
}

/// The retry delay after `failures` failures in a row of one namespace (counted in its memory,
/// so all reconciler tasks share it): 0.5 s doubling per failure, at most 5 minutes, of which
/// half is fixed and half spread at random (`spread` in [0, 1)), so that namespaces that failed
/// together (a fleet-wide quota, an API server restart) do not come back together.
fn backoff(failures: u32, spread: f64) -> Duration {
    let full =
        Duration::from_millis(500u64.saturating_mul(1 << failures.saturating_sub(1).min(10)))
            .min(Duration::from_secs(300));
    full / 2 + full.mul_f64(spread.clamp(0.0, 1.0) / 2.0)
}

fn retry_delay(failures: u32) -> Duration {
    backoff(failures, fastrand::f64())
}

async fn report_initial_sync(queue: Arc<WorkQueue>, mut leader: watch::Receiver<bool>) {
    if !leading(&mut leader).await {
        return;
    }
    let started = Instant::now();
    // Let the leadership hook fill the queue first.
    tokio::time::sleep(Duration::from_millis(50)).await;
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
    fn backoff_doubles_caps_and_spreads_half_of_it() {
        let ms = Duration::from_millis;
        assert_eq!(backoff(1, 0.0), ms(250));
        assert_eq!(backoff(1, 0.999_999), ms(500) - Duration::from_nanos(250));
        assert_eq!(backoff(2, 0.5), ms(750));
        assert_eq!(backoff(4, 0.0), Duration::from_secs(2));
        assert_eq!(backoff(40, 0.0), Duration::from_secs(150));
        assert!(backoff(40, 0.999) < Duration::from_secs(300));
    }
}
