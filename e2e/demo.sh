#!/usr/bin/env bash
# The main job on the local control plane (started by `make demo`): install flotilla from
# manifests/ and Argo's CRDs, run flotilla under its own ServiceAccount's token, opt a namespace
# in, show what was stamped, and run a Workflow on the controller flotilla stamped there.
# `e2e/demo.sh down` stops flotilla and the node stand-in again.
#
# The local control plane has no kubelet. flotilla's own Deployment from manifests/ stays Pending;
# the same binary runs here as a local process instead, with the same identity. The node
# stand-in (e2e/node.rs) runs the stamped workflow-controller pods as local processes, from their
# own pod spec, with Argo's workflow-controller built from source (e2e/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash e2e/cluster.sh env)"
STATE=$FLOTILLA_E2E_DIR
PIDFILE=$STATE/flotilla-demo.pid
NODE_PIDFILE=$STATE/node-demo.pid
LOG=$STATE/logs/flotilla-demo.log
NODE_LOG=$STATE/logs/node-demo.log
NS=team-a
BIN=${CARGO_TARGET_DIR:-target}/release/flotilla
NODE=${CARGO_TARGET_DIR:-target}/release/examples/node
ARGO=$(bash e2e/build.sh path argo)

stop() {
  local f
  for f in "$PIDFILE" "$NODE_PIDFILE"; do
    if [ -f "$f" ]; then
      kill "$(cat "$f")" 2>/dev/null || true
      # The node drains on SIGTERM: its controller processes stop, its Node is removed.
      for _ in $(seq 1 100); do kill -0 "$(cat "$f")" 2>/dev/null || break; sleep 0.1; done
      rm -f "$f"
    fi
  done
}
if [ "${1:-}" = down ]; then
  stop
  exit 0
fi

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Installing flotilla: kubectl apply -k manifests/"
kubectl apply -k manifests/

step "Installing Argo's CRDs (v4.0.5, the release built): kubectl apply --server-side -f $ARGO/crds"
kubectl apply --server-side --force-conflicts -f "$ARGO/crds" >/dev/null
kubectl wait --for condition=established --timeout=60s crd/workflows.argoproj.io

step "A token for ServiceAccount flotilla-system/flotilla: kubectl create token"
token=$(kubectl -n flotilla-system create token flotilla --duration=24h)
SA_KUBECONFIG=$STATE/flotilla.kubeconfig
cp "$KUBECONFIG" "$SA_KUBECONFIG"
kubectl --kubeconfig "$SA_KUBECONFIG" config set-credentials admin --token="$token" >/dev/null
for check in "list namespaces" "patch deployments/workflow-controller -n $NS" "patch deployments/coredns -n kube-system" "get secrets -n $NS" "create clusterroles"; do
  # shellcheck disable=SC2086 # the check is several words on purpose
  printf 'flotilla can %-50s %s\n' "$check:" "$(kubectl --kubeconfig "$SA_KUBECONFIG" auth can-i $check 2>/dev/null || true)"
done

step "Starting flotilla run (log: $LOG)"
stop
KUBECONFIG=$SA_KUBECONFIG nohup "$BIN" run --config flotilla.yaml --http-address 127.0.0.1:18080 >"$LOG" 2>&1 &
echo $! >"$PIDFILE"
for _ in $(seq 1 100); do
  grep -q "initial sync complete" "$LOG" && break
  sleep 0.2
done
grep -q "initial sync complete" "$LOG" || { cat "$LOG" >&2; echo "flotilla did not start" >&2; exit 1; }

step "Opting namespace $NS in: kubectl label namespace $NS flotilla.dev/enabled=true"
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$NS" flotilla.dev/enabled=true --overwrite
for _ in $(seq 1 100); do
  kubectl -n "$NS" get deployment workflow-controller >/dev/null 2>&1 && break
  sleep 0.2
done

step "What flotilla stamped for $NS"
kubectl -n "$NS" get serviceaccounts,configmaps,roles,rolebindings,services,deployments \
  -l app.kubernetes.io/managed-by=flotilla -L flotilla.dev/namespace
echo
kubectl -n "$NS" get deployment workflow-controller \
  -o 'custom-columns=DEPLOYMENT:.metadata.name,IMAGE:.spec.template.spec.containers[0].image,REVISION:.metadata.annotations.flotilla\.dev/revision'

step "The node stand-in runs $NS's controller from its stamped pod (log: $NODE_LOG)"
image=$(kubectl -n "$NS" get deployment workflow-controller -o 'jsonpath={.spec.template.spec.containers[0].image}')
nohup "$NODE" --kubeconfig "$KUBECONFIG" --image "$image" --argo "$ARGO" --dir "$STATE/node-demo" >"$NODE_LOG" 2>&1 &
echo $! >"$NODE_PIDFILE"
kubectl -n "$NS" rollout status deployment/workflow-controller --timeout=120s
kubectl -n "$NS" get pods -o wide

step "The fleet: kubectl get namespaceworkers"
kubectl wait nsw/"$NS" --for=jsonpath='{.status.phase}'=Ready --timeout=60s >/dev/null
kubectl get nsw -o wide

step "A Workflow in $NS, run by $NS's own controller: kubectl create -f examples/pauses.yaml"
workflow=$(kubectl -n "$NS" create -f examples/pauses.yaml -o name)
kubectl -n "$NS" wait "$workflow" --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s >/dev/null
kubectl -n "$NS" get workflows

cat <<TXT

flotilla and the node stand-in keep running (pids $(cat "$PIDFILE"), $(cat "$NODE_PIDFILE")). Try:
  export KUBECONFIG=$KUBECONFIG
  kubectl -n $NS delete deployment workflow-controller     # comes back as soon as flotilla sees it gone
  kubectl label namespace $NS flotilla.dev/enabled-          # opt out: everything is reaped
  kubectl get nsw $NS -o yaml                                # status, conditions, stamped objects
  curl -s 127.0.0.1:18080/metrics | grep ^flotilla_           # the operator's own metrics
  tail -f $LOG
  tail -f $STATE/node-demo/${NS}_workflow-controller-*/container.log   # the controller's own log
  make demo-down                                             # stop flotilla and the control plane
TXT
