#!/usr/bin/env bash
# A real, throw-away Kubernetes control plane on loopback for the e2e tests:
# etcd + kube-apiserver + kube-controller-manager (no nodes, no kubelet).
#
#   e2e/cluster.sh build    build kube-apiserver/kube-controller-manager from
#                           Debian's kubernetes source package (cached)
#   e2e/cluster.sh up       build, then start everything on 127.0.0.1
#   e2e/cluster.sh down     stop everything we started, remove the state dir
#   e2e/cluster.sh env      print export lines:  eval "$(e2e/cluster.sh env)"
#   e2e/cluster.sh status   print whether each component is up
#
# Host packages come from e2e/deps.sh. Messages go to stderr; `up` and `env`
# print only the export lines on stdout. Everything listens on 127.0.0.1 only.
set -euo pipefail

K8S_VERSION=v1.20.2
CACHE=${FLOTILLA_CACHE:-$HOME/.cache/flotilla}
STATE=${FLOTILLA_E2E_DIR:-/tmp/flotilla-e2e}
PORT=${FLOTILLA_E2E_PORT:-16443}
# Not etcd's default 2379/2380: a system etcd (from etcd-server) may own those.
ETCD_PORT=${FLOTILLA_E2E_ETCD_PORT:-23790}
ETCD_PEER_PORT=${FLOTILLA_E2E_ETCD_PEER_PORT:-23800}
KCM_PORT=${FLOTILLA_E2E_KCM_PORT:-10257}
READY_TIMEOUT=90
# The bench's knobs for kube-controller-manager: extra flags (its client rate limit), and 1 to
# turn off its token controller, as clusters from 1.24 on mint no token Secret per ServiceAccount.
KCM_ARGS=${FLOTILLA_E2E_KCM_ARGS:-}
NO_SA_TOKENS=${FLOTILLA_E2E_NO_SA_TOKENS:-0}

# Bump when the build recipe changes, so that no binary built the old way is reused from the cache.
RECIPE=2
BUILD_ID=k8s-$K8S_VERSION-r$RECIPE
BIN=$CACHE/$BUILD_ID/bin
GO_BIN=/usr/lib/go-1.19/bin
ETCD_BIN=${FLOTILLA_ETCD_BIN:-/usr/bin/etcd}
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

