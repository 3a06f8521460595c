//! DriftRepaired Events, one per repaired object, and Applied Events, one per NamespaceWorker,
//! aggregated as Kubernetes aggregates a repeated Event (its `count` and `lastTimestamp`): the
//! first occurrence creates its Event; those that follow within a minute are counted and folded
//! into one update of that Event (count, lastTimestamp, message), at most once a minute.
//! Someone re-editing an object every second (its content, or its `flotilla.dev/hash`
//! annotation, which makes it applied again) costs one Event write a minute, not sixty.
//!
//! Pure: given what was sent and when, what to send now. The sender task feeds it repairs and
//! wakes it when [`Aggregator::next_due`] says.

use super::{Reason, event};
use crate::object::ObjectKey;
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// At most one write per object's Event in this long.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// An object not repaired again for this long is forgotten: its next repair is a new Event
/// (Kubernetes' own aggregation window; the API server keeps Events for an hour).
pub const FORGET_AFTER: Duration = Duration::from_secs(600);

/// What happened, once.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// `object` was reverted to its template.
    Repaired(ObjectKey),
    /// Objects were applied; the note says how many, at which revision.
    Applied(String),
    /// The namespace's controller was scaled to zero; the note says why.
    Slept(String),
    /// It was woken; the note says what for.
    Woke(String),
}

impl Subject {
    pub(super) fn reason(&self) -> Reason {
        match self {
            Subject::Repaired(_) => Reason::DriftRepaired,
            Subject::Applied(_) => Reason::Applied,
            Subject::Slept(_) => Reason::Slept,
            Subject::Woke(_) => Reason::Woke,
        }
    }
}

/// One occurrence, told on `regarding` (its namespace's NamespaceWorker).
#[derive(Debug, Clone)]
pub struct Repair {
    pub subject: Subject,
    pub regarding: ObjectReference,
    /// When it happened, by the monotonic clock (pacing) and the wall clock (the Event).
    pub at: Instant,
    pub time: Timestamp,
}

/// What to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A new Event.
    Create(Event),
    /// The Event of this name, with its count, lastTimestamp and message as they are now (if
    /// it is gone, created as it is).
    Update(Event),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    /// The uid of what the Event is about (its name if it has none).
    regarding: String,
    reason: &'static str,
    /// The object repaired; `None` for the others.
    object: Option<ObjectKey>,
}

struct Entry {
    /// The Event as it is to be, once every repair counted is sent.
    event: Event,
    /// When it was last written.
    sent: Instant,
    /// Repairs counted in `event` but not sent yet.
    unsent: u32,
    last_repair: Instant,
}

#[derive(Default)]
pub struct Aggregator {
    entries: HashMap<Key, Entry>,
    instance: Option<String>,
}

impl Aggregator {
    /// Aggregates Events sent as `instance` (their `reportingInstance`).
    pub fn new(instance: Option<String>) -> Aggregator {
        Aggregator {
            entries: HashMap::new(),
            instance,
        }
    }

    /// One more occurrence: the write it makes due now, if any.
    pub fn repaired(&mut self, repair: Repair) -> Option<Write> {
        let key = Key {
            regarding: repair
                .regarding
                .uid
                .clone()
                .or_else(|| repair.regarding.name.clone())
                .unwrap_or_default(),
            reason: repair.subject.reason().as_str(),
            object: match &repair.subject {
                Subject::Repaired(object) => Some(object.clone()),
                Subject::Applied(_) | Subject::Slept(_) | Subject::Woke(_) => None,
            },
        };
        let known = self
            .entries
            .get(&key)
            .is_some_and(|e| repair.at < e.last_repair + FORGET_AFTER);
        if !known {
            let reason = repair.subject.reason();
            let note = match &repair.subject {
                Subject::Repaired(object) => {
                    format!("reverted an edit of {object} to its template")
                }
                Subject::Applied(note) | Subject::Slept(note) | Subject::Woke(note) => note.clone(),
            };
            let created = event(
                reason,
                &note,
                &repair.regarding,
                self.instance.clone(),
                repair.time,
            );
            let entry = Entry {
                event: created.clone(),
                sent: repair.at,
                unsent: 0,
                last_repair: repair.at,
            };
            self.entries.insert(key, entry);
            return Some(Write::Create(created));
        }
        // Known: just looked up.
        let entry = self.entries.get_mut(&key)?;
        let count = entry.event.count.unwrap_or(1).saturating_add(1);
        entry.event.count = Some(count);
        entry.event.last_timestamp = Some(Time(repair.time));
        entry.event.message = Some(repeated(
            &repair.subject,
            count,
            entry.event.first_timestamp.as_ref(),
        ));
        entry.unsent += 1;
        entry.last_repair = repair.at;
        (repair.at >= entry.sent + INTERVAL).then(|| flush(entry, repair.at))
    }

