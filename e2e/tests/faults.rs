//! Never lose or leak a namespace: flotilla killed mid-rollout, namespaces deleted or unlabelled
//! while it was down, the API server or etcd restarted under it, and two replicas with a leader;
//! and the client-side rate limit that keeps flotilla from flooding the API server.

use crate::harness::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use std::process::Command;
use std::time::{Duration, Instant};

/// Number of Deployments this fleet has stamped, across the cluster.
async fn stamped_deployments(client: &kube::Client, fleet: &Fleet) -> usize {
    let api: Api<Deployment> = Api::all(client.clone());
    let params = kube::api::ListParams::default()
        .labels(&flotilla::ownership::watch_selector(&fleet.instance));
    api.list_metadata(&params)
        .await
        .map(|l| l.items.len())
        .unwrap_or(0)
}

#[tokio::test]
async fn namespaces_deleted_or_unlabelled_while_flotilla_was_down_are_reaped_on_start() {
    let client = admin().await;
    let fleet = Fleet::new("downtime");
    // Objects in flotilla's own namespace: only flotilla can clean those up.
    fleet.add_template("outside.yaml", OUTSIDE_TEMPLATE);
    // Its names depend on the namespace: an admin grants what they cost.
    let _grant = outside_grant();
    let deleted: Vec<String> = (0..20).map(|i| format!("downtime-del-{i:02}")).collect();
    let unlabelled: Vec<String> = (0..20).map(|i| format!("downtime-off-{i:02}")).collect();
    let kept = "downtime-kept".to_string();
    for name in deleted.iter().chain(&unlabelled).chain([&kept]) {
        fleet.namespace(&client, name, true).await;
    }
    let flotilla = fleet.start();
    for name in deleted.iter().chain(&unlabelled).chain([&kept]) {
        fleet.wait_stamped(&client, name).await;
    }
    flotilla.stop();

    delete_namespaces(&client, &deleted).await;
    for name in &unlabelled {
        fleet.set_opt_in(&client, name, None).await;
    }
    let started = Instant::now();
    let _flotilla = fleet.start();
    for name in deleted.iter().chain(&unlabelled) {
        eventually_within(
            Duration::from_secs(30),
            &format!("{name} reaped"),
            || async {
                fleet
                    .stamped_for(&client, name)
                    .await
                    .is_empty()
                    .then_some(())
            },
        )
        .await;
    }
    let took = started.elapsed();
    println!("reaped 40 namespaces changed during downtime in {took:?} after start");
    assert!(took < Duration::from_secs(30), "{took:?}");
    let entries: Api<ConfigMap> = Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
    for name in &deleted {
        assert!(absent(&entries, &format!("{name}-fleet-entry")).await);
    }
    // The namespace that stayed opted in keeps everything.
    assert_eq!(
        fleet.stamped_for(&client, &kept).await.len(),
        fleet.render(&kept, &[]).len()
    );
    let mut all = unlabelled.clone();
    all.push(kept);
    delete_namespaces(&client, &all).await;
}

#[tokio::test]
async fn killed_mid_rollout_of_200_namespaces_it_converges_after_restart() {
    let client = admin().await;
    let fleet = Fleet::new("kill9");
    let names: Vec<String> = (0..200).map(|i| format!("kill9-{i:03}")).collect();
    for name in &names {
        fleet.namespace(&client, name, true).await;
    }
    let flotilla = fleet.start();
    let killed_at = eventually("some of the fleet to be stamped", || async {
        let n = stamped_deployments(&client, &fleet).await;
        (n >= 40).then_some(n)
    })
    .await;
    flotilla.kill();
    println!("killed flotilla with {killed_at}/200 Deployments stamped");
    assert!(killed_at < 200, "the kill must land mid-rollout");

    let started = Instant::now();
    let restarted = fleet.start();
    eventually_within(
        Duration::from_secs(180),
        "all 200 namespaces stamped",
        || async { (stamped_deployments(&client, &fleet).await == 200).then_some(()) },
    )
    .await;
    restarted.wait_log("initial sync complete").await;
    println!(
        "converged 200 namespaces {:?} after the restart",
        started.elapsed()
    );
    for name in &names {
        let want: std::collections::BTreeSet<Identity> =
            fleet.render(name, &[]).iter().map(identity).collect();
        let stamped = fleet.stamped_for(&client, name).await;
        assert_eq!(
            stamped_set(&stamped),
            want,
            "{name}: exactly the rendered set"
        );
    }
    delete_namespaces(&client, &names).await;
}

