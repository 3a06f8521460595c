//! How a new revision reaches the fleet: the config's `rollout` section, validated.

use kube::core::Selector;
use serde::Deserialize;
use std::time::Duration;

/// A number of namespaces, or a share of the fleet (`"10%"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Count(u32),
    Percent(u32),
}

impl Amount {
    /// The number of namespaces out of `total`; a share is rounded down, as Kubernetes rounds
    /// a Deployment's `maxUnavailable`.
    pub fn of(self, total: usize) -> usize {
        match self {
            Amount::Count(n) => n as usize,
            Amount::Percent(p) => total.saturating_mul(p as usize) / 100,
        }
    }

    /// Parses `5` or `"25%"` as the config writes it; the error says what is allowed.
    pub fn parse(written: &AmountFile) -> Result<Amount, String> {
        match written {
            AmountFile::Count(n) => Ok(Amount::Count(*n)),
            AmountFile::Text(text) => {
                let percent = text
                    .strip_suffix('%')
                    .filter(|digits| {
                        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
                    })
                    .and_then(|digits| digits.parse::<u32>().ok())
                    .filter(|p| *p <= 100);
                match (percent, text.parse::<u32>()) {
                    (Some(p), _) => Ok(Amount::Percent(p)),
                    (None, Ok(n)) => Ok(Amount::Count(n)),
                    (None, Err(_)) => Err(format!(
                        "{text:?} is neither a count (5) nor a share of the fleet from 0% to 100% (\"25%\")"
                    )),
                }
            }
        }
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Amount::Count(n) => write!(f, "{n}"),
            Amount::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// An amount as the config file writes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum AmountFile {
    Count(u32),
    Text(String),
}

/// What happens once more namespaces failed than `maxFailures` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum OnFailure {
    /// The rollout stops where it is: no more namespaces are updated.
    #[default]
    Pause,
    /// The namespaces updated so far return to the stable revision.
    Rollback,
}

/// The validated `rollout` section.
#[derive(Debug, Clone)]
pub struct Strategy {
    /// Namespaces matching this go first, all of them, before any other.
    pub canary: Option<Selector>,
    /// How many namespaces may be updating or not yet healthy at once (at least one).
    pub max_unavailable: Amount,
    /// How long an updated namespace must stay healthy before it counts as done.
    pub soak: Duration,
    /// An updated namespace not healthy within this counts as failed.
    pub progress_deadline: Duration,
    /// How many namespaces may fail before `on_failure`.
    pub max_failures: Amount,
    pub on_failure: OnFailure,
    /// How many revisions are kept (those still in use are kept as well).
    pub history_limit: usize,
    /// When opting out waits for confirmation.
    pub reap_brake: super::ReapBrake,
}

impl Default for Strategy {
    /// Safe at 1,000 namespaces: 10% at a time, each healthy for a minute, and the first
    /// failure stops the rollout.
    fn default() -> Self {
        Strategy {
            canary: None,
            max_unavailable: Amount::Percent(10),
            soak: Duration::from_secs(60),
            progress_deadline: Duration::from_secs(600),
            max_failures: Amount::Count(0),
            on_failure: OnFailure::Pause,
            history_limit: 10,
            reap_brake: super::ReapBrake::default(),
        }
    }
}

impl Strategy {
    /// `maxUnavailable` out of `total` namespaces, at least one so that a rollout can move.
    pub fn unavailable_budget(&self, total: usize) -> usize {
        self.max_unavailable.of(total).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_counts_or_shares() {
        let text = |s: &str| Amount::parse(&AmountFile::Text(s.into()));
        assert_eq!(Amount::parse(&AmountFile::Count(5)), Ok(Amount::Count(5)));
        assert_eq!(text("25%"), Ok(Amount::Percent(25)));
        assert_eq!(text("100%"), Ok(Amount::Percent(100)));
        assert_eq!(text("7"), Ok(Amount::Count(7)));
        for bad in ["101%", "%", "-1", "1.5%", "ten", "٣%", " 5%"] {
            assert!(text(bad).is_err(), "{bad}");
        }
        assert_eq!(Amount::Percent(10).of(1000), 100);
        assert_eq!(Amount::Percent(10).of(15), 1);
        assert_eq!(Amount::Percent(10).of(5), 0);
        assert_eq!(Amount::Percent(100).of(40), 40);
        let strategy = Strategy {
            max_unavailable: Amount::Percent(10),
            ..Strategy::default()
        };
        assert_eq!(strategy.unavailable_budget(5), 1, "at least one");
    }
}
