//! The brake on mass reaping. A change that opts many namespaces out at once (a selector edit,
//! a relabelling script gone wrong), or that prunes across the fleet (a template removed), would
//! delete their controllers, and with them every team's running workflows, within seconds; it
//! waits for an admin to confirm instead. It counts over a window (`reapBrake.windowSeconds`),
//! not only what is pending at once: a script that opts namespaces out one every two seconds
//! is as much a mass reaping. Deleted namespaces, and namespaces never in the fleet, are reaped
//! at once and never counted.
//!
//! The leader counts who opts out (`membership::Membership::OptingOut`, among the namespaces
//! with a NamespaceWorker) on every turn of the rollout and whenever the config changes, before
//! any reconcile sees the change; each reconcile about to reap or prune adds its own namespace,
//! and one that did is remembered, on this replica's monotonic clock, for the window. While the
//! brake holds, nothing is reaped or pruned but what deleted namespaces leave; once it lets go
//! (confirmed, or the count fell) the held namespaces are queued.

use super::strategy::Amount;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The config's `rollout.reapBrake`: the brake holds once more than `share` of the fleet, and
/// at least `at_least` namespaces, opt out or prune within `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReapBrake {
    pub share: Amount,
    pub at_least: usize,
    pub window: Duration,
}

impl Default for ReapBrake {
    fn default() -> Self {
        ReapBrake {
            share: Amount::Percent(10),
            at_least: 5,
            window: Duration::from_secs(600),
        }
    }
}

impl ReapBrake {
    /// Whether the reaping of `waiting` namespaces waits, when `counted` opt out or prune
    /// within the window (those waiting among them) out of a fleet of `fleet` (every namespace
    /// with a NamespaceWorker, and those reaped within the window). `confirmed` is how many
    /// waiting the admin confirmed (the Fleet's `spec.confirmReaping`): more holds again.
    pub fn holds(
        &self,
        counted: usize,
        waiting: usize,
        fleet: usize,
        confirmed: Option<u64>,
    ) -> bool {
        let mass = counted >= self.at_least && counted > self.share.of(fleet);
        let beyond_confirmed = confirmed.is_none_or(|c| waiting as u64 > c);
        mass && beyond_confirmed
    }
}

/// The brake as the leader applies it: shared by the rollout's turn, which counts, and the
/// reconciles, which ask before reaping or pruning.
#[derive(Default)]
pub struct Brake(Mutex<Counted>);

#[derive(Default)]
struct Counted {
    /// Members opting out, as the leader's census last saw them, and those a reconcile added.
    opting_out: BTreeSet<String>,
    /// Members about to prune what is no longer rendered, as their reconciles asked.
    pruning: BTreeSet<String>,
    /// Reaped (`true`: gone from the fleet) or pruned within the window, since when.
    recent: BTreeMap<String, (Instant, bool)>,
    /// Namespaces with a NamespaceWorker, as last counted.
    workers: usize,
    rule: ReapBrake,
    /// How many the admin confirmed (the Fleet's `spec.confirmReaping`).
    confirmed: Option<u64>,
    held: bool,
}

impl Counted {
    fn decide(&mut self, now: Instant) {
        let window = self.rule.window;
        self.recent
            .retain(|_, (at, _)| now.saturating_duration_since(*at) < window);
        self.held = self
            .rule
            .holds(self.count(), self.waiting(), self.fleet(), self.confirmed);
    }

    /// Opting out or pruning now, not done yet.
    fn waiting(&self) -> usize {
        self.opting_out.union(&self.pruning).count()
    }

    /// Every namespace opting out, pruning, or reaped or pruned within the window, once.
    fn count(&self) -> usize {
        let mut names: BTreeSet<&String> = self.opting_out.iter().collect();
        names.extend(&self.pruning);
        names.extend(self.recent.keys());
        names.len()
    }

    /// The fleet the share is of: with those reaped within the window, which it had.
    fn fleet(&self) -> usize {
        self.workers + self.recent.values().filter(|(_, gone)| *gone).count()
    }
}

