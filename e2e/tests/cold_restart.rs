//! A restart with nothing changed makes zero write requests. This module's name sorts first so
//! that it runs before the suites whose namespace deletions keep the controller-manager busy.
//!
//! Two oracles: the audit log's writes by flotilla's ServiceAccount, and, so that a wrong
//! identity cannot hide a write, the audit log's writes by anyone to this fleet's namespaces,
//! the objects in them and the NamespaceWorkers. The API server's own counter cannot tell
//! namespaces apart, so the control plane's churn in kube-system (a fresh cluster's first
//! minutes) would count against flotilla.

use crate::common::STAMPED_AND_NAMESPACES;
use crate::harness::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use std::time::Duration;

/// Waits until no namespace is terminating, so that the controller-manager's own cleanup of
/// earlier tests is over.
async fn no_namespace_terminating(client: &kube::Client) {
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
}

/// Writes in the window, by anyone, to what flotilla could write for `names`: the namespaces,
/// the stamped kinds in them (their status aside: that is the Deployment controller's), and
/// their NamespaceWorkers. As "user verb URI".
fn fleet_writes(audit: &AuditWindow, names: &[String]) -> Vec<String> {
    audit
        .all_requests()
        .iter()
        .filter(|e| crate::audit::is_write(e))
        .filter(|e| {
            let object = &e["objectRef"];
            let resource = object["resource"].as_str().unwrap_or_default();
            let ours = |field: &str| {
                object[field]
                    .as_str()
                    .is_some_and(|n| names.iter().any(|name| name == n))
            };
            match resource {
                "namespaces" | "namespaceworkers" => ours("name"),
                _ => {
                    STAMPED_AND_NAMESPACES.contains(&resource)
                        && object["subresource"] != "status"
                        && ours("namespace")
                }
            }
        })
        .map(|e| {
            format!(
                "{} {} {}",
                e["user"]["username"], e["verb"], e["requestURI"]
            )
        })
        .collect()
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

    no_namespace_terminating(&client).await;
    let audit = AuditWindow::open();
    let restarted = fleet.start();
    restarted.wait_log("initial sync complete").await;
    // Let any late watch event be processed too.
    tokio::time::sleep(Duration::from_secs(3)).await;
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
    let by_anyone = fleet_writes(&audit, &names);
    println!(
        "write requests by anyone to the 50 namespaces, their objects and workers during the restart: {}",
        by_anyone.len()
    );
    assert!(
        by_anyone.is_empty(),
        "a restart with nothing changed must not write: {by_anyone:#?}"
    );
    assert!(!restarted.logs().contains("created"), "nothing was created");
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    delete_namespaces(&client, &refs).await;
    // Positive control: the same filter sees the admin's deletes of these namespaces (and the
    // namespace controller's of their objects).
    eventually("the namespace deletes in the audit log", || async {
        let writes = fleet_writes(&audit, &names);
        (writes.iter().filter(|w| w.contains("\"delete\"")).count() >= names.len()).then_some(())
    })
    .await;
}
