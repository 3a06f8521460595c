//! Pure planning: from a [`Snapshot`] of what the watches and flotilla's memory know about one
//! namespace, and what its templates render, decide what to do with each object. Nothing here
//! talks to the API, so every rule (and every request it saves) is a table test.
//!
//! A reconcile is [`decide`] (reap, nothing to do, or sync with what the templates render), then
//! for a sync [`plan`], whose steps the controller executes; a [`Step::Read`] is decided once the
//! object is read, by `after_read`.

mod asleep;
mod compare;
mod decide;
mod snapshot;
mod verified;

pub use asleep::Crons;
pub use compare::contains;
pub use decide::{Decision, Sync, decide};
pub use snapshot::{
    NamespaceState, Settled, Snapshot, Verified, WorkerState, applied, fingerprint,
    reap_fingerprint,
};
pub use verified::VerifiedObjects;

use crate::kinds::Kind;
use crate::object::packed::Packed;
use crate::object::{ObjectKey, Stamped, Watched};
use crate::ownership::{self, Owner};
use crate::status::availability;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The namespaces a look at the whole fleet visits: `namespaces`, and every namespace something
/// was stamped for (one deleted while flotilla was down is known only from those).
pub fn fleet(
    namespaces: impl IntoIterator<Item = String>,
    stamped_for: impl IntoIterator<Item = String>,
) -> BTreeSet<String> {
    namespaces.into_iter().chain(stamped_for).collect()
}

/// Why an object is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Rendered otherwise than last applied: a rollout, or the namespace's inputs changed.
    Outdated,
    /// Rendered the same, but someone edited it: the edit is reverted.
    Drifted,
}

/// Why a stamped object is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Its template no longer renders it.
    Pruned,
    /// Its namespace is no longer opted in, or gone.
    Reaped,
}

/// One thing to do for one object.
#[derive(Debug, PartialEq)]
pub enum Step<'a> {
    /// In sync, as verified at the version the watch still shows (or as just read): nothing
    /// to send.
    Keep {
        object: &'a Stamped,
        verified: Verified,
    },
    /// The watches cannot tell: read it, then decide ([`after_read`]).
    Read { object: &'a Stamped },
    /// Nothing is there, as the watches show it: create it.
    Create { object: &'a Stamped },
    /// flotilla's own, and not as rendered.
    Apply { object: &'a Stamped, why: Why },
    /// The name is taken by an object flotilla did not stamp for this namespace: left as it is.
    Conflict { object: &'a Stamped, reason: String },
    /// Stamped for this namespace and no longer wanted. The uid and resourceVersion it was
    /// decided on go with the request, so that an object replaced or changed since (say, its
    /// labels removed) is not deleted.
    Delete {
        key: ObjectKey,
        uid: Option<String>,
        resource_version: Option<String>,
        why: Removal,
    },
}

/// The steps of a sync, in apply order: each rendered object (a Deployment after the
/// ServiceAccount it runs as), then what is no longer rendered, workloads first. `vacant` are
/// the rendered keys at which the watches show nothing at all: neither an object stamped for
/// this namespace nor one flotilla did not stamp (known only once the templates are rendered).
pub fn plan<'a>(
    snapshot: &Snapshot,
    rendered: &'a [Stamped],
    vacant: &HashSet<ObjectKey>,
) -> Vec<Step<'a>> {
    let mut steps: Vec<Step> = rendered.iter().map(|o| step(snapshot, vacant, o)).collect();
    let wanted: HashSet<&ObjectKey> = rendered.iter().map(|o| &o.key).collect();
    let stale = snapshot.stamped.iter().filter(|w| !wanted.contains(&w.key));
    steps.extend(deletes(stale, Removal::Pruned));
    steps
}

/// The steps of a reap: everything stamped for the namespace, workloads first.
pub fn reap(snapshot: &Snapshot) -> Vec<Step<'static>> {
    deletes(snapshot.stamped.iter(), Removal::Reaped)
}

