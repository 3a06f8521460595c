//! What the fleet looks like from the outside: one label-filtered, metadata-only watch per stamped
//! kind (the bench's own, as admin), so that "all objects exist" is seen the moment it happens,
//! without polling the API server that is being measured.

use flotilla::kinds::Kind;
use flotilla::object::ObjectKey;
use flotilla::ownership;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Live stamped objects -> their `flotilla.dev/revision` annotation.
pub type Live = HashMap<ObjectKey, String>;

pub struct Tracker {
    live: Arc<Mutex<Live>>,
    changed: Arc<Notify>,
    ready: Arc<Mutex<usize>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Tracker {
    pub async fn start(client: &Client, instance: &str) -> Tracker {
        let live = Arc::new(Mutex::new(Live::new()));
        let changed = Arc::new(Notify::new());
        let ready = Arc::new(Mutex::new(0));
        let selector = ownership::watch_selector(instance);
        let mut tasks = Vec::new();
        for kind in Kind::ALL {
            let api: Api<PartialObjectMeta<DynamicObject>> =
                Api::all_with(client.clone(), &kind.api_resource());
            let stream = watcher::watcher(api, watcher::Config::default().labels(&selector));
            let (live, changed, ready) = (live.clone(), changed.clone(), ready.clone());
            tasks.push(tokio::spawn(async move {
                let mut stream = std::pin::pin!(stream);
                let mut relist: Option<Live> = None;
                while let Some(event) = stream.next().await {
                    let key = |obj: &PartialObjectMeta<DynamicObject>| ObjectKey {
                        kind,
                        namespace: obj.namespace().unwrap_or_default(),
                        name: obj.name_any(),
                    };
                    let revision = |obj: &PartialObjectMeta<DynamicObject>| {
                        obj.annotations()
                            .get(ownership::REVISION)
                            .cloned()
                            .unwrap_or_default()
                    };
                    match event {
                        Ok(Event::Init) => relist = Some(Live::new()),
                        Ok(Event::InitApply(obj)) => {
                            if let Some(buffer) = relist.as_mut() {
                                buffer.insert(key(&obj), revision(&obj));
                            }
                        }
                        Ok(Event::InitDone) => {
                            let buffer = relist.take().unwrap_or_default();
                            let mut live = live.lock().unwrap();
                            live.retain(|k, _| k.kind != kind);
                            live.extend(buffer);
                            drop(live);
                            let mut ready = ready.lock().unwrap();
                            *ready += 1;
                        }
                        Ok(Event::Apply(obj)) => {
                            live.lock().unwrap().insert(key(&obj), revision(&obj));
                        }
                        Ok(Event::Delete(obj)) => {
                            live.lock().unwrap().remove(&key(&obj));
                        }
                        Err(e) => {
                            eprintln!("bench: {kind} watch error (retrying): {e}");
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                    }
                    changed.notify_waiters();
                }
            }));
        }
        let tracker = Tracker {
            live,
            changed,
            ready,
            tasks,
        };
        let start = Instant::now();
        while *tracker.ready.lock().unwrap() < Kind::ALL.len() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the bench's watches did not sync"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracker
    }

    /// Waits until `done` holds for the live objects; returns when it was first seen to hold,
    /// or `None` after `limit`. `done` runs on changes, at most once per `every` (a check over
    /// thousands of keys on every event would take CPU from the API server being measured).
    pub async fn wait(
        &self,
        limit: Duration,
        every: Duration,
        done: impl Fn(&Live) -> bool,
    ) -> Option<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            let checked = Instant::now();
            if done(&self.live.lock().unwrap()) {
                return Some(checked);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            // Also a wake-up every 100 ms, in case a change slipped in before `notified`.
            let _ = tokio::time::timeout(left.min(Duration::from_millis(100)), notified).await;
            let next = checked + every;
            if let Some(pause) = next.checked_duration_since(Instant::now()) {
                tokio::time::sleep(pause).await;
            }
        }
    }

    /// Waits until every one of `keys` is live (at `revision`, if given); returns when that was
    /// first seen, or panics naming `what` and how many were after `limit`.
    pub async fn wait_all(
        &self,
        what: &str,
        limit: Duration,
        every: Duration,
        keys: &[ObjectKey],
        revision: Option<&str>,
    ) -> Instant {
        self.wait(limit, every, |live| all_present(live, keys, revision))
            .await
            .unwrap_or_else(|| {
                let have = self.with(|live| count_present(live, keys, revision));
                panic!("{what}: {have}/{} objects after {limit:?}", keys.len())
            })
    }

    pub fn with<T>(&self, f: impl FnOnce(&Live) -> T) -> T {
        f(&self.live.lock().unwrap())
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// All of `keys` exist (at `revision`, if given).
fn all_present(live: &Live, keys: &[ObjectKey], revision: Option<&str>) -> bool {
    keys.iter().all(|k| match (live.get(k), revision) {
        (Some(r), Some(want)) => r == want,
        (Some(_), None) => true,
        (None, _) => false,
    })
}

/// How many of `keys` exist (at `revision`, if given).
pub fn count_present(live: &Live, keys: &[ObjectKey], revision: Option<&str>) -> usize {
    keys.iter()
        .filter(|k| match (live.get(*k), revision) {
            (Some(r), Some(want)) => r == want,
            (Some(_), None) => true,
            (None, _) => false,
        })
        .count()
}
