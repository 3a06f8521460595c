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
            "created 0, updated 1 objects at revision r4 (5 applies since 2026-12-01T09:00:00Z)"
                .to_string()
        )]
    );
}
