#!/usr/bin/env bash
# A real, throw-away Kubernetes control plane on loopback for the e2e tests:
# etcd + kube-apiserver + kube-controller-manager (no nodes: e2e/kubelet/ stands in for one).
#
#   e2e/cluster.sh build    build kube-apiserver, kube-controller-manager and etcd from the
#                           Go module proxy (e2e/build.sh; cached)
#   e2e/cluster.sh up       build, then start everything on 127.0.0.1
#   e2e/cluster.sh down     stop everything we started, remove the state dir
#   e2e/cluster.sh env      print export lines:  eval "$(e2e/cluster.sh env)"
#   e2e/cluster.sh status   print whether each component is up
#   e2e/cluster.sh restart COMPONENT   stop one component and start it again (fault tests)
#
# Host packages come from e2e/deps.sh. Messages go to stderr; `up` and `env`
# print only the export lines on stdout. Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=${FLOTILLA_E2E_DIR:-/tmp/flotilla-e2e}
PORT=${FLOTILLA_E2E_PORT:-16443}
# Not etcd's default 2379/2380: another etcd on the machine may own those.
ETCD_PORT=${FLOTILLA_E2E_ETCD_PORT:-23790}
ETCD_PEER_PORT=${FLOTILLA_E2E_ETCD_PEER_PORT:-23800}
KCM_PORT=${FLOTILLA_E2E_KCM_PORT:-10257}
READY_TIMEOUT=90
# The bench's knob for kube-controller-manager: extra flags (its client rate limit).
KCM_ARGS=${FLOTILLA_E2E_KCM_ARGS:-}

BIN=
ETCD_BIN=
PKI=$STATE/pki
LOGS=$STATE/logs
# Marks a directory as ours, so `down` never rm -rf's anything else.
MARKER=.flotilla-e2e-state
# Start order; `down` stops them in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager)

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------- helpers --

# Refuse to operate on a state dir that is obviously not ours (rm -rf below).
check_state_dir() {
  case $STATE in
    /*) ;;
    *) die "FLOTILLA_E2E_DIR must be an absolute path (got '$STATE')" ;;
  esac
  case ${STATE%/} in
    "" | /tmp | "$HOME" | /root | /home | /usr | /etc | /var) die "refusing to use '$STATE' as state dir" ;;
  esac
  if [ -d "$STATE" ] && [ ! -e "$STATE/$MARKER" ] && [ -n "$(ls -A "$STATE")" ]; then
    die "$STATE exists, is not empty and was not created by this script"
  fi
}

# Base name of the executable of a pid ("" if gone); /proc/PID/comm is cut at 15 chars.
pid_exe() {
  local exe
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 0
  exe=${exe% (deleted)}
  printf '%s' "${exe##*/}"
}

# True if PID runs binary NAME with our state dir on its command line (guards
# against pid reuse and against touching anyone else's etcd/apiserver).
is_ours() {
  local pid=$1 name=$2 cmdline
  [ -n "$pid" ] && [ "$(pid_exe "$pid")" = "$name" ] || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *"$STATE/"* ]]
}

pid_of() { cat "$STATE/$1.pid" 2>/dev/null || true; }

running() { is_ours "$(pid_of "$1")" "$1"; }

# All live processes of ours, found via /proc, even if a pid file was lost.
our_pids() {
  local d pid name
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    name=$(pid_exe "$pid")
    case $name in
      etcd | kube-apiserver | kube-controller-manager)
        if is_ours "$pid" "$name"; then printf '%s %s\n' "$pid" "$name"; fi ;;
    esac
  done
}

token() { cut -d, -f1 "$STATE/tokens.csv"; }

etcd_healthy() { curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }

apiserver_ready() {
  [ -s "$STATE/tokens.csv" ] || return 1
  [ "$(curl -fsS --max-time 3 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(token)" \
    "https://127.0.0.1:$PORT/readyz" 2>/dev/null)" = ok ]
}

# KCM serves a self-signed cert of its own; /healthz needs no credentials.
kcm_healthy() { [ "$(curl -fsSk --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null)" = ok ]; }

