//! Reconcile one namespace: render what should exist, apply what differs, prune what is no
//! longer rendered, or reap everything when the namespace opted out, is terminating or is gone.

use super::Context;
use super::api;
use super::watches::Observed;
use crate::object::{ObjectKey, Stamped};
use crate::ownership;
use crate::plan::{self, Decision};
use crate::render::NamespaceInput;
use kube::ResourceExt;
use kube::core::SelectorExt;
use std::fmt;

#[derive(Debug, thiserror::Error)]
#[error("{action} {key}: {source}")]
pub struct Error {
    action: &'static str,
    key: ObjectKey,
    #[source]
    source: kube::Error,
}

/// What one reconcile did; logged, and the basis of status later.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub created: usize,
    pub updated: usize,
    pub drift_repaired: usize,
    pub pruned: usize,
    pub reaped: usize,
    pub conflicts: usize,
    pub render_failed: bool,
}

impl Outcome {
    pub fn wrote(&self) -> bool {
        self.created + self.updated + self.drift_repaired + self.pruned + self.reaped > 0
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "created={} updated={} drift_repaired={} pruned={} reaped={} conflicts={}",
            self.created,
            self.updated,
            self.drift_repaired,
            self.pruned,
            self.reaped,
            self.conflicts
        )
    }
}

pub async fn reconcile(ctx: &Context, name: &str) -> Result<Outcome, Error> {
    let observed = ctx.stores.stamped_for(name);
    let namespace = ctx.stores.namespace(name).filter(|ns| {
        ns.metadata.deletion_timestamp.is_none() && ctx.config.selector.matches(ns.labels())
    });
    let Some(namespace) = namespace else {
        return reap(ctx, observed).await;
    };
    let input = NamespaceInput {
        name: name.to_string(),
        labels: namespace.labels().clone(),
        annotations: namespace.annotations().clone(),
    };
    let desired = match ctx.renderer.render(&input) {
        Ok(desired) => desired,
        Err(errors) => {
            // Nothing is applied or pruned: the namespace keeps what it has.
            tracing::error!(namespace = name, errors = %errors, "templates failed to render; stamped objects left as they are");
            return Ok(Outcome {
                render_failed: true,
                ..Outcome::default()
            });
        }
    };
    let mut outcome = Outcome::default();
    let mut first_error = None;
    for object in &desired {
        match sync(ctx, object).await {
            Ok(done) => done.count(&mut outcome),
            Err(e) => {
                tracing::warn!(namespace = name, error = %e, "apply failed");
                first_error.get_or_insert(e);
            }
        }
    }
    let observed_keys: Vec<ObjectKey> = observed.iter().map(|o| o.key.clone()).collect();
    for key in plan::prune(&desired, &observed_keys) {
        let uid = observed
            .iter()
            .find(|o| o.key == key)
            .and_then(|o| o.uid.clone());
        match delete(ctx, &key, uid).await {
            Ok(()) => {
                tracing::info!(namespace = name, object = %key, "pruned: no longer rendered");
                outcome.pruned += 1;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}

enum Synced {
    InSync,
    Created,
    Updated,
    DriftRepaired,
    Conflict,
}

impl Synced {
    fn count(self, outcome: &mut Outcome) {
        match self {
            Synced::InSync => {}
            Synced::Created => outcome.created += 1,
            Synced::Updated => outcome.updated += 1,
            Synced::DriftRepaired => outcome.drift_repaired += 1,
            Synced::Conflict => outcome.conflicts += 1,
        }
    }
}

async fn sync(ctx: &Context, object: &Stamped) -> Result<Synced, Error> {
    if ctx.is_verified(object) {
        return Ok(Synced::InSync);
    }
    let fail = |action| {
        move |source| Error {
            action,
            key: object.key.clone(),
            source,
        }
    };
    let live = api::get(&ctx.client, &object.key)
        .await
        .map_err(fail("get"))?;
    let synced = match plan::decide(object, live.as_ref(), &ctx.config.instance) {
        Decision::InSync => {
            let rv = live
                .as_ref()
                .and_then(|l| l["metadata"]["resourceVersion"].as_str());
            ctx.verified(object, rv.map(str::to_string));
            return Ok(Synced::InSync);
        }
        Decision::Conflict(reason) => {
            tracing::warn!(object = %object.key, "conflict: {reason}");
            return Ok(Synced::Conflict);
        }
        Decision::Create => Synced::Created,
        // Same content hash on the live object: it was rendered the same, so someone edited it.
        Decision::Update
            if live
                .as_ref()
                .and_then(|l| l["metadata"]["annotations"][ownership::HASH].as_str())
                == Some(object.hash.as_str()) =>
        {
            Synced::DriftRepaired
        }
        Decision::Update => Synced::Updated,
    };
    let rv = api::apply(&ctx.client, &ctx.config.field_manager, object)
        .await
        .map_err(fail("apply"))?;
    ctx.verified(object, rv);
    let what = match synced {
        Synced::Created => "created",
        Synced::DriftRepaired => "drift repaired",
        _ => "updated",
    };
    tracing::info!(object = %object.key, "{what}");
    Ok(synced)
}

async fn delete(ctx: &Context, key: &ObjectKey, uid: Option<String>) -> Result<(), Error> {
    ctx.forget(key);
    api::delete(&ctx.client, key, uid)
        .await
        .map_err(|source| Error {
            action: "delete",
            key: key.clone(),
            source,
        })
}

/// Deletes everything stamped for a namespace that is no longer opted in (or no longer exists),
/// including objects placed outside it. Only labelled objects seen by the watch are candidates.
async fn reap(ctx: &Context, mut observed: Vec<Observed>) -> Result<Outcome, Error> {
    observed.sort_by(|a, b| b.key.cmp(&a.key));
    let mut outcome = Outcome::default();
    let mut first_error = None;
    for object in observed {
        match delete(ctx, &object.key, object.uid).await {
            Ok(()) => {
                tracing::info!(object = %object.key, "reaped");
                outcome.reaped += 1;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}
