//! Failures made visible and paced: an object the API server refuses puts its namespace in
//! ApplyFailed (with the API's words, a condition and an Event) and stops the rest of its apply;
//! it recovers by itself once the cause is gone; many namespaces failing so retry at a rate
//! that decays. And no check-then-write race: an object created in the moment between
//! flotilla's decision that a name is free and its create is never modified.

use crate::harness::*;
use flotilla::status::{NamespaceWorker, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, ResourceQuota};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, ResourceExt};
use std::collections::BTreeMap;
use std::time::Duration;

/// A quota that allows no ConfigMap in `namespace`, created (and its status computed by the
/// controller-manager) before anything is opted in.
pub async fn forbid_config_maps(client: &kube::Client, namespace: &str) {
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), namespace);
    let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "no-config-maps"},
        "spec": {"hard": {"configmaps": "0"}},
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    eventually(
        &format!("the quota in {namespace} to be counted"),
        || async {
            let status = quotas.get("no-config-maps").await.ok()?.status?;
            status.used?.contains_key("configmaps").then_some(())
        },
    )
    .await;
}

async fn worker_of(client: &kube::Client, namespace: &str) -> Option<NamespaceWorker> {
    Api::<NamespaceWorker>::all(client.clone())
        .get_opt(namespace)
        .await
        .ok()?
}

#[tokio::test]
async fn a_quota_refusal_is_apply_failed_until_the_quota_is_lifted() {
    let client = admin().await;
    let fleet = Fleet::new("quota");
    let ns = "quota-a";
    fleet.namespace(&client, ns, false).await;
    forbid_config_maps(&client, ns).await;
    let _flotilla = fleet.start();
    fleet.set_opt_in(&client, ns, Some("on")).await;
    let failed = eventually(&format!("{ns} to be ApplyFailed"), || async {
        let status = worker_of(&client, ns).await?.status?;
        (status.phase == Phase::ApplyFailed).then_some(status)
    })
    .await;
    assert!(
        failed.message.contains("exceeded quota") && failed.message.contains("configmaps"),
        "{}",
        failed.message
    );
    let applied = failed
        .conditions
        .iter()
        .find(|c| c.type_ == "Applied")
        .unwrap();
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("False", "ApplyFailed")
    );
    // As kubectl shows it.
    let wide = kubectl(&env().admin_kubeconfig, &["get", "nsw", ns, "-o", "wide"]);
    println!("kubectl get nsw -o wide:\n{wide}");
    assert!(
        wide.contains("ApplyFailed") && wide.contains("exceeded quota"),
        "{wide}"
    );
    // Nothing after the refused ConfigMap was applied (the Deployment comes last).
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    assert!(absent(&deploys, "workflow-controller").await);
    // An Event on the Namespace, where its owner looks.
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    eventually("an ApplyFailed Event on the Namespace", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("ApplyFailed")
                    && e.involved_object.kind.as_deref() == Some("Namespace")
                    && e.involved_object.name.as_deref() == Some(ns)
            })
            .then_some(())
    })
    .await;

    // Lifted: it recovers by itself, with nothing touching the namespace.
    Api::<ResourceQuota>::namespaced(client.clone(), ns)
        .delete("no-config-maps", &DeleteParams::default())
        .await
        .unwrap();
    fleet.wait_stamped(&client, ns).await;
    eventually(&format!("{ns} past ApplyFailed"), || async {
        let status = worker_of(&client, ns).await?.status?;
        (status.phase != Phase::ApplyFailed).then_some(())
    })
    .await;
    delete_namespaces(&client, &[ns]).await;
}

