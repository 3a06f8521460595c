//! Rollouts across replicas (issue 30/3, items 6 and 7). Timing: soak and deadline compared
//! `now` with times written by whichever replica wrote them, so a step of the wall clock failed
//! every namespace in flight; the leader here runs under libfaketime, its wall clock read from a
//! file the test changes (its monotonic clock left alone, as a real clock step leaves it).
//! Files: a failover to a replica whose mounted config was not updated yet renumbered its old
//! content as the newest revision, ended the admin's undo, and rolled the fleet back; one whose
//! config was updated and its templates not (two ConfigMaps, each updated in its own time)
//! recorded a mix of the two as a new revision.

use crate::harness::*;
use crate::kubelet::ReadyMarker;
use crate::rollout::{wait_all_at, wait_fleet_phase, with_image};
use crate::rollout_safety::{namespaces, running, settled_at_v1};
use flotilla::rollout::Phase;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ListParams};
use std::time::{Duration, Instant};

/// The leader's wall clock as its last Lease renewal wrote it (faked or not).
async fn renewed_at(client: &kube::Client, instance: &str) -> Option<Timestamp> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
    Some(leases.get(instance).await.ok()?.spec?.renew_time?.0)
}

#[tokio::test]
async fn a_wall_clock_step_on_the_leader_fails_nothing_in_flight() {
    let client = admin().await;
    let mut fleet = Fleet::new("rs-clock").with(
        "rollout",
        serde_json::json!({"maxUnavailable": 1, "soakSeconds": 1, "progressDeadlineSeconds": 300}),
    );
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-clock", 3, &[]).await;
    let v1 = with_image(&mut fleet, "v1");
    let kubelet = ReadyMarker::start(&client, "rs-clock-", &[&v1]);
    let flotilla = settled_at_v1(&client, &fleet, &names, &v1).await;
    flotilla.stop();

    // v2, whose pods are not ready yet: one namespace moves and waits, well within 300 s.
    let v2 = with_image(&mut fleet, "v2");
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("faketime.rc");
    std::fs::write(&clock, "+0\n").unwrap();
    let clock_file = clock.to_string_lossy().into_owned();
    let flotilla = fleet.start_with_faketime(
        "a",
        &env().flotilla_kubeconfig,
        &[
            ("FAKETIME_TIMESTAMP_FILE", clock_file.as_str()),
            ("FAKETIME_CACHE_DURATION", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    eventually("a namespace at v2", || async {
        (running(&client, &names, &v2).await >= 1).then_some(())
    })
    .await;
    // The leader's wall clock steps an hour ahead.
    std::fs::write(&clock, "+3600\n").unwrap();
    let ahead = Timestamp::now() + SignedDuration::from_secs(3000);
    eventually("the leader's clock an hour ahead", || async {
        let renewed = renewed_at(&client, &fleet.instance).await;
        renewed.is_some_and(|t| t > ahead).then_some(())
    })
    .await;
    // Several turns later (one a second), nothing failed.
    let stepped = Instant::now();
    while stepped.elapsed() < Duration::from_secs(5) {
        let status = fleet_object(&client, &fleet.instance)
            .await
            .unwrap()
            .status
            .unwrap();
        assert!(
            status.phase == Phase::Progressing && status.failed_namespaces.is_empty(),
            "after the clock step: {:?}: {}",
            status.phase,
            status.message
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

/// A fleet moved whole, with a 1 s soak, led by one of two replicas on a 4 s lease.
fn two_replicas(name: &str) -> Fleet {
    Fleet::new(name)
        .with(
            "rollout",
            serde_json::json!({"maxUnavailable": "100%", "soakSeconds": 1}),
        )
        .with(
            "leaderElection",
            serde_json::json!({"enabled": true, "leaseDurationSeconds": 4}),
        )
}

/// The Fleet's undo (`spec.revision`), its target, and the newest revision's number, as the API
/// shows them.
async fn revisions_seen(
    client: &kube::Client,
    instance: &str,
) -> (Option<i64>, Option<i64>, Option<i64>) {
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
    let selector = format!("flotilla.dev/instance={instance}");
    let newest = revisions
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|r| r.revision)
        .max();
    let fleet = fleet_object(client, instance).await.unwrap();
    let target = fleet.status.map(|s| s.target_revision);
    (fleet.spec.revision, target, newest)
}

#[tokio::test]
async fn a_failover_to_stale_files_renumbers_nothing_and_keeps_the_undo() {
    let client = admin().await;
    let mut fleet = two_replicas("rs-stale");
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-stale", 2, &[]).await;
    let v1 = with_image(&mut fleet, "v1");
    let kubelet = ReadyMarker::start(&client, "rs-stale-", &[&v1]);
    let a = settled_at_v1(&client, &fleet, &names, &v1).await;
    // Replica b's files: revision 1's content, read now and not updated.
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("flotilla.yaml");
    std::fs::write(&stale, fleet.config(&fleet.templates).to_string()).unwrap();
    let b = Flotilla::start(
        &stale,
        &dir.path().join("b.log"),
        &format!("{}-b", fleet.instance),
        &standby_kubeconfig(dir.path()),
    );
    // b has read its files (at start, before it waits to lead) before revision 2 exists, as a
    // standby whose mounted files lag does.
    b.wait_log("waiting for leadership").await;
    // v2 on a's files (revision 2), then the admin's undo back to revision 1.
    let v2 = with_image(&mut fleet, "v2");
    kubelet.accept(&v2);
    fleet.config_file();
    let long = Duration::from_secs(120);
    wait_fleet_phase(&client, &fleet.instance, 2, Phase::Complete, long).await;
    assert_eq!(fleet.cli(&["rollout", "undo"]).0, 0);
    wait_fleet_phase(&client, &fleet.instance, 1, Phase::Complete, long).await;
    wait_all_at(&client, &names, &v1).await;

    a.kill();
    eventually("replica b to lead", || async {
        b.leads().await.then_some(())
    })
    .await;
    let unchanged = || async {
        assert_eq!(
            revisions_seen(&client, &fleet.instance).await,
            (Some(1), Some(1), Some(2)),
            "the undo, the target and the newest revision number after the failover"
        );
    };
    // b takes a turn a second: several of them.
    let led = Instant::now();
    while led.elapsed() < Duration::from_secs(5) {
        unchanged().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // b's files catch up (revision 2's content, as the kubelet updates them): still the undo.
    std::fs::write(&stale, fleet.config(&fleet.templates).to_string()).unwrap();
    b.wait_log("config reloaded").await;
    let caught_up = Instant::now();
    while caught_up.elapsed() < Duration::from_secs(5) {
        unchanged().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_all_at(&client, &names, &v1).await;
    b.stop();
    delete_namespaces_and_wait(&client, &names).await;
}

#[tokio::test]
async fn a_failover_to_files_with_old_templates_and_new_values_records_no_mix() {
    let client = admin().await;
    let mut fleet = two_replicas("rs-mix");
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-mix", 2, &[]).await;
    let v1 = with_image(&mut fleet, "v1");
    let kubelet = ReadyMarker::start(&client, "rs-mix-", &[&v1]);
    let a = settled_at_v1(&client, &fleet, &names, &v1).await;
    // Replica b's files: revision 1's templates, read now and not updated, and its config.
    let dir = tempfile::tempdir().unwrap();
    let b_templates = dir.path().join("templates");
    std::fs::create_dir(&b_templates).unwrap();
    for entry in std::fs::read_dir(&fleet.templates).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), b_templates.join(entry.file_name())).unwrap();
    }
    let b_config = dir.path().join("flotilla.yaml");
    std::fs::write(&b_config, fleet.config(&b_templates).to_string()).unwrap();
    let b = Flotilla::start(
        &b_config,
        &dir.path().join("b.log"),
        &format!("{}-b", fleet.instance),
        &standby_kubeconfig(dir.path()),
    );
    b.wait_log("waiting for leadership").await;

    // Revision 2 on a's files: a new image (values) and a new label (templates).
    let v2 = with_image(&mut fleet, "v2");
    let template = fleet.templates.join("controller-configmap.yaml");
    let source = std::fs::read_to_string(&template).unwrap();
    let part_of = "    app.kubernetes.io/part-of: argo-workflows\n";
    assert!(source.contains(part_of), "the template's labels changed");
    let labelled = format!("{part_of}    e2e.flotilla.dev/mix: templates-v2\n");
    fleet.add_template(
        "controller-configmap.yaml",
        &source.replace(part_of, &labelled),
    );
    kubelet.accept(&v2);
    fleet.config_file();
    let long = Duration::from_secs(120);
    wait_fleet_phase(&client, &fleet.instance, 2, Phase::Complete, long).await;
    wait_all_at(&client, &names, &v2).await;

    // b's config is updated (new values, read after revision 2 was recorded), its templates not:
    // content no revision holds, which no admin wrote.
    std::fs::write(&b_config, fleet.config(&b_templates).to_string()).unwrap();
    b.wait_log("config reloaded").await;
    a.kill();
    eventually("replica b to lead", || async {
        b.leads().await.then_some(())
    })
    .await;
    let led = Instant::now();
    while led.elapsed() < Duration::from_secs(5) {
        assert_eq!(
            revisions_seen(&client, &fleet.instance).await,
            (None, Some(2), Some(2)),
            "the undo, the target and the newest revision after the failover to half-updated files"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // b's templates catch up: its files are revision 2's, and nothing is recorded.
    std::fs::copy(&template, b_templates.join("controller-configmap.yaml")).unwrap();
    let caught_up = Instant::now();
    while caught_up.elapsed() < Duration::from_secs(5) {
        assert_eq!(
            revisions_seen(&client, &fleet.instance).await,
            (None, Some(2), Some(2))
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_all_at(&client, &names, &v2).await;
    b.stop();
    delete_namespaces_and_wait(&client, &names).await;
}
