//! The rollout while this replica leads: once a second, what the NamespaceWorkers show goes
//! through `rollout::step` (pure), the namespaces it moves are reconciled, and the Fleet's
//! status is written when it changed. Reconciles ask [`Rollout::pin`] which revision to render.

use super::events::Reason;
use super::live::Current;
use super::queue::WorkQueue;
use super::{Context, fleet_message};
use crate::rollout::fleet::{self, Fleet, FleetSpec, FleetStatus};
use crate::rollout::{self, Phase, State};
use crate::sync::{read, write};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::SelectorExt;
use kube::{Resource, ResourceExt};
use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;
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
    /// By the uid of the Fleet it was written to: a Fleet deleted and created again has none.
    written: RwLock<Option<(String, FleetStatus)>>,
    /// The config refusal last published as an Event.
    refusal_reported: RwLock<Option<String>>,
}

impl Default for Rollout {
    fn default() -> Self {
        Rollout {
            state: RwLock::new(None),
            ready: watch::channel(false).0,
            written: RwLock::new(None),
            refusal_reported: RwLock::new(None),
        }
    }
}

impl Rollout {
    /// The revision to render namespace `name` at, whose objects were last applied at
    /// `applied`; `None` before the rollout is loaded.
    pub fn pin(&self, ctx: &Context, name: &str, applied: Option<&str>) -> Option<String> {
        let state = read(&self.state);
        let known = applied.is_some_and(|a| ctx.revisions.known(a));
        Some(state.as_ref()?.pin(name, applied, known).to_string())
    }

    /// Waits until the rollout is loaded.
    pub async fn loaded(&self) {
        let _ = self.ready.subscribe().wait_for(|ready| *ready).await;
    }

