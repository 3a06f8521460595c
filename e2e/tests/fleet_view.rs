//! What a cluster admin sees and steers: NamespaceWorker status and phases, Events, per-namespace
//! overrides, `flotilla diff`, `flotilla check` and `flotilla status`.

use crate::audit::is_write;
use crate::harness::*;
use flotilla::status::{NamespaceWorker, Phase};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, ResourceExt};
use kube::runtime::{WatchStreamExt, watcher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn worker_api(client: &kube::Client) -> Api<NamespaceWorker> {
    Api::all(client.clone())
}

async fn phase_of(client: &kube::Client, namespace: &str) -> Option<Phase> {
    let worker = worker_api(client).get_opt(namespace).await.ok()??;
    Some(worker.status?.phase)
}

async fn wait_phase(client: &kube::Client, namespace: &str, want: Phase) -> NamespaceWorker {
    eventually(
        &format!("NamespaceWorker {namespace} to be {want:?}"),
        || async {
            let worker = worker_api(client).get_opt(namespace).await.ok()??;
            (worker.status.as_ref()?.phase == want).then_some(worker)
        },
    )
    .await
}

/// Stands in for the kubelet: marks the controller's pods ready or not, so the ReplicaSet and
/// Deployment controllers compute real availability from them.
async fn set_pods_ready(client: &kube::Client, namespace: &str, ready: bool) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = eventually(&format!("the controller pod in {namespace}"), || async {
        let list = pods
            .list(&ListParams::default().labels("app=workflow-controller"))
            .await
            .ok()?;
        (!list.items.is_empty()).then_some(list)
    })
    .await;
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = if ready { "True" } else { "False" };
    for pod in list {
        let patch = serde_json::json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": status, "lastTransitionTime": now}],
        }});
        pods.patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .unwrap();
    }
}

/// How many reconciles of `namespace` flotilla has logged (whether it wrote or not).
fn reconciles_of(flotilla: &Flotilla, namespace: &str) -> usize {
    let tag = format!("namespace={namespace}");
    flotilla
        .logs()
        .lines()
        .filter(|l| l.contains(&tag) && (l.contains("in sync") || l.contains("reconciled")))
        .count()
}

fn kubectl_admin(args: &[&str]) -> String {
    kubectl(&env().admin_kubeconfig, args)
}