fn deletes<'w>(watched: impl Iterator<Item = &'w Watched>, why: Removal) -> Vec<Step<'static>> {
    let mut doomed: Vec<&Watched> = watched.collect();
    doomed.sort_by(|a, b| b.key.cmp(&a.key));
    doomed
        .into_iter()
        .map(|w| Step::Delete {
            key: w.key.clone(),
            uid: w.uid.clone(),
            resource_version: w.resource_version.clone(),
            why,
        })
        .collect()
}

fn step<'a>(snapshot: &Snapshot, vacant: &HashSet<ObjectKey>, object: &'a Stamped) -> Step<'a> {
    let watched = snapshot.stamped.iter().find(|w| w.key == object.key);
    // flotilla's own object, last applied with other content: no need to read it to know that
    // it must be applied. The same hash could still hide an edit: that is read, unless verified
    // at the version watched.
    if watched
        .and_then(|w| w.hash.as_deref())
        .is_some_and(|hash| hash != object.hash)
    {
        return Step::Apply {
            object,
            why: Why::Outdated,
        };
    }
    let verified = watched
        .and_then(|w| w.resource_version.as_deref())
        .and_then(|rv| {
            let v = snapshot.verified.get(&object.key)?;
            v.resource_version.is(rv).then_some(v)
        });
    if let Some(verified) = verified {
        return Step::Keep {
            object,
            verified: verified.clone(),
        };
    }
    // Nothing there, stamped or not, as the watches show it: nothing to read. (A new fleet is
    // all such objects; reading each first would double its requests.)
    if vacant.contains(&object.key) {
        Step::Create { object }
    } else {
        Step::Read { object }
    }
}

/// The step for `object` once the live object of its name is read (`None`: there is none).
/// `field_manager` recognises an object flotilla applied whose labels were removed.
pub fn after_read<'a>(
    object: &'a Stamped,
    live: Option<&Value>,
    instance: &str,
    field_manager: &str,
) -> Step<'a> {
    let Some(live) = live else {
        return Step::Create { object };
    };
    let labels: Option<BTreeMap<String, String>> =
        serde_json::from_value(live["metadata"]["labels"].clone()).ok();
    let for_namespace = &object.body["metadata"]["labels"][ownership::FOR_NAMESPACE];
    let ours = for_namespace.as_str().unwrap_or_default();
    let owner = match ownership::owner(labels.as_ref(), instance) {
        Owner::Foreign if ownership::applied_by_us(live, field_manager, instance, ours) => {
            Owner::Stamped(ours)
        }
        owner => owner,
    };
    let reason = match owner {
        Owner::Foreign => format!(
            "{} exists and was not created by flotilla (instance {instance}); it is left untouched",
            object.key
        ),
        Owner::Stamped(ns) if for_namespace != ns => format!(
            "{} was stamped for namespace {ns}; it is left untouched",
            object.key
        ),
        Owner::Stamped(_) if contains(live, &object.body) => {
            let verified = verified_as(object, live);
            return Step::Keep { object, verified };
        }
        Owner::Stamped(_) => {
            // Same content hash on the live object: rendered the same, so someone edited it.
            let same = live["metadata"]["annotations"][ownership::HASH].as_str()
                == Some(object.hash.as_str());
            let why = if same { Why::Drifted } else { Why::Outdated };
            return Step::Apply { object, why };
        }
    };
    Step::Conflict { object, reason }
}

/// `live`, an object as the API returned it, as verified in sync now.
pub fn verified_as(object: &Stamped, live: &Value) -> Verified {
    let health = Some(live)
        .filter(|_| object.key.kind == Kind::Deployment)
        .and_then(availability)
        .map(Box::new);
    let resource_version = live["metadata"]["resourceVersion"].as_str();
    Verified {
        resource_version: Packed::decimal(resource_version.unwrap_or_default()),
        health,
    }
}

#[cfg(test)]
mod tests;
