//! The kept revisions as the leader knows them: listed from flotilla's namespace each time it
//! gains leadership, with the config in force recorded as the newest (again whenever it
//! changes), pruned to the history limit, and each compiled on first use. Only the leader
//! writes them, so its list stays current.

use super::in_force::Current;
use crate::config::Config;
use crate::render::Renderer;
use crate::rollout::KeptRevisions;
use crate::rollout::revision::{self, Content, Stored};
use crate::sync::{read, write};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

struct Kept {
    stored: Stored,
    /// Its ControllerRevision's uid: a delete removes that object and no other.
    uid: Option<String>,
    /// Compiled on first use; `None` until then, or for good if it does not compile.
    renderer: Option<Arc<Renderer>>,
    broken: bool,
    /// When it was last made the newest (`revision::recorded_at`).
    recorded: Option<Timestamp>,
}

impl Kept {
    fn of(object: &ControllerRevision) -> Result<Kept, revision::RevisionError> {
        Ok(Kept {
            stored: revision::read(object)?,
            uid: object.metadata.uid.clone(),
            renderer: None,
            broken: false,
            recorded: revision::recorded_at(object),
        })
    }
}

/// Kept by name: their namespace and instance are the process's, which a reload never changes.
pub struct History {
    namespace: String,
    instance: String,
    kept: RwLock<BTreeMap<String, Kept>>,
}

impl History {
    pub fn new(config: &Config) -> History {
        History {
            namespace: config.namespace.clone(),
            instance: config.instance.clone(),
            kept: RwLock::default(),
        }
    }

    fn api(&self, client: &kube::Client) -> Api<ControllerRevision> {
        Api::namespaced(client.clone(), &self.namespace)
    }

    /// Lists the kept revisions: on a gain of leadership, when another replica may have
    /// recorded some.
    pub async fn list(&self, client: &kube::Client) -> kube::Result<()> {
        let selector = crate::ownership::watch_selector(&self.instance);
        let listed = self
            .api(client)
            .list(&ListParams::default().labels(&selector))
            .await?;
        let mut kept = BTreeMap::new();
        for object in &listed.items {
            match Kept::of(object) {
                Ok(k) => {
                    kept.insert(k.stored.hash.clone(), k);
                }
                Err(e) => tracing::warn!(error = %e, "a ControllerRevision is not used"),
            }
        }
        *write(&self.kept) = kept;
        Ok(())
    }

    /// Records `current` (the config in force and its templates) as the newest revision, and
    /// deletes the oldest beyond the history limit that nothing uses (`in_use`). Returns whether
    /// `current` became the newest just now (which supersedes an undo).
    pub async fn record(
        &self,
        client: &kube::Client,
        current: &Current,
        in_use: &BTreeSet<String>,
    ) -> kube::Result<bool> {
        let api = self.api(client);
        let hash = current.renderer.revision().to_string();
        let (newest, number) = {
            let kept = read(&self.kept);
            let newest = kept.values().map(|k| k.stored.number).max().unwrap_or(0);
            (newest, kept.get(&hash).map(|k| k.stored.number))
        };
        let made_newest = match number {
            Some(n) if n == newest => false,
            // Back to an earlier revision's content: it is the newest again, as Kubernetes
            // renumbers a Deployment's old ReplicaSet on a rollback.
            Some(_) => {
                // A replace of the object as read, not a patch: the API server applies a patch
                // to the object as Go encodes it, with `<`, `>` and `&` escaped in strings, and
                // refuses the data as changed ("field is immutable") when the content holds one
                // (a shell `&&`, a `>` in a template). Read and written back by serde_json, the
                // data is byte for byte what flotilla created; the resourceVersion read makes
                // the replace refused if the object changed meanwhile.
                let name = revision::object_name(&self.instance, &hash);
                let mut object = api.get(&name).await?;
                object.revision = Some(newest + 1);
                let now = Timestamp::now();
                revision::mark_recorded(&mut object, now);
                api.replace(&name, &PostParams::default(), &object).await?;
                if let Some(k) = write(&self.kept).get_mut(&hash) {
                    k.stored.number = newest + 1;
                    k.recorded = Some(now);
                }
                true
            }
            None => {
                let content = Content::of(&current.config, current.renderer.sources());
                let mut object =
                    revision::controller_revision(&current.config, &hash, newest + 1, &content);
                revision::mark_recorded(&mut object, Timestamp::now());
                let created = api.create(&PostParams::default(), &object).await?;
                let kept = Kept::of(&created).map_err(|e| {
                    kube::Error::Service(format!("reading back what was created: {e}").into())
                })?;
                write(&self.kept).insert(hash.clone(), kept);
                true
            }
        };
        let (number, count) = {
            let kept = read(&self.kept);
            (kept.get(&hash).map_or(0, |k| k.stored.number), kept.len())
        };
        tracing::info!(revision = %hash, number, kept = count, "revision recorded as the newest");
        let limit = current.config.rollout.history_limit;
        self.prune(&api, limit, &hash, in_use).await;
        Ok(made_newest)
    }

