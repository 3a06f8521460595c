//! The periodic full resync: every namespace is looked at again once a period, also those only
//! known from the labels of stamped objects. That is how deletions missed while flotilla was
//! down are reaped.
//!
//! A resync is spread over its period in small batches rather than queued at one tick: at
//! 10,000 namespaces a whole fleet queued at once kept both cores busy for seconds, and an
//! opt-in during that burst waited up to a second for its requests to be served.

use super::Context;
use super::queue::WorkQueue;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How often a batch is queued.
const BATCH_EVERY: Duration = Duration::from_millis(100);

/// Each batch of a resync of `count` namespaces over `period`: when, from the period's start,
/// and which of the namespaces (positions in the list taken at the start). Batches are equal
/// but for the last, at most one per [`BATCH_EVERY`], and all are queued within the period.
pub(super) fn batches(count: usize, period: Duration) -> Vec<(Duration, Range<usize>)> {
    let slots = (period.as_millis() / BATCH_EVERY.as_millis()).max(1);
    let slots = usize::try_from(slots).unwrap_or(usize::MAX);
    let size = count.div_ceil(slots).max(1);
    (0..count)
        .step_by(size)
        .enumerate()
        .map(|(slot, start)| {
            let at = BATCH_EVERY * u32::try_from(slot).unwrap_or(u32::MAX);
            (at, start..(start + size).min(count))
        })
        .collect()
}

/// Runs for the life of the process: the first resync starts one period after start-up (which
/// looked at every namespace already), and each one after that a period later.
pub(super) async fn every(period: Duration, ctx: Arc<Context>, queue: Arc<WorkQueue>) {
    let mut start = Instant::now() + period;
    loop {
        tokio::time::sleep_until(start).await;
        let names: Vec<String> = ctx.stores.all_namespaces().into_iter().collect();
        for (at, range) in batches(names.len(), period) {
            tokio::time::sleep_until(start + at).await;
            for name in &names[range] {
                queue.add_resync(name);
            }
        }
        start += period;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resync_is_queued_in_small_batches_across_its_period() {
        let ms = Duration::from_millis;
        let secs = Duration::from_secs;
        // (namespaces, period, batches, size of the first, when the last is queued)
        let cases = [
            (10_000, secs(600), 5000, 2, ms(499_900)),
            (10_000, secs(60), 589, 17, ms(58_800)),
            (2_000, secs(600), 2000, 1, ms(199_900)),
            (3, secs(600), 3, 1, ms(200)),
            (5, ms(50), 1, 5, ms(0)),
            (1, secs(1), 1, 1, ms(0)),
        ];
        for (count, period, want_batches, want_size, want_last) in cases {
            let batches = batches(count, period);
            let what = format!("{count} namespaces over {period:?}");
            assert_eq!(batches.len(), want_batches, "{what}");
            assert_eq!(batches[0].1.len(), want_size, "{what}");
            assert_eq!(batches.last().map(|b| b.0), Some(want_last), "{what}");
            let last = batches.last().map_or(Duration::ZERO, |b| b.0);
            assert!(last < period.max(BATCH_EVERY), "{what}: within the period");
            // Every namespace exactly once, in order.
            let queued: Vec<usize> = batches.iter().flat_map(|b| b.1.clone()).collect();
            assert_eq!(queued, (0..count).collect::<Vec<_>>(), "{what}");
        }
        assert!(batches(0, secs(600)).is_empty());
    }
}
