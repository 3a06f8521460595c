//! A property test against the real control plane: random sequences of opt-in, opt-out, label
//! changes, values changes, namespace deletions, and flotilla stopping, being killed and
//! starting again (with changes made while it was down), each followed by a check of the
//! model: "each opted-in namespace holds exactly its rendered objects (one of them outside the
//! namespace, which only flotilla can clean up) and a NamespaceWorker at the current revision;
//! nothing else carries our labels or has a NamespaceWorker; an object flotilla did not create
//! is unchanged".
//!
//! Every sequence covers what a short random walk can miss: an opted-in namespace deleted, a
//! values change with namespaces opted in, and a start after changes made while flotilla was
//! down. `make test` runs FLOTILLA_MODEL_CASES (default 3) sequences of FLOTILLA_MODEL_STEPS
//! (default 16) steps from a fresh seed each run; the seed is printed, and FLOTILLA_MODEL_SEED
//! replays a run.

use crate::harness::*;
use flotilla::status::{NamespaceWorker, Phase};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

/// xorshift64*: reproducible from the printed seed, no dependency.
struct Rng(u64);

impl Rng {
    /// Seeds through splitmix64, so that neighbouring seeds give unrelated sequences.
    fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    OptIn(usize),
    OptOut(usize),
    OtherLabelValue(usize),
    ChangeValues,
    DeleteNamespace(usize),
    /// SIGTERM; the steps after it happen while flotilla is down.
    Stop,
    /// kill -9 and start again, or start if it was down.
    Restart,
}

const NAMESPACES: usize = 4;

/// What the test knows of the world, stepped alongside it.
#[derive(Clone, Default)]
struct Model {
    exists: [bool; NAMESPACES],
    opted_in: [bool; NAMESPACES],
    down: bool,
}

impl Model {
    fn apply(&mut self, step: Step) {
        match step {
            Step::OptIn(i) | Step::OptOut(i) | Step::OtherLabelValue(i) => {
                self.exists[i] = true;
                self.opted_in[i] = step == Step::OptIn(i);
            }
            Step::DeleteNamespace(i) => {
                self.exists[i] = false;
                self.opted_in[i] = false;
            }
            Step::Stop => self.down = true,
            Step::Restart => self.down = false,
            Step::ChangeValues => {}
        }
    }
}

/// What one sequence must contain to check what a random walk may skip.
#[derive(Default)]
struct Coverage {
    deleted_opted_in: bool,
    values_changed_with_fleet: bool,
    started_after_changes: bool,
}

fn draw_step(rng: &mut Rng, down: bool) -> Step {
    let i = rng.next(NAMESPACES);
    match rng.next(11) {
        0..=2 => Step::OptIn(i),
        3 | 4 => Step::OptOut(i),
        5 => Step::OtherLabelValue(i),
        6 => Step::ChangeValues,
        7 | 8 => Step::DeleteNamespace(i),
        9 if !down => Step::Stop,
        _ => Step::Restart,
    }
}

/// A sequence of `steps` that covers everything in [`Coverage`]: drawn again until it does.
fn sequence(rng: &mut Rng, steps: usize) -> Vec<Step> {
    for _ in 0..10_000 {
        let (mut model, mut covered) = (Model::default(), Coverage::default());
        let mut changed_while_down = false;
        let mut drawn = Vec::with_capacity(steps);
        for _ in 0..steps {
            let step = draw_step(rng, model.down);
            match step {
                Step::DeleteNamespace(i) if model.opted_in[i] => covered.deleted_opted_in = true,
                Step::ChangeValues if model.opted_in.contains(&true) => {
                    covered.values_changed_with_fleet = true
                }
                Step::Restart if model.down && changed_while_down => {
                    covered.started_after_changes = true
                }
                _ => {}
            }
            changed_while_down = match step {
                Step::Stop | Step::Restart => false,
                _ => changed_while_down || model.down,
            };
            model.apply(step);
            drawn.push(step);
        }
        let Coverage {
            deleted_opted_in,
            values_changed_with_fleet,
            started_after_changes,
        } = covered;
        if deleted_opted_in && values_changed_with_fleet && started_after_changes {
            return drawn;
        }
    }
    panic!("no sequence of {steps} steps covers the model's cases: use more steps");
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test]
async fn random_sequences_keep_the_model() {
    let cases = env_number("FLOTILLA_MODEL_CASES", 3);
    let steps = env_number("FLOTILLA_MODEL_STEPS", 16);
    let fresh = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let first_seed = env_number("FLOTILLA_MODEL_SEED", fresh);
    println!("model: FLOTILLA_MODEL_SEED={first_seed} replays this run");
    for case in 0..cases {
        let seed = first_seed.wrapping_add(case);
        println!("model case {case}: seed {seed}, {steps} steps");
        run_case(seed, steps as usize).await;
    }
    println!("model cases run: {cases} x {steps} steps");
}

