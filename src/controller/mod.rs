//! The operator loop: watches feed a work queue of namespace names; reconciler tasks take them
//! one at a time through the pipeline in reconcile.rs.

mod admission;
mod argo_watch;
mod budget_task;
mod cron_watch;
pub mod events;
mod execute;
#[cfg(test)]
mod fixture;
mod follow;
mod history;
mod in_force;
mod index;
mod memory;
mod name_watches;
mod queue;
mod reconcile;
mod report;
mod resync;
mod rollout_task;
mod run;
mod stores;
mod taken;
mod watch;
mod worker;
mod worker_view;
mod workflow_watch;

use crate::config::Config;
use crate::object::{ObjectKey, Stamped};
use crate::plan::{self, NamespaceState, Snapshot};
use crate::telemetry::Metrics;
use execute::Executor;
use history::History;
use in_force::InForce;
use memory::Memory;
use rollout_task::Rollout;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use stores::Stores;
use worker::Workers;

pub use report::Outcome;
pub use run::{RunOptions, run};

/// Everything a reconcile needs. Nothing global.
pub struct Context {
    client: kube::Client,
    /// The config as the process started: its process settings hold until a restart.
    config: Config,
    /// The config and templates in force, which follow the files.
    in_force: InForce,
    /// Every kept revision, this one included: what namespaces are rendered at.
    history: History,
    rollout: Rollout,
    brake: crate::rollout::Brake,
    stores: Stores,
    memory: Arc<Memory>,
    events: events::Events,
    metrics: Arc<Metrics>,
    /// Every namespace's Workflows, counted by instanceid label.
    workflows: Arc<workflow_watch::Workflows>,
    /// Every namespace's CronWorkflows' schedules.
    crons: Arc<cron_watch::CronWorkflows>,
    /// The fleet's budget of running Workflows, as the leader shares it.
    budget: budget_task::Budget,
}

impl Context {
    /// Everything a reconcile of namespace `name` decides from, read once: what the watches show
    /// of it, what is remembered of it, the config in force, and the revision the rollout pins
    /// it to. No request. `None` before the rollout is loaded (leadership was lost a moment
    /// ago): a pin is never guessed.
    fn snapshot(&self, name: &str) -> Option<Snapshot> {
        let current = self.in_force.get();
        let remembered = self.memory.of(name);
        let watched = self.stores.worker(name);
        let previous = remembered
            .written
            .map(|w| w.status)
            .or_else(|| watched.as_ref().and_then(|w| w.status()));
        let applied = plan::applied(previous.as_ref());
        let known = applied.is_some_and(|a| self.history.known(a));
        let stamped = self.stores.stamped_for(name);
        let revision = self
            .rollout
            .pin(name, applied, known, !stamped.is_empty())?;
        let share = current.config.fleet_parallelism.map(|_| {
            self.budget
                .share(name, previous.as_ref().and_then(|p| p.share))
        });
        Some(Snapshot {
            name: name.to_string(),
            namespace: self.stores.namespace(name).map(|ns| {
                let mut state = NamespaceState::of(&ns.metadata, &current.config.selector);
                state.input.share = share;
                state
            }),
            stamped,
            worker: watched.map(|w| worker::watched(&w, name, &self.config.instance)),
            previous,
            renderer: self.history.renderer(&revision, &current.config),
            revision,
            degraded_after: Duration::from_secs(current.config.degraded_after_seconds),
            verified: remembered.verified,
            settled: remembered.settled,
            workflows: self.workflows.seen(name),
            idle_since: self.workflows.idle_since(name),
            crons: match self.crons.seen(name) {
                Ok(all) => plan::Crons::Seen(all),
                Err(why) => plan::Crons::Unseen(why),
            },
            sleep: current.config.sleep,
            soak: current.config.rollout.soak,
            now: crate::status::now(),
            share,
        })
    }

    /// Of the rendered objects, those at whose names the watches show nothing at all.
    fn vacant(&self, rendered: &[Stamped]) -> HashSet<ObjectKey> {
        rendered
            .iter()
            .filter(|o| self.stores.vacant(&o.key))
            .map(|o| o.key.clone())
            .collect()
    }

    fn executor(&self) -> Executor<'_> {
        Executor {
            client: &self.client,
            field_manager: &self.config.field_manager,
            instance: &self.config.instance,
        }
    }

    fn workers(&self) -> Workers<'_> {
        Workers {
            client: &self.client,
            field_manager: &self.config.field_manager,
            instance: &self.config.instance,
            memory: &self.memory,
        }
    }
}
