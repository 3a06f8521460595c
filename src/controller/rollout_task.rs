//! The rollout while this replica leads: once a second a turn, decided by `rollout::turn` (pure)
//! from one snapshot of the fleet and carried out here: the Fleet's spec and status written when
//! they change, the namespaces it moves reconciled, its Events published. Reconciles ask
//! [`Rollout::pin`] which revision to render.

use super::Context;
use super::events::Reason;
use super::in_force::Current;
use super::queue::WorkQueue;
use crate::rollout::clock::{Monotonic, Observed};
use crate::rollout::fleet::{Fleet, FleetSpec, FleetStatus};
use crate::rollout::{self, FleetSnapshot, News, Phase, State, Turn, WrittenStatus};
use crate::sync::{lock, read, write};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::SelectorExt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often the rollout looks at the fleet.
const TICK: Duration = Duration::from_secs(1);

/// The rollout state shared with reconciles: `None` until this replica, leading, has loaded the
/// revisions and the Fleet (nothing is rendered before: a pin must never be guessed).
pub struct Rollout {
    state: RwLock<Option<State>>,
    ready: watch::Sender<bool>,
    /// The Fleet status this leader wrote last: the watch shows it a moment later, and only the
    /// leader writes it.
    written: RwLock<Option<WrittenStatus>>,
    /// The config refusal last published as an Event.
    refusal_reported: RwLock<Option<String>>,
    /// The revision of the config in force this leader last took into account: a change of
    /// it seen while leading is recorded as the newest revision; what the files say at a
    /// takeover is not, when it is kept already (they may be stale: a mounted ConfigMap is
    /// updated on each replica in its own time).
    recorded: RwLock<Option<String>>,
    /// Since when this leader has waited for its files to catch up (record.rs).
    waiting_for_files: Mutex<Option<Instant>>,
    /// The Fleet this leader created, until the watch shows one.
    created: RwLock<Option<Fleet>>,
    /// The rollout's times are this replica's monotonic clock's, from when it observed them.
    clock: Monotonic,
    observed: Mutex<Observed>,
}

impl Default for Rollout {
    fn default() -> Self {
        Rollout {
            state: RwLock::new(None),
            ready: watch::channel(false).0,
            written: RwLock::new(None),
            refusal_reported: RwLock::new(None),
            recorded: RwLock::new(None),
            waiting_for_files: Mutex::new(None),
            created: RwLock::new(None),
            clock: Monotonic::default(),
            observed: Mutex::default(),
        }
    }
}

impl Rollout {
    /// The revision to render namespace `name` at, whose objects were last applied at
    /// `applied` (which can still be rendered if `known`; `stamped`: objects of it exist);
    /// `None` before the rollout is loaded.
    pub fn pin(
        &self,
        name: &str,
        applied: Option<&str>,
        known: bool,
        stamped: bool,
    ) -> Option<String> {
        let state = read(&self.state);
        Some(
            state
                .as_ref()?
                .pin(name, applied, known, stamped)
                .to_string(),
        )
    }

    /// Waits until the rollout is loaded.
    pub async fn loaded(&self) {
        let _ = self.ready.subscribe().wait_for(|ready| *ready).await;
    }

    pub(super) fn set(&self, state: Option<State>) {
        let ready = state.is_some();
        if !ready {
            *write(&self.written) = None;
            *write(&self.recorded) = None;
            *lock(&self.waiting_for_files) = None;
            *write(&self.created) = None;
            // The next time this replica leads, it observes everything anew.
            *lock(&self.observed) = Observed::default();
        }
        *write(&self.state) = state;
        self.ready.send_replace(ready);
    }

    fn get(&self) -> Option<State> {
        read(&self.state).clone()
    }
}

/// Runs the rollout for as long as this replica leads, each time it does.
pub async fn run(ctx: Arc<Context>, queue: Arc<WorkQueue>, mut leader: watch::Receiver<bool>) {
    while leader.wait_for(|leads| *leads).await.is_ok() {
        let mut tick = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                lost = leader.wait_for(|leads| !*leads) => {
                    if lost.is_err() { return; }
                    break;
                }
            }
            let state = match ctx.rollout.get() {
                Some(state) => Ok(state),
                None => load(&ctx).await,
            };
            let result = match state {
                Ok(state) => turn(&ctx, &queue, state).await,
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, "rollout: request failed; trying again");
            }
        }
        // The next leader, maybe this replica again, starts from what the cluster records.
        ctx.rollout.set(None);
        ctx.metrics.fleet.clear();
    }
}

