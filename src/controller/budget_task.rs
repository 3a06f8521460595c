//! The fleet's budget of running Workflows on the leader: every second, what the watches show
//! of each namespace's Workflows (the view), the shares (crate::budget, pure), and each
//! namespace whose share moved queued for a reconcile, which renders it as its controller's
//! `parallelism` (the executor). Only the leader allocates; a share changes no revision and
//! waits for no rollout.

use super::Context;
use super::queue::WorkQueue;
use crate::budget::{self, Allocation, Demand, FLOOR, Usage};
use crate::membership::Membership;
use crate::plan::NamespaceState;
use crate::render::Renderer;
use crate::sync::{read, write};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// The budget is shared again every tick, not on each Workflow's event: a burst arriving across
/// many namespaces is then split among all that arrived within the tick, rather than handed to
/// the first few, which later ones would wait for until their running Workflows end (the bench
/// measured p99 7.65 s to the fair share turning on every event, against 6.30 s on the tick).
const TICK: Duration = Duration::from_secs(1);

/// The shares this leader decided. Before its first allocation (and on a replica that does not
/// lead) each namespace keeps the share its status records: a restart or a failover writes
/// nothing until the shares move.
#[derive(Default)]
pub struct Budget {
    /// By namespace, the shares above the floor; `None` until this leader allocated.
    shares: RwLock<Option<BTreeMap<String, u32>>>,
    usage: RwLock<Option<Usage>>,
}

impl Budget {
    /// The share to render `name` with: this leader's, else `recorded` (its status's), else the
    /// floor.
    pub fn share(&self, name: &str, recorded: Option<u32>) -> u32 {
        match read(&self.shares).as_ref() {
            Some(shares) => shares.get(name).copied().unwrap_or(FLOOR),
            None => recorded.unwrap_or(FLOOR),
        }
    }

    /// The budget as last allocated (`None`: no budget, or not allocated by this leader yet).
    pub fn usage(&self) -> Option<Usage> {
        *read(&self.usage)
    }

    fn clear(&self) {
        *write(&self.shares) = None;
        *write(&self.usage) = None;
    }
}

/// Shares the budget every second for as long as this replica leads, each time it does.
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
            turn(&ctx, &queue);
        }
        ctx.budget.clear();
    }
}

fn turn(ctx: &Context, queue: &WorkQueue) {
    let current = ctx.in_force.get();
    let Some(limit) = current.config.fleet_parallelism else {
        if ctx.budget.usage().is_some() {
            ctx.budget.clear();
            ctx.metrics.fleet.record_budget(None);
        }
        return;
    };
    let Some((demands, rendered)) = demands(ctx, &current.renderer) else {
        return;
    };
    let allocation = budget::allocate(limit, &demands);
    let moved = moved(&demands, &rendered, &allocation);
    ctx.metrics.fleet.record_budget(Some(&allocation.usage));
    let above_floor = allocation
        .shares
        .into_iter()
        .filter(|(_, share)| *share > FLOOR)
        .collect();
    // The new shares first, then the queue: a reconcile that took a namespace at once would
    // otherwise render its old share, find it in sync, and leave it there until a resync.
    *write(&ctx.budget.shares) = Some(above_floor);
    *write(&ctx.budget.usage) = Some(allocation.usage);
    for name in moved {
        queue.add(&name);
    }
}

/// The namespaces whose share `allocation` moves from `rendered`, what each is rendered with.
fn moved(demands: &[Demand], rendered: &[u32], allocation: &Allocation) -> Vec<String> {
    demands
        .iter()
        .zip(rendered)
        .filter(|(d, rendered)| allocation.shares.get(&d.name) != Some(*rendered))
        .map(|(d, _)| d.name.clone())
        .collect()
}

/// How long since `since` by the wall clock (the Workflows' changes are stamped by it).
fn idle_for(since: k8s_openapi::jiff::Timestamp) -> Duration {
    let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(since);
    Duration::try_from(elapsed).unwrap_or_default()
}

/// What the budget decides from: every namespace of the fleet with live Workflows or a share
/// above the floor, given or in force (the others stay at the floor, and cost nothing to look
/// at). `None` while the Workflows are not listed: nothing is known of the demand, and no share
/// moves. With each, the share it is rendered with now.
fn demands(ctx: &Context, renderer: &Renderer) -> Option<(Vec<Demand>, Vec<u32>)> {
    let active = ctx.workflows.active()?;
    let selector = &ctx.in_force.get().config.selector;
    let (mut demands, mut rendered) = (Vec::new(), Vec::new());
    for worker in ctx.stores.workers() {
        let name = worker.metadata.name.as_deref().unwrap_or_default();
        let asleep = worker.phase == Some(crate::status::Phase::Sleeping);
        let share = ctx.budget.share(name, worker.share);
        let in_force = worker.share.unwrap_or(FLOOR);
        if !active.contains(name) && share.max(in_force) <= FLOOR {
            continue;
        }
        let Some(namespace) = ctx.stores.namespace(name) else {
            continue;
        };
        let state = NamespaceState::of(&namespace.metadata, selector);
        if state.membership != Membership::Member {
            continue;
        }
        let Some((cap, instance_id)) = renderer.budget_terms(&state.input) else {
            continue;
        };
        let (running, live) = ctx.workflows.budget_counts(name, instance_id.as_deref())?;
        // A sleeping controller holds nothing: what it was given goes back.
        let (given, in_force) = match asleep && live == 0 {
            true => (FLOOR, FLOOR),
            false => (share, in_force),
        };
        demands.push(Demand {
            name: name.to_string(),
            cap,
            running,
            waiting: live - running,
            share: given,
            in_force,
            idle: match live {
                0 => idle_for(ctx.workflows.idle_since(name)),
                _ => Duration::ZERO,
            },
        });
        rendered.push(share);
    }
    Some((demands, rendered))
}

#[cfg(test)]
mod tests;
