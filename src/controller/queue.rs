//! A work queue of namespace names with client-go semantics: a key waits in the queue at most
//! once, is handed to one worker at a time, and a key added while it is being worked on is
//! worked on again afterwards. Events for one namespace therefore coalesce instead of piling
//! up, and no namespace is ever reconciled by two workers at once.
//!
//! Two lanes: keys from watch events and retries go ahead of the periodic full resync, so an
//! opt-in is not stuck behind thousands of namespaces that are merely being looked at again.
//! The resync lane still gets every [`RESYNC_SHARE`]th turn, so it cannot starve.
//!
//! Delayed adds (retries, status deadlines) go through kube-runtime's scheduler: one task for
//! all of them, and a key delayed twice is added once, at the earlier time.

use crate::sync::lock;
use futures::StreamExt;
use futures::channel::mpsc;
use kube::runtime::scheduler::{ScheduleRequest, scheduler};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// One in this many keys handed out comes from the resync lane while both have work.
const RESYNC_SHARE: u32 = 8;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lane {
    Event,
    Resync,
}

#[derive(Default)]
struct State {
    events: VecDeque<String>,
    /// May hold keys since promoted to the event lane; those are skipped.
    resyncs: VecDeque<String>,
    queued: HashMap<String, Lane>,
    active: HashSet<String>,
    /// Added while active: re-queued in this lane when the worker is done.
    dirty: HashMap<String, Lane>,
    handed_out: u32,
}

impl State {
    fn add(&mut self, key: &str, lane: Lane) -> bool {
        if self.active.contains(key) {
            let dirty = self.dirty.entry(key.to_string()).or_insert(lane);
            if lane == Lane::Event {
                *dirty = Lane::Event;
            }
            return false;
        }
        match self.queued.get(key) {
            // Already waiting, in this lane or ahead of it.
            Some(queued) if *queued == lane || lane == Lane::Resync => return false,
            // Waiting for a resync, now something happened: it moves up to the event lane.
            _ => {}
        }
        self.queued.insert(key.to_string(), lane);
        match lane {
            Lane::Event => self.events.push_back(key.to_string()),
            Lane::Resync => self.resyncs.push_back(key.to_string()),
        }
        true
    }

