//! Statuses flotilla wrote that the NamespaceWorker watch does not show yet. Right after a write
//! the watch still shows the worker before it, and a reconcile then must build on what was
//! written (a condition's transition time, whether a problem is news). Each is dropped as soon as
//! the watch shows the version it was written at, so a settled fleet keeps none: the watch's copy
//! is the only one. Pure bookkeeping, no I/O.

use crate::status::WorkerStatus;
use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct Written {
    /// Per namespace: the resourceVersion the status was written at, and the status.
    pending: HashMap<String, (String, WorkerStatus)>,
}

impl Written {
    /// `status` was written to `namespace`'s worker at `version`; `watched` is the version the
    /// watch shows now (it may already be this one).
    pub fn wrote(
        &mut self,
        namespace: &str,
        version: &str,
        status: &WorkerStatus,
        watched: Option<&str>,
    ) {
        if watched == Some(version) {
            self.pending.remove(namespace);
        } else {
            let entry = (version.to_string(), status.clone());
            self.pending.insert(namespace.to_string(), entry);
        }
    }

    /// The watch shows `namespace`'s worker at `version`. Watch events come in order, so once
    /// it shows the version written, the watch is at least as fresh as the write.
    pub fn watched(&mut self, namespace: &str, version: &str) {
        if self
            .pending
            .get(namespace)
            .is_some_and(|(written, _)| written == version)
        {
            self.pending.remove(namespace);
        }
    }

    /// The status written to `namespace`'s worker that the watch does not show yet, if any.
    pub fn get(&self, namespace: &str) -> Option<&WorkerStatus> {
        self.pending.get(namespace).map(|(_, status)| status)
    }

    pub fn forget(&mut self, namespace: &str) {
        self.pending.remove(namespace);
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

    #[test]
    fn a_write_answers_until_the_watch_shows_its_version() {
        let mut written = Written::default();
        written.wrote("team-a", "12", &status("new"), Some("10"));
        assert_eq!(written.get("team-a"), Some(&status("new")));
        // An event from before the write (the watch is behind): the write still answers.
        written.watched("team-a", "11");
        assert_eq!(written.get("team-a"), Some(&status("new")));
        written.watched("team-a", "12");
        assert_eq!(written.get("team-a"), None);
        assert!(written.pending.is_empty());
    }

    #[test]
    fn nothing_is_kept_when_the_watch_was_faster_than_the_write_returned() {
        let mut written = Written::default();
        written.wrote("team-a", "12", &status("old"), Some("10"));
        written.wrote("team-a", "13", &status("new"), Some("13"));
        assert_eq!(written.get("team-a"), None);
        assert!(written.pending.is_empty());
    }

    #[test]
    fn the_latest_write_answers_and_an_earlier_version_does_not_drop_it() {
        let mut written = Written::default();
        written.wrote("team-a", "12", &status("first"), None);
        written.wrote("team-a", "14", &status("second"), Some("12"));
        written.watched("team-a", "12");
        assert_eq!(written.get("team-a"), Some(&status("second")));
        written.wrote("team-b", "20", &status("b"), None);
        written.forget("team-a");
        assert_eq!(written.get("team-a"), None);
        assert_eq!(written.get("team-b"), Some(&status("b")));
    }
}