#[tokio::test]
async fn namespaces_that_keep_failing_retry_at_a_rate_that_decays() {
    const N: usize = 50;
    let client = admin().await;
    let fleet = Fleet::new("backoff");
    let names: Vec<String> = (0..N).map(|i| format!("backoff-{i:02}")).collect();
    for name in &names {
        fleet.namespace(&client, name, false).await;
        forbid_config_maps(&client, name).await;
    }
    let flotilla = fleet.start();
    flotilla.wait_log("initial sync complete").await;
    let audit = AuditWindow::open();
    let started = k8s_openapi::jiff::Timestamp::now();
    for name in &names {
        fleet.set_opt_in(&client, name, Some("on")).await;
    }
    // The measure is the 60 s from the first opt-in: read once the log has gone past them.
    let end = started + k8s_openapi::jiff::SignedDuration::from_secs(60);
    eventually_within(
        Duration::from_secs(90),
        "the audit log past 60 s",
        || async { audit.reaches(end).then_some(()) },
    )
    .await;
    // Every request flotilla made for these namespaces, by 10 s from the first opt-in.
    let in_fleet = |e: &serde_json::Value| {
        let uri = e["requestURI"].as_str().unwrap_or_default();
        names.iter().any(|n| {
            e["objectRef"]["namespace"] == n.as_str()
                || uri.contains(&format!("namespaceworkers/{n}"))
        })
    };
    let mut buckets = [0usize; 6];
    for e in audit
        .requests(FLOTILLA_USER, Some("backoff-"))
        .iter()
        .filter(|e| in_fleet(e))
    {
        let at: k8s_openapi::jiff::Timestamp = e["requestReceivedTimestamp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let second = at.duration_since(started).as_secs_f64().max(0.0) as usize;
        if let Some(bucket) = buckets.get_mut(second / 10) {
            *bucket += 1;
        }
    }
    let total: usize = buckets.iter().sum();
    println!(
        "requests for {N} namespaces refused by a quota, per 10 s over 60 s: {buckets:?} ({total} in all)"
    );
    for name in &names {
        let status = worker_of(&client, name).await.and_then(|w| w.status);
        assert_eq!(status.map(|s| s.phase), Some(Phase::ApplyFailed), "{name}");
    }
    // Decaying: the last 20 s hold far fewer than the first 20 s, and no flood in all.
    assert!(buckets[0] > 0, "no request seen");
    assert!(
        (buckets[4] + buckets[5]) * 3 < buckets[0] + buckets[1],
        "not decaying: {buckets:?}"
    );
    assert!(
        total < N * 30,
        "{total} requests for {N} namespaces in 60 s"
    );
    delete_namespaces(&client, &names).await;
}

#[tokio::test]
async fn an_object_created_while_flotilla_decides_the_name_is_free_is_never_modified() {
    const N: usize = 40;
    let client = admin().await;
    let fleet = Fleet::new("race");
    let names: Vec<String> = (0..N).map(|i| format!("race-{i:02}")).collect();
    for name in &names {
        fleet.namespace(&client, name, false).await;
    }
    let flotilla = fleet.start();
    flotilla.wait_log("initial sync complete").await;
    // The opt-in, then their own object of a rendered name a moment later (0 to 390 ms, a
    // different moment in each namespace): some land while flotilla is stamping the namespace,
    // after it saw the name free and before it reached that object.
    let theirs = |ns: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some("workflow-controller-configmap".into()),
            labels: Some(BTreeMap::from([("owner".into(), ns.into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "instanceID".into(),
            format!("theirs-{ns}"),
        )])),
        ..ConfigMap::default()
    };
    let races = names.iter().enumerate().map(|(i, ns)| {
        let (client, fleet, object) = (client.clone(), &fleet, theirs(ns));
        async move {
            let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            fleet.set_opt_in(&client, ns, Some("on")).await;
            tokio::time::sleep(Duration::from_millis(10 * i as u64)).await;
            let created = cms.create(&PostParams::default(), &object).await;
            (ns.clone(), created.ok())
        }
    });
    let outcomes = futures::future::join_all(races).await;
    let won: Vec<&(String, Option<ConfigMap>)> =
        outcomes.iter().filter(|(_, c)| c.is_some()).collect();
    println!("their object came first in {} of {N} namespaces", won.len());
    // Wait until flotilla has done what it will: every namespace has its worker status, and
    // where theirs came first, flotilla has found the conflict.
    for ns in &names {
        eventually(&format!("{ns}'s NamespaceWorker"), || async {
            worker_of(&client, ns).await?.status.map(|_| ())
        })
        .await;
    }
    for (ns, _) in &won {
        eventually(&format!("{ns} in Conflict"), || async {
            let status = worker_of(&client, ns).await?.status?;
            (status.phase == Phase::Conflict).then_some(())
        })
        .await;
    }
    for (ns, created) in won {
        let created = created.as_ref().unwrap();
        let live = Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get("workflow-controller-configmap")
            .await
            .unwrap();
        assert_eq!(
            live.resource_version(),
            created.resource_version(),
            "{ns}: theirs was modified"
        );
        assert_eq!(live.labels(), created.labels(), "{ns}");
        assert_eq!(live.data, created.data, "{ns}");
    }
    delete_namespaces(&client, &names).await;
}
