//! A stuck namespace under the fleet's budget, with the real controllers: the API server refuses
//! the lowered share flotilla renders for it, so its controller keeps the higher one. The budget
//! counts the share in force as held, and grants none of it elsewhere until the lowered one is
//! applied; the NamespaceWorker shows the share its controller really runs with.

use crate::argo_world::*;
use crate::fleet_budget::{
    BUDGET, Sampler, budget_fleet, fleet_budget_when, peak, samples_once_done, submit_all,
};
use crate::harness::*;
use crate::rollout_faults::unreachable_webhook;
use flotilla::status::{NamespaceWorker, Phase, WorkerStatus};
use kube::api::Api;
use std::time::Duration;

/// How long the stuck namespace's Workflows run, and the late namespace's: it stays active
/// throughout, one Workflow at a time at its floor until the stuck share is applied.
const STUCK_RUN: u32 = 6;
const LATE_RUN: u32 = 15;

#[tokio::test(flavor = "multi_thread")]
async fn a_share_the_api_server_refuses_stays_held_until_it_is_applied() {
    let client = admin().await;
    let budget = budget_fleet(&client, "stuck").await;
    let (fleet, node) = (&budget.fleet, &budget.node);
    let [stuck, late, _] = budget.names.each_ref().map(String::as_str);
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    let status = |name: &str| {
        let workers = workers.clone();
        let name = name.to_string();
        async move { workers.get_opt(&name).await.ok().flatten()?.status }
    };
    let sampler = Sampler::start(&client, &[stuck, late]);
    let mut submitted = Vec::new();

    // The stuck namespace alone holds the whole budget; then its ConfigMaps are refused.
    submit_all(&client, stuck, 0..4, STUCK_RUN, &mut submitted).await;
    eventually(&format!("{stuck} given the whole budget"), || async {
        (status(stuck).await?.share == Some(BUDGET)).then_some(())
    })
    .await;
    let refusing = unreachable_webhook("stuck-configmaps", "", "configmaps", stuck);

    // Another namespace turns active: the stuck one's share is lowered and refused.
    submit_all(&client, late, 0..4, LATE_RUN, &mut submitted).await;
    let refused: WorkerStatus = eventually_within(
        Duration::from_secs(60),
        &format!("{stuck} ApplyFailed"),
        || async {
            let status = status(stuck).await?;
            (status.phase == Phase::ApplyFailed).then_some(status)
        },
    )
    .await;
    assert_eq!(
        refused.share,
        Some(BUDGET),
        "the share its controller runs with"
    );
    // Its Workflows end: idle, its controller may still start the whole budget at once, so the
    // budget it held is not granted to the late namespace, which keeps its floor.
    for (name, workflow) in &submitted[..4] {
        wait_run(&client, node, name, workflow, "Succeeded").await;
    }
    let idle = fleet_budget_when(&client, fleet, "the stuck namespace idle", |b| {
        b.running == 1
    })
    .await;
    // Absence is shown over a window: several turns of the budget (one a second).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        status(late).await.and_then(|s| s.share),
        Some(1),
        "{late} given budget that {stuck}'s controller still has in force"
    );
    assert!(idle.held > BUDGET, "what is in force is held: {idle:?}");
    // And so it can: its next four start at once, beside the late namespace's one.
    submit_all(&client, stuck, 4..8, STUCK_RUN, &mut submitted).await;
    for (name, workflow) in &submitted[8..] {
        wait_run(&client, node, name, workflow, "Running").await;
    }
    assert_eq!(status(late).await.and_then(|s| s.share), Some(1));

    // Writes allowed again: the lowered share is applied, and the late namespace is given more
    // as the stuck one's Workflows end.
    drop(refusing);
    eventually_within(
        Duration::from_secs(60),
        &format!("{stuck}'s lowered share applied"),
        || async {
            let status = status(stuck).await?;
            (status.phase != Phase::ApplyFailed && status.share < Some(BUDGET)).then_some(())
        },
    )
    .await;
    eventually_within(
        Duration::from_secs(60),
        &format!("{late} given more"),
        || async { (status(late).await?.share >= Some(2)).then_some(()) },
    )
    .await;
    let samples = samples_once_done(&client, node, &submitted, sampler).await;
    let peak = peak(&samples);
    println!("budget {BUDGET}, one namespace's share refused: peak {peak} running at once");
    assert!(
        peak <= BUDGET + 1,
        "at most one beyond the budget, for the namespace that turned active: saw {peak}"
    );
    budget.tear_down(&client).await;
}