/// The brake as one count saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// Opting out or pruning now: what waits while the brake holds, and what a confirmation
    /// confirms.
    pub opting_out: usize,
    /// Those, and those reaped or pruned within the window: what the rule counts.
    pub counted: usize,
    pub fleet: usize,
    /// Whether the reaping of `opting_out` waits.
    pub held: bool,
    /// Held until now and let go: to be queued.
    pub released: Vec<String>,
}

impl Brake {
    /// Counts again at `now`: `opting_out` out of `workers` namespaces with a NamespaceWorker,
    /// under `rule`, with `confirmed` as the Fleet's spec says.
    pub fn count(
        &self,
        opting_out: BTreeSet<String>,
        workers: usize,
        rule: ReapBrake,
        confirmed: Option<u64>,
        now: Instant,
    ) -> Seen {
        let mut counted = crate::sync::lock(&self.0);
        let was_held = counted.held;
        counted.workers = workers;
        counted.rule = rule;
        counted.confirmed = confirmed;
        counted.opting_out = opting_out;
        // Confirmed and done: what the admin confirmed is spent (the Fleet's confirmation is
        // cleared), and counting starts again.
        if confirmed.is_some() && counted.opting_out.is_empty() && counted.pruning.is_empty() {
            counted.recent.clear();
        }
        counted.decide(now);
        let released = if was_held && !counted.held {
            let waiting = counted.opting_out.iter().chain(&counted.pruning);
            waiting
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        } else {
            Vec::new()
        };
        Seen {
            opting_out: counted.waiting(),
            counted: counted.count(),
            fleet: counted.fleet(),
            held: counted.held,
            released,
        }
    }

    /// Whether namespace `name`, which exists and opts out, may be reaped now. One never in
    /// the fleet (no NamespaceWorker: `member` false) is not counted and may.
    pub fn may_reap(&self, name: &str, member: bool) -> bool {
        if !member {
            return true;
        }
        let mut counted = crate::sync::lock(&self.0);
        if counted.opting_out.insert(name.to_string()) {
            counted.decide(Instant::now());
        }
        !counted.held
    }

    /// Whether namespace `name` may prune what its templates no longer render now.
    pub fn may_prune(&self, name: &str) -> bool {
        let mut counted = crate::sync::lock(&self.0);
        if counted.pruning.insert(name.to_string()) {
            counted.decide(Instant::now());
        }
        !counted.held
    }

    /// Namespace `name` was reaped at `now`: counted for the window, as gone from the fleet.
    pub fn reaped(&self, name: &str, now: Instant) {
        let mut counted = crate::sync::lock(&self.0);
        counted.pruning.remove(name);
        if counted.opting_out.remove(name) {
            counted.recent.insert(name.to_string(), (now, true));
        }
    }

