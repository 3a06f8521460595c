//! No split brain: a leader frozen past its lease writes nothing once it wakes, and clock skew
//! between replicas neither lets a standby take over from a live leader nor makes it wait past
//! the lease's expiry. The replicas run as two ServiceAccounts, so the audit log tells them
//! apart.

use crate::harness::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use std::time::{Duration, Instant};

async fn wait_leads(replica: &Flotilla, what: &str, within: Duration) -> Duration {
    let started = Instant::now();
    eventually_within(within, what, || async {
        replica.leads().await.then_some(())
    })
    .await;
    started.elapsed()
}

/// Edits the stamped ConfigMap as a tenant would; flotilla (whoever leads) reverts it.
async fn edit_config_map(client: &kube::Client, namespace: &str, value: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let edit = serde_json::json!({"data": {"parallelism": value}});
    cms.patch(
        "workflow-controller-configmap",
        &PatchParams::default(),
        &Patch::Merge(edit),
    )
    .await
    .unwrap();
}

async fn wait_reverted(client: &kube::Client, fleet: &Fleet, namespace: &str) {
    let want = fleet
        .render(namespace, &[])
        .into_iter()
        .find(|o| o["metadata"]["name"] == "workflow-controller-configmap")
        .unwrap()["data"]["parallelism"]
        .clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    eventually("the edited ConfigMap reverted", || async {
        let live = cms.get("workflow-controller-configmap").await.ok()?;
        (serde_json::json!(live.data?.get("parallelism")) == want).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_leader_frozen_past_its_lease_writes_nothing_once_it_wakes() {
    let client = admin().await;
    let fleet = Fleet::new("frozen").with(
        "leaderElection",
        serde_json::json!({"leaseDurationSeconds": 4}),
    );
    let dir = tempfile::tempdir().unwrap();
    let standby_config = standby_kubeconfig(dir.path());
    let ns = "frozen-a";
    fleet.namespace(&client, ns, true).await;
    let leader = fleet.start_as("leader", &env().flotilla_kubeconfig);
    wait_leads(
        &leader,
        "the first replica to lead",
        Duration::from_secs(30),
    )
    .await;
    fleet.wait_stamped(&client, ns).await;
    let standby = fleet.start_as("standby", &standby_config);
    standby.wait_log("caches synced").await;

    let audit = AuditWindow::open();
    leader.signal("STOP");
    let takeover = wait_leads(
        &standby,
        "the standby to take over",
        Duration::from_secs(20),
    )
    .await;
    println!("leader frozen: the standby leads after {takeover:?}");
    // Work for the old leader to find when it wakes: an edit the new leader reverts.
    edit_config_map(&client, ns, "7").await;
    wait_reverted(&client, &fleet, ns).await;
    leader.signal("CONT");
    // Its watches deliver the edit and the revert, its reconciles resume where they stopped,
    // its Lease round runs late: everything that once made it write.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(standby.leads().await, "the standby must still lead");
    assert!(
        !leader.leads().await,
        "the old leader must know it does not lead"
    );

    // The window holds both replicas' requests: the new leader's revert, the old one's reads of
    // the Lease after it woke.
    let revert = audit.writes_in(STANDBY_USER, ns);
    let woke = audit.lease_reads(FLOTILLA_USER, &fleet.instance);
    assert!(revert > 0, "no write by the new leader in {ns}");
    assert!(woke > 0, "no Lease read by the old leader after it woke");
    let writes = audit.writes(FLOTILLA_USER);
    println!(
        "old leader after waking: {} writes, {woke} Lease reads; new leader: {revert} writes in {ns}",
        writes.len()
    );
    assert!(writes.is_empty(), "the old leader wrote: {writes:#?}");
    // Nor did it win the Lease back while the standby lived (a Lease write that succeeded).
    let lease = format!("/leases/{}", fleet.instance);
    let taken_back: Vec<_> = audit
        .requests(FLOTILLA_USER, Some(&lease))
        .into_iter()
        .filter(|e| crate::audit::is_write(e) && e["responseStatus"]["code"] == 200)
        .collect();
    assert!(
        taken_back.is_empty(),
        "the old leader renewed: {taken_back:#?}"
    );
    delete_namespaces(&client, &[ns]).await;
}

#[tokio::test]
async fn clock_skew_neither_steals_a_live_lease_nor_waits_past_its_expiry() {
    let client = admin().await;
    let fleet = Fleet::new("skew").with(
        "leaderElection",
        serde_json::json!({"leaseDurationSeconds": 10}),
    );
    let dir = tempfile::tempdir().unwrap();
    let standby_config = standby_kubeconfig(dir.path());
    let ns = "skew-a";
    fleet.namespace(&client, ns, true).await;
    let leader = fleet.start_as("leader", &env().flotilla_kubeconfig);
    wait_leads(
        &leader,
        "the first replica to lead",
        Duration::from_secs(30),
    )
    .await;
    fleet.wait_stamped(&client, ns).await;

    // A standby 30 s ahead sees the leader's renewTime as long past, yet it is renewed all the
    // time: it must not take over.
    let ahead = fleet.start_with_clock("ahead", &standby_config, "+30s");
    ahead.wait_log("caches synced").await;
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(15) {
        assert!(
            !ahead.leads().await,
            "a standby 30 s ahead took a live lease"
        );
        assert!(leader.leads().await, "the leader lost its lease");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    ahead.stop();

    // A standby 30 s behind sees the leader's renewTime as 30 s in the future: it must still
    // take over once the lease expires, not 30 s later.
    let behind = fleet.start_with_clock("behind", &standby_config, "-30s");
    behind.wait_log("caches synced").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    leader.kill();
    let takeover = wait_leads(
        &behind,
        "the standby behind to take over",
        Duration::from_secs(30),
    )
    .await;
    println!("standby 30 s behind took over {takeover:?} after the leader was killed");
    assert!(takeover <= Duration::from_secs(15), "{takeover:?}");
    delete_namespaces(&client, &[ns]).await;
}