/// On a gain of leadership: the revisions (the config in force recorded as the newest), the
/// Fleet (created if missing), and the rollout state its status records, even when its
/// revisions are no longer kept: taken as settled at the newest, a failed revision would go to
/// the whole fleet at once (the turn holds instead, rollout/turn.rs).
async fn load(ctx: &Context) -> kube::Result<State> {
    ctx.history.list(&ctx.client).await?;
    let fleet = fleet_object(ctx).await?;
    let current = ctx.in_force.get();
    // The config in force is recorded by the first turn (`newest`), not here.
    *write(&ctx.rollout.recorded) = None;
    let state = fleet
        .status
        .as_ref()
        .map(FleetStatus::state)
        .filter(|s| !s.stable.is_empty())
        .unwrap_or_else(|| State::settled(current.renderer.revision()));
    tracing::info!(stable = %state.stable, target = %state.target, phase = ?state.phase, "rollout loaded");
    Ok(state)
}

/// The Fleet as the watch shows it, or created (again, if someone deleted it).
async fn fleet_object(ctx: &Context) -> kube::Result<Fleet> {
    if let Some(fleet) = ctx.stores.fleet() {
        *write(&ctx.rollout.created) = None;
        return Ok((*fleet).clone());
    }
    // Created by this leader a moment ago (the load, then its first turn): the watch shows it
    // soon; created again meanwhile, it would be refused (409).
    if let Some(fleet) = read(&ctx.rollout.created).clone() {
        return Ok(fleet);
    }
    let api: Api<Fleet> = Api::all(ctx.client.clone());
    let mut object = Fleet::new(&ctx.config.instance, FleetSpec::default());
    object.metadata.labels = Some(
        [(
            crate::ownership::INSTANCE.to_string(),
            ctx.config.instance.clone(),
        )]
        .into(),
    );
    match api.create(&PostParams::default(), &object).await {
        Ok(created) => {
            *write(&ctx.rollout.created) = Some(created.clone());
            Ok(created)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => api.get(&ctx.config.instance).await,
        Err(e) => Err(e),
    }
}

async fn patch_spec(ctx: &Context, spec: serde_json::Value) -> kube::Result<()> {
    let api: Api<Fleet> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({ "spec": spec });
    api.patch(
        &ctx.config.instance,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// One turn: the Fleet (created if missing), the config in force recorded as the newest
/// revision if it changed, then the turn decided from one snapshot and carried out. The first
/// turn after a load is what lets reconciles begin.
async fn turn(ctx: &Context, queue: &WorkQueue, state: State) -> kube::Result<()> {
    let fleet = fleet_object(ctx).await?;
    let current = ctx.in_force.get();
    let hash = current.renderer.revision();
    if read(&ctx.rollout.recorded).as_deref() != Some(hash) && record::newest(ctx, &current) {
        record::record(ctx, &current, &fleet).await?;
        *write(&ctx.rollout.recorded) = Some(hash.to_string());
    }
    let snapshot = snapshot(ctx, fleet, &current, state);
    let turn = rollout::turn(&snapshot);
    carry_out(ctx, queue, &snapshot, turn).await
}

/// Everything a turn decides from, read once: the Fleet, what the watches show of the fleet's
/// namespaces (who is in it, who opts out: the brake counted again), the kept revisions and the
/// config in force, and what this leader remembers writing.
fn snapshot(ctx: &Context, fleet: Fleet, current: &Current, state: State) -> FleetSnapshot {
    let config = &current.config;
    let census = ctx.stores.census(&config.selector);
    let brake = ctx.brake.count(
        census.opting_out,
        census.workers,
        config.rollout.reap_brake,
        fleet.spec.confirm_reaping,
        Instant::now(),
    );
    let canary = config.rollout.canary.as_ref();
    let mut members: Vec<rollout::Member> = census
        .members
        .iter()
        .map(|(worker, namespace)| {
            let labels = namespace.metadata.labels.clone().unwrap_or_default();
            rollout::Member {
                canary: canary.is_some_and(|c| c.matches(&labels)),
                ..worker.member.clone()
            }
        })
        .collect();
    // Each member's times as this leader first observed them, on its monotonic clock.
    let now = ctx.rollout.clock.at(Instant::now());
    lock(&ctx.rollout.observed).observe(&mut members, now);
    let written = read(&ctx.rollout.written)
        .as_ref()
        .and_then(|written| written.unseen_by(&fleet));
    FleetSnapshot {
        fleet,
        written,
        state,
        members,
        brake,
        kept: ctx.history.kept(),
        strategy: config.rollout.clone(),
        in_force: current.renderer.revision().to_string(),
        refused: current.refused.clone(),
        waiting: current.waiting.clone(),
        refusal_reported: read(&ctx.rollout.refusal_reported).clone(),
        now,
        wall: Timestamp::now(),
        budget: ctx.budget.usage(),
    }
}

/// The turn's requests, pins, queue and Events, in that order.
async fn carry_out(
    ctx: &Context,
    queue: &WorkQueue,
    snapshot: &FleetSnapshot,
    turn: Turn,
) -> kube::Result<()> {
    if let Some(spec) = turn.spec {
        patch_spec(ctx, spec).await?;
    }
    // The new pins first, then the queue: a reconcile that took a namespace at once would
    // otherwise render it at its old pin, find it in sync and settle there for good.
    ctx.rollout.set(Some(turn.step.state.clone()));
    for name in &turn.queue {
        queue.add(name);
    }
    log(snapshot, &turn.step);
    // The gauges every turn, from the status as it now stands (written or not).
    let standing = turn.status.as_ref().or(snapshot.written.as_ref());
    if let Some(status) = standing.or(snapshot.fleet.status.as_ref()) {
        let phases = ctx
            .stores
            .workers()
            .iter()
            .filter_map(|w| w.phase)
            .collect::<Vec<_>>();
        ctx.metrics.fleet.record(status, &turn.step.counts, phases);
    }
    let Some(status) = turn.status else {
        return Ok(());
    };
    let api: Api<Fleet> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({ "status": status });
    let params = PatchParams::default();
    let written = api
        .patch_status(&ctx.config.instance, &params, &Patch::Merge(&patch))
        .await?;
    *write(&ctx.rollout.written) = Some(WrittenStatus {
        uid: snapshot.fleet.metadata.uid.clone().unwrap_or_default(),
        over: snapshot.fleet.metadata.resource_version.clone(),
        status: status.clone(),
    });
    *write(&ctx.rollout.refusal_reported) = turn.refusal_reported;
    let about = [&written.object_ref(&())];
    for news in turn.news {
        let (reason, message) = match news {
            News::Phase(phase) => (phase_reason(phase), status.message.clone()),
            News::ConfigRefused => {
                let why = snapshot.refused.clone().unwrap_or_default();
                (Reason::ConfigRefused, why)
            }
            News::ReapingHeld => (Reason::ReapingHeld, status.message.clone()),
        };
        ctx.events.publish(reason, message, &about);
    }
    Ok(())
}

fn phase_reason(phase: Phase) -> Reason {
    match phase {
        Phase::Progressing => Reason::RolloutProgressing,
        Phase::Paused => Reason::RolloutPaused,
        Phase::Complete => Reason::RolloutComplete,
        Phase::Failed => Reason::RolloutFailed,
        Phase::RolledBack => Reason::RolledBack,
    }
}

/// Who moved and who failed in `step`.
fn log(snapshot: &FleetSnapshot, step: &rollout::Step) {
    for name in &step.failed {
        if let Some(m) = snapshot.members.iter().find(|m| &m.name == name) {
            tracing::warn!(namespace = %name, applied = ?m.applied, since = ?m.applied_since,
                unhealthy_since = ?m.unhealthy_since, failing = m.failing,
                "rollout: failed at the target revision");
        }
    }
    if !step.admitted.is_empty() || !step.failed.is_empty() {
        tracing::info!(admitted = ?step.admitted, failed = ?step.failed, phase = ?step.state.phase, "rollout step");
    }
}

mod record;
#[cfg(test)]
mod tests;
