//! Rollouts on the real control plane: revisions reach the fleet canaries first, a few
//! namespaces at a time, each only once the one before is healthy; a bad revision stops or
//! rolls back; pause holds across a failover; undo returns the fleet. The pods are marked
//! ready (the suite has no kubelet: e2e/kubelet/ready_marker.rs stands in) only when they run an image the
//! test accepts.

use crate::harness::*;
use crate::kubelet::ReadyMarker;
use flotilla::rollout::Phase;
use flotilla::rollout::fleet::Fleet as FleetObject;
use flotilla::status::{NamespaceWorker, Phase as WorkerPhase};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, ResourceExt};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

pub(crate) const IMAGE: &str = "quay.io/argoproj/workflow-controller";

/// What the cluster shows of one namespace: its controller Deployment's image and whether the
/// Deployment is healthy (the new generation runs, no old pod left), and its worker's phase.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Seen {
    pub image: String,
    pub healthy: bool,
    pub worker: Option<WorkerPhase>,
}

pub(crate) async fn look(client: &kube::Client, names: &[String]) -> BTreeMap<String, Seen> {
    let deployments: Api<Deployment> = Api::all(client.clone());
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    let listed = deployments
        .list(&ListParams::default().labels("app.kubernetes.io/name=workflow-controller"))
        .await
        .unwrap();
    let phases: BTreeMap<String, WorkerPhase> = workers
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|w| Some((w.name_any(), w.status?.phase)))
        .collect();
    let mut seen = BTreeMap::new();
    for d in listed.items {
        let ns = d.namespace().unwrap_or_default();
        if !names.contains(&ns) {
            continue;
        }
        let image = d
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let healthy = flotilla::status::availability(&serde_json::to_value(&d).unwrap())
            .is_some_and(|h| h.is_available());
        let worker = phases.get(&ns).copied();
        seen.insert(
            ns,
            Seen {
                image,
                healthy,
                worker,
            },
        );
    }
    seen
}

/// Samples the fleet every 200 ms until stopped: the most namespaces seen updating or unhealthy
/// at once, and when each first ran `image`.
struct Watcher {
    task: JoinHandle<()>,
    peak: Arc<Mutex<usize>>,
    first_at: Arc<Mutex<BTreeMap<String, Instant>>>,
}