async fn restart_component_while_labels_change(component: &str, prefix: &str) {
    let client = admin().await;
    let fleet = Fleet::new(prefix);
    let (stays, leaves, joins) = (
        format!("{prefix}-stays"),
        format!("{prefix}-leaves"),
        format!("{prefix}-joins"),
    );
    let _flotilla = fleet.start();
    fleet.namespace(&client, &stays, true).await;
    fleet.namespace(&client, &leaves, true).await;
    fleet.namespace(&client, &joins, false).await;
    fleet.wait_stamped(&client, &stays).await;
    fleet.wait_stamped(&client, &leaves).await;

    let out = Command::new("bash")
        .args([
            &format!("{}/e2e/cluster.sh", env!("CARGO_MANIFEST_DIR")),
            "restart",
            component,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "restart {component}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Change labels at once, while flotilla's watches are still reconnecting.
    let client = admin().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let patch = |value: Option<&str>| Patch::Merge(fleet.opt_in_patch(value));
    eventually("the API server to accept writes again", || async {
        namespaces
            .patch(&leaves, &PatchParams::default(), &patch(None))
            .await
            .ok()
    })
    .await;
    namespaces
        .patch(&joins, &PatchParams::default(), &patch(Some("on")))
        .await
        .unwrap();
    // Within a watch timeout (60 s) plus margin, even if a watch went silent over the restart.
    let settle = Duration::from_secs(150);
    eventually_within(settle, &format!("{leaves} reaped"), || async {
        fleet
            .stamped_for(&client, &leaves)
            .await
            .is_empty()
            .then_some(())
    })
    .await;
    let want = fleet.render(&joins, &[]).len();
    eventually_within(settle, &format!("{joins} stamped"), || async {
        (fleet.stamped_for(&client, &joins).await.len() == want).then_some(())
    })
    .await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), &stays);
    deploys
        .delete("workflow-controller", &DeleteParams::default())
        .await
        .unwrap();
    fleet.wait_stamped(&client, &stays).await;
    delete_namespaces(&client, &[stays, leaves, joins]).await;
}

#[tokio::test]
async fn an_api_server_restart_with_label_changes_around_it_converges() {
    restart_component_while_labels_change("kube-apiserver", "apirestart").await;
}

#[tokio::test]
async fn an_etcd_restart_with_label_changes_around_it_converges() {
    restart_component_while_labels_change("etcd", "etcdrestart").await;
}

/// With leader election off, the one replica leads from the start, and an idle fleet costs it
/// next to no CPU (a leadership channel without a sender once had every worker spin).
#[tokio::test]
async fn without_leader_election_the_one_replica_writes_and_idles_quietly() {
    let client = admin().await;
    let fleet = Fleet::new("solo").with("leaderElection", serde_json::json!({"enabled": false}));
    let ns = "solo-a";
    fleet.namespace(&client, ns, true).await;
    let flotilla = fleet.start();
    fleet.wait_stamped(&client, ns).await;
    flotilla.wait_log("initial sync complete").await;
    let cpu = || crate::common::cpu_seconds(flotilla.pid()).unwrap_or(f64::NAN);
    let before = cpu();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = cpu() - before;
    println!("without leader election: {idle:.2} CPU seconds in 5 s idle");
    assert!(
        idle < 1.0,
        "an idle flotilla used {idle:.2} CPU seconds in 5 s"
    );
    // It still repairs what breaks.
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deploys
        .delete("workflow-controller", &DeleteParams::default())
        .await
        .unwrap();
    fleet.wait_stamped(&client, ns).await;
    delete_namespaces(&client, &[ns]).await;
}