    /// Namespace `name` pruned at `now`: counted for the window.
    pub fn pruned(&self, name: &str, now: Instant) {
        let mut counted = crate::sync::lock(&self.0);
        if counted.pruning.remove(name) {
            counted
                .recent
                .entry(name.to_string())
                .or_insert((now, false));
        }
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
                brake.holds(opting_out, opting_out, fleet, confirmed),
                holds,
                "{opting_out} of {fleet} opting out, {confirmed:?} confirmed"
            );
        }
        let count = ReapBrake {
            share: Amount::Count(20),
            at_least: 1,
            ..ReapBrake::default()
        };
        assert!(!count.holds(20, 20, 1000, None) && count.holds(21, 21, 1000, None));
        // Counted over the window, confirmed by those waiting: 25 within it, 5 waiting.
        let rule = ReapBrake::default();
        assert!(rule.holds(25, 5, 40, None) && rule.holds(25, 5, 40, Some(4)));
        assert!(!rule.holds(25, 5, 40, Some(5)));
    }

    #[test]
    fn a_held_brake_lets_go_once_confirmed_and_a_reconcile_adds_its_namespace() {
        let brake = Brake::default();
        let names = |n: usize| (0..n).map(|i| format!("ns-{i}")).collect::<BTreeSet<_>>();
        let rule = ReapBrake::default();
        let now = Instant::now();
        let seen = brake.count(names(4), 40, rule, None, now);
        assert!(!seen.held && seen.released.is_empty());
        // A fifth namespace about to be reaped tips it: it waits.
        assert!(!brake.may_reap("ns-4", true));
        let held = brake.count(names(5), 40, rule, None, now);
        assert_eq!((held.opting_out, held.held), (5, true));
        let released = brake.count(names(5), 40, rule, Some(5), now);
        assert!(!released.held);
        assert_eq!(released.released, names(5).into_iter().collect::<Vec<_>>());
        assert!(brake.may_reap("ns-0", true));
        brake.reaped("ns-0", now);
        // Reaped: still counted for the window (not waiting), then no more.
        let seen = brake.count(names(0), 39, rule, None, now);
        assert_eq!((seen.opting_out, seen.counted), (0, 1));
        let later = now + rule.window;
        assert_eq!(brake.count(names(0), 39, rule, None, later).counted, 0);
        // Confirmed, and none left opting out: the confirmation is spent, counting starts again.
        brake.count(names(1), 40, rule, None, later);
        assert!(brake.may_reap("ns-0", true));
        brake.reaped("ns-0", later);
        assert_eq!(
            brake.count(names(0), 39, rule, Some(5), later).opting_out,
            0
        );
    }

    #[test]
    fn paced_opt_outs_count_over_the_window_and_strangers_never() {
        let brake = Brake::default();
        let rule = ReapBrake::default();
        let start = Instant::now();
        // One namespace opting out every two seconds out of 20: each alone, but the fifth
        // within the window tips it.
        for i in 0..5 {
            let now = start + Duration::from_secs(2 * i);
            let name = format!("ns-{i}");
            let seen = brake.count(
                BTreeSet::from([name.clone()]),
                20 - i as usize,
                rule,
                None,
                now,
            );
            if i < 4 {
                assert!(!seen.held, "held at {i}");
                assert!(brake.may_reap(&name, true));
                brake.reaped(&name, now);
            } else {
                assert!(seen.held, "the fifth within the window");
                assert_eq!((seen.opting_out, seen.counted, seen.fleet), (1, 5, 20));
            }
        }
        // Past the window, the same pace is a handful again.
        let later = start + Duration::from_secs(2 * 4) + rule.window;
        let seen = brake.count(BTreeSet::from(["ns-4".to_string()]), 16, rule, None, later);
        assert!(!seen.held && seen.released == ["ns-4"]);
        // Namespaces never in the fleet (objects labelled for them, no NamespaceWorker) are
        // reaped at once and not counted.
        for i in 0..10 {
            assert!(brake.may_reap(&format!("stranger-{i}"), false));
        }
        assert_eq!(
            brake
                .count(BTreeSet::new(), 16, rule, None, later)
                .opting_out,
            0
        );
    }

    #[test]
    fn a_fleet_wide_prune_goes_through_the_brake() {
        let brake = Brake::default();
        let rule = ReapBrake::default();
        let now = Instant::now();
        brake.count(BTreeSet::new(), 20, rule, None, now);
        for i in 0..4 {
            let name = format!("ns-{i}");
            assert!(brake.may_prune(&name), "{name}");
            brake.pruned(&name, now);
        }
        assert!(
            !brake.may_prune("ns-4"),
            "the fifth prune within the window waits"
        );
        let seen = brake.count(BTreeSet::new(), 20, rule, None, now);
        assert_eq!((seen.held, seen.opting_out, seen.counted), (true, 1, 5));
        let seen = brake.count(BTreeSet::new(), 20, rule, Some(1), now);
        assert_eq!(seen.released, ["ns-4"]);
        assert!(brake.may_prune("ns-4"));
    }
}
