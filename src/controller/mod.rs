//! The operator loop: watches feed a work queue of namespace names; reconciler tasks take them
//! one at a time through the pipeline in reconcile.rs.

mod brake;
pub mod events;
mod execute;
mod fleet_message;
mod follow;
mod index;
mod live;
mod memory;
mod names;
mod queue;
mod reconcile;
mod report;
mod resync;
mod revisions;
mod rollout;
mod run;
mod taken;
mod watches;
mod worker;
mod worker_view;
mod workflows;

use crate::config::Config;
use crate::object::{ObjectKey, Stamped};
use crate::plan::{NamespaceState, Snapshot};
use crate::telemetry::Metrics;
use execute::Executor;
use live::Live;
use memory::Memory;
use revisions::Revisions;
use rollout::Rollout;
use std::collections::HashSet;
use std::sync::Arc;
use watches::Stores;
use worker::Workers;

pub use report::Outcome;
pub use run::{RunOptions, run};

/// Everything a reconcile needs. Nothing global.
pub struct Context {
    client: kube::Client,
    /// The config as the process started: its process settings hold until a restart.
    config: Config,
    /// The config and templates in force, which follow the files.
    live: Live,
    /// Every kept revision, this one included: what namespaces are rendered at.
    revisions: Revisions,
    rollout: Rollout,
    brake: brake::Brake,
    stores: Stores,
    memory: Arc<Memory>,
    events: events::Events,
    metrics: Arc<Metrics>,
    /// Every namespace's Workflows, counted by instanceid label.
    workflows: Arc<workflows::Workflows>,
}

impl Context {
    /// What the watches show of namespace `name` and what is remembered of it: no request.
    fn snapshot(&self, name: &str) -> Snapshot {
        let remembered = self.memory.of(name);
        Snapshot {
            name: name.to_string(),
            namespace: self
                .stores
                .namespace(name)
                .map(|ns| NamespaceState::of(&ns.metadata, &self.live.get().config.selector)),
            stamped: self.stores.stamped_for(name),
            worker_version: self
                .stores
                .worker(name)
                .and_then(|w| w.metadata.resource_version.clone()),
            // Filled in by the reconcile, which asks the rollout.
            revision: String::new(),
            verified: remembered.verified,
            settled: remembered.settled,
            vacant: HashSet::new(),
            workflows: self.workflows.seen(name),
        }
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
            metrics: &self.metrics,
        }
    }

    fn workers(&self) -> Workers<'_> {
        Workers {
            client: &self.client,
            field_manager: &self.config.field_manager,
            instance: &self.config.instance,
            memory: &self.memory,
            metrics: &self.metrics,
        }
    }
}