#[tokio::test]
async fn two_replicas_one_writes_and_the_standby_takes_over() {
    let client = admin().await;
    let fleet = Fleet::new("ha").with(
        "leaderElection",
        serde_json::json!({"leaseDurationSeconds": 10}),
    );
    let dir = tempfile::tempdir().unwrap();
    let standby_config = standby_kubeconfig(dir.path());
    let ns = "ha-a";
    fleet.namespace(&client, ns, true).await;

    let leader = fleet.start_as("leader", &env().flotilla_kubeconfig);
    eventually("the first replica to lead", || async {
        leader.leads().await.then_some(())
    })
    .await;
    fleet.wait_stamped(&client, ns).await;
    let audit = AuditWindow::open();
    let standby = fleet.start_as("standby", &standby_config);
    standby.wait_log("caches synced").await;
    // The standby watches but never writes, even when there is work to do.
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deploys
        .delete("workflow-controller", &DeleteParams::default())
        .await
        .unwrap();
    fleet.wait_stamped(&client, ns).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!standby.leads().await, "the standby must not lead");
    // The window holds the standby's requests: it reads the Lease every second.
    let lease_reads = audit.lease_reads(STANDBY_USER, &fleet.instance);
    assert!(
        lease_reads >= 2,
        "the audit log shows {lease_reads} Lease reads by the standby"
    );
    let writes = audit.writes(STANDBY_USER);
    println!(
        "standby write requests while the leader lives: {} (and {lease_reads} Lease reads)",
        writes.len()
    );
    assert!(writes.is_empty(), "the standby wrote: {writes:#?}");

    // kill -9 the leader, break something at once: the standby takes over and repairs it.
    leader.kill();
    let killed = Instant::now();
    deploys
        .delete("workflow-controller", &DeleteParams::default())
        .await
        .unwrap();
    eventually_within(
        Duration::from_secs(20),
        "the standby to take over",
        || async { standby.leads().await.then_some(()) },
    )
    .await;
    let takeover = killed.elapsed();
    fleet.wait_stamped(&client, ns).await;
    let repaired = killed.elapsed();
    println!(
        "kill -9: standby took over after {takeover:?}, repaired the deleted Deployment after {repaired:?}"
    );
    assert!(takeover <= Duration::from_secs(15), "{takeover:?}");

    // SIGTERM: the leader releases the Lease, a new standby takes over at once.
    let third = fleet.start_as("third", &env().flotilla_kubeconfig);
    third.wait_log("caches synced").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stopped = Instant::now();
    standby.stop();
    eventually_within(
        Duration::from_secs(15),
        "the third replica to take over",
        || async { third.leads().await.then_some(()) },
    )
    .await;
    let handover = stopped.elapsed();
    println!("SIGTERM: handover took {handover:?}");
    assert!(handover < Duration::from_secs(2), "{handover:?}");
    deploys
        .delete("workflow-controller", &DeleteParams::default())
        .await
        .unwrap();
    fleet.wait_stamped(&client, ns).await;
    let _ = Api::<Namespace>::all(client.clone())
        .delete(ns, &DeleteParams::default())
        .await;
    drop(third);
    let lease = kubectl(
        &env().admin_kubeconfig,
        &[
            "-n",
            FLOTILLA_NAMESPACE,
            "get",
            "lease",
            &fleet.instance,
            "-o",
            "jsonpath={.spec.leaseTransitions}",
        ],
    );
    assert!(
        lease.parse::<i32>().unwrap_or(0) >= 3,
        "three leaders in turn: {lease}"
    );
}

/// When the audit log says a request arrived.
fn received(entry: &serde_json::Value) -> Option<Timestamp> {
    entry["requestReceivedTimestamp"].as_str()?.parse().ok()
}