#[tokio::test]
async fn worker_phase_follows_the_controller_deployment() {
    let client = admin().await;
    let mut fleet = Fleet::new("phases");
    fleet
        .settings
        .insert("degradedAfterSeconds".into(), 4.into());
    let ns = "phases-a";
    // Every phase the worker is written with, in order, as a watcher sees them.
    let seen: Arc<Mutex<Vec<Phase>>> = Arc::default();
    let recorder = tokio::spawn({
        let seen = Arc::clone(&seen);
        let config = watcher::Config::default().fields(&format!("metadata.name={ns}"));
        let stream = watcher(worker_api(&client), config).applied_objects();
        async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(Ok(worker)) = stream.next().await {
                if let Some(status) = worker.status {
                    let mut seen = seen.lock().unwrap();
                    if seen.last() != Some(&status.phase) {
                        seen.push(status.phase);
                    }
                }
            }
        }
    });
    let _flotilla = fleet.start();
    fleet.namespace(&client, ns, true).await;
    wait_phase(&client, ns, Phase::Progressing).await;
    set_pods_ready(&client, ns, true).await;
    let ready = wait_phase(&client, ns, Phase::Ready).await;
    let status = ready.status.unwrap();
    assert_eq!(status.ready, "1/1");
    assert_eq!(status.image, "quay.io/argoproj/workflow-controller:v4.1.2");
    assert_eq!(status.objects.len(), 9);
    let of = |type_: &str| {
        let found = status.conditions.iter().find(|c| c.type_ == type_);
        found.map(|c| (c.status.as_str(), c.reason.as_str()))
    };
    assert_eq!(
        of("Applied").map(|c| c.0),
        Some("True"),
        "{:?}",
        status.conditions
    );
    assert_eq!(
        of("Available").map(|c| c.0),
        Some("True"),
        "{:?}",
        status.conditions
    );
    // Whether an earlier test left Argo's Workflow CRD installed or not, none is ignored here.
    assert!(
        matches!(
            of("WorkflowsIgnored"),
            Some(("Unknown", "WorkflowCRDMissing") | ("False", "NoneIgnored"))
        ),
        "{:?}",
        status.conditions
    );

    set_pods_ready(&client, ns, false).await;
    let degraded = wait_phase(&client, ns, Phase::Degraded).await;
    let message = degraded.status.unwrap().message;
    assert!(message.contains("unavailable since"), "{message}");
    assert!(
        message.contains(&format!("kubectl -n {ns} get pods")),
        "{message}"
    );
    set_pods_ready(&client, ns, true).await;
    wait_phase(&client, ns, Phase::Ready).await;
    let expected = [
        Phase::Pending,
        Phase::Progressing,
        Phase::Ready,
        Phase::Degraded,
        Phase::Ready,
    ];
    let in_order = |seen: &[Phase]| {
        let mut rest = seen.iter();
        expected.iter().all(|want| rest.any(|p| p == want))
    };
    // The watcher sees the last write a moment after flotilla made it.
    eventually("the watcher to see every phase in order", || async {
        in_order(&seen.lock().unwrap()).then_some(())
    })
    .await;
    recorder.abort();
    let seen = seen.lock().unwrap().clone();
    let mut rest = seen.iter();
    for want in expected {
        assert!(
            rest.any(|p| *p == want),
            "phases {seen:?} lack {expected:?} in order"
        );
    }

    // kubectl's printer columns.
    let table = kubectl_admin(&["get", "nsw", ns]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "PHASE", "READY", "REVISION", "IMAGE", "IGNORED", "SHARE", "AGE"
        ]
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], [ns, "Ready", "1/1"]);
    assert_eq!(
        row[3],
        fleet.render(ns, &[])[0]["metadata"]["annotations"]["flotilla.dev/revision"]
    );
    assert_eq!(row[4], "quay.io/argoproj/workflow-controller:v4.1.2");
    let wide = kubectl_admin(&["get", "nsw", ns, "-o", "wide"]);
    assert!(wide.lines().next().unwrap().ends_with("MESSAGE"), "{wide}");
    assert!(wide.contains("1/1 replicas ready"), "{wide}");
    let describe = kubectl_admin(&["describe", "nsw", ns]);
    assert!(
        describe.contains("Phase:") && describe.contains("Available"),
        "{describe}"
    );

    // Reaping removes the worker with everything else.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    fleet.set_opt_in(&client, ns, None).await;
    fleet.wait_reaped(&client, ns).await;
    eventually("the NamespaceWorker to be removed", || async {
        worker_api(&client)
            .get_opt(ns)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let _ = namespaces.delete(ns, &DeleteParams::default()).await;
}

#[tokio::test]
async fn events_are_published_once_per_occurrence() {
    let client = admin().await;
    let fleet = Fleet::new("events").with("resyncSeconds", 1.into());
    let ns = "events-a";
    let flotilla = fleet.start();
    let namespace_uid = fleet.namespace(&client, ns, true).await.uid().unwrap();
    let worker_uid = wait_phase(&client, ns, Phase::Progressing)
        .await
        .uid()
        .unwrap();
    let objects = [
        ("Namespace", namespace_uid.as_str()),
        ("NamespaceWorker", worker_uid.as_str()),
    ];
    // Several resyncs later, still one Applied Event, on the NamespaceWorker: routine news is
    // not repeated on the Namespace.
    reconciled_again(&flotilla, ns, 3).await;
    let applied = events(&client, "NamespaceWorker", &worker_uid, "Applied").await;
    assert_eq!(applied.len(), 1, "{applied:?}");
    assert_eq!(applied[0].count, Some(1), "a single occurrence");
    assert!(
        events(&client, "Namespace", &namespace_uid, "Applied")
            .await
            .is_empty()
    );

    tamper_image(&client, ns, "someone/else:1").await;
    flotilla.wait_log("drift repaired").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let bad = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "lots"}}});
    namespaces
        .patch(ns, &PatchParams::default(), &Patch::Merge(bad))
        .await
        .unwrap();
    wait_phase(&client, ns, Phase::RenderFailed).await;
    reconciled_again(&flotilla, ns, 3).await;
    assert_eq!(
        events(&client, "NamespaceWorker", &worker_uid, "DriftRepaired")
            .await
            .len(),
        1
    );
    // A problem is told on both: the namespace's owner sees it with `kubectl describe namespace`.
    for (kind, uid) in objects {
        let failed = events(&client, kind, uid, "RenderFailed").await;
        assert_eq!(failed.len(), 1, "{kind}: {failed:?}");
        let note = failed[0].message.clone().unwrap_or_default();
        assert!(note.contains("override.flotilla.dev/parallelism"), "{note}");
    }
    fleet.set_opt_in(&client, ns, None).await;
    fleet.wait_reaped(&client, ns).await;
    eventually("a Reaped Event on the namespace", || async {
        (events(&client, "Namespace", &namespace_uid, "Reaped")
            .await
            .len()
            == 1)
            .then_some(())
    })
    .await;
    reconciled_again(&flotilla, ns, 3).await;
    assert_eq!(
        events(&client, "Namespace", &namespace_uid, "Reaped")
            .await
            .len(),
        1
    );
    let _ = namespaces.delete(ns, &DeleteParams::default()).await;
}

