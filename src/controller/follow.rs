//! flotilla follows its config file and templates directory while it runs. In a cluster they
//! are the mounted ConfigMap, which the kubelet swaps in place. A valid change is in force
//! within [`POLL`]: the leader's rollout records it as the newest revision and rolls it out by
//! the strategy. An invalid one is refused, and the fleet keeps what it has. Every replica
//! follows, so that a standby that takes over starts from the files as they are.

use super::Context;
use super::in_force::Current;
use super::queue::WorkQueue;
use crate::config::Config;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How often the files are read again. The kubelet takes up to a minute to update a mounted
/// ConfigMap; reading a config and a few templates costs next to nothing.
const POLL: Duration = Duration::from_secs(2);

/// Follows the files at `path` from `seen`, their fingerprint when the process loaded them.
pub async fn follow(ctx: Arc<Context>, queue: Arc<WorkQueue>, path: PathBuf, mut seen: u64) {
    let dir = ctx.config.templates_dir.clone();
    loop {
        tokio::time::sleep(POLL).await;
        let now = fingerprint(&path, &dir);
        if now == seen {
            continue;
        }
        seen = now;
        let before = ctx.in_force.get();
        let current = reload(&ctx.config, &before, &path);
        match &current.refused {
            Some(why) => tracing::error!(error = %why,
                revision = before.renderer.revision(),
                "config change refused; the fleet keeps what it has"),
            None => tracing::info!(revision = current.renderer.revision(), "config reloaded"),
        }
        if !current.waiting.is_empty() {
            tracing::warn!(keys = ?current.waiting, "changed keys take effect at the next restart");
        }
        let selector_changed = current.config.selector_text != before.config.selector_text;
        let policy_changed = current.config.policy != before.config.policy;
        let sleep_changed = current.config.sleep != before.config.sleep;
        // Turned on, every controller is rendered at its share; off, at its own parallelism.
        let budget_switched =
            current.config.fleet_parallelism.is_some() != before.config.fleet_parallelism.is_some();
        // Counted before any reconcile sees the new selector: a selector edit that opts many
        // namespaces out is held as a whole.
        let confirmed = ctx.stores.fleet().and_then(|f| f.spec.confirm_reaping);
        let census = ctx.stores.census(&current.config.selector);
        let rule = current.config.rollout.reap_brake;
        let now = std::time::Instant::now();
        ctx.brake
            .count(census.opting_out, census.workers, rule, confirmed, now);
        ctx.in_force.set(current);
        if policy_changed {
            ctx.history.recompile();
        }
        // The rollout moves namespaces to a new revision; a new selector, policy, sleep or budget
        // concerns every namespace at once.
        if selector_changed || policy_changed || sleep_changed || budget_switched {
            for name in ctx.stores.all_namespaces() {
                queue.add(&name);
            }
        }
    }
}

/// What is in force after reading the files at `path` again: the new config and templates if
/// they are valid, or `before`'s with the reason they are refused. `started` is the config the
/// process started with, whose process settings stay.
fn reload(started: &Config, before: &Current, path: &Path) -> Current {
    let refused = |why: String| Current {
        config: Arc::clone(&before.config),
        renderer: Arc::clone(&before.renderer),
        refused: Some(why),
        waiting: before.waiting.clone(),
        since: before.since,
    };
    let newer = match Config::load(path) {
        Ok(config) => config,
        Err(e) => return refused(e.to_string()),
    };
    let (config, waiting) = started.reloaded(newer);
    match crate::render::load(&config) {
        Ok(renderer) => Current {
            since: before.since.after(before, &config, &renderer),
            config: Arc::new(config),
            renderer: Arc::new(renderer),
            refused: None,
            waiting,
        },
        Err(e) => refused(e.to_string()),
    }
}

/// What the config file and the templates directory hold, as one number: any change to
/// either, including one that makes them unreadable, changes it.
pub fn fingerprint(path: &Path, templates: &Path) -> u64 {
    let mut hasher = DefaultHasher::new();
    match std::fs::read(path) {
        Ok(bytes) => bytes.hash(&mut hasher),
        Err(e) => e.kind().to_string().hash(&mut hasher),
    }
    match crate::render::load_dir(templates) {
        Ok(files) => files.hash(&mut hasher),
        Err(e) => e.to_string().hash(&mut hasher),
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::in_force::PartsRead;
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn a_change_to_either_file_changes_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let templates = dir.path().join("templates");
        std::fs::create_dir(&templates).unwrap();
        let config = dir.path().join("flotilla.yaml");
        std::fs::write(&config, "selector: a=b\n").unwrap();
        std::fs::write(templates.join("cm.yaml"), "kind: ConfigMap\n").unwrap();
        let first = fingerprint(&config, &templates);
        assert_eq!(first, fingerprint(&config, &templates));
        std::fs::write(templates.join("cm.yaml"), "kind: Secret\n").unwrap();
        let second = fingerprint(&config, &templates);
        assert_ne!(first, second);
        std::fs::write(&config, "selector: a=c\n").unwrap();
        let third = fingerprint(&config, &templates);
        assert_ne!(second, third);
        std::fs::remove_file(&config).unwrap();
        assert_ne!(third, fingerprint(&config, &templates));
    }

    #[test]
    fn an_invalid_change_keeps_what_is_in_force_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let templates = dir.path().join("templates");
        std::fs::create_dir(&templates).unwrap();
        std::fs::write(
            templates.join("cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
        )
        .unwrap();
        let path = dir.path().join("flotilla.yaml");
        std::fs::write(&path, "values:\n  a: 1\n").unwrap();
        let started = Config::load(&path).unwrap();
        let renderer = crate::render::load(&started).unwrap();
        let before = Current {
            config: Arc::new(started.clone()),
            renderer: Arc::new(renderer),
            refused: None,
            waiting: Vec::new(),
            since: PartsRead {
                templates: Timestamp::UNIX_EPOCH,
                values: Timestamp::UNIX_EPOCH,
            },
        };
        std::fs::write(&path, "values:\n  a: 2\nconcurrency: 9\n").unwrap();
        let valid = reload(&started, &before, &path);
        assert_eq!(valid.refused, None);
        assert!(
            valid.since.values > before.since.values,
            "other values: read since now"
        );
        assert_eq!(
            valid.since.templates, before.since.templates,
            "the same templates: read since as before"
        );
        let same = reload(&started, &valid, &path);
        assert_eq!(same.since, valid.since, "the same content: since as before");
        std::fs::write(
            templates.join("cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
        )
        .unwrap();
        let other_templates = reload(&started, &valid, &path);
        assert!(other_templates.since.templates > valid.since.templates);
        assert_eq!(other_templates.since.values, valid.since.values);
        std::fs::write(
            templates.join("cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
        )
        .unwrap();
        assert_eq!(valid.waiting, ["concurrency"]);
        assert_ne!(valid.renderer.revision(), before.renderer.revision());

        std::fs::write(&path, "values: [\n").unwrap();
        let broken = reload(&started, &before, &path);
        let why = broken.refused.unwrap();
        assert!(
            why.contains("flotilla.yaml") && why.contains("line"),
            "{why}"
        );
        assert_eq!(broken.renderer.revision(), before.renderer.revision());

        std::fs::write(&path, "values:\n  a: 3\n").unwrap();
        std::fs::write(templates.join("bad.yaml"), "a: {{ nope(\n").unwrap();
        let why = reload(&started, &before, &path).refused.unwrap();
        assert!(
            why.contains(&format!("{}:1", templates.join("bad.yaml").display())),
            "{why}"
        );
    }
}