#[tokio::test]
async fn the_client_side_rate_limit_holds_and_requests_wait_rather_than_fail() {
    const QPS: i64 = 10;
    let client = admin().await;
    let fleet = Fleet::new("throttle")
        .with("apiQps", QPS.into())
        .with("apiBurst", QPS.into());
    let names: Vec<String> = (0..4).map(|i| format!("throttle-{i}")).collect();
    for name in &names {
        fleet.namespace(&client, name, true).await;
    }
    let audit = AuditWindow::open();
    let flotilla = fleet.start();
    for name in &names {
        fleet.wait_stamped(&client, name).await;
    }
    flotilla.wait_log("initial sync complete").await;
    // Throttled requests wait: none failed, so no reconcile failed. (Read before the stop.)
    let metrics = flotilla.metrics().await;
    flotilla.stop();
    let series = |s: &str| sample_sum(&metrics, s).unwrap_or(0.0);
    let (ok, failed) = (
        series(r#"flotilla_reconciles_total{result="ok"}"#),
        series(r#"flotilla_reconciles_total{result="error"}"#),
    );
    let api_errors = series("flotilla_api_errors_total");
    println!("reconciles: {ok} ok, {failed} failed; API errors: {api_errors}");
    assert!(ok >= names.len() as f64, "{ok} reconciles ok:\n{metrics}");
    assert_eq!((failed, api_errors), (0.0, 0.0), "{metrics}");

    // The leader Lease has a client of its own, unthrottled: renewals never wait behind work.
    let mut times: Vec<Timestamp> = audit
        .requests(FLOTILLA_USER, None)
        .iter()
        .filter(|e| e["objectRef"]["resource"] != "leases")
        .filter_map(received)
        .collect();
    times.sort();
    // The limit is a token bucket of apiBurst tokens refilled at apiQps a second: any one-second
    // span holds at most apiBurst + apiQps requests.
    let busiest = times
        .iter()
        .enumerate()
        .map(|(i, t)| {
            times[i..]
                .iter()
                .take_while(|u| u.duration_since(*t).as_secs_f64() < 1.0)
                .count()
        })
        .max()
        .unwrap_or(0);
    let span = match (times.first(), times.last()) {
        (Some(first), Some(last)) => last.duration_since(*first).as_secs_f64(),
        _ => 0.0,
    };
    println!(
        "{} requests in {span:.1} s at apiQps={QPS} apiBurst={QPS}; busiest second: {busiest}",
        times.len()
    );
    assert!(
        times.len() as i64 > 6 * QPS,
        "too few requests to meet the limit"
    );
    assert!(busiest as i64 <= 2 * QPS, "busiest second {busiest}");
    assert!(
        times.len() as f64 <= QPS as f64 * (span + 2.0),
        "{} requests in {span:.1} s",
        times.len()
    );
    delete_namespaces(&client, &names).await;
}

#[tokio::test]
async fn lease_renewals_keep_time_while_work_waits_behind_the_rate_limit() {
    // At one request a second flotilla's work queues up for a minute. The leader Lease has a
    // client of its own: renewals (every 0.6 s for a 3 s lease) must not wait behind that work,
    // or the leader would step down 2 s after its last renewal.
    let client = admin().await;
    let fleet = Fleet::new("leaseqps")
        .with("apiQps", 1.into())
        .with("apiBurst", 1.into())
        .with(
            "leaderElection",
            serde_json::json!({"enabled": true, "leaseDurationSeconds": 3}),
        );
    let names: Vec<String> = (0..3).map(|i| format!("leaseqps-{i}")).collect();
    for name in &names {
        fleet.namespace(&client, name, true).await;
    }
    let flotilla = fleet.start();
    flotilla
        .wait_log("leading: reconciling every namespace")
        .await;
    let audit = AuditWindow::open();
    // The window measured: from here to 15 s later, while flotilla runs. What it requests while
    // it stops, after the window, is not counted.
    let from = Timestamp::now();
    tokio::time::sleep(Duration::from_secs(15)).await;
    let to = Timestamp::now();
    let window = to.duration_since(from).as_secs_f64();
    let logs = flotilla.logs();
    flotilla.stop();

    let lease = format!("/leases/{}", fleet.instance);
    let in_window = |entries: Vec<serde_json::Value>| -> Vec<Timestamp> {
        let mut times: Vec<Timestamp> = entries
            .iter()
            .filter_map(received)
            .filter(|t| (from..=to).contains(t))
            .collect();
        times.sort();
        times
    };
    let renewals = in_window(
        audit
            .requests(FLOTILLA_USER, Some(&lease))
            .into_iter()
            .filter(|e| e["verb"] == "update")
            .collect(),
    );
    let work_entries: Vec<serde_json::Value> = audit
        .requests(FLOTILLA_USER, None)
        .into_iter()
        .filter(|e| e["objectRef"]["resource"] != "leases")
        // A watch opened before the window is logged complete when flotilla stops in it: not
        // a request the window's work made.
        .filter(|e| e["verb"] != "watch")
        .filter(|e| received(e).is_some_and(|t| (from..=to).contains(&t)))
        .collect();
    let described: Vec<String> = work_entries
        .iter()
        .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
        .collect();
    let work = in_window(work_entries);
    let longest_gap = renewals
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_secs_f64())
        .fold(0.0, f64::max);
    // At 1 a second with a burst of 1: one a second of the window, the burst, and one more
    // admitted just before the window whose request the server received in it.
    let at_most = window.ceil() as usize + 2;
    println!(
        "{} renewals and {} other requests in {window:.1} s at apiQps=1 (at most {at_most}); longest gap between renewals {longest_gap:.2} s",
        renewals.len(),
        work.len()
    );
    // The work was throttled (else this test proves nothing) ...
    assert!(
        (5..=at_most).contains(&work.len()),
        "{} requests of work in {window:.1} s at 1 a second: {described:#?}",
        work.len()
    );
    // ... and the renewals were not.
    assert!(renewals.len() >= 15, "{} renewals in 15 s", renewals.len());
    assert!(longest_gap < 1.5, "longest gap {longest_gap:.2} s");
    assert!(
        !logs.contains("lost leadership"),
        "the leader stepped down: {logs}"
    );
    // Every renewal went through at its first try: none failed on a connection the client
    // itself had timed out.
    assert!(
        !logs.contains("lease update failed") && !logs.contains("lease update timed out"),
        "a renewal failed: {logs}"
    );
    delete_namespaces(&client, &names).await;
}
