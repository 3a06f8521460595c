//! Idle controllers sleep: a namespace whose controller has had nothing to do for
//! `sleep.afterSeconds` gets its controller Deployment rendered at `replicas: 0`, and is woken
//! when there is work again. Pure: whether a namespace sleeps or wakes, and when that next
//! changes, is decided from what the watches show (decide.rs), and a CronWorkflow's next run
//! from its schedules (schedule.rs).

mod decide;
mod schedule;

pub use decide::{Cause, Inputs, Verdict, Wake, decide};
pub use schedule::{CronEntry, next_run, run_by};

use std::time::Duration;

/// The Namespace annotation by which one namespace opts out of sleeping (`"false"`). It sits
/// among the override annotations, which only cluster admins may set (docs/security.md).
pub const OPT_OUT_ANNOTATION: &str = "override.flotilla.dev/sleep";

/// The config's `sleep`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Policy {
    /// With no Workflow to run for this long, a controller sleeps.
    pub after: Duration,
    /// A controller wakes this long before a CronWorkflow's run, and stays awake as long after.
    pub wake_ahead: Duration,
    /// A sleeping controller wakes this often for housekeeping (TTL and GC of completed
    /// Workflows), until it has run for the rollout's soak again.
    pub housekeeping: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            after: Duration::from_secs(900),
            wake_ahead: Duration::from_secs(30),
            housekeeping: Duration::from_secs(6 * 3600),
        }
    }
}
