//! The brake on mass reaping. A change that opts many namespaces out at once (a selector edit,
//! a relabelling script gone wrong) would delete their controllers, and with them every team's
//! running workflows, within seconds; it waits for an admin to confirm instead. Namespaces that
//! opt out one at a time, and deleted namespaces, are reaped at once.

use super::strategy::Amount;

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
}
