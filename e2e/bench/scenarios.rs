//! Which of flotilla's scenarios a run measures: `BENCH_SCENARIOS=cold,steady` for a subset,
//! every one by default. The cold converge always runs (every other scenario starts from the
//! fleet it converged), and each scenario brings the baselines it is judged against; but
//! `BENCH_SCENARIOS=sleep` or `budget` alone, each of which runs on a control plane of its own.

use std::collections::BTreeSet;

/// In the order they run.
pub const ALL: [&str; 10] = [
    "cold",
    "steady",
    "restart",
    "reaction",
    "rollout",
    "progressive",
    "burst",
    "workflows",
    "sleep",
    "budget",
];

/// Kubernetes' scalability threshold for namespaces in one cluster: by default the burst (which
/// doubles the fleet) is left out when it would go beyond it.
pub const NAMESPACE_THRESHOLD: usize = 10_000;

pub struct Scenarios {
    chosen: BTreeSet<&'static str>,
    /// What the run says of its choice (printed in the results).
    pub said: String,
}

impl Scenarios {
    /// From `BENCH_SCENARIOS` (comma-separated names of `ALL`) for a fleet of `n`.
    pub fn from_env(n: usize) -> Result<Scenarios, String> {
        let asked = std::env::var("BENCH_SCENARIOS").unwrap_or_default();
        let mut chosen = BTreeSet::from(["cold"]);
        if asked.trim().is_empty() {
            chosen.extend(ALL);
            if 2 * n > NAMESPACE_THRESHOLD {
                chosen.remove("burst");
                let said = format!(
                    "every scenario but the burst, which would double the fleet to {} namespaces, \
                     beyond Kubernetes' threshold of {NAMESPACE_THRESHOLD} \
                     (BENCH_SCENARIOS=...,burst runs it)",
                    2 * n
                );
                return Ok(Scenarios { chosen, said });
            }
            let said = "every scenario".to_string();
            return Ok(Scenarios { chosen, said });
        }
        for name in asked.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let known = ALL.iter().find(|s| **s == name).ok_or_else(|| {
                format!(
                    "BENCH_SCENARIOS: unknown scenario '{name}'; choose from {}",
                    ALL.join(",")
                )
            })?;
            chosen.insert(known);
        }
        let said = format!(
            "BENCH_SCENARIOS={} (cold always runs)",
            ALL.iter()
                .filter(|s| chosen.contains(*s))
                .copied()
                .collect::<Vec<_>>()
                .join(",")
        );
        Ok(Scenarios { chosen, said })
    }

    /// Only the scenarios that run on a control plane of their own (sleep, budget): no cold
    /// converge.
    pub fn only_apart(&self) -> bool {
        self.chosen
            .iter()
            .all(|s| matches!(*s, "cold" | "sleep" | "budget"))
            && (self.chosen.contains("sleep") || self.chosen.contains("budget"))
            && std::env::var("BENCH_SCENARIOS")
                .is_ok_and(|s| !s.split(',').any(|s| s.trim() == "cold"))
    }

    pub fn has(&self, name: &str) -> bool {
        self.chosen.contains(name)
    }
}
