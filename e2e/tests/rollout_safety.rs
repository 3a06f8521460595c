//! Rollouts that survive one bad namespace, an empty fleet and lost state (issue 30, item 3):
//! each test replays what a code review found on the real control plane, and checks the
//! outcome the strategy promises from what the cluster shows (Deployments' images, the Fleet's
//! and the NamespaceWorkers' status), not from flotilla's log. rollout_faults.rs holds the
//! findings about what the API server and tenants do.

use crate::harness::*;
use crate::kubelet::ReadyMarker;
use crate::rollout::{look, wait_all_at, wait_fleet_phase, with_image};
use flotilla::rollout::Phase;
use flotilla::status::{NamespaceWorker, Phase as WorkerPhase};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, ResourceExt};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// `n` namespaces `<prefix>-<i>`, opted in; those whose index is in `canaries` labelled
/// `tier=canary`.
pub(crate) async fn namespaces(
    client: &kube::Client,
    fleet: &Fleet,
    prefix: &str,
    n: usize,
    canaries: &[usize],
) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let mut labels = BTreeMap::from([(fleet.label.clone(), "on".to_string())]);
        if canaries.contains(&i) {
            labels.insert("tier".into(), "canary".into());
        }
        create_namespace(client, name, labels, BTreeMap::new()).await;
    }
    names
}

/// Starts `fleet` at image `v1` over `names` and waits until revision 1 is complete.
pub(crate) async fn settled_at_v1(
    client: &kube::Client,
    fleet: &Fleet,
    names: &[String],
    v1: &str,
) -> Flotilla {
    let flotilla = fleet.start();
    wait_all_at(client, names, v1).await;
    wait_fleet_phase(
        client,
        &fleet.instance,
        1,
        Phase::Complete,
        Duration::from_secs(60),
    )
    .await;
    flotilla
}

/// How many of `names` run `image`.
pub(crate) async fn running(client: &kube::Client, names: &[String], image: &str) -> usize {
    look(client, names)
        .await
        .values()
        .filter(|s| s.image == image)
        .count()
}

pub(crate) async fn worker_phase(client: &kube::Client, name: &str) -> Option<WorkerPhase> {
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    Some(workers.get_opt(name).await.ok()??.status?.phase)
}

/// Finding 1: a namespace already RenderFailed (an override no revision accepts) kept its old
/// revision, so it never reached the target, was never late, and the Fleet stayed Progressing
/// for good. Refused at the target, it fails at once, and the rollout ends as the strategy says.
#[tokio::test]
async fn a_namespace_refused_at_the_target_ends_the_rollout_as_the_strategy_says() {
    let client = admin().await;
    let mut fleet = Fleet::new("rs-refused").with(
        "rollout",
        serde_json::json!({"maxUnavailable": 1, "soakSeconds": 1,
            "progressDeadlineSeconds": 300, "maxFailures": 0}),
    );
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-refused", 3, &[]).await;
    let v1 = with_image(&mut fleet, "v1");
    let _kubelet = ReadyMarker::start(&client, "rs-refused-", &[&v1]);
    let flotilla = settled_at_v1(&client, &fleet, &names, &v1).await;
    let bad = &names[0];
    let patch = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "abc"}}});
    Api::<Namespace>::all(client.clone())
        .patch(bad, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    eventually("the annotated namespace RenderFailed", || async {
        (worker_phase(&client, bad).await == Some(WorkerPhase::RenderFailed)).then_some(())
    })
    .await;

    // A values edit: revision 2. The refused namespace sorts first, so it is the first moved.
    fleet.values["logLevel"] = serde_json::json!("debug");
    fleet.config_file();
    // Well within the 300 s deadline: a refusal at the target needs no deadline.
    let failed = wait_fleet_phase(
        &client,
        &fleet.instance,
        2,
        Phase::Failed,
        Duration::from_secs(60),
    )
    .await;
    let status = failed.status.unwrap();
    assert_eq!(
        status.failed_namespaces,
        std::slice::from_ref(bad),
        "{}",
        status.message
    );
    assert!(status.message.contains(bad.as_str()), "{}", status.message);
    // maxFailures 0 and maxUnavailable 1: nothing else moved.
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    for name in &names[1..] {
        let revision = workers.get(name).await.unwrap().status.unwrap().revision;
        assert_eq!(
            revision, status.stable_hash,
            "{name} moved past a failed rollout"
        );
    }
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}