/// Someone re-editing a stamped object every second: every edit is reverted, and the Events
/// about it cost at most one write a minute: one DriftRepaired Event for the object, on the
/// NamespaceWorker, created at the first repair and updated a minute later with the count.
#[tokio::test]
async fn an_edit_loop_costs_at_most_one_event_write_a_minute() {
    let client = admin().await;
    let fleet = Fleet::new("edit-loop");
    let ns = "edit-loop-a";
    let _flotilla = fleet.start();
    fleet.namespace(&client, ns, true).await;
    let worker_uid = wait_phase(&client, ns, Phase::Progressing)
        .await
        .uid()
        .unwrap();
    fleet.wait_stamped(&client, ns).await;
    let audit = AuditWindow::open();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let name = "workflow-controller-configmap";
    let parallelism = |cm: &ConfigMap| cm.data.as_ref()?.get("parallelism").cloned();
    let started = std::time::Instant::now();
    let mut edits = 0;
    while started.elapsed() < Duration::from_secs(10) {
        let edit = serde_json::json!({"data": {"parallelism": format!("9{edits}")}});
        configmaps
            .patch(name, &PatchParams::default(), &Patch::Merge(edit))
            .await
            .unwrap();
        edits += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eventually("the last edit reverted", || async {
        let cm = configmaps.get(name).await.ok()?;
        (parallelism(&cm).as_deref() == Some("50")).then_some(())
    })
    .await;
    // The repairs' Event: one, counting them once its minute is up.
    let event = eventually_within(
        Duration::from_secs(90),
        "the DriftRepaired Event to count the repairs",
        || async {
            let repaired = events(&client, "NamespaceWorker", &worker_uid, "DriftRepaired").await;
            assert!(repaired.len() <= 1, "an Event per repair: {repaired:#?}");
            repaired.into_iter().find(|e| e.count > Some(1))
        },
    )
    .await;
    // The audit log holds the request that wrote it (its create, then the update that counts).
    let named = event.metadata.name.clone().unwrap_or_default();
    eventually("the audit log to hold the Event's update", || async {
        let writes = audit.requests(FLOTILLA_USER, Some(&named));
        (writes.iter().filter(|e| is_write(e)).count() >= 2).then_some(())
    })
    .await;
    let requests = audit.requests(FLOTILLA_USER, None);
    let writes_of = |resource: &str| -> Vec<String> {
        requests
            .iter()
            .filter(|e| is_write(e) && e["objectRef"]["resource"] == resource)
            .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
            .collect()
    };
    // Positive control: the window holds flotilla's repairs, each one counted.
    let repairs = writes_of("configmaps").len();
    assert!(repairs * 2 >= edits, "{repairs} repairs of {edits} edits");
    assert_eq!(event.count, Some(repairs as i32), "{event:#?}");
    let event_writes = writes_of("events");
    println!(
        "{edits} edits, {repairs} repairs, Event count {:?}, Event writes {event_writes:?}",
        event.count
    );
    assert_eq!(
        event_writes
            .iter()
            .filter(|w| w.starts_with("\"create\""))
            .count(),
        1,
        "{event_writes:?}"
    );
    assert!(event_writes.len() <= 2, "{event_writes:?}");
    let note = event.message.clone().unwrap_or_default();
    assert!(
        note.contains(&format!("ConfigMap {ns}/{name}"))
            && note.contains(&format!("{repairs} times")),
        "{note}"
    );
    fleet.set_opt_in(&client, ns, None).await;
    fleet.wait_reaped(&client, ns).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(ns, &DeleteParams::default()).await;
}

#[tokio::test]
async fn overrides_change_only_their_namespace_and_a_bad_one_changes_nothing() {
    let client = admin().await;
    let fleet = Fleet::new("override");
    let flotilla = fleet.start();
    let (canary, other) = ("override-canary", "override-other");
    for ns in [canary, other] {
        fleet.namespace(&client, ns, true).await;
        fleet.wait_stamped(&client, ns).await;
    }
    let image_of = |ns: &'static str| {
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
        async move {
            let d = deploys.get("workflow-controller").await.ok()?;
            d.spec.template.spec?.containers[0].image.clone()
        }
    };
    // What flotilla wrote there (audit log): the controller-manager keeps writing to the
    // Deployment and ServiceAccounts for a while after they appear, so resourceVersions would not tell.
    let audit = AuditWindow::open();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let annotate = |value: Option<&str>, key: &str| serde_json::json!({"metadata": {"annotations": {format!("override.flotilla.dev/{key}"): value}}});
    let canary_image = "quay.io/argoproj/workflow-controller:v4.1.3-rc1";
    namespaces
        .patch(
            canary,
            &PatchParams::default(),
            &Patch::Merge(annotate(Some(canary_image), "controllerImage")),
        )
        .await
        .unwrap();
    eventually("the canary image in the canary namespace", || async {
        (image_of(canary).await? == canary_image).then_some(())
    })
    .await;
    let worker = wait_phase(&client, canary, Phase::Progressing).await;
    assert_eq!(worker.status.unwrap().image, canary_image);
    // The other namespace is looked at again after the override (a change to it makes flotilla
    // render it anew), and nothing of the canary's reaches it.
    let reconciled = || reconciles_of(&flotilla, other);
    let before = reconciled();
    let touch =
        serde_json::json!({"metadata": {"annotations": {"e2e.flotilla.dev/touched": "yes"}}});
    namespaces
        .patch(other, &PatchParams::default(), &Patch::Merge(touch))
        .await
        .unwrap();
    eventually(&format!("flotilla to reconcile {other} again"), || async {
        (reconciled() > before).then_some(())
    })
    .await;
    assert_eq!(
        image_of(other).await.as_deref(),
        Some("quay.io/argoproj/workflow-controller:v4.1.2")
    );
    // The window holds flotilla's writes: the canary's Deployment was patched in it.
    assert!(
        audit.writes_in(FLOTILLA_USER, canary) > 0,
        "no writes in the canary seen"
    );
    assert_eq!(
        audit.writes_in(FLOTILLA_USER, other),
        0,
        "the other namespace is untouched"
    );

    // A bad override: reported with its key, and nothing changes.
    let audit = AuditWindow::open();
    let evil = "evil.example/controller:latest";
    namespaces
        .patch(
            canary,
            &PatchParams::default(),
            &Patch::Merge(annotate(Some(evil), "controllerImage")),
        )
        .await
        .unwrap();
    let failed = wait_phase(&client, canary, Phase::RenderFailed).await;
    let message = failed.status.unwrap().message;
    assert!(
        message.contains("override.flotilla.dev/controllerImage"),
        "{message}"
    );
    assert!(
        message.contains("does not match the allowed pattern"),
        "{message}"
    );
    // The window holds flotilla's writes: the RenderFailed status it wrote, after which that
    // reconcile wrote nothing more.
    let status_path = format!("namespaceworkers/{canary}/status");
    let status_writes = eventually("the RenderFailed status write in the audit log", || async {
        let writes = audit.requests(FLOTILLA_USER, Some(&status_path)).len();
        (writes > 0).then_some(writes)
    })
    .await;
    assert!(status_writes > 0, "no status write for {canary} seen");
    assert_eq!(audit.writes_in(FLOTILLA_USER, canary), 0);
    assert_eq!(image_of(canary).await.as_deref(), Some(canary_image));

    // Removing the override restores the defaults.
    namespaces
        .patch(
            canary,
            &PatchParams::default(),
            &Patch::Merge(annotate(None, "controllerImage")),
        )
        .await
        .unwrap();
    eventually("the default image back in the canary namespace", || async {
        (image_of(canary).await? == "quay.io/argoproj/workflow-controller:v4.1.2").then_some(())
    })
    .await;
    assert_ne!(phase_of(&client, canary).await, Some(Phase::RenderFailed));
    for ns in [canary, other] {
        let _ = namespaces.delete(ns, &DeleteParams::default()).await;
    }
}