healthy() {
  case $1 in
    etcd) etcd_healthy ;;
    kube-apiserver) apiserver_ready ;;
    kube-controller-manager) kcm_healthy ;;
  esac
}

all_up() {
  local c
  for c in "${COMPONENTS[@]}"; do running "$c" && healthy "$c" || return 1; done
}

# wait_until DESC TIMEOUT COMPONENT CMD...: poll CMD, fail fast if COMPONENT died.
wait_until() {
  local desc=$1 timeout=$2 comp=$3 start=$SECONDS
  shift 3
  until "$@"; do
    if [ -n "$comp" ] && ! running "$comp"; then
      log "$comp exited while waiting for $desc; last log lines:"
      tail -n 30 "$LOGS/$comp.log" >&2 || true
      return 1
    fi
    if ((SECONDS - start >= timeout)); then
      log "timed out after ${timeout}s waiting for $desc; last log lines:"
      [ -z "$comp" ] || tail -n 30 "$LOGS/$comp.log" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start NAME CMD...: run in its own session (so it survives the calling shell's
# process group), log to $LOGS/NAME.log, pid in $STATE/NAME.pid.
start() {
  local name=$1 pid tries=0
  shift
  setsid "$@" </dev/null >"$LOGS/$name.log" 2>&1 &
  pid=$!
  echo "$pid" >"$STATE/$name.pid"
  # Until the child has exec'd, /proc shows it as bash or setsid, and `running` would call a
  # component that is only starting "exited".
  while kill -0 "$pid" 2>/dev/null && [ "$(pid_exe "$pid")" != "$name" ] && ((tries++ < 100)); do
    sleep 0.05
  done
}

# TERM, then KILL after a few seconds.
stop_pid() {
  local pid=$1 name=$2 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 50); do
    is_ours "$pid" "$name" || return 0
    sleep 0.2
  done
  log "$name ($pid) ignored SIGTERM; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 25); do
    is_ours "$pid" "$name" || return 0
    sleep 0.2
  done
}

# ------------------------------------------------------------------ build --

# The binaries, built once from the Go module proxy (e2e/build.sh says how and where).
do_build() {
  local dir
  dir=$(bash e2e/build.sh path kubernetes) || die "could not build kubernetes (e2e/build.sh)"
  BIN=$dir/bin
  dir=$(bash e2e/build.sh path etcd) || die "could not build etcd (e2e/build.sh)"
  ETCD_BIN=${FLOTILLA_ETCD_BIN:-$dir/bin/etcd}
  # kubectl of the same release, ahead of any other on the PATH (client and server in step).
  export PATH="$BIN:$PATH"
}

# --------------------------------------------------------------------- up --

gen_pki() {
  mkdir -p "$PKI"
  chmod 0700 "$PKI"
  (
    cd "$PKI"
    umask 077
    cat >ca.cnf <<'EOF'
[req]
distinguished_name = dn
prompt = no
x509_extensions = v3_ca
[dn]
CN = flotilla-e2e-ca
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EOF
    # A proper v3 leaf: webpki (rustls) rejects CA certs as server certs, certs
    # without a SAN matching the host, and v1 certs.
    cat >apiserver.cnf <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = kube-apiserver
[v3_leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
EOF
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -sha256 -days 3650 -key ca.key -config ca.cnf -out ca.crt
    openssl genrsa -out apiserver.key 2048 2>/dev/null
    openssl req -new -sha256 -key apiserver.key -config apiserver.cnf -out apiserver.csr
    openssl x509 -req -sha256 -days 825 -in apiserver.csr -CA ca.crt -CAkey ca.key \
      -set_serial "0x$(openssl rand -hex 16)" -extfile apiserver.cnf -extensions v3_leaf \
      -out apiserver.crt 2>/dev/null
    openssl verify -x509_strict -purpose sslserver -CAfile ca.crt apiserver.crt >/dev/null
    # Service-account token signing key pair.
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    chmod 0644 ca.crt apiserver.crt sa.pub
  )
}

write_kubeconfig() {
  local f=$STATE/admin.kubeconfig
  (
    umask 077
    cat >"$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: flotilla-e2e
  cluster:
    server: https://127.0.0.1:$PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: admin
  user:
    token: $(token)
contexts:
- name: flotilla-e2e
  context:
    cluster: flotilla-e2e
    user: admin
current-context: flotilla-e2e
EOF
  )
}

# Proves the controllers we rely on work: the namespace controller (and garbage collector)
# finish a namespace deletion.
kc() { kubectl --kubeconfig "$STATE/admin.kubeconfig" --request-timeout=10s "$@"; }
ns_gone() { ! kc get namespace "$1" >/dev/null 2>&1; }
smoke_test() {
  local ns=flotilla-e2e-smoke-$RANDOM t0=$SECONDS
  kc create namespace "$ns" >/dev/null
  kc delete namespace "$ns" --wait=false >/dev/null
  wait_until "namespace $ns to be deleted" 30 kube-controller-manager ns_gone "$ns"
  log "controllers work: namespace deletion in $((SECONDS - t0))s"
}

print_env() {
  printf 'export PATH=%q\n' "$BIN:$PATH"
  printf 'export KUBECONFIG=%q\n' "$STATE/admin.kubeconfig"
  printf 'export FLOTILLA_E2E_DIR=%q\n' "$STATE"
  printf 'export FLOTILLA_E2E_PORT=%q\n' "$PORT"
}

on_up_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    log "up failed; stopping what was started (logs kept in $LOGS)"
    stop_all || true
  fi
}

# One function per component, so `restart` can start one again the same way.
start_etcd() {
  # Any ETCD_* in the caller's environment would clash with our flags.
  local envargs=() v
  for v in $(compgen -e); do
    case $v in ETCD_*) envargs+=(-u "$v") ;; esac
  done
  start etcd env "${envargs[@]}" \
    "$ETCD_BIN" --name flotilla-e2e --data-dir "$STATE/etcd" --logger zap \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "flotilla-e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster-state new
  wait_until "etcd health" 30 etcd etcd_healthy
}

