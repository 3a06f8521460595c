//! Carrying out a plan's steps on stamped objects: the only place a reconcile talks to the API
//! about them. One object after the other, in the plan's order (a Deployment after the
//! ServiceAccount it runs as): reading a namespace's objects in parallel was measured no faster
//! on the bench's two cores (N=2000: 93 s against 86 s).

use crate::cluster::{self, Mode, Read};
use crate::object::{ObjectKey, Stamped};
use crate::plan::{self, Removal, Step, Verified, Why};
use kube::Client;
use std::fmt;

#[derive(Debug, thiserror::Error)]
#[error("{action} {object}: {}", brief(.source))]
pub struct Error {
    action: &'static str,
    object: String,
    #[source]
    source: kube::Error,
}

/// One line for a log: the API server's code, reason and message rather than its whole Status.
fn brief(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            format!("{} {}: {}", status.code, status.reason, status.message)
        }
        other => other.to_string(),
    }
}

impl Error {
    /// The API server refused the request for what it is (invalid, forbidden, over a quota, in
    /// conflict), not for a passing reason (unavailable, throttled, no answer): sending the same
    /// again will fail the same way until something changes.
    pub fn refused(&self) -> bool {
        matches!(&self.source, kube::Error::Api(status) if (400..500).contains(&status.code) && status.code != 429)
    }

    /// The API server failed on its side (5xx): it may pass. Retried as any failure, and shown
    /// in the NamespaceWorker meanwhile (`ApplyFailed`, reason `ServerError`).
    pub fn server_error(&self) -> bool {
        matches!(&self.source, kube::Error::Api(status) if (500..600).contains(&status.code))
    }

    pub fn on(
        action: &'static str,
        object: impl fmt::Display,
    ) -> impl FnOnce(kube::Error) -> Error {
        let object = object.to_string();
        move |source| Error {
            action,
            object,
            source,
        }
    }
}

/// What one step did.
#[derive(Debug, PartialEq)]
pub enum Done {
    /// In sync: nothing sent, or read and found so.
    InSync(ObjectKey, Verified),
    Created(ObjectKey, Verified),
    Updated(ObjectKey, Verified),
    DriftRepaired(ObjectKey, Verified),
    /// Left alone: the name is another's.
    Conflict(ObjectKey, String),
    Deleted(ObjectKey, Removal),
    /// Already gone, or replaced or changed since the plan was made: not deleted.
    NotDeleted(ObjectKey),
}

/// The API and the identity the steps are carried out with.
pub struct Executor<'a> {
    pub client: &'a Client,
    pub field_manager: &'a str,
    pub instance: &'a str,
}

impl Executor<'_> {
    /// The steps in order. After a passing failure the others still run (one object does not
    /// hold up the rest); after a refusal nothing more is sent: the namespace is half applied,
    /// and its status says why.
    pub async fn run(&self, steps: Vec<Step<'_>>) -> Vec<Result<Done, Error>> {
        let mut done = Vec::with_capacity(steps.len());
        for step in steps {
            let result = self.step(step).await;
            let refused = result.as_ref().is_err_and(Error::refused);
            done.push(result);
            if refused {
                break;
            }
        }
        done
    }

    async fn step(&self, step: Step<'_>) -> Result<Done, Error> {
        match step {
            Step::Read { object } => {
                let live = self.get(object, Read::WatchCache).await?;
                // Never another Read: what was read decides.
                let decided =
                    plan::after_read(object, live.as_ref(), self.instance, self.field_manager);
                Box::pin(self.step(decided)).await
            }
            Step::Keep { object, verified } => Ok(Done::InSync(object.key.clone(), verified)),
            Step::Conflict { object, reason } => Ok(Done::Conflict(object.key.clone(), reason)),
            Step::Create { object } => match self.apply(object, Mode::Create).await {
                Ok(verified) => {
                    tracing::info!(object = %object.key, "created");
                    Ok(Done::Created(object.key.clone(), verified))
                }
                // Someone created it since the watches showed the name free: what is there now
                // decides (theirs is left alone), once.
                Err(e) if is_conflict(&e) => {
                    let live = self.get(object, Read::Latest).await?;
                    match plan::after_read(object, live.as_ref(), self.instance, self.field_manager)
                    {
                        Step::Create { .. } => Err(e),
                        decided => Box::pin(self.step(decided)).await,
                    }
                }
                Err(e) => Err(e),
            },
            Step::Apply { object, why } => {
                let verified = self.apply(object, Mode::Update).await?;
                let key = object.key.clone();
                let (done, what) = match why {
                    Why::Drifted => (Done::DriftRepaired(key, verified), "drift repaired"),
                    Why::Outdated => (Done::Updated(key, verified), "updated"),
                };
                tracing::info!(object = %object.key, "{what}");
                Ok(done)
            }
            Step::Delete {
                key,
                uid,
                resource_version,
                why,
            } => {
                let deleted = cluster::delete(self.client, &key, uid, resource_version).await;
                // Forbidden: flotilla may delete only the names its templates render (its
                // ClusterRole flotilla-stamp), so this is not one of them: labelled as flotilla's
                // by someone else, or of a template removed or renamed since. It stays, and
                // holds up nothing.
                if matches!(&deleted, Err(kube::Error::Api(status)) if status.code == 403) {
                    tracing::warn!(
                        object = %key,
                        "not deleted: flotilla may delete only the names its templates render (README, Security); left as it is"
                    );
                    return Ok(Done::NotDeleted(key));
                }
                let deleted = deleted.map_err(Error::on("delete", &key))?;
                if !deleted {
                    return Ok(Done::NotDeleted(key));
                }
                match why {
                    Removal::Pruned => tracing::info!(object = %key, "pruned: no longer rendered"),
                    Removal::Reaped => tracing::info!(object = %key, "reaped"),
                }
                Ok(Done::Deleted(key, why))
            }
        }
    }

    async fn get(&self, object: &Stamped, read: Read) -> Result<Option<serde_json::Value>, Error> {
        cluster::get(self.client, &object.key, read)
            .await
            .map_err(Error::on("get", &object.key))
    }

    async fn apply(&self, object: &Stamped, mode: Mode) -> Result<Verified, Error> {
        let applied = cluster::apply(self.client, self.field_manager, object, mode)
            .await
            .map_err(Error::on("apply", &object.key))?;
        Ok(plan::verified_as(object, &applied))
    }
}

fn is_conflict(error: &Error) -> bool {
    matches!(&error.source, kube::Error::Api(status) if status.code == 409)
}

#[cfg(test)]
mod tests;
