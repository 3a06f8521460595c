//! What flotilla remembers of each namespace between reconciles, in one place: the objects it
//! found in sync (and at which version), whether the namespace is settled, the status it wrote
//! that the watch does not show yet, and how often in a row its reconcile failed. None of it is
//! needed for correctness (a restart starts empty and reads what it must); all of it saves
//! requests. A namespace's entry leaves at one point only: when it is reaped or gone.

use crate::plan::{Settled, VerifiedObjects};
use crate::status::WorkerStatus;
use crate::sync::lock;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub struct Memory {
    namespaces: Mutex<HashMap<String, NamespaceMemory>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamespaceMemory {
    /// Rendered objects found in sync, at the version they were found at.
    pub verified: VerifiedObjects,
    pub settled: Option<Settled>,
    /// The status last written to its NamespaceWorker, while the watch does not show it yet:
    /// right after a write the watch still shows the worker before it, and the next reconcile
    /// must build on what was written (a condition's transition time, whether a problem is news).
    /// Boxed: it is there only between a write and its watch event, and the map has a slot
    /// for every namespace.
    pub written: Option<Box<Written>>,
    /// Reconciles that failed in a row: the retry backoff, shared by every reconciler task.
    pub failures: u32,
    /// When its sleeping controller was woken, until it is available again.
    pub woke: Option<std::time::Instant>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub resource_version: String,
    pub status: WorkerStatus,
}

impl Memory {
    /// What is remembered of `namespace` (nothing, for one never reconciled).
    pub fn of(&self, namespace: &str) -> NamespaceMemory {
        lock(&self.namespaces)
            .get(namespace)
            .cloned()
            .unwrap_or_default()
    }

    pub fn update<T>(&self, namespace: &str, f: impl FnOnce(&mut NamespaceMemory) -> T) -> T {
        let mut namespaces = lock(&self.namespaces);
        f(namespaces.entry(namespace.to_string()).or_default())
    }

    /// A reconcile of `namespace` failed: how many have, in a row.
    pub fn failed(&self, namespace: &str) -> u32 {
        self.update(namespace, |m| {
            m.failures = m.failures.saturating_add(1);
            m.failures
        })
    }

    /// A reconcile of `namespace` succeeded (after a reap there is nothing left to reset).
    pub fn succeeded(&self, namespace: &str) {
        if let Some(entry) = lock(&self.namespaces).get_mut(namespace) {
            entry.failures = 0;
        }
    }

    /// The one way out: the namespace was reaped, or is gone.
    pub fn forget(&self, namespace: &str) {
        lock(&self.namespaces).remove(namespace);
    }

    /// `status` was written to `namespace`'s worker at `version`; `watched` tells the version
    /// the watch shows now. Called under the same lock as [`Memory::worker_shown`], so a watch
    /// event for this version, before or after, leaves nothing kept.
    pub fn wrote(
        &self,
        namespace: &str,
        version: &str,
        status: &WorkerStatus,
        watched: impl FnOnce() -> Option<String>,
    ) {
        let mut namespaces = lock(&self.namespaces);
        let entry = namespaces.entry(namespace.to_string()).or_default();
        entry.written = (watched().as_deref() != Some(version)).then(|| {
            Box::new(Written {
                resource_version: version.to_string(),
                status: status.clone(),
            })
        });
    }

    /// The watch shows `namespace`'s worker at `version`. Watch events come in order, so once it
    /// shows the version written, the watch is at least as fresh as the write.
    pub fn worker_shown(&self, namespace: &str, version: &str) {
        let mut namespaces = lock(&self.namespaces);
        if let Some(entry) = namespaces.get_mut(namespace)
            && entry
                .written
                .as_ref()
                .is_some_and(|w| w.resource_version == version)
        {
            entry.written = None;
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.namespaces).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(message: &str) -> WorkerStatus {
        WorkerStatus {
            message: message.into(),
            ..WorkerStatus::default()
        }
    }

    fn written(memory: &Memory, namespace: &str) -> Option<WorkerStatus> {
        memory.of(namespace).written.map(|w| w.status)
    }

    #[test]
    fn a_write_answers_until_the_watch_shows_its_version() {
        let memory = Memory::default();
        memory.wrote("team-a", "12", &status("new"), || Some("10".into()));
        assert_eq!(written(&memory, "team-a"), Some(status("new")));
        // An event from before the write (the watch is behind): the write still answers.
        memory.worker_shown("team-a", "11");
        assert_eq!(written(&memory, "team-a"), Some(status("new")));
        memory.worker_shown("team-a", "12");
        assert_eq!(written(&memory, "team-a"), None);
    }

    #[test]
    fn nothing_is_kept_when_the_watch_was_faster_than_the_write_returned() {
        let memory = Memory::default();
        memory.wrote("team-a", "12", &status("old"), || Some("10".into()));
        memory.wrote("team-a", "13", &status("new"), || Some("13".into()));
        assert_eq!(written(&memory, "team-a"), None);
    }

    #[test]
    fn a_watch_event_creates_no_entry_and_forget_is_the_way_out() {
        let memory = Memory::default();
        memory.worker_shown("never-reconciled", "1");
        assert_eq!(memory.len(), 0);
        memory.succeeded("never-reconciled");
        assert_eq!(memory.len(), 0);
        for _ in 0..3 {
            memory.failed("team-a");
        }
        memory.wrote("team-a", "14", &status("s"), || None);
        memory.wrote("team-b", "20", &status("b"), || None);
        assert_eq!(memory.of("team-a").failures, 3);
        memory.succeeded("team-a");
        assert_eq!(memory.of("team-a").failures, 0);
        memory.forget("team-a");
        assert_eq!(memory.of("team-a"), NamespaceMemory::default());
        assert_eq!(written(&memory, "team-b"), Some(status("b")));
        assert_eq!(memory.len(), 1);
    }
}
