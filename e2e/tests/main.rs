//! End-to-end tests against the real local control plane from `e2e/cluster.sh` (etcd,
//! kube-apiserver, kube-controller-manager). flotilla runs as a process under the token of its
//! own ServiceAccount, bound to the ClusterRole from manifests/. Run with `make test`.

mod admission_policy;
mod argo_server;
mod argo_world;
mod audit;
mod cold_restart;
#[path = "../common.rs"]
mod common;
mod controller_knobs;
mod failures;
mod faults;
mod fleet_budget;
mod fleet_budget_stuck;
mod fleet_budget_transition;
mod fleet_pod;
mod fleet_view;
mod handover;
mod harness;
mod helm;
mod image;
mod install;
#[path = "../kubelet/mod.rs"]
mod kubelet;
mod leadership;
mod live_config;
mod model;
mod monitoring;
mod pod;
#[path = "../../src/telemetry/queries.rs"]
mod queries;
mod real_argo;
mod reap_window;
mod rollout;
mod rollout_faults;
mod rollout_replicas;
mod rollout_safety;
mod sbom;
mod scenarios;
mod security;
mod shed;
mod sleep;
mod sleep_failover;
mod workflows;
