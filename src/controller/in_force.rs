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
    /// Since when this replica has had the revision `renderer` is (read at start, or reloaded
    /// with other content): files read before the newest revision was recorded are stale.
    pub since: Timestamp,
}

pub struct InForce(RwLock<Arc<Current>>);

impl InForce {
    pub fn new(config: Config, renderer: Renderer) -> InForce {
        InForce(RwLock::new(Arc::new(Current {
            config: Arc::new(config),
            renderer: Arc::new(renderer),
            refused: None,
            waiting: Vec::new(),
            since: Timestamp::now(),
        })))
    }

    pub fn get(&self) -> Arc<Current> {
        Arc::clone(&read(&self.0))
    }

    pub fn set(&self, current: Current) {
        *write(&self.0) = Arc::new(current);
    }
}