async fn run_case(seed: u64, steps: usize) {
    let client = admin().await;
    let mut rng = Rng::new(seed);
    // Names of their own per case: a case never sees the namespaces of the one before.
    let mut fleet = Fleet::new(&format!("model{:06x}", rng.next(1 << 24)));
    fleet.add_template("outside.yaml", OUTSIDE_TEMPLATE);
    // Its names depend on the namespace: an admin grants what they cost.
    let _grant = outside_grant();
    let names: Vec<String> = (0..NAMESPACES)
        .map(|i| format!("{}-{i}", fleet.instance))
        .collect();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut model = Model::default();
    let mut untouchable: BTreeMap<String, String> = BTreeMap::new();
    let mut flotilla = Some(fleet.start());
    for (n, step) in sequence(&mut rng, steps).into_iter().enumerate() {
        println!(
            "  step {n}: {step:?}{}",
            if model.down { " (flotilla down)" } else { "" }
        );
        match step {
            Step::OptIn(i) | Step::OptOut(i) | Step::OtherLabelValue(i) => {
                let value = match step {
                    Step::OptIn(_) => Some("on"),
                    Step::OptOut(_) => None,
                    _ => Some("off"),
                };
                if model.exists[i] {
                    let patch = Patch::Merge(fleet.opt_in_patch(value));
                    namespaces
                        .patch(&names[i], &PatchParams::default(), &patch)
                        .await
                        .unwrap();
                } else {
                    fleet
                        .namespace(&client, &names[i], value == Some("on"))
                        .await;
                    untouchable.insert(
                        names[i].clone(),
                        plant_foreign_object(&client, &names[i]).await,
                    );
                }
            }
            Step::ChangeValues => {
                let parallelism = fleet.values["parallelism"].as_i64().unwrap_or(50);
                fleet.values["parallelism"] = (if parallelism == 50 { 60 } else { 50 }).into();
                // Written by the next start (a running flotilla is restarted with them; a live
                // edit is e2e/tests/live_config.rs's).
                if flotilla.take().is_some() {
                    flotilla = Some(fleet.start());
                }
            }
            Step::DeleteNamespace(i) => {
                if model.exists[i] {
                    namespaces
                        .delete(&names[i], &DeleteParams::default())
                        .await
                        .unwrap();
                    eventually_within(
                        Duration::from_secs(120),
                        &format!("{} gone", names[i]),
                        || async {
                            namespaces
                                .get_opt(&names[i])
                                .await
                                .ok()?
                                .is_none()
                                .then_some(())
                        },
                    )
                    .await;
                    untouchable.remove(&names[i]);
                }
            }
            Step::Stop => {
                if let Some(running) = flotilla.take() {
                    running.stop();
                }
            }
            Step::Restart => {
                if let Some(running) = flotilla.take() {
                    running.kill();
                }
                flotilla = Some(fleet.start());
            }
        }
        model.apply(step);
        if !model.down {
            check_model(&client, &fleet, &names, &model, &untouchable).await;
        }
    }
    if model.down {
        println!("  end: flotilla starts again");
        flotilla = Some(fleet.start());
        model.down = false;
        check_model(&client, &fleet, &names, &model, &untouchable).await;
    }
    drop(flotilla);
    for (i, name) in names.iter().enumerate() {
        if model.exists[i] {
            let _ = namespaces.delete(name, &DeleteParams::default()).await;
        }
    }
}

/// An unlabelled ConfigMap in the namespace: flotilla must never change or delete it.
async fn plant_foreign_object(client: &kube::Client, namespace: &str) -> String {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("not-flotillas".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("owner".into(), "someone".into())])),
        ..ConfigMap::default()
    };
    cms.create(&PostParams::default(), &cm)
        .await
        .unwrap()
        .resource_version()
        .unwrap()
}

async fn check_model(
    client: &kube::Client,
    fleet: &Fleet,
    names: &[String],
    model: &Model,
    untouchable: &BTreeMap<String, String>,
) {
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    for (name, &on) in names.iter().zip(&model.opted_in) {
        if on {
            let rendered = fleet.render(name, &[]);
            let revision = rendered[0]["metadata"]["annotations"]["flotilla.dev/revision"]
                .as_str()
                .unwrap()
                .to_string();
            fleet.wait_stamped(client, name).await;
            eventually(
                &format!("{name}'s NamespaceWorker at revision {revision}"),
                || async {
                    let status = workers.get_opt(name).await.ok()??.status?;
                    let healthy = !matches!(status.phase, Phase::RenderFailed | Phase::Conflict);
                    (status.revision == revision && healthy).then_some(())
                },
            )
            .await;
        } else {
            fleet.wait_reaped(client, name).await;
            eventually(&format!("{name} without a NamespaceWorker"), || async {
                workers.get_opt(name).await.ok()?.is_none().then_some(())
            })
            .await;
        }
    }
    for (namespace, version) in untouchable {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let cm = cms.get("not-flotillas").await.unwrap();
        assert_eq!(
            cm.resource_version().as_deref(),
            Some(version.as_str()),
            "{namespace}/not-flotillas changed"
        );
    }
    // Nothing with our labels beyond the model's namespaces.
    let strays = fleet.stamped_for_any(client).await;
    let known: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    for owner in &strays {
        assert!(
            known.contains(owner.as_str()),
            "stamped for unknown namespace {owner}"
        );
    }
}