#[tokio::test]
async fn diff_shows_a_drifted_field_and_exits_1_then_0_after_repair() {
    let client = admin().await;
    let fleet = Fleet::new("diff");
    let ns = "diff-a";
    let flotilla = fleet.start();
    fleet.namespace(&client, ns, true).await;
    fleet.wait_stamped(&client, ns).await;
    let (code, out) = fleet.cli(&["diff", "--namespace", ns]);
    assert_eq!((code, out.as_str()), (0, ""), "in sync: no diff");
    flotilla.stop();

    tamper_image(&client, ns, "someone/else:1").await;
    let (code, out) = fleet.cli(&["diff", "--namespace", ns]);
    println!("flotilla diff --namespace {ns}:\n{out}");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("--- live/Deployment {ns}/workflow-controller")),
        "{out}"
    );
    assert!(out.contains("-        image: someone/else:1"), "{out}");
    assert!(
        out.contains("+        image: quay.io/argoproj/workflow-controller:v4.1.2"),
        "{out}"
    );
    let (code, all) = fleet.cli(&["diff", "--all"]);
    assert_eq!((code, all.contains("someone/else:1")), (1, true), "{all}");

    let _flotilla = fleet.start();
    eventually("the drift to be repaired", || async {
        (fleet.cli(&["diff", "--namespace", ns]).0 == 0).then_some(())
    })
    .await;
    let _ = Api::<Namespace>::all(client.clone())
        .delete(ns, &DeleteParams::default())
        .await;
}