    fn pop(&mut self) -> Option<String> {
        loop {
            let resync_turn = self.handed_out % RESYNC_SHARE == RESYNC_SHARE - 1;
            let from_resyncs = self.events.is_empty() || (resync_turn && !self.resyncs.is_empty());
            let (key, lane) = if from_resyncs {
                (self.resyncs.pop_front()?, Lane::Resync)
            } else {
                (self.events.pop_front()?, Lane::Event)
            };
            // A resync entry whose key was promoted is a leftover; the event entry counts.
            if self.queued.get(&key) == Some(&lane) {
                self.queued.remove(&key);
                self.active.insert(key.clone());
                self.handed_out = self.handed_out.wrapping_add(1);
                return Some(key);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }
}

pub struct WorkQueue {
    state: Mutex<State>,
    ready: Notify,
    delayed: mpsc::UnboundedSender<ScheduleRequest<String>>,
}

impl WorkQueue {
    /// A queue, and the task that adds its delayed keys when they are due (it ends with the
    /// queue).
    pub fn start() -> Arc<WorkQueue> {
        let (delayed, requests) = mpsc::unbounded();
        let queue = Arc::new(WorkQueue {
            state: Mutex::default(),
            ready: Notify::new(),
            delayed,
        });
        tokio::spawn(add_when_due(Arc::downgrade(&queue), requests));
        queue
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn add_to(&self, key: &str, lane: Lane) {
        if self.lock().add(key, lane) {
            self.ready.notify_one();
        }
    }

    /// Queues `key` for something that happened to it.
    pub fn add(&self, key: &str) {
        self.add_to(key, Lane::Event);
    }

    /// Queues `key` to be looked at again, behind everything that happened.
    pub fn add_resync(&self, key: &str) {
        self.add_to(key, Lane::Resync);
    }

    /// Adds `key` after `delay` (or earlier, if it is already due earlier).
    pub fn add_after(&self, key: String, delay: Duration) {
        let request = ScheduleRequest {
            message: key,
            run_at: tokio::time::Instant::now() + delay,
        };
        // Fails only once the queue is being dropped: then nothing is waiting for the key.
        let _ = self.delayed.unbounded_send(request);
    }

    /// Waits for the next key and marks it active; call [`WorkQueue::done`] when finished.
    ///
    /// Lets other tasks run first, even when a key is ready: a reconcile of a settled namespace
    /// waits on nothing, so in a full resync a worker would take key after key without once
    /// giving up its thread. At 10,000 namespaces that kept an opt-in's reconcile, and the
    /// connections its requests wait on, off the runtime's threads for up to a second.
    pub async fn next(&self) -> String {
        tokio::task::yield_now().await;
        loop {
            let notified = self.ready.notified();
            {
                let mut state = self.lock();
                if let Some(key) = state.pop() {
                    if !state.is_empty() {
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
        if let Some(lane) = requeue {
            self.add_to(key, lane);
        }
    }

    /// Nothing queued and nothing being worked on.
    pub fn is_idle(&self) -> bool {
        let state = self.lock();
        state.is_empty() && state.active.is_empty()
    }
}

async fn add_when_due(
    queue: Weak<WorkQueue>,
    requests: mpsc::UnboundedReceiver<ScheduleRequest<String>>,
) {
    let mut due = std::pin::pin!(scheduler(requests));
    while let Some(key) = due.next().await {
        let Some(queue) = queue.upgrade() else {
            return;
        };
        queue.add(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn coalesces_duplicates_in_order() {
        let q = WorkQueue::start();
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
        let q = WorkQueue::start();
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
    async fn events_go_ahead_of_resyncs_and_promote_them() {
        let q = WorkQueue::start();
        for key in ["r1", "r2", "r3"] {
            q.add_resync(key);
        }
        q.add("e1");
        // r2 had an event: it leaves the resync lane for the event lane.
        q.add("r2");
        // Already waiting for an event: a resync does not demote it.
        q.add_resync("e1");
        let mut order = Vec::new();
        while !q.lock().is_empty() {
            let key = q.next().await;
            q.done(&key);
            order.push(key);
        }
        assert_eq!(order, ["e1", "r2", "r1", "r3"]);
        assert!(q.is_idle());
    }

    #[tokio::test]
    async fn resyncs_get_a_share_while_events_keep_coming() {
        let q = WorkQueue::start();
        q.add_resync("resync");
        for i in 0..20 {
            q.add(&format!("event-{i}"));
        }
        let mut position = None;
        for n in 1..=21 {
            let key = q.next().await;
            q.done(&key);
            if key == "resync" {
                position = Some(n);
            }
        }
        assert_eq!(position, Some(RESYNC_SHARE as usize));
    }

    #[tokio::test]
    async fn a_key_active_during_an_event_runs_again_in_the_event_lane() {
        let q = WorkQueue::start();
        q.add_resync("a");
        let key = q.next().await;
        q.add_resync("a");
        q.add("a");
        for i in 0..3 {
            q.add_resync(&format!("r{i}"));
        }
        q.done(&key);
        assert_eq!(q.next().await, "a");
    }

    #[tokio::test]
    async fn a_worker_taking_ready_keys_lets_other_tasks_run() {
        let q = WorkQueue::start();
        for i in 0..100 {
            q.add_resync(&format!("ns-{i}"));
        }
        let ran = Arc::new(AtomicBool::new(false));
        tokio::spawn({
            let ran = Arc::clone(&ran);
            async move { ran.store(true, Ordering::SeqCst) }
        });
        // One thread: the other task runs only when this one yields.
        let mut taken_before = None;
        for taken in 0..100 {
            if taken_before.is_none() && ran.load(Ordering::SeqCst) {
                taken_before = Some(taken);
            }
            let key = q.next().await;
            q.done(&key);
        }
        assert_eq!(
            taken_before,
            Some(1),
            "the other task ran after the first key"
        );
    }

    #[tokio::test]
    async fn waiting_workers_are_woken() {
        let q = WorkQueue::start();
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

    #[tokio::test]
    async fn a_key_delayed_twice_comes_once_at_the_earlier_time() {
        let q = WorkQueue::start();
        q.add_after("a".into(), Duration::from_millis(300));
        q.add_after("a".into(), Duration::from_millis(20));
        let first = tokio::time::timeout(Duration::from_millis(200), q.next()).await;
        assert_eq!(first.expect("due at the earlier time"), "a");
        q.done("a");
        let again = tokio::time::timeout(Duration::from_millis(500), q.next()).await;
        assert!(
            again.is_err(),
            "the later request was merged into the earlier one"
        );
        assert!(q.is_idle());
    }
}