/// Finding 2: with no member at all (a selector typo), `all()` over nothing made the target
/// stable, and once the typo was fixed the namespaces not moved stayed on the old revision under
/// a Complete Fleet.
#[tokio::test]
async fn an_empty_fleet_promotes_nothing_and_the_rollout_completes_once_the_typo_is_fixed() {
    let client = admin().await;
    // The brake as it comes (the harness lifts it): the typo opts out all six, held.
    let mut fleet = Fleet::new("rs-empty").with(
        "rollout",
        serde_json::json!({"maxUnavailable": 1, "soakSeconds": 1, "progressDeadlineSeconds": 600}),
    );
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-empty", 6, &[]).await;
    let v1 = with_image(&mut fleet, "v1");
    let kubelet = ReadyMarker::start(&client, "rs-empty-", &[&v1]);
    let flotilla = settled_at_v1(&client, &fleet, &names, &v1).await;

    // v2, whose pods are not ready yet: one namespace moves and waits there.
    let v2 = with_image(&mut fleet, "v2");
    fleet.config_file();
    eventually("a namespace at v2", || async {
        (running(&client, &names, &v2).await >= 1).then_some(())
    })
    .await;
    let selector = format!("{}=on", fleet.label);
    fleet
        .settings
        .insert("selector".into(), serde_json::json!(format!("{selector}n")));
    fleet.config_file();
    let empty = eventually("the Fleet to count no member", || async {
        let status = fleet_object(&client, &fleet.instance).await?.status?;
        (status.total == 0).then_some(status)
    })
    .await;
    assert_eq!(
        (empty.phase, empty.stable_revision),
        (Phase::Progressing, 1),
        "an empty fleet promoted the target: {}",
        empty.message
    );
    fleet
        .settings
        .insert("selector".into(), serde_json::json!(selector));
    fleet.config_file();
    kubelet.accept(&v2);
    wait_all_at(&client, &names, &v2).await;
    wait_fleet_phase(
        &client,
        &fleet.instance,
        2,
        Phase::Complete,
        Duration::from_secs(120),
    )
    .await;
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}

