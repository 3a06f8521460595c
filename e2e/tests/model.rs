//! A property test against the real control plane: random sequences of opt-in, opt-out, label
//! changes, values changes, namespace deletions and flotilla restarts, each followed by a check
//! of the model "stamped objects = the rendered objects of the currently opted-in namespaces,
//! nothing else carries our labels, and an object flotilla did not create is unchanged".
//!
//! `make test` runs FLOTILLA_MODEL_CASES (default 1) sequences of FLOTILLA_MODEL_STEPS (default
//! 24) steps; the seed is printed, and FLOTILLA_MODEL_SEED replays one.

use crate::harness::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

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

#[derive(Debug, Clone, Copy)]
enum Step {
    OptIn(usize),
    OptOut(usize),
    OtherLabelValue(usize),
    ChangeValues,
    DeleteNamespace(usize),
    Restart,
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test]
async fn random_sequences_keep_the_model() {
    let cases = env_number("FLOTILLA_MODEL_CASES", 1);
    let steps = env_number("FLOTILLA_MODEL_STEPS", 24);
    let first_seed = env_number("FLOTILLA_MODEL_SEED", 0x5eed_f107_111a);
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
    let names: Vec<String> = (0..4).map(|i| format!("{}-{i}", fleet.instance)).collect();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut exists = vec![false; names.len()];
    let mut opted_in = vec![false; names.len()];
    let mut untouchable: BTreeMap<String, String> = BTreeMap::new();
    let mut flotilla = Some(fleet.start());
    for step in 0..steps {
        let action = match rng.next(10) {
            0..=2 => Step::OptIn(rng.next(names.len())),
            3 | 4 => Step::OptOut(rng.next(names.len())),
            5 => Step::OtherLabelValue(rng.next(names.len())),
            6 => Step::ChangeValues,
            7 | 8 => Step::DeleteNamespace(rng.next(names.len())),
            _ => Step::Restart,
        };
        println!("  step {step}: {action:?}");
        match action {
            Step::OptIn(i) | Step::OptOut(i) | Step::OtherLabelValue(i) => {
                let value = match action {
                    Step::OptIn(_) => Some("on"),
                    Step::OptOut(_) => None,
                    _ => Some("off"),
                };
                if exists[i] {
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
                    exists[i] = true;
                }
                opted_in[i] = value == Some("on");
            }
            Step::ChangeValues => {
                let parallelism = fleet.values["parallelism"].as_i64().unwrap_or(50);
                fleet.values["parallelism"] = (if parallelism == 50 { 60 } else { 50 }).into();
                drop(flotilla.take());
                flotilla = Some(fleet.start());
            }
            Step::DeleteNamespace(i) => {
                if exists[i] {
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
                    exists[i] = false;
                    opted_in[i] = false;
                }
            }
            Step::Restart => {
                if let Some(running) = flotilla.take() {
                    running.kill();
                }
                flotilla = Some(fleet.start());
            }
        }
        check_model(&client, &fleet, &names, &opted_in, &untouchable).await;
    }
    drop(flotilla);
    for (i, name) in names.iter().enumerate() {
        if exists[i] {
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
    opted_in: &[bool],
    untouchable: &BTreeMap<String, String>,
) {
    for (name, &on) in names.iter().zip(opted_in) {
        if on {
            let rendered = fleet.render(name, &[]);
            let want: BTreeSet<(String, String)> = rendered
                .iter()
                .map(|o| {
                    let hash = o["metadata"]["annotations"]["flotilla.dev/hash"]
                        .as_str()
                        .unwrap_or_default();
                    (
                        o["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        hash.to_string(),
                    )
                })
                .collect();
            eventually(
                &format!("{name} to hold exactly its rendered set"),
                || async {
                    let have: BTreeSet<(String, String)> = fleet
                        .stamped_for(client, name)
                        .await
                        .iter()
                        .map(|o| {
                            (
                                o.name_any(),
                                o.annotations()
                                    .get("flotilla.dev/hash")
                                    .cloned()
                                    .unwrap_or_default(),
                            )
                        })
                        .collect();
                    (have == want).then_some(())
                },
            )
            .await;
        } else {
            fleet.wait_reaped(client, name).await;
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