#[tokio::test]
async fn check_reports_every_broken_template_with_its_line() {
    let fleet = Fleet::new("check");
    let (code, out) = fleet.cli(&["check"]);
    assert_eq!(code, 0, "{out}");
    fleet.add_template(
        "broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: {{ oops\n",
    );
    fleet.add_template(
        "undefined.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  a: {{ values.nope }}\n",
    );
    let (code, out) = fleet.cli(&["check"]);
    println!("flotilla check:\n{out}");
    assert_eq!(code, 2);
    assert!(out.contains("broken.yaml:6: syntax error"), "{out}");
    assert!(out.contains("undefined.yaml:6: undefined value"), "{out}");
}

#[tokio::test]
async fn a_fleet_with_a_degraded_and_a_render_failed_namespace_at_a_glance() {
    let client = admin().await;
    let mut fleet = Fleet::new("glance");
    fleet
        .settings
        .insert("degradedAfterSeconds".into(), 2.into());
    let _flotilla = fleet.start();
    let (ready, degraded, broken) = ("glance-ready", "glance-degraded", "glance-broken");
    for ns in [ready, degraded, broken] {
        fleet.namespace(&client, ns, true).await;
        wait_phase(&client, ns, Phase::Progressing).await;
    }
    set_pods_ready(&client, ready, true).await;
    wait_phase(&client, ready, Phase::Ready).await;
    wait_phase(&client, degraded, Phase::Degraded).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let bad = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "5000"}}});
    namespaces
        .patch(broken, &PatchParams::default(), &Patch::Merge(bad))
        .await
        .unwrap();
    wait_phase(&client, broken, Phase::RenderFailed).await;
    let selector = format!("flotilla.dev/instance={}", fleet.instance);
    let wide = kubectl_admin(&["get", "nsw", "-o", "wide", "-l", &selector]);
    println!("kubectl get nsw -o wide:\n{wide}");
    let (code, table) = fleet.cli(&["status"]);
    println!("flotilla status:\n{table}");
    assert_eq!(code, 0);
    for (ns, phase) in [
        (ready, "Ready"),
        (degraded, "Degraded"),
        (broken, "RenderFailed"),
    ] {
        for out in [&wide, &table] {
            let line = out
                .lines()
                .find(|l| l.starts_with(ns))
                .unwrap_or_else(|| panic!("{ns} missing:\n{out}"));
            assert_eq!(line.split_whitespace().nth(1), Some(phase), "{line}");
        }
    }
    assert!(
        table.contains("3 namespaces: 1 Degraded, 1 Ready, 1 RenderFailed (1 ready)"),
        "{table}"
    );
    let (code, json) = fleet.cli(&["status", "-o", "json"]);
    let parsed: Vec<NamespaceWorker> = serde_json::from_str(&json).unwrap();
    assert_eq!((code, parsed.len()), (0, 3));
    for ns in [ready, degraded, broken] {
        let _ = namespaces.delete(ns, &DeleteParams::default()).await;
    }
}

/// Waits until `flotilla` has reconciled `namespace` `n` more times (with `resyncSeconds: 1`, so
/// many resyncs later): what was told once would have been told again by now.
async fn reconciled_again(flotilla: &Flotilla, namespace: &str, n: usize) {
    let before = reconciles_of(flotilla, namespace);
    eventually(&format!("{n} more reconciles of {namespace}"), || async {
        (reconciles_of(flotilla, namespace) >= before + n).then_some(())
    })
    .await;
}
