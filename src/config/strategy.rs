//! The config's `rollout` section: how a new revision reaches the fleet.

use super::{ConfigProblem, refused};
use crate::rollout::{Amount, AmountFile, OnFailure, ReapBrake, Strategy};
use crate::selector;
use serde::Deserialize;

/// How a new revision reaches the fleet (`rollout::Strategy`, whose defaults these are).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RolloutFile {
    canary: Option<String>,
    max_unavailable: Option<AmountFile>,
    soak_seconds: Option<u64>,
    progress_deadline_seconds: Option<u64>,
    max_failures: Option<AmountFile>,
    on_failure: Option<OnFailure>,
    revision_history_limit: Option<usize>,
    reap_brake: Option<ReapBrakeFile>,
}

/// `rollout.reapBrake`: how many namespaces opting out at once wait for confirmation.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReapBrakeFile {
    share: Option<AmountFile>,
    at_least: Option<usize>,
    window_seconds: Option<u64>,
}

impl RolloutFile {
    pub(super) fn validate(self) -> Result<Strategy, (String, ConfigProblem)> {
        let defaults = Strategy::default();
        let canary = self
            .canary
            .map(|text| {
                selector::parse(&text)
                    .map_err(|e| refused("rollout.canary", ConfigProblem::Selector(e)))
            })
            .transpose()?;
        let amount = |key: &str, written: Option<AmountFile>, default: Amount| {
            written.map_or(Ok(default), |w| {
                Amount::parse(&w).map_err(|e| refused(key, ConfigProblem::Amount(e)))
            })
        };
        let history_limit = self
            .revision_history_limit
            .unwrap_or(defaults.history_limit);
        if history_limit < 1 {
            return Err(refused(
                "rollout.revisionHistoryLimit",
                ConfigProblem::AtLeast(1),
            ));
        }
        let brake = self.reap_brake.unwrap_or_default();
        // At least a second: a window of none would count only what is pending at once, which
        // a script opting namespaces out one by one never makes many.
        let window = brake
            .window_seconds
            .map_or(defaults.reap_brake.window.as_secs(), |s| s);
        if window < 1 {
            return Err(refused(
                "rollout.reapBrake.windowSeconds",
                ConfigProblem::AtLeast(1),
            ));
        }
        let reap_brake = ReapBrake {
            window: std::time::Duration::from_secs(window),
            share: amount(
                "rollout.reapBrake.share",
                brake.share,
                defaults.reap_brake.share,
            )?,
            at_least: brake.at_least.unwrap_or(defaults.reap_brake.at_least),
        };
        let seconds = |s: Option<u64>, default: std::time::Duration| {
            s.map_or(default, std::time::Duration::from_secs)
        };
        Ok(Strategy {
            canary,
            max_unavailable: amount(
                "rollout.maxUnavailable",
                self.max_unavailable,
                defaults.max_unavailable,
            )?,
            soak: seconds(self.soak_seconds, defaults.soak),
            progress_deadline: seconds(self.progress_deadline_seconds, defaults.progress_deadline),
            max_failures: amount(
                "rollout.maxFailures",
                self.max_failures,
                defaults.max_failures,
            )?,
            on_failure: self.on_failure.unwrap_or(defaults.on_failure),
            history_limit,
            reap_brake,
        })
    }
}
