//! The fleet's budget of running Workflows (`fleetParallelism`), shared between namespaces.
//! Argo's `parallelism` counts one controller's own Workflows; with a controller per namespace,
//! nothing caps the cluster. flotilla sees every Workflow's phase, so it hands each namespace a
//! share of the budget and renders it as that controller's `parallelism`, which the controller
//! reloads without a restart.
//!
//! The rules, decided here from counts alone:
//! - Fair: the budget is shared max-min between the namespaces with live Workflows, each
//!   wanting what it has live, up to its own `parallelism`; each gets at least 1.
//! - A share changes only when a Workflow waits for it: it is raised while the namespace has
//!   Workflows waiting and is below its fair share, from budget no one holds; it is lowered to
//!   the fair share only while another namespace starves (or the budget shrank). A namespace
//!   without live Workflows for [`RELEASE_AFTER`] gives its share back (before it sleeps, so that
//!   a sleeping controller is not woken to take a lower one). A steady fleet makes no writes.
//! - What a namespace holds is the largest of its share, what it runs and the share its
//!   controller has in force: Argo never stops a running Workflow for parallelism, so a lowered
//!   share frees budget only as its Workflows end, and only once it is applied.
//! - A namespace without a share runs at [`FLOOR`], holding nothing: its first Workflow starts at
//!   once, without waiting for flotilla.
//!
//! The guarantee: what all namespaces hold never exceeds the budget, so the running Workflows
//! exceed it by at most the namespaces that started a Workflow at the floor since the last
//! allocation, and by the active namespaces beyond the budget (each keeps its floor).

use std::collections::BTreeMap;
use std::time::Duration;

#[cfg(test)]
mod tests;

/// The `parallelism` of a controller that holds no share.
pub const FLOOR: u32 = 1;

/// How long a namespace without live Workflows keeps its share, unless another starves: a
/// pipeline's next Workflow usually comes sooner, and finds its share still there.
pub const RELEASE_AFTER: Duration = Duration::from_secs(60);

/// One namespace as the budget sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    pub name: String,
    /// Its controller's own `parallelism` (values and override): its share never exceeds it.
    pub cap: u32,
    /// Its controller's Workflows running now, and live but not running (waiting to start).
    pub running: u32,
    pub waiting: u32,
    /// The share it was given last ([`FLOOR`]: none).
    pub share: u32,
    /// The share its controller runs with: the last one applied, which a share given but refused
    /// by the API server (a stuck namespace) is not.
    pub in_force: u32,
    /// How long it has had no live Workflow (zero while it has some).
    pub idle: Duration,
}

impl Demand {
    fn live(&self) -> u32 {
        self.running.saturating_add(self.waiting)
    }

    /// What it holds of the budget at `share`: what it runs, or may start at once, whichever
    /// is more; a controller at the floor without live Workflows holds nothing.
    fn holds(&self, share: u32) -> u32 {
        let may_start = share.max(self.in_force);
        if may_start <= FLOOR && self.live() == 0 {
            0
        } else {
            may_start.max(self.running)
        }
    }
}

/// The shares decided, and the budget as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocation {
    /// By namespace: every namespace given, at [`FLOOR`] when it holds no share.
    pub shares: BTreeMap<String, u32>,
    pub usage: Usage,
}

/// The budget as the Fleet shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub budget: u32,
    /// Workflows running across the fleet, and waiting to start.
    pub running: u32,
    pub waiting: u32,
    /// What the namespaces hold (their shares, or what they run where that is more).
    pub held: u32,
}

/// The shares of `budget` for `demands`, moved from the shares they have as little as the rules
/// allow (module doc).
pub fn allocate(budget: u32, demands: &[Demand]) -> Allocation {
    let fair = fair_shares(budget, demands);
    let mut shares: Vec<u32> = demands
        .iter()
        .map(|d| match d.live() == 0 && d.idle >= RELEASE_AFTER {
            true => FLOOR,
            false => d.share.clamp(FLOOR, d.cap.max(FLOOR)),
        })
        .collect();
    let starving = demands
        .iter()
        .zip(&fair)
        .any(|(d, &f)| d.waiting > 0 && d.share < f);
    let held = |shares: &[u32]| -> u32 {
        demands
            .iter()
            .zip(shares)
            .map(|(d, &s)| d.holds(s))
            .fold(0u32, u32::saturating_add)
    };
    if starving || held(&shares) > budget {
        for (share, &f) in shares.iter_mut().zip(&fair) {
            *share = (*share).min(f.max(FLOOR));
        }
    }
    // What no one holds goes to the namespaces with Workflows waiting below their fair share,
    // a unit at a time to the lowest.
    let mut free = budget.saturating_sub(held(&shares));
    let mut wanting: Vec<usize> = (0..demands.len())
        .filter(|&i| demands[i].waiting > 0 && shares[i] < fair[i])
        .collect();
    while free > 0 {
        let Some(at) = (0..wanting.len()).min_by_key(|&at| {
            let i = wanting[at];
            (shares[i], &demands[i].name)
        }) else {
            break;
        };
        let i = wanting[at];
        let before = demands[i].holds(shares[i]);
        shares[i] += 1;
        free = free.saturating_sub(demands[i].holds(shares[i]) - before);
        if shares[i] >= fair[i] {
            wanting.swap_remove(at);
        }
    }
    let usage = Usage {
        budget,
        running: demands
            .iter()
            .map(|d| d.running)
            .fold(0, u32::saturating_add),
        waiting: demands
            .iter()
            .map(|d| d.waiting)
            .fold(0, u32::saturating_add),
        held: held(&shares),
    };
    Allocation {
        shares: demands.iter().map(|d| d.name.clone()).zip(shares).collect(),
        usage,
    }
}

/// Max-min fair shares of `budget` between the namespaces with live Workflows, each wanting
/// what it has live up to its cap, each at least [`FLOOR`]; 0 for the others. The units a level
/// leaves over go to the first by name.
fn fair_shares(budget: u32, demands: &[Demand]) -> Vec<u32> {
    let mut fair = vec![0u32; demands.len()];
    let mut active: Vec<usize> = (0..demands.len())
        .filter(|&i| demands[i].live() > 0)
        .collect();
    let wants = |i: usize| demands[i].live().min(demands[i].cap).max(FLOOR);
    active.sort_by_key(|&i| (wants(i), &demands[i].name));
    let mut remaining = budget;
    for (k, &i) in active.iter().enumerate() {
        let left = (active.len() - k) as u32;
        let level = remaining / left;
        if wants(i) <= level {
            fair[i] = wants(i);
            remaining -= wants(i);
            continue;
        }
        let mut rest: Vec<usize> = active[k..].to_vec();
        rest.sort_by_key(|&j| &demands[j].name);
        let extra = remaining % left;
        for (n, &j) in rest.iter().enumerate() {
            fair[j] = (level + u32::from((n as u32) < extra)).max(FLOOR);
        }
        break;
    }
    fair
}
