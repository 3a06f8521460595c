//! How far the fleet's budget is exceeded in a transition, with the real controllers. One
//! namespace holds the whole budget when two more turn active: each starts its first Workflow at
//! its floor at once, beyond the budget (README, "The guarantee": by at most one per namespace
//! that turns active while the budget is all held). The fleet is back within the budget once the
//! Workflows running at that moment end, because the busy namespace's share was lowered before
//! they did.

use crate::fleet_budget::{
    BUDGET, Sampler, budget_fleet, fleet_budget_when, peak, running, samples_once_done, submit_all,
};
use crate::harness::*;
use std::time::{Duration, Instant};

/// How long every Workflow here runs: those of the busy namespace running when the others arrive
/// end within it, and nothing of the budget's can end them sooner. The late namespaces' run as
/// long, two each, so that they are still live when the busy one's next Workflows may start.
const RUN: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread")]
async fn namespaces_turning_active_while_the_budget_is_all_held_exceed_it_by_one_each_until_it_moves()
 {
    let client = admin().await;
    let budget = budget_fleet(&client, "overshoot").await;
    let (fleet, node) = (&budget.fleet, &budget.node);
    let [busy, late @ ..] = budget.names.each_ref().map(String::as_str);
    let sampler = Sampler::start(&client, &[busy, late[0], late[1]]);
    let mut submitted = Vec::new();
    let seconds = RUN.as_secs() as u32;
    submit_all(&client, busy, 0..10, seconds, &mut submitted).await;
    fleet_budget_when(&client, fleet, "the busy namespace holding it all", |b| {
        b.running == BUDGET
    })
    .await;
    let arrived = Instant::now();
    for name in late {
        submit_all(&client, name, 0..2, seconds, &mut submitted).await;
    }
    let samples = samples_once_done(&client, node, &submitted, sampler).await;

    let peak = peak(&samples);
    let over_for = samples
        .iter()
        .filter(|(at, c)| *at >= arrived && running(c) > BUDGET)
        .map(|(at, _)| at.duration_since(arrived))
        .max()
        .unwrap_or_default();
    println!(
        "budget {BUDGET}, all held, two namespaces turn active: peak {peak} running at once; \
         above the budget until {over_for:?} after they arrived"
    );
    assert!(
        peak <= BUDGET + 2,
        "at most one beyond the budget for each namespace that turned active, saw {peak}"
    );
    // Their first Workflows did not wait for flotilla: each started at its floor at once.
    assert!(peak > BUDGET, "the late namespaces waited: peak {peak}");
    // The busy namespace's share was lowered before its running Workflows ended: as they end,
    // it starts only as many as the budget has left beside the late namespaces. Slack: the
    // controller's marking a Workflow done.
    assert!(
        over_for <= RUN + Duration::from_secs(2),
        "above the budget for {over_for:?} after they arrived"
    );
    budget.tear_down(&client).await;
}
