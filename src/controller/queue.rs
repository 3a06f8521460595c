//! A work queue of namespace names with client-go semantics: a key waits in the queue at most
//! once, is handed to one worker at a time, and a key added while it is being worked on is
//! worked on again afterwards. Events for one namespace therefore coalesce instead of piling
//! up, and no namespace is ever reconciled by two workers at once.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Default)]
struct State {
    queue: VecDeque<String>,
    queued: HashSet<String>,
    active: HashSet<String>,
    /// Added while active: re-queued when the worker is done.
    dirty: HashSet<String>,
}

#[derive(Default)]
pub struct WorkQueue {
    state: Mutex<State>,
    ready: Notify,
}

impl WorkQueue {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a worker panicked mid-update of plain sets; keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, key: &str) {
        let mut state = self.lock();
        if state.active.contains(key) {
            state.dirty.insert(key.to_string());
        } else if state.queued.insert(key.to_string()) {
            state.queue.push_back(key.to_string());
            self.ready.notify_one();
        }
    }

    /// Adds `key` after `delay`, for retries with backoff.
    pub fn add_after(self: &Arc<Self>, key: String, delay: Duration) {
        let queue = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(&key);
        });
    }

    /// Waits for the next key and marks it active; call [`WorkQueue::done`] when finished.
    pub async fn next(&self) -> String {
        loop {
            let notified = self.ready.notified();
            {
                let mut state = self.lock();
                if let Some(key) = state.queue.pop_front() {
                    state.queued.remove(&key);
                    state.active.insert(key.clone());
                    if !state.queue.is_empty() {
                        // Wake another worker for the rest.
                        self.ready.notify_one();
                    }
                    return key;
                }
            }
            notified.await;
        }
    }

    pub fn done(&self, key: &str) {
        let requeue = {
            let mut state = self.lock();
            state.active.remove(key);
            state.dirty.remove(key)
        };
        if requeue {
            self.add(key);
        }
    }

    /// Nothing queued and nothing being worked on.
    pub fn is_idle(&self) -> bool {
        let state = self.lock();
        state.queue.is_empty() && state.active.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn coalesces_duplicates_in_order() {
        let q = WorkQueue::default();
        for key in ["a", "b", "a", "c", "b"] {
            q.add(key);
        }
        assert_eq!(q.next().await, "a");
        assert_eq!(q.next().await, "b");
        assert_eq!(q.next().await, "c");
        assert!(!q.is_idle());
        for key in ["a", "b", "c"] {
            q.done(key);
        }
        assert!(q.is_idle());
    }

    #[tokio::test]
    async fn a_key_added_while_active_runs_again_after_done() {
        let q = WorkQueue::default();
        q.add("a");
        let key = q.next().await;
        q.add("a");
        q.add("a");
        // Not handed out twice at once.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), q.next())
                .await
                .is_err()
        );
        q.done(&key);
        assert_eq!(q.next().await, "a");
        q.done("a");
        assert!(q.is_idle());
    }

    #[tokio::test]
    async fn waiting_workers_are_woken() {
        let q = Arc::new(WorkQueue::default());
        let worker = tokio::spawn({
            let q = Arc::clone(&q);
            async move { q.next().await }
        });
        tokio::task::yield_now().await;
        q.add_after("late".into(), Duration::from_millis(10));
        let key = tokio::time::timeout(Duration::from_secs(2), worker)
            .await
            .expect("worker woken")
            .unwrap();
        assert_eq!(key, "late");
    }
}
