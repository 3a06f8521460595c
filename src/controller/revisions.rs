//! The kept revisions as the leader knows them: listed from flotilla's namespace each time it
//! gains leadership, with its own config recorded as the newest, pruned to the history limit,
//! and each compiled on first use. Only the leader writes them, so its list stays current.

use crate::config::Config;
use crate::render::Renderer;
use crate::rollout::revision::{self, Content, Stored};
use crate::sync::{read, write};
use crate::telemetry::Metrics;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

struct Kept {
    stored: Stored,
    /// Compiled on first use; `None` until then, or for good if it does not compile.
    renderer: Option<Arc<Renderer>>,
    broken: bool,
}

pub struct Revisions {
    config: Config,
    kept: RwLock<BTreeMap<String, Kept>>,
}

impl Revisions {
    pub fn new(config: &Config) -> Revisions {
        Revisions {
            config: config.clone(),
            kept: RwLock::default(),
        }
    }

    fn api(&self, client: &kube::Client) -> Api<ControllerRevision> {
        Api::namespaced(client.clone(), &self.config.namespace)
    }

    /// Lists the kept revisions, records `current` (this replica's config) as the newest, and
    /// deletes the oldest beyond the history limit that nothing uses (`in_use`). Returns whether
    /// `current` became the newest just now (which supersedes an undo).
    pub async fn load(
        &self,
        client: &kube::Client,
        current: &Renderer,
        in_use: &BTreeSet<String>,
        metrics: &Metrics,
    ) -> kube::Result<bool> {
        let api = self.api(client);
        let selector = crate::ownership::watch_selector(&self.config.instance);
        let listed = metrics.count(
            "list",
            api.list(&ListParams::default().labels(&selector)).await,
        )?;
        let mut kept = BTreeMap::new();
        for object in &listed.items {
            match revision::read(object) {
                Ok(stored) => {
                    kept.insert(
                        stored.hash.clone(),
                        Kept {
                            stored,
                            renderer: None,
                            broken: false,
                        },
                    );
                }
                Err(e) => tracing::warn!(error = %e, "a ControllerRevision is not used"),
            }
        }
        let newest = kept.values().map(|k| k.stored.number).max().unwrap_or(0);
        let hash = current.revision().to_string();
        let made_newest = match kept.get_mut(&hash) {
            Some(k) if k.stored.number == newest => false,
            // Back to an earlier revision's content: it is the newest again, as Kubernetes
            // renumbers a Deployment's old ReplicaSet on a rollback.
            Some(k) => {
                let patch = serde_json::json!({ "revision": newest + 1 });
                let name = revision::object_name(&self.config.instance, &hash);
                let params = PatchParams::default();
                metrics.count(
                    "patch",
                    api.patch(&name, &params, &Patch::Merge(&patch)).await,
                )?;
                k.stored.number = newest + 1;
                true
            }
            None => {
                let content = Content::of(&self.config, current.sources());
                let object =
                    revision::controller_revision(&self.config, &hash, newest + 1, &content);
                let created =
                    metrics.count("create", api.create(&PostParams::default(), &object).await)?;
                let stored = revision::read(&created).map_err(|e| {
                    kube::Error::Service(format!("reading back what was created: {e}").into())
                })?;
                kept.insert(
                    hash.clone(),
                    Kept {
                        stored,
                        renderer: None,
                        broken: false,
                    },
                );
                true
            }
        };
        tracing::info!(revision = %hash, number = kept[&hash].stored.number, kept = kept.len(), "revisions loaded");
        self.prune(&api, &mut kept, &hash, in_use, &listed.items, metrics)
            .await;
        *write(&self.kept) = kept;
        Ok(made_newest)
    }

    async fn prune(
        &self,
        api: &Api<ControllerRevision>,
        kept: &mut BTreeMap<String, Kept>,
        current: &str,
        in_use: &BTreeSet<String>,
        listed: &[ControllerRevision],
        metrics: &Metrics,
    ) {
        let mut by_number: Vec<(i64, String)> = kept
            .iter()
            .map(|(hash, k)| (k.stored.number, hash.clone()))
            .collect();
        by_number.sort_unstable_by(|a, b| b.cmp(a));
        let limit = self.config.rollout.history_limit;
        for (_, hash) in by_number.into_iter().skip(limit) {
            if hash == current || in_use.contains(&hash) {
                continue;
            }
            let name = revision::object_name(&self.config.instance, &hash);
            let uid = listed
                .iter()
                .find(|o| o.metadata.name.as_deref() == Some(name.as_str()))
                .and_then(|o| o.metadata.uid.clone());
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid,
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match metrics.count("delete", api.delete(&name, &params).await) {
                Ok(_) => {
                    kept.remove(&hash);
                }
                Err(e) => {
                    tracing::warn!(revision = %hash, error = %e, "could not delete an old revision")
                }
            }
        }
    }

    /// The renderer of revision `hash`, compiled on first use; `None` if it is not kept or
    /// does not compile (logged once).
    pub fn renderer(&self, hash: &str) -> Option<Arc<Renderer>> {
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
        match entry.stored.renderer(&self.config) {
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

    /// Whether revision `hash` is kept (and so can be rendered, unless it is broken).
    pub fn known(&self, hash: &str) -> bool {
        read(&self.kept).get(hash).is_some_and(|k| !k.broken)
    }

    /// A revision's number; 0 for one not kept.
    pub fn number(&self, hash: &str) -> i64 {
        read(&self.kept).get(hash).map_or(0, |k| k.stored.number)
    }

    pub fn hash_of(&self, number: i64) -> Option<String> {
        read(&self.kept)
            .iter()
            .find(|(_, k)| k.stored.number == number)
            .map(|(hash, _)| hash.clone())
    }

    pub fn newest(&self) -> Option<String> {
        read(&self.kept)
            .iter()
            .max_by_key(|(_, k)| k.stored.number)
            .map(|(hash, _)| hash.clone())
    }
}