start_kube-apiserver() {
  # --endpoint-reconciler-type=none: Endpoints may not hold loopback IPs, so the
  # default reconciler would fail (HTTP 422) every 10 s, spamming log and audit
  # log. Pods reach the API server through the node stand-in (e2e/kubelet/), not the
  # `kubernetes` Service.
  start kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --advertise-address=127.0.0.1 --bind-address=127.0.0.1 --secure-port="$PORT" \
    --cert-dir="$STATE/apiserver-certs" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=Node,RBAC \
    --allow-privileged=true \
    --token-auth-file="$STATE/tokens.csv" \
    --service-account-issuer="https://127.0.0.1:$PORT" \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --audit-policy-file="$STATE/audit-policy.yaml" \
    --audit-log-path="$STATE/audit.log" --audit-log-maxsize=200 \
    --endpoint-reconciler-type=none
  wait_until "kube-apiserver /readyz" "$READY_TIMEOUT" kube-apiserver apiserver_ready
}

start_kube-controller-manager() {
  # Delegated authn/authz via the admin kubeconfig, so its secure port (/metrics) accepts our
  # token; skip-lookup because the API server has no front-proxy (requestheader) CA for it to
  # find, which would otherwise be logged as an error every minute. No node here sends
  # heartbeats the way a kubelet does, so the node lifecycle controller, which would taint the
  # stand-in's node and evict its pods, is off.
  local extra
  read -r -a extra <<<"$KCM_ARGS"
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$STATE/admin.kubeconfig" \
    --authentication-kubeconfig="$STATE/admin.kubeconfig" \
    --authorization-kubeconfig="$STATE/admin.kubeconfig" \
    --authentication-skip-lookup=true \
    --leader-elect=false \
    --controllers='*,-node-lifecycle-controller' \
    --service-account-private-key-file="$PKI/sa.key" \
    --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
    --cert-dir="$STATE/kcm-certs" \
    "${extra[@]}"
  wait_until "kube-controller-manager /healthz" 60 kube-controller-manager kcm_healthy
}

