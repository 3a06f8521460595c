//! The brake on mass reaping. A change that opts many namespaces out at once (a selector edit,
//! a relabelling script gone wrong) would delete their controllers, and with them every team's
//! running workflows, within seconds; it waits for an admin to confirm instead. Namespaces that
//! opt out one at a time, and deleted namespaces, are reaped at once.
//!
//! The leader counts who opts out (`membership::Membership::OptingOut`, among the namespaces
//! with a NamespaceWorker) on every turn of the rollout and whenever the config changes, before
//! any reconcile sees the change, and each reconcile about to reap adds its own namespace. While
//! the brake holds, nothing is reaped but what deleted namespaces leave; once it lets go
//! (confirmed, or fewer opting out) the held namespaces are queued.

use super::strategy::Amount;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The config's `rollout.reapBrake`: the brake holds once more than `share` of the fleet, and
/// at least `at_least` namespaces, are opting out at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReapBrake {
    pub share: Amount,
    pub at_least: usize,
}

impl Default for ReapBrake {
    fn default() -> Self {
        ReapBrake {
            share: Amount::Percent(10),
            at_least: 5,
        }
    }
}

impl ReapBrake {
    /// Whether the reaping of `opting_out` namespaces, out of a fleet of `fleet` (every
    /// namespace with a NamespaceWorker), waits. `confirmed` is how many the admin confirmed
    /// (the Fleet's `spec.confirmReaping`): more than that opting out holds again.
    pub fn holds(&self, opting_out: usize, fleet: usize, confirmed: Option<u64>) -> bool {
        let mass = opting_out >= self.at_least && opting_out > self.share.of(fleet);
        let beyond_confirmed = confirmed.is_none_or(|c| opting_out as u64 > c);
        mass && beyond_confirmed
    }
}

/// The brake as the leader applies it: shared by the rollout's turn, which counts, and the
/// reconciles, which ask before reaping.
#[derive(Default)]
pub struct Brake(Mutex<Counted>);

#[derive(Default)]
struct Counted {
    opting_out: BTreeSet<String>,
    fleet: usize,
    rule: ReapBrake,
    /// How many the admin confirmed (the Fleet's `spec.confirmReaping`).
    confirmed: Option<u64>,
    held: bool,
}

impl Counted {
    fn decide(&mut self) {
        self.held = self
            .rule
            .holds(self.opting_out.len(), self.fleet, self.confirmed);
    }
}

/// The brake as one count saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    pub opting_out: usize,
    pub fleet: usize,
    /// Whether the reaping of `opting_out` waits.
    pub held: bool,
    /// Held until now and let go: to be queued.
    pub released: Vec<String>,
}

impl Brake {
    /// Counts again: `opting_out` out of a fleet of `fleet` (every namespace with a
    /// NamespaceWorker), under `rule`, with `confirmed` as the Fleet's spec says.
    pub fn count(
        &self,
        opting_out: BTreeSet<String>,
        fleet: usize,
        rule: ReapBrake,
        confirmed: Option<u64>,
    ) -> Seen {
        let mut counted = crate::sync::lock(&self.0);
        let was_held = counted.held;
        counted.fleet = fleet;
        counted.rule = rule;
        counted.confirmed = confirmed;
        counted.opting_out = opting_out;
        counted.decide();
        let released = if was_held && !counted.held {
            counted.opting_out.iter().cloned().collect()
        } else {
            Vec::new()
        };
        Seen {
            opting_out: counted.opting_out.len(),
            fleet: counted.fleet,
            held: counted.held,
            released,
        }
    }

    /// Whether namespace `name`, which exists and opts out, may be reaped now.
    pub fn may_reap(&self, name: &str) -> bool {
        let mut counted = crate::sync::lock(&self.0);
        if counted.opting_out.insert(name.to_string()) {
            counted.decide();
        }
        !counted.held
    }

    /// Namespace `name` was reaped: it no longer counts.
    pub fn reaped(&self, name: &str) {
        crate::sync::lock(&self.0).opting_out.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_only_many_at_once_until_confirmed() {
        let brake = ReapBrake::default();
        // (opting out, fleet, confirmed) -> holds
        let cases = [
            ((1, 40, None), false),
            ((4, 40, None), false),
            ((5, 40, None), true),
            ((30, 40, None), true),
            // 10% of 100 is 10: ten at once is the share, eleven is more.
            ((10, 100, None), false),
            ((11, 100, None), true),
            // A small fleet: at least five, whatever the share.
            ((4, 4, None), false),
            ((5, 5, None), true),
            ((30, 40, Some(30)), false),
            ((20, 40, Some(30)), false),
            ((31, 40, Some(30)), true),
            ((0, 0, None), false),
        ];
        for ((opting_out, fleet, confirmed), holds) in cases {
            assert_eq!(
                brake.holds(opting_out, fleet, confirmed),
                holds,
                "{opting_out} of {fleet} opting out, {confirmed:?} confirmed"
            );
        }
        let count = ReapBrake {
            share: Amount::Count(20),
            at_least: 1,
        };
        assert!(!count.holds(20, 1000, None) && count.holds(21, 1000, None));
    }

    #[test]
    fn a_held_brake_lets_go_once_confirmed_and_a_reconcile_adds_its_namespace() {
        let brake = Brake::default();
        let names = |n: usize| (0..n).map(|i| format!("ns-{i}")).collect::<BTreeSet<_>>();
        let rule = ReapBrake::default();
        let seen = brake.count(names(4), 40, rule, None);
        assert!(!seen.held && seen.released.is_empty());
        // A fifth namespace about to be reaped tips it: it waits.
        assert!(!brake.may_reap("ns-4"));
        let held = brake.count(names(5), 40, rule, None);
        assert_eq!((held.opting_out, held.held), (5, true));
        let released = brake.count(names(5), 40, rule, Some(5));
        assert!(!released.held);
        assert_eq!(released.released, names(5).into_iter().collect::<Vec<_>>());
        assert!(brake.may_reap("ns-0"));
        brake.reaped("ns-0");
        assert_eq!(brake.count(names(0), 40, rule, Some(5)).opting_out, 0);
    }
}
