#!/usr/bin/env bash
# The main job on the local control plane (started by `make demo`): install flotilla from
# manifests/, run it under its own ServiceAccount's token, opt a namespace in, and show what
# was stamped.  `e2e/demo.sh down` stops the flotilla process again.
#
# The local control plane has no kubelet, so the flotilla Deployment from manifests/ stays
# Pending; the same binary runs here as a local process instead, with the same identity.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash e2e/cluster.sh env)"
STATE=$FLOTILLA_E2E_DIR
PIDFILE=$STATE/flotilla-demo.pid
LOG=$STATE/logs/flotilla-demo.log
NS=${DEMO_NAMESPACE:-team-a}
BIN=${CARGO_TARGET_DIR:-target}/release/flotilla

stop() {
  if [ -f "$PIDFILE" ]; then
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
}
if [ "${1:-}" = down ]; then
  stop
  exit 0
fi

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Installing flotilla: kubectl apply -k manifests/"
kubectl apply -k manifests/

step "Fetching the token of ServiceAccount flotilla-system/flotilla"
for _ in $(seq 1 120); do
  secret=$(kubectl -n flotilla-system get serviceaccount flotilla -o 'jsonpath={.secrets[0].name}')
  [ -n "$secret" ] && break
  sleep 0.5
done
[ -n "$secret" ] || { echo "no token secret for flotilla's ServiceAccount" >&2; exit 1; }
token=$(kubectl -n flotilla-system get secret "$secret" -o 'go-template={{.data.token | base64decode}}')
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

step "The fleet: kubectl get namespaceworkers"
sleep 1
kubectl get nsw -o wide

cat <<TXT

flotilla keeps running (pid $(cat "$PIDFILE")). Try:
  export KUBECONFIG=$KUBECONFIG
  kubectl -n $NS delete deployment workflow-controller     # comes back within a second
  kubectl label namespace $NS flotilla.dev/enabled-          # opt out: everything is reaped
  kubectl get nsw $NS -o yaml                                # status, conditions, stamped objects
  curl -s 127.0.0.1:18080/metrics | grep ^flotilla_           # the operator's own metrics
  tail -f $LOG
  make demo-down                                             # stop flotilla and the control plane
TXT
