#!/usr/bin/env bash
# `make bench`, the fleet part: flotilla against its baselines on a control plane of the bench's
# own (state dir and ports apart from the e2e suite's, so both can run at once).
#   N=2000 e2e/bench/run.sh       (default N=500)
# Other knobs (environment): BENCH_SCRIPT_SAMPLE (50), BENCH_STEADY_SECONDS (120),
# BENCH_QUIET_MAX_SECONDS (max(300, N/2)), BENCH_IDLE_MAX_SECONDS (120), BENCH_TIMEOUT_SECONDS
# (1800), BENCH_FLOTILLA_LOG (RUST_LOG), BENCH_BASELINES (1; 0 runs flotilla's scenarios only),
# BENCH_WORKFLOWS (20000: the Workflows created in the last scenario),
# BENCH_SCENARIOS (a subset, e.g. cold,steady; all by default, but the burst beyond 10,000
# namespaces; e2e/bench/scenarios.rs),
# BENCH_KCM_QPS (kube-controller-manager's client rate limit, burst twice that: 100, and N/25
# beyond N=2500; its default of 20 leaves a large fleet's ReplicaSets and pods minutes behind,
# and at 100 it fell 3,000 Deployments behind at N=10,000),
# BENCH_FLOTILLA_WRAP (a command flotilla runs under, for a profile: BENCH_FLOTILLA_WRAP=heaptrack;
# RSS and CPU are still the flotilla process's, found under the wrapper by its executable).
#
# It prints a table (a row per scenario, notes under it), ratios, and targets, each PASS or MISS:
# cold converge against the limit for the same objects (timed until every namespace's objects
# and fleet view, NamespaceWorker status and `Applied` Event, exist); against the script; zero
# writes at steady state (every write by flotilla but its Lease renewals, which must cover the
# window: else the audit log was not read); reaction p99; flotilla's LISTs per scenario bounded by
# its watches, not N; peak RSS (a MISS if any flotilla scenario has no reading). An audit log that
# cannot be followed (unreadable, shrunk, rotated twice between reads, unparsable lines) marks
# its rows and MISSes the targets that count from it. The bench's flotilla runs with
# degradedAfterSeconds of a day, so that no worker turns Degraded (no kubelet runs pods) during it.
set -euo pipefail
cd "$(dirname "$0")/../.."

export FLOTILLA_E2E_DIR=${FLOTILLA_E2E_DIR:-/tmp/flotilla-bench}
export FLOTILLA_E2E_PORT=${FLOTILLA_E2E_PORT:-26443}
export FLOTILLA_E2E_ETCD_PORT=${FLOTILLA_E2E_ETCD_PORT:-33790}
export FLOTILLA_E2E_ETCD_PEER_PORT=${FLOTILLA_E2E_ETCD_PEER_PORT:-33800}
export FLOTILLA_E2E_KCM_PORT=${FLOTILLA_E2E_KCM_PORT:-20257}
export N=${N:-500}
KCM_QPS=${BENCH_KCM_QPS:-$((N > 2500 ? N / 25 : 100))}
export FLOTILLA_E2E_KCM_ARGS="--kube-api-qps=$KCM_QPS --kube-api-burst=$((2 * KCM_QPS))"
if [ "${FLOTILLA_E2E_DIR%/}" = /tmp/flotilla-e2e ]; then
  echo "bench: refusing to use the e2e suite's state dir /tmp/flotilla-e2e" >&2
  exit 1
fi

# Build first, so that compiling takes no CPU from the control plane being measured.
cargo bench --features e2e --bench fleet --no-run
# The bench brings its control plane up (fresh for each phase) and down; this is for a crash.
trap 'bash e2e/cluster.sh down' EXIT
cargo bench --features e2e --bench fleet