impl Watcher {
    fn start(client: &kube::Client, names: &[String], image: &str) -> Watcher {
        let peak = Arc::new(Mutex::new(0));
        let first_at = Arc::new(Mutex::new(BTreeMap::new()));
        let (client, names, image) = (client.clone(), names.to_vec(), image.to_string());
        let (p, f) = (Arc::clone(&peak), Arc::clone(&first_at));
        let task = tokio::spawn(async move {
            loop {
                let seen = look(&client, &names).await;
                let unavailable = seen
                    .values()
                    .filter(|s| !s.healthy || s.worker != Some(WorkerPhase::Ready))
                    .count();
                {
                    let mut peak = p.lock().unwrap();
                    *peak = (*peak).max(unavailable);
                    let mut first = f.lock().unwrap();
                    for (ns, s) in &seen {
                        if s.image == image {
                            first.entry(ns.clone()).or_insert_with(Instant::now);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Watcher {
            task,
            peak,
            first_at,
        }
    }

    fn stop(self) -> (usize, BTreeMap<String, Instant>) {
        self.task.abort();
        let peak = *self.peak.lock().unwrap();
        let first = self.first_at.lock().unwrap().clone();
        (peak, first)
    }
}

/// Waits until the Fleet's rollout of revision `target` is in `phase`; on a timeout, says what
/// the Fleet showed last.
pub(crate) async fn wait_fleet_phase(
    client: &kube::Client,
    instance: &str,
    target: i64,
    phase: Phase,
    within: Duration,
) -> FleetObject {
    let started = Instant::now();
    loop {
        let fleet = fleet_object(client, instance).await;
        let status = fleet.as_ref().and_then(|f| f.status.as_ref());
        if status.is_some_and(|s| s.phase == phase && s.target_revision == target) {
            return fleet.unwrap();
        }
        assert!(
            started.elapsed() < within,
            "timed out after {within:?} waiting for Fleet {instance} {phase:?} at revision {target}; it shows {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The test's strategy: `progress_deadline` seconds for a namespace to turn healthy. Short
/// where a failure is the point; generous where it is not, since a busy CI machine takes a while
/// to create, schedule and report a pod.
fn strategy(progress_deadline: u64, on_failure: &str) -> serde_json::Value {
    serde_json::json!({"canary": "tier=canary", "maxUnavailable": 5, "soakSeconds": 2,
        "progressDeadlineSeconds": progress_deadline, "onFailure": on_failure})
}

/// Waits until every namespace runs `image`, healthy, with its worker Ready.
pub(crate) async fn wait_all_at(client: &kube::Client, names: &[String], image: &str) {
    eventually_within(
        Duration::from_secs(180),
        &format!("every namespace at {image}, ready"),
        || async {
            let seen = look(client, names).await;
            (seen.len() == names.len()
                && seen
                    .values()
                    .all(|s| s.image == image && s.healthy && s.worker == Some(WorkerPhase::Ready)))
            .then_some(())
        },
    )
    .await;
}

/// `flotilla rollout status --watch`'s exit code, waited for without blocking the test's
/// runtime: the ReadyMarker task has to go on marking pods ready meanwhile.
async fn watch_rollout(fleet: &Fleet, limit: Duration) -> i32 {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["rollout", "status", "--watch", "--config"])
        .arg(fleet.config_file())
        .env("KUBECONFIG", &env().flotilla_kubeconfig)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("flotilla rollout status --watch still waiting after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) fn with_image(fleet: &mut Fleet, tag: &str) -> String {
    let image = format!("{IMAGE}:{tag}");
    fleet.values["controllerImage"] = serde_json::json!(image);
    image
}

#[tokio::test]
async fn a_good_revision_rolls_out_canaries_first_a_bad_one_stops_or_rolls_back() {
    let client = admin().await;
    let mut fleet = Fleet::new("rollout").with("rollout", strategy(120, "Pause"));
    let names: Vec<String> = (0..40).map(|i| format!("rollout-{i:02}")).collect();
    // Canaries that sort neither first nor together: they go first for their label alone.
    let canaries = ["rollout-17", "rollout-33"];
    forget_revisions(&client, &fleet.instance).await;
    let v1 = with_image(&mut fleet, "v1");
    let kubelet = ReadyMarker::start(&client, "rollout-", &[&v1]);
    for name in &names {
        let mut labels = BTreeMap::from([(fleet.label.clone(), "on".to_string())]);
        if canaries.contains(&name.as_str()) {
            labels.insert("tier".into(), "canary".into());
        }
        create_namespace(&client, name, labels, BTreeMap::new()).await;
    }
    let flotilla = fleet.start();
    wait_all_at(&client, &names, &v1).await;
    wait_fleet_phase(
        &client,
        &fleet.instance,
        1,
        Phase::Complete,
        Duration::from_secs(60),
    )
    .await;
    flotilla.stop();

    // A good image: the canaries, then five at a time.
    let v2 = with_image(&mut fleet, "v2");
    kubelet.accept(&v2);
    let watcher = Watcher::start(&client, &names, &v2);
    let flotilla = fleet.start();
    let started = Instant::now();
    // What an admin sees mid-rollout (the README shows it).
    eventually_within(
        Duration::from_secs(120),
        "ten namespaces updated",
        || async {
            let status = fleet_object(&client, &fleet.instance).await?.status?;
            let updated: usize = status.updated.split('/').next()?.parse().ok()?;
            (status.target_revision == 2 && updated >= 10).then_some(())
        },
    )
    .await;
    println!(
        "{}",
        kubectl(&env().admin_kubeconfig, &["get", "fleet", &fleet.instance])
    );
    let done = wait_fleet_phase(
        &client,
        &fleet.instance,
        2,
        Phase::Complete,
        Duration::from_secs(300),
    )
    .await;
    let took = started.elapsed();
    wait_all_at(&client, &names, &v2).await;
    let (peak, first_at) = watcher.stop();
    let status = done.status.unwrap();
    assert_eq!(
        (status.updated.as_str(), status.ready.as_str()),
        ("40/40", "40/40")
    );
    let canaries_last = canaries.iter().map(|c| first_at[*c]).max().unwrap();
    let others_first = first_at
        .iter()
        .filter(|(ns, _)| !canaries.contains(&ns.as_str()))
        .map(|(_, t)| *t)
        .min()
        .unwrap();
    assert!(
        canaries_last < others_first,
        "a namespace ran {v2} before the canaries"
    );
    assert!(peak <= 5, "{peak} namespaces updating or unhealthy at once");
    assert!(
        peak >= 3,
        "the watcher saw at most {peak} namespaces move at once"
    );
    println!(
        "40 namespaces, maxUnavailable 5: complete in {took:?}, peak {peak} unavailable; {} pods marked ready",
        kubelet.marked.lock().unwrap()
    );
    let table = kubectl(&env().admin_kubeconfig, &["get", "fleet", &fleet.instance]);
    println!("{table}");
    assert!(
        table.contains("40/40") && table.contains("Complete"),
        "{table}"
    );
    assert_eq!(fleet.cli(&["rollout", "status"]).0, 0);
    flotilla.stop();

    // A bad image: its pods never become ready. The canaries fail, and nothing else moves.
    fleet
        .settings
        .insert("rollout".into(), strategy(20, "Pause"));
    let bad = with_image(&mut fleet, "bad");
    let flotilla = fleet.start();
    let failed = wait_fleet_phase(
        &client,
        &fleet.instance,
        3,
        Phase::Failed,
        Duration::from_secs(120),
    )
    .await;
    let status = failed.status.unwrap();
    // Budget 0: the first canary to miss its deadline stops the rollout.
    assert!(
        !status.failed_namespaces.is_empty()
            && status
                .failed_namespaces
                .iter()
                .all(|n| canaries.contains(&n.as_str())),
        "{:?}",
        status.failed_namespaces
    );
    let seen = look(&client, &names).await;
    for (ns, s) in &seen {
        let want = if canaries.contains(&ns.as_str()) {
            &bad
        } else {
            &v2
        };
        assert_eq!(&s.image, want, "{ns}");
    }
    let (code, out) = fleet.cli(&["rollout", "status"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Failed"), "{out}");
    // The namespaces waiting their turn are still repaired, at the revision they run.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "rollout-05");
    deployments
        .delete("workflow-controller", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted Deployment back at v2", || async {
        let seen = look(&client, &["rollout-05".to_string()]).await;
        (seen.get("rollout-05")?.image == v2).then_some(())
    })
    .await;
    flotilla.stop();

    // Past the budget with onFailure: Rollback, the canaries return to the stable revision.
    fleet
        .settings
        .insert("rollout".into(), strategy(20, "Rollback"));
    let worse = with_image(&mut fleet, "worse");
    let flotilla = fleet.start();
    eventually("the canaries to run the worse image", || async {
        let seen = look(&client, &names).await;
        canaries
            .iter()
            .all(|c| seen.get(*c).is_some_and(|s| s.image == worse))
            .then_some(())
    })
    .await;
    let rolled = wait_fleet_phase(
        &client,
        &fleet.instance,
        4,
        Phase::RolledBack,
        Duration::from_secs(120),
    )
    .await;
    println!("{}", rolled.status.unwrap().message);
    wait_all_at(&client, &names, &v2).await;
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}

#[tokio::test]
async fn pause_holds_across_a_failover_resume_completes_and_undo_returns() {
    let client = admin().await;
    let mut fleet = Fleet::new("pause")
        .with(
            "rollout",
            serde_json::json!({"maxUnavailable": 1, "soakSeconds": 2}),
        )
        .with(
            "leaderElection",
            serde_json::json!({"enabled": true, "leaseDurationSeconds": 4}),
        );
    let names: Vec<String> = (0..10).map(|i| format!("pause-{i:02}")).collect();
    forget_revisions(&client, &fleet.instance).await;
    let v1 = with_image(&mut fleet, "v1");
    let kubelet = ReadyMarker::start(&client, "pause-", &[&v1]);
    for name in &names {
        fleet.namespace(&client, name, true).await;
    }
    let flotilla = fleet.start();
    wait_all_at(&client, &names, &v1).await;
    wait_fleet_phase(
        &client,
        &fleet.instance,
        1,
        Phase::Complete,
        Duration::from_secs(60),
    )
    .await;
    flotilla.stop();

    let v2 = with_image(&mut fleet, "v2");
    kubelet.accept(&v2);
    let dir = tempfile::tempdir().unwrap();
    let a = fleet.start();
    eventually("replica a to lead", || async {
        a.leads().await.then_some(())
    })
    .await;
    let b = fleet.start_as("b", &standby_kubeconfig(dir.path()));
    let at_v2 = || async {
        look(&client, &names)
            .await
            .values()
            .filter(|s| s.image == v2)
            .count()
    };
    eventually("three namespaces at v2", || async {
        (at_v2().await >= 3).then_some(())
    })
    .await;
    assert_eq!(fleet.cli(&["rollout", "pause"]).0, 0);
    wait_fleet_phase(
        &client,
        &fleet.instance,
        2,
        Phase::Paused,
        Duration::from_secs(10),
    )
    .await;
    // What was moving when the pause came may still land; then nothing moves.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = at_v2().await;
    assert!(held < names.len(), "all moved before the pause");
    a.kill();
    eventually("replica b to lead", || async {
        b.leads().await.then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        at_v2().await,
        held,
        "the new leader moved namespaces of a paused rollout"
    );
    let (code, out) = fleet.cli(&["rollout", "status"]);
    assert_eq!(code, 1, "paused: {out}");
    assert!(out.contains("Paused"), "{out}");

    assert_eq!(fleet.cli(&["rollout", "resume"]).0, 0);
    assert_eq!(watch_rollout(&fleet, Duration::from_secs(120)).await, 0);
    wait_all_at(&client, &names, &v2).await;

    let (code, history) = fleet.cli(&["rollout", "history"]);
    assert_eq!(code, 0);
    println!("{history}");
    assert!(history.contains("values.controllerImage"), "{history}");
    assert_eq!(fleet.cli(&["rollout", "undo"]).0, 0);
    wait_all_at(&client, &names, &v1).await;
    // Undone: revision 1 is the target again, and it completes.
    let undone = wait_fleet_phase(
        &client,
        &fleet.instance,
        1,
        Phase::Complete,
        Duration::from_secs(120),
    )
    .await;
    let uid = undone.uid().unwrap();
    for reason in ["RolloutProgressing", "RolloutPaused", "RolloutComplete"] {
        eventually(&format!("a {reason} Event on the Fleet"), || async {
            let found = events(&client, "Fleet", &uid, reason).await;
            (!found.is_empty()).then_some(())
        })
        .await;
    }

    // A newer revision ends the undo: an edit of the running config is revision 3, the target,
    // and the undo's spec.revision is cleared.
    let v3 = with_image(&mut fleet, "v3");
    kubelet.accept(&v3);
    fleet.config_file();
    let newer = wait_fleet_phase(
        &client,
        &fleet.instance,
        3,
        Phase::Complete,
        Duration::from_secs(180),
    )
    .await;
    assert_eq!(
        newer.spec.revision, None,
        "the undo outlived a newer revision"
    );
    wait_all_at(&client, &names, &v3).await;
    b.stop();
    delete_namespaces_and_wait(&client, &names).await;
}
