//! What the fleet looks like from the outside, as the bench's own watches (as admin) show it, so
//! that "all objects exist" is seen the moment it happens, without polling the API server that
//! is being measured: one label-filtered, metadata-only watch per stamped kind; the fleet view,
//! i.e. the NamespaceWorkers (with their status) and the `Applied` Events on them.

use flotilla::controller::events::EVENT_NAMESPACE;
use flotilla::kinds::Kind;
use flotilla::object::ObjectKey;
use flotilla::ownership;
use flotilla::status::NamespaceWorker;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Event as KubeEvent;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Live stamped objects -> their `flotilla.dev/revision` annotation.
pub type Live = HashMap<ObjectKey, String>;

/// Everything the watches show.
#[derive(Default)]
pub struct Seen {
    pub objects: Live,
    /// NamespaceWorkers by name (their namespace's) -> the revision in their status ("" if none).
    pub workers: HashMap<String, String>,
    /// Workers an `Applied` Event was published on since the tracker started.
    pub applied: HashSet<String>,
}

/// What one watch keeps of its objects.
trait Part: Send + 'static {
    type Object: Send;
    /// The part of `Seen` this watch keeps, emptied for a relist.
    fn clear(&self, seen: &mut Seen);
    fn apply(&self, seen: &mut Seen, object: &Self::Object);
    fn delete(&self, seen: &mut Seen, object: &Self::Object);
}

impl Part for Kind {
    type Object = PartialObjectMeta<DynamicObject>;
    fn clear(&self, seen: &mut Seen) {
        seen.objects.retain(|k, _| k.kind != *self);
    }
    fn apply(&self, seen: &mut Seen, obj: &Self::Object) {
        let revision = obj.annotations().get(ownership::REVISION).cloned();
        seen.objects
            .insert(object_key(*self, obj), revision.unwrap_or_default());
    }
    fn delete(&self, seen: &mut Seen, obj: &Self::Object) {
        seen.objects.remove(&object_key(*self, obj));
    }
}

fn object_key(kind: Kind, obj: &PartialObjectMeta<DynamicObject>) -> ObjectKey {
    ObjectKey {
        kind,
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
    }
}

struct Workers;

impl Part for Workers {
    type Object = NamespaceWorker;
    fn clear(&self, seen: &mut Seen) {
        seen.workers.clear();
    }
    fn apply(&self, seen: &mut Seen, worker: &NamespaceWorker) {
        let revision = worker.status.as_ref().map(|s| s.revision.clone());
        seen.workers
            .insert(worker.name_any(), revision.unwrap_or_default());
    }
    fn delete(&self, seen: &mut Seen, worker: &NamespaceWorker) {
        seen.workers.remove(&worker.name_any());
    }
}

/// Events are only ever added: one that expires still was published.
struct Applied;

impl Part for Applied {
    type Object = KubeEvent;
    fn clear(&self, _: &mut Seen) {}
    fn apply(&self, seen: &mut Seen, event: &KubeEvent) {
        seen.applied
            .extend(event.involved_object.name.iter().cloned());
    }
    fn delete(&self, _: &mut Seen, _: &KubeEvent) {}
}

pub struct Tracker {
    seen: Arc<Mutex<Seen>>,
    changed: Arc<Notify>,
    ready: Arc<Mutex<usize>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Tracker {
    pub async fn start(client: &Client, instance: &str) -> Tracker {
        let mut tracker = Tracker {
            seen: Arc::default(),
            changed: Arc::default(),
            ready: Arc::default(),
            tasks: Vec::new(),
        };
        let selector = ownership::watch_selector(instance);
        let config = || watcher::Config::default().labels(&selector);
        for kind in Kind::ALL {
            let api = Api::all_with(client.clone(), &kind.api_resource());
            tracker.watch(kind, watcher::watcher(api, config()));
        }
        let workers = Api::<NamespaceWorker>::all(client.clone());
        tracker.watch(Workers, watcher::watcher(workers, config()));
        let events = Api::<KubeEvent>::namespaced(client.clone(), EVENT_NAMESPACE);
        let applied =
            watcher::Config::default().fields("involvedObject.kind=NamespaceWorker,reason=Applied");
        tracker.watch(Applied, watcher::watcher(events, applied));
        let (start, watches) = (Instant::now(), tracker.tasks.len());
        while *tracker.ready.lock().unwrap() < watches {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the bench's watches did not sync"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracker
    }

    fn watch<P: Part>(
        &mut self,
        part: P,
        stream: impl Stream<Item = watcher::Result<Event<P::Object>>> + Send + 'static,
    ) {
        let (seen, changed, ready) = (self.seen.clone(), self.changed.clone(), self.ready.clone());
        self.tasks.push(tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut relist: Option<Vec<P::Object>> = None;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(Event::Init) => relist = Some(Vec::new()),
                    Ok(Event::InitApply(obj)) => relist.get_or_insert_default().push(obj),
                    Ok(Event::InitDone) => {
                        let mut seen = seen.lock().unwrap();
                        part.clear(&mut seen);
                        for obj in relist.take().unwrap_or_default() {
                            part.apply(&mut seen, &obj);
                        }
                        drop(seen);
                        *ready.lock().unwrap() += 1;
                    }
                    Ok(Event::Apply(obj)) => part.apply(&mut seen.lock().unwrap(), &obj),
                    Ok(Event::Delete(obj)) => part.delete(&mut seen.lock().unwrap(), &obj),
                    Err(e) => {
                        eprintln!("bench: watch error (retrying): {e}");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
                changed.notify_waiters();
            }
        }));
    }

    /// Waits until `done` holds for what the watches show; returns when it was first seen to
    /// hold, or `None` after `limit`. `done` runs on changes, at most once per `every` (a check
    /// over thousands of keys on every event would take CPU from the API server being measured).
    pub async fn wait(
        &self,
        limit: Duration,
        every: Duration,
        done: impl Fn(&Seen) -> bool,
    ) -> Option<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            let checked = Instant::now();
            if done(&self.seen.lock().unwrap()) {
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
        self.wait(limit, every, |seen| {
            count_present(&seen.objects, keys, revision) == keys.len()
        })
        .await
        .unwrap_or_else(|| {
            let have = self.with(|seen| count_present(&seen.objects, keys, revision));
            panic!("{what}: {have}/{} objects after {limit:?}", keys.len())
        })
    }

    /// Waits until each of `namespaces` has its fleet view: a NamespaceWorker whose status is at
    /// `revision` and, with `events`, an `Applied` Event on it. Returns when that was first seen,
    /// or panics naming `what` after `limit`.
    pub async fn wait_view(
        &self,
        what: &str,
        limit: Duration,
        every: Duration,
        namespaces: &[String],
        revision: &str,
        events: bool,
    ) -> Instant {
        let missing = |seen: &Seen| {
            namespaces
                .iter()
                .filter(|ns| {
                    seen.workers.get(*ns).is_none_or(|r| r != revision)
                        || (events && !seen.applied.contains(*ns))
                })
                .count()
        };
        self.wait(limit, every, |seen| missing(seen) == 0)
            .await
            .unwrap_or_else(|| {
                let have = namespaces.len() - self.with(missing);
                panic!(
                    "{what}: {have}/{} namespaces with their fleet view after {limit:?}",
                    namespaces.len()
                )
            })
    }

    pub fn with<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.seen.lock().unwrap())
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
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
