//! The brake on mass reaping counts over a window (issue 30/3, item 5): namespaces opted out
//! one at a time, each reaped before the next (a relabelling script with a `sleep`), and a
//! template removed (a prune across the fleet) are held as a selector edit is, until `flotilla
//! rollout resume`. The brake as it comes: more than 10% of the fleet and at least 5, within
//! 600 s.

use crate::harness::*;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;

/// The Fleet's status once the brake holds.
async fn held(client: &kube::Client, fleet: &Fleet) -> flotilla::rollout::fleet::FleetStatus {
    eventually_within(
        std::time::Duration::from_secs(60),
        "the brake to hold",
        || async {
            let status = fleet_object(client, &fleet.instance).await?.status?;
            (status.reap_held > 0).then_some(status)
        },
    )
    .await
}

#[tokio::test]
async fn paced_opt_outs_are_held_once_five_fall_within_the_window() {
    let client = admin().await;
    let fleet =
        Fleet::new("rs-paced").with("rollout", serde_json::json!({"maxUnavailable": "100%"}));
    forget_revisions(&client, &fleet.instance).await;
    let names: Vec<String> = (0..8).map(|i| format!("rs-paced-{i}")).collect();
    for name in &names {
        fleet.namespace(&client, name, true).await;
    }
    let flotilla = fleet.start();
    for name in &names {
        fleet.wait_stamped(&client, name).await;
    }
    // One at a time, each gone before the next: never more than one opting out at once.
    for name in &names[..4] {
        fleet.set_opt_in(&client, name, None).await;
        fleet.wait_reaped(&client, name).await;
    }
    fleet.set_opt_in(&client, &names[4], None).await;
    let status = held(&client, &fleet).await;
    // One waits; five opted out within the window.
    assert_eq!(status.reap_held, 1, "{}", status.message);
    assert!(
        status
            .message
            .contains("(5 opting out or pruning within 600 s"),
        "{}",
        status.message
    );
    assert!(
        !fleet.stamped_for(&client, &names[4]).await.is_empty(),
        "the fifth was reaped while the brake held"
    );
    assert_eq!(fleet.cli(&["rollout", "resume"]).0, 0);
    fleet.wait_reaped(&client, &names[4]).await;
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}

#[tokio::test]
async fn a_template_removed_prunes_through_the_brake() {
    let client = admin().await;
    let fleet =
        Fleet::new("rs-prune").with("rollout", serde_json::json!({"maxUnavailable": "100%"}));
    forget_revisions(&client, &fleet.instance).await;
    let names: Vec<String> = (0..8).map(|i| format!("rs-prune-{i}")).collect();
    for name in &names {
        fleet.namespace(&client, name, true).await;
    }
    let flotilla = fleet.start();
    for name in &names {
        fleet.wait_stamped(&client, name).await;
    }
    let services = |ns: &str| Api::<Service>::namespaced(client.clone(), ns);
    let left = || async {
        let mut left = 0;
        for name in &names {
            if !absent(&services(name), "workflow-controller-metrics").await {
                left += 1;
            }
        }
        left
    };
    assert_eq!(left().await, names.len());
    fleet.remove_template("controller-metrics-service.yaml");
    fleet.config_file();
    held(&client, &fleet).await;
    let kept = left().await;
    assert!(
        kept >= 3,
        "{kept} Services left: the prune went past the brake"
    );
    assert_eq!(fleet.cli(&["rollout", "resume"]).0, 0);
    eventually("every Service pruned", || async {
        (left().await == 0).then_some(())
    })
    .await;
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}
