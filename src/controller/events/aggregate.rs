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
mod tests;