# Write deb-src versions of the machine's `deb` entries into $1 (a SourceParts
# dir). Only the distribution's own suites (codename, codename-*) are kept, so
# unrelated third-party repos don't break `apt-get update`; if that leaves
# nothing, every entry is kept.
derive_src_lists() {
  local out=$1 codename="" f n pass
  # shellcheck disable=SC1091
  codename=$(. /etc/os-release 2>/dev/null && printf '%s' "${VERSION_CODENAME:-}")
  for pass in filtered all; do
    [ "$pass" = filtered ] || codename=""
    n=0
    rm -f "$out"/*
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      n=$((n + 1))
      # deb822: paragraph per entry. Keep every field (Signed-By may span
      # lines), set Types to deb-src, drop disabled or non-matching entries.
      awk -v codename="$codename" '
        BEGIN { RS = ""; FS = "\n" }
        {
          out = ""; isdeb = 0; ok = 1; suites = 0
          for (i = 1; i <= NF; i++) {
            line = $i; low = tolower(line)
            if (line ~ /^#/) continue
            if (low ~ /^types:/) {
              if ((" " substr(line, 7) " ") ~ /[ \t]deb[ \t]/) isdeb = 1
              line = "Types: deb-src"
            } else if (low ~ /^enabled:/) {
              if (tolower(line) ~ /:[ \t]*no[ \t]*$/) ok = 0
            } else if (low ~ /^suites:/ && codename != "") {
              m = split(substr(line, 8), s, /[ \t]+/); kept = ""
              for (j = 1; j <= m; j++)
                if (s[j] == codename || index(s[j], codename "-") == 1) kept = kept " " s[j]
              if (kept == "") ok = 0
              line = "Suites:" kept
            }
            out = out line "\n"
          }
          if (isdeb && ok) printf "%s\n", out
        }' "$f" >"$out/$n.sources"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [ -f "$f" ] || continue
      n=$((n + 1))
      # One-line format: deb [options] URI SUITE COMPONENT...
      awk -v codename="$codename" '
        $1 != "deb" { next }
        {
          i = 2
          if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
          suite = $(i + 1)
          if (codename != "" && suite != codename && index(suite, codename "-") != 1) next
          line = $0; sub(/^[ \t]*deb[ \t]+/, "deb-src ", line); print line
        }' "$f" >"$out/$n.list"
    done
    if grep -qs -e '^deb-src' -e '^Types: deb-src' "$out"/*; then return 0; fi
  done
  die "found no 'deb' entries in /etc/apt/sources.list{,.d/} to derive deb-src entries from"
}

do_build() {
  if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ]; then
    return 0
  fi
  local t0=$SECONDS tmp apt_opts dl orig tree p opt buildlog=$CACHE/$BUILD_ID-build.log
  [ -x "$GO_BIN/go" ] || die "$GO_BIN/go not found; run e2e/deps.sh"
  command -v apt-get >/dev/null || die "apt-get not found (Debian/Ubuntu only)"
  mkdir -p "$CACHE"

  # One build at a time: a second caller waits, then finds the binaries.
  exec 9>"$CACHE/.build.lock"
  flock 9
  if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ]; then
    exec 9>&-
    return 0
  fi

  log "building kube-apiserver + kube-controller-manager $K8S_VERSION (cold: ~4 min on 2 cores; log: $buildlog)"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/flotilla-k8s-build.XXXXXX")
  # The source tree is ~1.5 GB once built; never leave it behind.
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  # apt's download sandbox user (_apt) must be able to reach and write these.
  chmod 0755 "$tmp"
  mkdir -p "$tmp/sources.d" "$tmp/lists/partial" "$tmp/cache" "$tmp/dl"
  if id _apt >/dev/null 2>&1; then chown _apt "$tmp/lists/partial" "$tmp/dl"; fi

  derive_src_lists "$tmp/sources.d"
  # Only through -o options: the machine's own apt config and lists stay untouched.
  apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$tmp/sources.d"
    -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache")
  : >"$buildlog"
  if ! apt-get "${apt_opts[@]}" update >>"$buildlog" 2>&1; then
    log "apt-get update reported errors (see $buildlog); trying the download anyway"
  fi
  dl=$tmp/dl
  (cd "$dl" && apt-get "${apt_opts[@]}" source --download-only kubernetes) >>"$buildlog" 2>&1 ||
    { tail -n 20 "$buildlog" >&2; die "could not download Debian's kubernetes source package"; }
  log "source package: $(sed -n 's/^Version: //p' "$dl"/kubernetes_*.dsc) ($((SECONDS - t0))s)"

  # The main upstream tarball is NAME_VERSION.orig.tar.*; extra component
  # tarballs (if any) are named NAME_VERSION.orig-COMPONENT.tar.*.
  orig=$(find "$dl" -maxdepth 1 -name 'kubernetes_*.orig.tar.*' ! -name '*.asc' | head -n1)
  [ -n "$orig" ] || die "no kubernetes_*.orig.tar.* in the source package"
  mkdir -p "$tmp/src"
  tar -xf "$orig" -C "$tmp/src"
  tree=$(find "$tmp/src" -mindepth 2 -maxdepth 2 -name go.mod -path '*/kubernetes*' -printf '%h\n' | head -n1)
  if [ -z "$tree" ] || [ ! -d "$tree/vendor" ] || [ ! -d "$tree/cmd/kube-apiserver" ]; then
    die "$orig does not look like the kubernetes source tree (with vendor/)"
  fi
  grep -q "tag: $K8S_VERSION'" "$tree/hack/lib/version.sh" ||
    die "$orig is not kubernetes $K8S_VERSION"

  # Apply Debian's patches (security fixes) so the result is Debian's source.
  if tar -xf "$dl"/kubernetes_*.debian.tar.* -C "$tmp" 2>/dev/null && [ -f "$tmp/debian/patches/series" ]; then
    while read -r p opt; do
      case $p in "" | \#*) continue ;; esac
      patch -d "$tree" -s -N "${opt:--p1}" <"$tmp/debian/patches/$p" >>"$buildlog" 2>&1 ||
        die "Debian patch $p did not apply (see $buildlog)"
    done <"$tmp/debian/patches/series"
  fi

  # Kubernetes 1.20 vendors reflect2 1.0.1, whose unsafe map iteration segfaults under Go >= 1.18
  # (kube-apiserver crashes on the first custom resource it encodes). Debian packages the fixed
  # 1.0.2 (golang-github-modern-go-reflect2-dev, installed by e2e/deps.sh); use its source.
  local reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
  [ -f "$reflect2/reflect2.go" ] || die "$reflect2 missing; run e2e/deps.sh"
  rsync -a --delete --exclude '*_test.go' --exclude tests "$reflect2/" "$tree/vendor/github.com/modern-go/reflect2/"

  # Debian's own recipe: a GOPATH with k8s.io/kubernetes -> the tree, make run
  # from the symlinked path. k8s' hack/ scripts force GOPATH mode
  # (GO111MODULE=off) and pick up vendor/ themselves, and point GOCACHE into
  # _output; we link that into the cache dir so an interrupted build resumes.
  mkdir -p "$tmp/gopath/src/k8s.io" "$tree/_output/local/go" "$CACHE/go-build"
  ln -s "$tree" "$tmp/gopath/src/k8s.io/kubernetes"
  ln -s "$CACHE/go-build" "$tree/_output/local/go/cache"
  log "compiling (go $("$GO_BIN/go" env GOVERSION))..."
  if ! (cd "$tmp/gopath/src/k8s.io/kubernetes" &&
    env PATH="$GO_BIN:$PATH" GOPATH="$tmp/gopath" CGO_ENABLED=0 HOME="$tmp" \
      make WHAT="cmd/kube-apiserver cmd/kube-controller-manager") >>"$buildlog" 2>&1; then
    tail -n 30 "$buildlog" >&2
    die "kubernetes build failed (full log: $buildlog)"
  fi

  mkdir -p "$BIN"
  for p in kube-apiserver kube-controller-manager; do
    cp -L "$tree/_output/bin/$p" "$BIN/.$p.tmp"
    mv -f "$BIN/.$p.tmp" "$BIN/$p" # atomic: a half-copied binary is never "cached"
  done
  sed -n 's/^Version: //p' "$dl"/kubernetes_*.dsc >"$CACHE/$BUILD_ID/debian-source-version"
  rm -rf "$tmp" "$CACHE/go-build" # the Go build cache is only worth keeping until success
  trap - EXIT
  exec 9>&-
  log "built $("$BIN/kube-apiserver" --version) in $((SECONDS - t0))s -> $BIN"
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

# Proves the controllers we rely on work: the token controller fills the
# default ServiceAccount with a token Secret, the namespace controller (and
# garbage collector) finish a namespace deletion.
kc() { kubectl --kubeconfig "$STATE/admin.kubeconfig" --request-timeout=10s "$@"; }
sa_has_token() { [ -n "$(kc -n "$1" get serviceaccount default -o 'jsonpath={.secrets[0].name}' 2>/dev/null)" ]; }
ns_gone() { ! kc get namespace "$1" >/dev/null 2>&1; }
smoke_test() {
  local ns=flotilla-e2e-smoke-$RANDOM t0=$SECONDS
  kc create namespace "$ns" >/dev/null
  if [ "$NO_SA_TOKENS" = 1 ]; then
    log "token controller off (FLOTILLA_E2E_NO_SA_TOKENS=1): no token Secrets are minted"
  else
    wait_until "a token Secret for $ns/default" 20 kube-controller-manager sa_has_token "$ns"
  fi
  kc delete namespace "$ns" --wait=false >/dev/null
  wait_until "namespace $ns to be deleted" 30 kube-controller-manager ns_gone "$ns"
  log "controllers work: $([ "$NO_SA_TOKENS" = 1 ] || echo 'SA token + ')namespace deletion in $((SECONDS - t0))s"
}

print_env() {
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
  # etcd 3.4 refuses to start on architectures other than amd64/ppc64le
  # unless told explicitly.
  arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
  case $arch in amd64 | x86_64 | ppc64el | ppc64le) arch="" ;; esac
  # Any ETCD_* in the caller's environment would clash with our flags.
  local envargs=() v
  for v in $(compgen -e); do
    case $v in ETCD_*) envargs+=(-u "$v") ;; esac
  done
  if [ -n "$arch" ]; then envargs+=("ETCD_UNSUPPORTED_ARCH=$arch"); fi
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
  # log. Nothing runs in-cluster here, so the `kubernetes` Service needs none.
  start kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --advertise-address=127.0.0.1 --bind-address=127.0.0.1 --secure-port="$PORT" \
    --cert-dir="$STATE/apiserver-certs" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=RBAC \
    --disable-admission-plugins=ServiceAccount \
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
  # --port=0 turns off 1.20's insecure HTTP port (10252). Delegated authn/authz
  # via the admin kubeconfig, so its secure port (/metrics) accepts our token;
  # skip-lookup because the API server has no front-proxy (requestheader) CA
  # for it to find, which would otherwise be logged as an error every minute.
  local extra
  read -r -a extra <<<"$KCM_ARGS"
  if [ "$NO_SA_TOKENS" = 1 ]; then extra+=("--controllers=*,-serviceaccount-token"); fi
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$STATE/admin.kubeconfig" \
    --authentication-kubeconfig="$STATE/admin.kubeconfig" \
    --authorization-kubeconfig="$STATE/admin.kubeconfig" \
    --authentication-skip-lookup=true \
    --leader-elect=false \
    --service-account-private-key-file="$PKI/sa.key" \
    --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --port=0 \
    --cert-dir="$STATE/kcm-certs" \
    "${extra[@]}"
  wait_until "kube-controller-manager /healthz" 60 kube-controller-manager kcm_healthy
}

do_up() {
  local t0=$SECONDS p arch
  check_state_dir
  do_build
  for p in "$ETCD_BIN" "$BIN/kube-apiserver" "$BIN/kube-controller-manager"; do
    [ -x "$p" ] || die "$p not found (etcd: run e2e/deps.sh)"
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
  env) print_env ;;
  status) do_status ;;
  restart) do_restart "${2:-}" ;;
  *)
    echo "usage: $0 build|up|down|env|status|restart COMPONENT" >&2
    exit 2
    ;;
esac
