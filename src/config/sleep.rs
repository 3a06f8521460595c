//! The config's `sleep` section: idle controllers scaled to zero, woken when there is work.

use super::{ConfigProblem, refused};
use crate::sleep::Policy;
use serde::Deserialize;
use std::time::Duration;

/// `sleep`, as written. Absent, nothing sleeps.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SleepFile {
    after_seconds: u64,
    wake_ahead_seconds: Option<u64>,
    housekeeping_seconds: Option<u64>,
}

impl SleepFile {
    pub(super) fn validate(self) -> Result<Policy, (String, ConfigProblem)> {
        let defaults = Policy::default();
        let wake_ahead = self
            .wake_ahead_seconds
            .unwrap_or(defaults.wake_ahead.as_secs());
        let housekeeping = self
            .housekeeping_seconds
            .unwrap_or(defaults.housekeeping.as_secs());
        for (key, value, minimum) in [
            ("sleep.afterSeconds", self.after_seconds, 1),
            ("sleep.wakeAheadSeconds", wake_ahead, 1),
            ("sleep.housekeepingSeconds", housekeeping, 60),
        ] {
            if value < minimum {
                return Err(refused(key, ConfigProblem::AtLeast(minimum)));
            }
        }
        Ok(Policy {
            after: Duration::from_secs(self.after_seconds),
            wake_ahead: Duration::from_secs(wake_ahead),
            housekeeping: Duration::from_secs(housekeeping),
        })
    }
}