    /// The writes due at `now`: every Event with repairs unsent whose last write is a minute
    /// old. Forgets the objects not repaired for [`FORGET_AFTER`].
    pub fn due(&mut self, now: Instant) -> Vec<Write> {
        self.entries
            .retain(|_, e| e.unsent > 0 || now < e.last_repair + FORGET_AFTER);
        let mut writes: Vec<Write> = self
            .entries
            .values_mut()
            .filter(|e| e.unsent > 0 && now >= e.sent + INTERVAL)
            .map(|e| flush(e, now))
            .collect();
        writes.sort_by(|a, b| event_of(a).metadata.name.cmp(&event_of(b).metadata.name));
        writes
    }

    /// When [`Aggregator::due`] has something to do next.
    pub fn next_due(&self) -> Option<Instant> {
        self.entries
            .values()
            .map(|e| {
                if e.unsent > 0 {
                    e.sent + INTERVAL
                } else {
                    e.last_repair + FORGET_AFTER
                }
            })
            .min()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

fn flush(entry: &mut Entry, now: Instant) -> Write {
    entry.sent = now;
    entry.unsent = 0;
    Write::Update(entry.event.clone())
}

fn event_of(write: &Write) -> &Event {
    match write {
        Write::Create(e) | Write::Update(e) => e,
    }
}

fn repeated(subject: &Subject, count: i32, since: Option<&Time>) -> String {
    let since = match since {
        Some(Time(first)) => format!(" since {first}"),
        None => String::new(),
    };
    match subject {
        Subject::Repaired(object) => {
            format!("reverted edits of {object} to its template, {count} times{since}")
        }
        Subject::Applied(note) => format!("{note} ({count} applies{since})"),
        Subject::Slept(note) => format!("{note} (slept {count} times{since})"),
        Subject::Woke(note) => format!("{note} (woke {count} times{since})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Kind;

    fn worker(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("flotilla.dev/v1alpha1".into()),
            kind: Some("NamespaceWorker".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        }
    }

    fn object(name: &str) -> ObjectKey {
        ObjectKey {
            kind: Kind::ConfigMap,
            namespace: "team-a".into(),
            name: name.into(),
        }
    }

    /// A clock for the tests: seconds after `start`.
    struct Clock {
        start: Instant,
        wall: Timestamp,
    }

    impl Clock {
        fn new() -> Clock {
            Clock {
                start: Instant::now(),
                wall: "2026-12-01T09:00:00Z".parse().unwrap(),
            }
        }

        fn at(&self, seconds: u64) -> Instant {
            self.start + Duration::from_secs(seconds)
        }

        fn repair(&self, name: &str, regarding: &str, seconds: u64) -> Repair {
            Repair {
                subject: Subject::Repaired(object(name)),
                regarding: worker(regarding),
                at: self.at(seconds),
                time: self.wall + Duration::from_secs(seconds),
            }
        }
    }

    /// A write as (created or updated, Event name, count, lastTimestamp, message).
    fn summary(write: &Write) -> (&'static str, String, i32, String, String) {
        let (verb, e) = match write {
            Write::Create(e) => ("create", e),
            Write::Update(e) => ("update", e),
        };
        (
            verb,
            e.metadata.name.clone().unwrap_or_default(),
            e.count.unwrap_or_default(),
            e.last_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            e.message.clone().unwrap_or_default(),
        )
    }

    #[test]
    fn an_edit_loop_costs_one_write_a_minute() {
        let clock = Clock::new();
        let mut events = Aggregator::new(Some("flotilla-0".into()));
        let mut writes = Vec::new();
        // Re-edited every second for three minutes, the aggregator asked whenever it is due.
        for second in 0..180 {
            while events.next_due().is_some_and(|due| due <= clock.at(second)) {
                let due = events.next_due().unwrap();
                let flushed = events.due(due);
                assert!(!flushed.is_empty(), "woken at {due:?} for nothing");
                writes.extend(flushed);
            }
            writes.extend(events.repaired(clock.repair("cm", "team-a", second)));
        }
        let summaries: Vec<_> = writes.iter().map(summary).collect();
        let first = summaries[0].1.clone();
        assert!(first.starts_with("team-a."), "{first}");
        assert_eq!(
            summaries,
            [
                (
                    "create",
                    first.clone(),
                    1,
                    "2026-12-01T09:00:00Z".into(),
                    "reverted an edit of ConfigMap team-a/cm to its template".into()
                ),
                (
                    "update",
                    first.clone(),
                    60,
                    "2026-12-01T09:00:59Z".into(),
                    "reverted edits of ConfigMap team-a/cm to its template, 60 times since 2026-12-01T09:00:00Z".into()
                ),
                (
                    "update",
                    first.clone(),
                    120,
                    "2026-12-01T09:01:59Z".into(),
                    "reverted edits of ConfigMap team-a/cm to its template, 120 times since 2026-12-01T09:00:00Z".into()
                ),
            ]
        );
        // The edits stop: the last minute's are sent when it is up, and then nothing.
        let last = events.next_due().unwrap();
        assert_eq!(last, clock.at(180));
        let flushed: Vec<_> = events.due(last).iter().map(summary).collect();
        assert_eq!(flushed.len(), 1);
        assert_eq!(flushed[0].2, 180);
        assert_eq!(flushed[0].3, "2026-12-01T09:02:59Z");
        assert!(events.due(clock.at(300)).is_empty());
        let e = event_of(&writes[0]);
        assert_eq!(
            e.involved_object,
            worker("team-a"),
            "on the NamespaceWorker"
        );
        assert_eq!(e.reason.as_deref(), Some("DriftRepaired"));
        assert_eq!(e.reporting_instance.as_deref(), Some("flotilla-0"));
    }

    #[test]
    fn a_repair_a_minute_after_the_last_write_is_sent_at_once() {
        let clock = Clock::new();
        let mut events = Aggregator::new(None);
        assert!(matches!(
            events.repaired(clock.repair("cm", "team-a", 0)),
            Some(Write::Create(_))
        ));
        assert_eq!(
            events.next_due(),
            Some(clock.at(600)),
            "nothing unsent: only forgetting"
        );
        let again = events
            .repaired(clock.repair("cm", "team-a", 61))
            .map(|w| summary(&w));
        assert_eq!(again.map(|s| (s.0, s.2)), Some(("update", 2)));
        assert!(events.repaired(clock.repair("cm", "team-a", 62)).is_none());
        assert_eq!(events.next_due(), Some(clock.at(121)));
        assert!(
            events.due(clock.at(120)).is_empty(),
            "not before a minute is up"
        );
        assert_eq!(events.due(clock.at(121)).len(), 1);
    }

    #[test]
    fn each_object_and_each_namespace_has_an_event_of_its_own() {
        let clock = Clock::new();
        let mut events = Aggregator::new(None);
        let created: Vec<_> = [("cm", "team-a"), ("deploy", "team-a"), ("cm", "team-b")]
            .iter()
            .map(|(object, regarding)| events.repaired(clock.repair(object, regarding, 0)))
            .collect();
        assert!(
            created.iter().all(|w| matches!(w, Some(Write::Create(_)))),
            "{created:?}"
        );
        let note = |w: &Option<Write>| event_of(w.as_ref().unwrap()).message.clone().unwrap();
        assert!(note(&created[1]).contains("ConfigMap team-a/deploy"));
        for (object, regarding) in [("cm", "team-a"), ("cm", "team-b")] {
            assert!(
                events
                    .repaired(clock.repair(object, regarding, 10))
                    .is_none()
            );
        }
        let due: Vec<_> = events.due(clock.at(60)).iter().map(summary).collect();
        assert_eq!(due.len(), 2, "{due:?}");
        assert!(due.iter().all(|s| s.0 == "update" && s.2 == 2), "{due:?}");
    }

    #[test]
    fn an_object_quiet_for_ten_minutes_is_forgotten_and_gets_a_new_event() {
        let clock = Clock::new();
        let mut events = Aggregator::new(None);
        events.repaired(clock.repair("cm", "team-a", 0));
        events.repaired(clock.repair("cm", "team-a", 5));
        assert_eq!(events.due(clock.at(60)).len(), 1);
        assert_eq!(events.next_due(), Some(clock.at(605)));
        assert!(events.due(clock.at(605)).is_empty());
        assert_eq!(events.len(), 0, "forgotten");
        assert_eq!(events.next_due(), None);
        let later = events.repaired(clock.repair("cm", "team-a", 700));
        assert!(
            matches!(&later, Some(Write::Create(e)) if e.count == Some(1)),
            "{later:?}"
        );
        // Even if nothing asked the aggregator in between.
        let mut idle = Aggregator::new(None);
        idle.repaired(clock.repair("cm", "team-a", 0));
        assert!(matches!(
            idle.repaired(clock.repair("cm", "team-a", 600)),
            Some(Write::Create(_))
        ));
    }

    #[test]
    fn applies_are_counted_into_one_event_per_namespace_worker() {
        let clock = Clock::new();
        let mut events = Aggregator::new(None);
        let applied = |seconds: u64, regarding: &str| Repair {
            subject: Subject::Applied(format!(
                "created 0, updated 1 objects at revision r{seconds}"
            )),
            regarding: worker(regarding),
            at: clock.at(seconds),
            time: clock.wall + Duration::from_secs(seconds),
        };
        let first = events.repaired(applied(0, "team-a")).map(|w| summary(&w));
        assert_eq!(
            first.map(|s| (s.0, s.2, s.4)),
            Some((
                "create",
                1,
                "created 0, updated 1 objects at revision r0".to_string()
            ))
        );
        assert_eq!(
            event_of(&events.repaired(applied(0, "team-b")).unwrap())
                .reason
                .as_deref(),
            Some("Applied")
        );
        for second in 1..5 {
            assert!(events.repaired(applied(second, "team-a")).is_none());
        }
        // A repair of an object of the same worker is an Event of its own.
        assert!(events.repaired(clock.repair("cm", "team-a", 5)).is_some());
        let due: Vec<_> = events.due(clock.at(60)).iter().map(summary).collect();
        assert_eq!(
            due,
            [(
                "update",
                due[0].1.clone(),
                5,
                "2026-12-01T09:00:04Z".to_string(),
                "created 0, updated 1 objects at revision r4 (5 applies since 2026-12-01T09:00:00Z)".to_string()
            )]
        );
    }
}
