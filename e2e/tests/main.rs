//! End-to-end tests against the real local control plane from `e2e/cluster.sh` (etcd,
//! kube-apiserver, kube-controller-manager). flotilla runs as a process under the token of its
//! own ServiceAccount, bound to the ClusterRole from manifests/. Run with `make test`.

mod argo_server;
mod audit;
mod cold_restart;
#[path = "../common.rs"]
mod common;
mod controller_knobs;
mod failures;
mod faults;
mod fleet_pod;
mod fleet_view;
mod harness;
mod image;
mod install;
#[path = "../kubelet.rs"]
mod kubelet;
mod leadership;
mod live_config;
mod model;
mod pod;
mod rollout;
mod scenarios;
mod security;
mod workflows;
