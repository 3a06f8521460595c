//! Sleep across a failover, with Argo's real controller: a standby that takes the Lease while a
//! namespace sleeps wakes nothing that has nothing to do, and a Workflow submitted after the
//! takeover still wakes its controller.

use crate::argo_world::*;
use crate::harness::*;
use crate::sleep::{node_for, opted_in, sleepy, wait_asleep, worker};
use flotilla::status::Phase;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_failover_while_a_namespace_sleeps_wakes_nothing_and_strands_nothing() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let fleet = sleepy("sleep-failover").with(
        "leaderElection",
        serde_json::json!({"enabled": true, "leaseDurationSeconds": 4}),
    );
    let node = node_for(&client, &fleet, "e2e-sleep-failover-node").await;
    let leader = fleet.start();
    let ns = "sleep-failover-a";
    opted_in(&client, &fleet, &[ns]).await;
    wait_asleep(&client, &node, ns).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let generation = || async {
        let deployment = deployments.get("workflow-controller").await.unwrap();
        deployment.metadata.generation
    };
    let before = generation().await;

    // A standby of its own ServiceAccount, its caches warm, takes over from the killed leader.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("flotilla.yaml");
    std::fs::write(&config, fleet.config(&fleet.templates).to_string()).unwrap();
    let standby = Flotilla::start(
        &config,
        &dir.path().join("standby.log"),
        &format!("{}-standby", fleet.instance),
        &standby_kubeconfig(dir.path()),
    );
    standby.wait_log("waiting for leadership").await;
    leader.kill();
    eventually("the standby to lead", || async {
        standby.leads().await.then_some(())
    })
    .await;
    // Leading, it leaves the sleeping namespace asleep: no write to its Deployment, no process.
    let led = Instant::now();
    while led.elapsed() < Duration::from_secs(10) {
        let phase = worker(&client, ns)
            .await
            .and_then(|w| Some(w.status?.phase));
        assert_eq!(phase, Some(Phase::Sleeping), "{ns} after the failover");
        assert_eq!(
            generation().await,
            before,
            "the sleeping Deployment untouched"
        );
        assert_eq!(node.running(ns), 0, "no controller process woken");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A Workflow submitted to the new leader's fleet wakes the controller, runs, and it sleeps
    // again.
    submit(
        &client,
        ns,
        &pause_workflow("after-failover", Some(ns), 1, 1),
    )
    .await;
    wait_run(&client, &node, ns, "after-failover", "Succeeded").await;
    wait_asleep(&client, &node, ns).await;
    standby.stop();
    node.stop().await;
    delete_namespaces(&client, &[ns]).await;
}