    fn set(&self, state: Option<State>) {
        let ready = state.is_some();
        if !ready {
            *write(&self.written) = None;
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
    }
}

/// On a gain of leadership: the revisions (the config in force recorded as the newest), the
/// Fleet (created if missing), and the rollout state its status records.
async fn load(ctx: &Context) -> kube::Result<State> {
    ctx.revisions.list(&ctx.client, &ctx.metrics).await?;
    let fleet = fleet_object(ctx).await?;
    let live = ctx.live.get();
    record(ctx, &live, &fleet).await?;
    let state = fleet
        .status
        .as_ref()
        .map(FleetStatus::state)
        .filter(|s| ctx.revisions.known(&s.target) && ctx.revisions.known(&s.stable))
        .unwrap_or_else(|| State::settled(live.renderer.revision()));
    tracing::info!(stable = %state.stable, target = %state.target, phase = ?state.phase, "rollout loaded");
    Ok(state)
}

/// The Fleet as the watch shows it, or created (again, if someone deleted it).
async fn fleet_object(ctx: &Context) -> kube::Result<Fleet> {
    if let Some(fleet) = ctx.stores.fleet() {
        return Ok((*fleet).clone());
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
    match ctx
        .metrics
        .count("create", api.create(&PostParams::default(), &object).await)
    {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(e)) if e.code == 409 => ctx
            .metrics
            .count("get", api.get(&ctx.config.instance).await),
        Err(e) => Err(e),
    }
}

/// Records the config in force as the newest revision, keeping those the fleet still uses. A
/// newer revision supersedes an undo.
async fn record(ctx: &Context, live: &Current, fleet: &Fleet) -> kube::Result<()> {
    let mut in_use: BTreeSet<String> = ctx
        .stores
        .workers()
        .iter()
        .filter_map(|w| w.member.applied.clone())
        .collect();
    if let Some(status) = &fleet.status {
        in_use.extend([status.stable_hash.clone(), status.target_hash.clone()]);
    }
    let made_newest = ctx
        .revisions
        .record(&ctx.client, live, &in_use, &ctx.metrics)
        .await?;
    if made_newest && fleet.spec.revision.is_some() {
        patch_spec(ctx, serde_json::json!({"revision": null})).await?;
    }
    Ok(())
}

async fn patch_spec(ctx: &Context, spec: serde_json::Value) -> kube::Result<()> {
    let api: Api<Fleet> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({ "spec": spec });
    ctx.metrics.count(
        "patch",
        api.patch(
            &ctx.config.instance,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await,
    )?;
    Ok(())
}

/// One step: the target as the Fleet's spec and the kept revisions say, the step, the
/// namespaces whose pin it changed queued, the status written if it changed. The first step
/// after a load is what lets reconciles begin.
async fn turn(ctx: &Context, queue: &WorkQueue, state: State) -> kube::Result<()> {
    let fleet = fleet_object(ctx).await?;
    let spec = fleet.spec.clone();
    let live = ctx.live.get();
    // The config in force changed on disk: it is the newest revision now.
    if ctx.revisions.newest().as_deref() != Some(live.renderer.revision()) {
        record(ctx, &live, &fleet).await?;
    }
    let brake = ctx
        .brake
        .count(&ctx.stores, &live.config, spec.confirm_reaping);
    for name in &brake.released {
        queue.add(name);
    }
    if brake.opting_out == 0 && spec.confirm_reaping.is_some() {
        patch_spec(ctx, serde_json::json!({"confirmReaping": null})).await?;
    }
    let mut problems = fleet_message::problems(ctx, &live, &brake);
    let target = match spec.revision {
        Some(number) => ctx.revisions.hash_of(number).or_else(|| {
            problems.push(format!(
                "spec.revision {number} is not a kept revision (flotilla rollout history lists them); rolling out the newest"
            ));
            ctx.revisions.newest()
        }),
        None => ctx.revisions.newest(),
    }
    .unwrap_or_else(|| state.target.clone());
    let state = state.retarget(&target);
    let canary = live.config.rollout.canary.as_ref();
    let members: Vec<rollout::Member> = ctx
        .stores
        .workers()
        .iter()
        .filter_map(|worker| {
            let name = worker.name_any();
            let namespace = ctx.stores.namespace(&name)?;
            let labels = namespace.metadata.labels.clone().unwrap_or_default();
            if !live.config.selector.matches(&labels) {
                return None;
            }
            Some(rollout::Member {
                canary: canary.is_some_and(|c| c.matches(&labels)),
                ..worker.member.clone()
            })
        })
        .collect();
    let now = Timestamp::now();
    let step = rollout::step(&state, &members, &live.config.rollout, spec.paused, now);
    let known = |m: &rollout::Member| m.applied.as_deref().is_some_and(|a| ctx.revisions.known(a));
    // The new pins first, then the queue: a reconcile that took a namespace at once would
    // otherwise render it at its old pin, find it in sync and settle there for good.
    ctx.rollout.set(Some(step.state.clone()));
    for m in &members {
        let before = state.pin(&m.name, m.applied.as_deref(), known(m));
        let after = step.state.pin(&m.name, m.applied.as_deref(), known(m));
        if before != after {
            queue.add(&m.name);
        }
    }
    for name in &step.failed {
        if let Some(m) = members.iter().find(|m| &m.name == name) {
            tracing::warn!(namespace = %name, applied = ?m.applied, since = ?m.applied_since,
                unhealthy_since = ?m.unhealthy_since, failing = m.failing,
                "rollout: failed at the target revision");
        }
    }
    if !step.admitted.is_empty() || !step.failed.is_empty() {
        tracing::info!(admitted = ?step.admitted, failed = ?step.failed, phase = ?step.state.phase, "rollout step");
    }
    let message = fleet_message::message(ctx, &live, &step, &problems);
    let uid = fleet.metadata.uid.clone().unwrap_or_default();
    let previous = read(&ctx.rollout.written)
        .clone()
        .filter(|(written_to, _)| *written_to == uid)
        .map(|(_, status)| status)
        .or_else(|| fleet.status.clone());
    let mut status = fleet::status(
        &step.state,
        &step.counts,
        |hash| ctx.revisions.number(hash),
        message,
        previous.as_ref(),
        &crate::status::now().to_string(),
    );
    if brake.held {
        status.reap_held = brake.opting_out as u64;
    }
    if previous.as_ref() == Some(&status) {
        return Ok(());
    }
    let api: Api<Fleet> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({ "status": status });
    let written = ctx.metrics.count(
        "patch",
        api.patch_status(
            &ctx.config.instance,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await,
    )?;
    *write(&ctx.rollout.written) = Some((uid, status.clone()));
    publish(ctx, &live, &status, previous.as_ref(), &written);
    Ok(())
}

/// Events on the Fleet for what is news in `status`: a phase or target reached, a refused
/// config (each refusal once), the brake taking hold.
fn publish(
    ctx: &Context,
    live: &Current,
    status: &FleetStatus,
    previous: Option<&FleetStatus>,
    fleet: &Fleet,
) {
    let about = [&fleet.object_ref(&())];
    if previous.map(|p| p.phase) != Some(status.phase)
        || previous.map(|p| &p.target_hash) != Some(&status.target_hash)
    {
        let reason = match status.phase {
            Phase::Progressing => Reason::RolloutProgressing,
            Phase::Paused => Reason::RolloutPaused,
            Phase::Complete => Reason::RolloutComplete,
            Phase::Failed => Reason::RolloutFailed,
            Phase::RolledBack => Reason::RolledBack,
        };
        ctx.events.publish(reason, status.message.clone(), &about);
    }
    let mut reported = write(&ctx.rollout.refusal_reported);
    if live.refused.is_some() && *reported != live.refused {
        let why = live.refused.clone().unwrap_or_default();
        ctx.events.publish(Reason::ConfigRefused, why, &about);
    }
    reported.clone_from(&live.refused);
    if status.reap_held > 0 && previous.is_none_or(|p| p.reap_held == 0) {
        ctx.events
            .publish(Reason::ReapingHeld, status.message.clone(), &about);
    }
}