    async fn prune(
        &self,
        api: &Api<ControllerRevision>,
        limit: usize,
        current: &str,
        in_use: &BTreeSet<String>,
    ) {
        let mut by_number: Vec<(i64, String, Option<String>)> = read(&self.kept)
            .iter()
            .map(|(hash, k)| (k.stored.number, hash.clone(), k.uid.clone()))
            .collect();
        by_number.sort_unstable_by(|a, b| b.cmp(a));
        for (_, hash, uid) in by_number.into_iter().skip(limit) {
            if hash == current || in_use.contains(&hash) {
                continue;
            }
            let name = revision::object_name(&self.instance, &hash);
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid,
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {
                    write(&self.kept).remove(&hash);
                }
                Err(e) => {
                    tracing::warn!(revision = %hash, error = %e, "could not delete an old revision")
                }
            }
        }
    }

    /// Keeps `object` as if listed: for tests.
    #[cfg(test)]
    pub fn keep(&self, object: &ControllerRevision) {
        let kept = Kept::of(object).expect("a flotilla revision");
        write(&self.kept).insert(kept.stored.hash.clone(), kept);
    }

    /// Forgets every compiled revision, to be compiled again on next use: the policy they
    /// were compiled with changed.
    pub fn recompile(&self) {
        for kept in write(&self.kept).values_mut() {
            kept.renderer = None;
            kept.broken = false;
        }
    }

    /// The renderer of revision `hash` under `config` (the one in force), compiled on first
    /// use; `None` if it is not kept or does not compile (logged once).
    pub fn renderer(&self, hash: &str, config: &Config) -> Option<Arc<Renderer>> {
        if let Some(kept) = read(&self.kept).get(hash) {
            if let Some(renderer) = &kept.renderer {
                return Some(Arc::clone(renderer));
            }
            if kept.broken {
                return None;
            }
        }
        let mut kept = write(&self.kept);
        let entry = kept.get_mut(hash)?;
        match entry.stored.renderer(config) {
            Ok(renderer) => {
                let renderer = Arc::new(renderer);
                entry.renderer = Some(Arc::clone(&renderer));
                Some(renderer)
            }
            Err(e) => {
                tracing::error!(error = %e, "a kept revision cannot be rendered");
                entry.broken = true;
                None
            }
        }
    }

    /// When revision `hash` was last made the newest.
    pub fn recorded(&self, hash: &str) -> Option<Timestamp> {
        read(&self.kept).get(hash).and_then(|k| k.recorded)
    }

    /// What revision `hash` holds, if it is kept.
    pub fn content(&self, hash: &str) -> Option<Content> {
        read(&self.kept).get(hash).map(|k| k.stored.content.clone())
    }

    /// Whether revision `hash` is kept (and so can be rendered, unless it is broken).
    pub fn known(&self, hash: &str) -> bool {
        read(&self.kept).get(hash).is_some_and(|k| !k.broken)
    }

    /// The kept revisions as they are now.
    pub fn kept(&self) -> KeptRevisions {
        KeptRevisions::new(
            read(&self.kept)
                .iter()
                .map(|(hash, k)| (hash.clone(), k.stored.number, !k.broken)),
        )
    }
}
