//! The config and templates in force, swapped whole when the files change (follow.rs): a
//! reconcile or a rollout step reads one consistent pair, however the files move meanwhile.

use crate::config::Config;
use crate::render::Renderer;
use crate::sync::{read, write};
use k8s_openapi::jiff::Timestamp;
use std::sync::{Arc, RwLock};

pub struct Current {
    pub config: Arc<Config>,
    /// This config's templates, compiled: the revision the rollout makes the newest.
    pub renderer: Arc<Renderer>,
    /// Why the files as they are now are not in force; `None` when they are.
    pub refused: Option<String>,
    /// The keys changed on disk that take effect at the next restart.
    pub waiting: Vec<&'static str>,
    /// Since when this replica has had each part of the revision `renderer` is (read at start,
    /// or reloaded with other content): a part read before the newest revision was recorded,
    /// and not as that revision has it, is stale.
    pub since: PartsRead,
}

/// When this replica's files last changed, by part of a revision: the config and the templates
/// are separate ConfigMaps, which the kubelet updates each in its own time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartsRead {
    pub templates: Timestamp,
    /// The values and the overrides' declarations.
    pub values: Timestamp,
}

impl PartsRead {
    fn now() -> PartsRead {
        let now = Timestamp::now();
        PartsRead {
            templates: now,
            values: now,
        }
    }

    /// After a reload from `before` to `config` and `renderer`: each part since now if it
    /// changed, else since as before.
    pub fn after(&self, before: &Current, config: &Config, renderer: &Renderer) -> PartsRead {
        let now = Timestamp::now();
        let values_kept = config.values == before.config.values
            && config.override_specs == before.config.override_specs;
        PartsRead {
            templates: if renderer.sources() == before.renderer.sources() {
                self.templates
            } else {
                now
            },
            values: if values_kept { self.values } else { now },
        }
    }
}

pub struct InForce(RwLock<Arc<Current>>);

impl InForce {
    pub fn new(config: Config, renderer: Renderer) -> InForce {
        InForce(RwLock::new(Arc::new(Current {
            config: Arc::new(config),
            renderer: Arc::new(renderer),
            refused: None,
            waiting: Vec::new(),
            since: PartsRead::now(),
        })))
    }

    pub fn get(&self) -> Arc<Current> {
        Arc::clone(&read(&self.0))
    }

    pub fn set(&self, current: Current) {
        *write(&self.0) = Arc::new(current);
    }
}