/// Finding 2, the other half: NamespaceWorkers deleted while flotilla is down left their
/// namespaces with no recorded revision, and each was pinned to the target at once, past
/// `maxUnavailable`.
#[tokio::test]
async fn namespace_workers_deleted_mid_rollout_move_nobody_at_once() {
    let client = admin().await;
    let mut fleet = Fleet::new("rs-nsw").with(
        "rollout",
        serde_json::json!({"maxUnavailable": 1, "soakSeconds": 1, "progressDeadlineSeconds": 600}),
    );
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-nsw", 6, &[]).await;
    let v1 = with_image(&mut fleet, "v1");
    let _kubelet = ReadyMarker::start(&client, "rs-nsw-", &[&v1]);
    let flotilla = settled_at_v1(&client, &fleet, &names, &v1).await;
    flotilla.stop();

    // v2 in progress (its pods not ready), then every NamespaceWorker deleted while flotilla
    // is down.
    let v2 = with_image(&mut fleet, "v2");
    let flotilla = fleet.start();
    eventually("a namespace at v2", || async {
        (running(&client, &names, &v2).await >= 1).then_some(())
    })
    .await;
    flotilla.stop();
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    for name in &names {
        workers
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("the NamespaceWorkers gone", || async {
        let listed = workers.list(&ListParams::default()).await.ok()?;
        (!listed.items.iter().any(|w| names.contains(&w.name_any()))).then_some(())
    })
    .await;
    let flotilla = fleet.start();
    // Every worker written again, each at the revision it was rendered at.
    eventually("every NamespaceWorker back", || async {
        let listed = workers.list(&ListParams::default()).await.ok()?;
        let back = listed
            .items
            .iter()
            .filter(|w| names.contains(&w.name_any()))
            .filter(|w| w.status.as_ref().is_some_and(|s| !s.revision.is_empty()))
            .count();
        (back == names.len()).then_some(())
    })
    .await;
    let at_v2 = running(&client, &names, &v2).await;
    assert!(
        at_v2 <= 1,
        "{at_v2} namespaces moved to v2 at once with maxUnavailable 1"
    );
    let status = fleet_object(&client, &fleet.instance)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_ne!(status.phase, Phase::Complete, "{}", status.message);
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}

/// Finding 10: canaries were admitted all at once, whatever `maxUnavailable` said.
#[tokio::test]
async fn canaries_move_within_max_unavailable() {
    let client = admin().await;
    let mut fleet = Fleet::new("rs-canary").with(
        "rollout",
        serde_json::json!({"canary": "tier=canary", "maxUnavailable": 2, "soakSeconds": 1,
            "progressDeadlineSeconds": 600}),
    );
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-canary", 4, &[0, 1, 2]).await;
    let v1 = with_image(&mut fleet, "v1");
    let kubelet = ReadyMarker::start(&client, "rs-canary-", &[&v1]);
    let flotilla = settled_at_v1(&client, &fleet, &names, &v1).await;

    // v2's pods are not ready: two canaries move and wait; the third must not follow.
    let v2 = with_image(&mut fleet, "v2");
    fleet.config_file();
    let mut two_since: Option<Instant> = None;
    let started = Instant::now();
    while two_since.is_none_or(|t| t.elapsed() < Duration::from_secs(5)) {
        let moved = running(&client, &names, &v2).await;
        assert!(
            moved <= 2,
            "{moved} canaries at v2 at once with maxUnavailable 2"
        );
        if moved == 2 {
            two_since.get_or_insert_with(Instant::now);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "two canaries never moved"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    kubelet.accept(&v2);
    wait_all_at(&client, &names, &v2).await;
    wait_fleet_phase(
        &client,
        &fleet.instance,
        2,
        Phase::Complete,
        Duration::from_secs(120),
    )
    .await;
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}

/// Finding 9: once its one failed namespace was deleted, a Fleet stayed Failed with the
/// message `stopped: 0 failed at revision 2 (maxFailures 0): ;`. With nothing failed the
/// rollout goes on, and the next namespace to fail is the one named.
#[tokio::test]
async fn a_failed_namespace_deleted_leaves_no_failure_without_a_name() {
    let client = admin().await;
    let mut fleet = Fleet::new("rs-gone").with(
        "rollout",
        serde_json::json!({"canary": "tier=canary", "maxUnavailable": 1, "soakSeconds": 1,
            "progressDeadlineSeconds": 10, "maxFailures": 0}),
    );
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-gone", 2, &[0]).await;
    let v1 = with_image(&mut fleet, "v1");
    let _kubelet = ReadyMarker::start(&client, "rs-gone-", &[&v1]);
    let flotilla = settled_at_v1(&client, &fleet, &names, &v1).await;
    let bad = with_image(&mut fleet, "bad");
    fleet.config_file();
    let failed = wait_fleet_phase(
        &client,
        &fleet.instance,
        2,
        Phase::Failed,
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(failed.status.unwrap().failed_namespaces, [names[0].clone()]);
    delete_namespaces_and_wait(&client, &names[..1]).await;
    let last = eventually_within(
        Duration::from_secs(90),
        "the other namespace failed, by name",
        || async {
            let status = fleet_object(&client, &fleet.instance).await?.status?;
            assert!(
                !(status.phase == Phase::Failed && status.failed_namespaces.is_empty()),
                "Failed with nothing failed: {}",
                status.message
            );
            (status.phase == Phase::Failed && status.failed_namespaces == [names[1].clone()])
                .then_some(status)
        },
    )
    .await;
    assert!(
        last.message.contains(&format!(
            "1 failed at revision 2 (maxFailures 0): {}",
            names[1]
        )),
        "{}",
        last.message
    );
    assert_eq!(running(&client, &names[1..], &bad).await, 1);
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names[1..]).await;
}

/// Finding 3: the stable revision's ControllerRevision deleted after a failed rollout, then a
/// failover: the new leader took the newest (failed) revision as settled and sent it to the
/// whole fleet. It holds, naming the missing revision, and moves nothing until the admin acts.
#[tokio::test]
async fn a_missing_stable_revision_holds_the_rollout_until_the_admin_acts() {
    let client = admin().await;
    let mut fleet = Fleet::new("rs-lost").with(
        "rollout",
        serde_json::json!({"canary": "tier=canary", "maxUnavailable": 1, "soakSeconds": 1,
            "progressDeadlineSeconds": 10, "maxFailures": 0}),
    );
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-lost", 3, &[0]).await;
    let v1 = with_image(&mut fleet, "v1");
    let _kubelet = ReadyMarker::start(&client, "rs-lost-", &[&v1]);
    let flotilla = settled_at_v1(&client, &fleet, &names, &v1).await;
    let bad = with_image(&mut fleet, "bad");
    fleet.config_file();
    wait_fleet_phase(
        &client,
        &fleet.instance,
        2,
        Phase::Failed,
        Duration::from_secs(90),
    )
    .await;
    flotilla.stop();
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
    let selector = format!("flotilla.dev/instance={}", fleet.instance);
    let listed = revisions
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap();
    let first = listed.items.iter().find(|r| r.revision == Some(1)).unwrap();
    revisions
        .delete(&first.name_any(), &DeleteParams::default())
        .await
        .unwrap();

    let flotilla = fleet.start();
    let others = &names[1..];
    let never_bad = || async {
        let moved = running(&client, others, &bad).await;
        assert_eq!(moved, 0, "the failed revision went to the fleet");
    };
    eventually("the Fleet holding, naming revision 1", || async {
        never_bad().await;
        let status = fleet_object(&client, &fleet.instance).await?.status?;
        status
            .message
            .contains("holding: the stable revision 1 (")
            .then_some(())
    })
    .await;
    // Held: nothing moves while it says so (the leader takes a turn every second).
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(5) {
        never_bad().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(running(&client, others, &v1).await, others.len());

    // The admin acts: the config back to v1's content, recorded as revision 3.
    let _ = with_image(&mut fleet, "v1");
    fleet.config_file();
    wait_fleet_phase(
        &client,
        &fleet.instance,
        3,
        Phase::Complete,
        Duration::from_secs(120),
    )
    .await;
    wait_all_at(&client, &names, &v1).await;
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}
