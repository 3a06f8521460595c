//! A restart with nothing changed makes zero write requests. This module's name sorts first so
//! that it runs before the suites whose namespace deletions keep the controller-manager busy:
//! the API server's own write counter (which cannot tell clients apart) must hold still.

use crate::common::STAMPED_AND_NAMESPACES;
use crate::harness::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use std::time::Duration;

/// Waits until no namespace is terminating and the API server's write counter holds still, so
/// that the controller-manager's own cleanup of earlier tests is not counted.
async fn quiet_write_count(client: &kube::Client, resources: &[&str]) -> u64 {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    eventually_within(
        Duration::from_secs(180),
        "earlier namespaces to finish terminating",
        || async {
            let list = namespaces.list(&Default::default()).await.ok()?;
            list.items
                .iter()
                .all(|ns| ns.metadata.deletion_timestamp.is_none())
                .then_some(())
        },
    )
    .await;
    let mut last = write_requests(client, resources).await;
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = write_requests(client, resources).await;
        if now == last {
            return now;
        }
        last = now;
    }
}

#[tokio::test]
async fn a_restart_with_nothing_changed_makes_zero_writes() {
    let client = admin().await;
    let fleet = Fleet::new("restart");
    let names: Vec<String> = (0..50).map(|i| format!("restart-{i:02}")).collect();
    for name in &names {
        fleet.namespace(&client, name, true).await;
    }
    let flotilla = fleet.start();
    for name in &names {
        fleet.wait_stamped(&client, name).await;
    }
    flotilla.wait_log("initial sync complete").await;
    // Settled: every worker has seen its Deployment (status changes after this would be news).
    let workers: Api<flotilla::status::NamespaceWorker> = Api::all(client.clone());
    for name in &names {
        eventually(&format!("{name}'s worker to be Progressing"), || async {
            let status = workers.get(name).await.ok()?.status?;
            (status.phase == flotilla::status::Phase::Progressing).then_some(())
        })
        .await;
    }
    flotilla.stop();

    let resources = [&STAMPED_AND_NAMESPACES[..], &["namespaceworkers"]].concat();
    let before = quiet_write_count(&client, &resources).await;
    // The counter was read: this fleet's creates alone are hundreds of writes.
    assert!(before > 0, "the API server's write counter reads 0");
    let audit = AuditWindow::open();
    let restarted = fleet.start();
    restarted.wait_log("initial sync complete").await;
    // Let any late watch event be processed too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = write_requests(&client, &resources).await;
    // The window holds the restarted flotilla's requests: its watches' lists at the least.
    let lists = audit
        .requests(FLOTILLA_USER, None)
        .iter()
        .filter(|e| e["verb"] == "list")
        .count();
    assert!(
        lists > 0,
        "the audit log shows no list by the restarted flotilla"
    );
    let writes = audit.writes(FLOTILLA_USER);
    println!(
        "write requests by flotilla's ServiceAccount during the restart (audit log, Lease renewals aside): {} (and {lists} lists)",
        writes.len()
    );
    assert!(writes.is_empty(), "flotilla wrote: {writes:#?}");
    println!(
        "write requests during a restart with 50 opted-in namespaces: {}",
        after - before
    );
    assert_eq!(
        after - before,
        0,
        "a restart with nothing changed must not write"
    );
    assert!(!restarted.logs().contains("created"), "nothing was created");
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    delete_namespaces(&client, &refs).await;
}
