//! The brake on mass reaping as the leader applies it; `rollout::ReapBrake` decides. Opting out
//! are the namespaces with a NamespaceWorker that exist, are not being deleted, and no longer
//! match the selector. They are counted from the caches on every rollout step and whenever the
//! config changes, before any reconcile sees the change, and each reconcile about to reap adds
//! its own namespace. While the brake holds, nothing is reaped but what deleted namespaces
//! leave; once it lets go (confirmed, or fewer opting out) the held namespaces are queued.

use super::watches::Stores;
use crate::config::Config;
use crate::plan::NamespaceState;
use crate::rollout::ReapBrake;
use kube::ResourceExt;
use std::collections::BTreeSet;
use std::sync::Mutex;

#[derive(Default)]
pub struct Brake(Mutex<Counted>);

#[derive(Default)]
struct Counted {
    opting_out: BTreeSet<String>,
    fleet: usize,
    brake: ReapBrake,
    /// How many the admin confirmed (the Fleet's `spec.confirmReaping`).
    confirmed: Option<u64>,
    held: bool,
}

impl Counted {
    fn decide(&mut self) {
        self.held = self
            .brake
            .holds(self.opting_out.len(), self.fleet, self.confirmed);
    }
}

/// The brake as a step saw it.
#[derive(Debug, Default, PartialEq)]
pub struct Seen {
    pub opting_out: usize,
    pub fleet: usize,
    /// Whether the reaping of `opting_out` waits.
    pub held: bool,
    /// Held until now and let go: to be queued.
    pub released: Vec<String>,
}

impl Brake {
    /// Counts again from the caches under `config`, with `confirmed` as the Fleet's spec says.
    pub fn count(&self, stores: &Stores, config: &Config, confirmed: Option<u64>) -> Seen {
        let workers = stores.workers();
        let opting_out: BTreeSet<String> = workers
            .iter()
            .filter_map(|worker| {
                let name = worker.name_any();
                let namespace = stores.namespace(&name)?;
                let state = NamespaceState::of(&namespace.metadata, &config.selector);
                let deleted = namespace.metadata.deletion_timestamp.is_some();
                (!deleted && !state.opted_in).then_some(name)
            })
            .collect();
        let mut counted = crate::sync::lock(&self.0);
        let was_held = counted.held;
        counted.fleet = workers.len();
        counted.brake = config.rollout.reap_brake;
        counted.confirmed = confirmed;
        counted.opting_out = opting_out;
        counted.decide();
        let released = if was_held && !counted.held {
            counted.opting_out.iter().cloned().collect()
        } else {
            Vec::new()
        };
        Seen {
            opting_out: counted.opting_out.len(),
            fleet: counted.fleet,
            held: counted.held,
            released,
        }
    }

    /// Whether namespace `name`, which exists and opts out, may be reaped now.
    pub fn may_reap(&self, name: &str) -> bool {
        let mut counted = crate::sync::lock(&self.0);
        if counted.opting_out.insert(name.to_string()) {
            counted.decide();
        }
        !counted.held
    }

    /// Namespace `name` was reaped: it no longer counts.
    pub fn reaped(&self, name: &str) {
        crate::sync::lock(&self.0).opting_out.remove(name);
    }
}