do_up() {
  local t0=$SECONDS p arch
  check_state_dir
  do_build
  for p in "$ETCD_BIN" "$BIN/kube-apiserver" "$BIN/kube-controller-manager"; do
    [ -x "$p" ] || die "$p not found"
  done
  for p in openssl curl setsid base64; do
    command -v "$p" >/dev/null || die "$p not found; run e2e/deps.sh"
  done

  if all_up; then
    log "already running (state: $STATE)"
    print_env
    return 0
  fi
  if [ -e "$STATE" ]; then
    log "cleaning up stale state in $STATE"
    do_down
  fi
  for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$PORT" "$KCM_PORT"; do
    port_free "$p" || die "127.0.0.1:$p is already in use by another process"
  done

  mkdir -p "$STATE" "$LOGS" "$STATE/etcd"
  touch "$STATE/$MARKER"
  chmod 0700 "$STATE/etcd"
  # If anything below fails, stop what was started (logs stay for a look).
  trap on_up_exit EXIT

  gen_pki
  (umask 077 && printf '%s,admin,admin,system:masters\n' "$(openssl rand -hex 16)" >"$STATE/tokens.csv")
  cat >"$STATE/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages:
  - RequestReceived
rules:
  - level: Metadata
EOF

  start_etcd

  start_kube-apiserver
  write_kubeconfig
  if command -v kubectl >/dev/null; then
    kubectl --kubeconfig "$STATE/admin.kubeconfig" get namespaces >/dev/null ||
      die "kubectl cannot talk to the API server with $STATE/admin.kubeconfig"
  fi

  start_kube-controller-manager
  if command -v kubectl >/dev/null; then smoke_test; fi

  trap - EXIT
  log "up in $((SECONDS - t0))s: https://127.0.0.1:$PORT (state: $STATE)"
  print_env
}

# ------------------------------------------------------------------- down --

# Reverse start order: an API server whose etcd is gone hangs on SIGTERM.
stop_all() {
  local i c pid name left
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    c=${COMPONENTS[i]}
    pid=$(pid_of "$c")
    if is_ours "$pid" "$c"; then stop_pid "$pid" "$c"; fi
    rm -f "$STATE/$c.pid"
    # Also any of ours whose pid file was lost (e.g. `up` killed mid-way).
    while read -r pid name; do
      [ "$name" = "$c" ] || continue
      log "stopping leftover $name ($pid)"
      stop_pid "$pid" "$name"
    done < <(our_pids)
  done
  left=$(our_pids)
  [ -z "$left" ] || die "still running after SIGKILL: $left"
  # Pods the node stand-in ran (e2e/kubelet/), should a test have died without stopping them:
  # each is chrooted into a root filesystem under the state dir.
  for d in /proc/[0-9]*; do
    root=$(readlink "$d/root" 2>/dev/null) || continue
    case $root in "$STATE"/*) kill -KILL "${d#/proc/}" 2>/dev/null || true ;; esac
  done
}

do_down() {
  check_state_dir
  [ -e "$STATE" ] || { log "nothing to stop ($STATE does not exist)"; return 0; }
  stop_all
  rm -rf "$STATE"
  log "down; removed $STATE"
}

# ---------------------------------------------------------- env / status --

# Stops one running component and starts it again, for fault tests (a restarted API server or
# etcd); the others keep running.
do_restart() {
  local name=$1
  case " ${COMPONENTS[*]} " in *" $name "*) ;; *) die "restart: one of ${COMPONENTS[*]}" ;; esac
  all_up || die "restart: the control plane is not up"
  do_build
  stop_pid "$(pid_of "$name")" "$name"
  "start_$name"
  log "restarted $name"
}

do_status() {
  local c state all=0
  for c in "${COMPONENTS[@]}"; do
    if ! running "$c"; then
      state="down"
      all=1
    elif healthy "$c"; then
      state="up (pid $(pid_of "$c"))"
    else
      state="running but not healthy (pid $(pid_of "$c"))"
      all=1
    fi
    printf '%-24s %s\n' "$c" "$state"
  done
  return $all
}

case ${1:-} in
  build) do_build ;;
  up) do_up ;;
  down) do_down ;;
  env)
    do_build
    print_env
    ;;
  status) do_status ;;
  restart) do_restart "${2:-}" ;;
  *)
    echo "usage: $0 build|up|down|env|status|restart COMPONENT" >&2
    exit 2
    ;;
esac
