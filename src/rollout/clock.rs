//! The rollout's times on the leader's monotonic clock. A NamespaceWorker's times (applied
//! since, healthy since, unhealthy since) are written by whichever replica reconciled it, by its
//! wall clock: compared with this replica's `now`, a clock step or a skew between replicas
//! would fail every namespace in flight or end a soak at once. The rollout takes each as the
//! moment this leader first observed it (a failover starts each soak and deadline again: later,
//! never sooner), on a clock that never steps.

use super::plan::Member;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;
use std::time::Instant;

/// The leader's monotonic clock as timestamps: the time since it started observing, from the
/// Unix epoch. Only ever compared with each other.
#[derive(Debug, Clone, Copy)]
pub struct Monotonic(Instant);

impl Default for Monotonic {
    fn default() -> Self {
        Monotonic(Instant::now())
    }
}

impl Monotonic {
    pub fn at(&self, instant: Instant) -> Timestamp {
        let since = instant.saturating_duration_since(self.0);
        let since = SignedDuration::try_from(since).unwrap_or(SignedDuration::MAX);
        Timestamp::UNIX_EPOCH
            .checked_add(since)
            .unwrap_or(Timestamp::MAX)
    }
}

/// What a member's times were when first observed, and when that was.
#[derive(Debug, Clone, Default, PartialEq)]
struct Seen {
    applied: Option<(Timestamp, Timestamp)>,
    healthy: Option<(Timestamp, Timestamp)>,
    unhealthy: Option<(Timestamp, Timestamp)>,
}

/// Each member's times, by name, as first observed.
#[derive(Debug, Default)]
pub struct Observed(HashMap<String, Seen>);

impl Observed {
    /// Replaces each of `members`' times with when this leader first observed it (`now`, on
    /// the monotonic clock, for one not seen before or changed since); forgets those gone.
    pub fn observe(&mut self, members: &mut [Member], now: Timestamp) {
        let mut seen = HashMap::with_capacity(members.len());
        for m in members.iter_mut() {
            let before = self.0.remove(&m.name).unwrap_or_default();
            let keep = |written: Option<Timestamp>, before: Option<(Timestamp, Timestamp)>| {
                written.map(|w| match before {
                    Some((was, at)) if was == w => (w, at),
                    _ => (w, now),
                })
            };
            let now_seen = Seen {
                applied: keep(m.applied_since, before.applied),
                healthy: keep(m.healthy_since, before.healthy),
                unhealthy: keep(m.unhealthy_since, before.unhealthy),
            };
            m.applied_since = now_seen.applied.map(|(_, at)| at);
            m.healthy_since = now_seen.healthy.map(|(_, at)| at);
            m.unhealthy_since = now_seen.unhealthy.map(|(_, at)| at);
            seen.insert(m.name.clone(), now_seen);
        }
        self.0 = seen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_when_the_leader_first_saw_them_whatever_the_writer_s_clock() {
        let clock = Monotonic::default();
        let start = clock.0;
        let mono = |s: u64| clock.at(start + Duration::from_secs(s));
        let wall = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let member = |applied: i64, healthy: Option<i64>| Member {
            name: "ns-0".into(),
            applied_since: Some(wall(applied)),
            healthy_since: healthy.map(wall),
            unhealthy_since: healthy.is_none().then(|| wall(applied)),
            ..Member::default()
        };
        let mut observed = Observed::default();
        // Written by a replica an hour ahead: seen now, at 10 s.
        let mut members = [member(3600, None)];
        observed.observe(&mut members, mono(10));
        assert_eq!(members[0].applied_since, Some(mono(10)));
        assert_eq!(members[0].unhealthy_since, Some(mono(10)));
        // The same a second later: still when first seen.
        let mut members = [member(3600, None)];
        observed.observe(&mut members, mono(11));
        assert_eq!(members[0].applied_since, Some(mono(10)));
        // Healthy now (written with a clock an hour behind): from when it was seen so.
        let mut members = [member(3600, Some(-3600))];
        observed.observe(&mut members, mono(20));
        assert_eq!(
            (members[0].applied_since, members[0].healthy_since),
            (Some(mono(10)), Some(mono(20)))
        );
        assert_eq!(members[0].unhealthy_since, None);
        // Gone and back: seen anew.
        observed.observe(&mut [], mono(30));
        let mut members = [member(3600, Some(-3600))];
        observed.observe(&mut members, mono(40));
        assert_eq!(members[0].healthy_since, Some(mono(40)));
        assert!(mono(1) > Timestamp::UNIX_EPOCH && mono(1) < mono(2));
    }
}
