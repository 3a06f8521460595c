#!/usr/bin/env bash
# Builds the programs the e2e control plane runs, from modules of the Go module proxy, once:
#
#   kubernetes  kube-apiserver, kube-controller-manager, (k8s.io/kubernetes, e2e/build/kubernetes)
#               kubectl of the same release
#   etcd        etcd                                     (go.etcd.io/etcd/server/v3, e2e/build/etcd)
#   argo        workflow-controller, and Argo's CRDs      (github.com/argoproj/argo-workflows/v4,
#               from the same module                      e2e/build/argo)
#
#   e2e/build.sh [NAME...]   build what is missing (all three by default)
#   e2e/build.sh path NAME   print the directory of NAME's build (bin/, and for argo crds/)
#
# Each e2e/build/NAME is a Go module whose go.mod and go.sum pin every module version: the build
# is the same on every machine, and `go` verifies each download against go.sum. The output goes to
# ${FLOTILLA_CACHE:-~/.cache/flotilla}/build/NAME-<hash of e2e/build/NAME and this recipe>, so a
# change to either builds afresh and never reuses an old binary. Messages go to stderr.
#
# k8s.io/kubernetes's own go.mod replaces its staging modules (k8s.io/api, client-go, ...) with
# paths inside its repository, which a module download does not carry; e2e/build/kubernetes/go.mod
# pins each of them to the release's published v0.x version instead.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${FLOTILLA_CACHE:-$HOME/.cache/flotilla}
# Bump when the commands below change.
RECIPE=1
K8S_VERSION=v1.37.2
ARGO_VERSION=v4.0.5

log() { printf 'build: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The directory NAME's build goes to: named after the content of its module and this recipe.
build_dir() {
  local name=$1 hash
  [ -d "e2e/build/$name" ] || die "no build named '$name' (kubernetes, etcd, argo)"
  hash=$( (cat "e2e/build/$name"/*; printf 'recipe %s %s %s\n' "$RECIPE" "$K8S_VERSION" "$ARGO_VERSION") |
    sha256sum | cut -c1-12)
  printf '%s/build/%s-%s' "$CACHE" "$name" "$hash"
}

# go, offline from any toolchain download, with every module version checked against go.sum.
go_build() {
  local module=$1 out=$2 ldflags=$3
  shift 3
  (cd "e2e/build/$module" &&
    env CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
      go build -trimpath -ldflags "-s -w $ldflags" -o "$out/" "$@")
}

compile() {
  local name=$1 out=$2
  case $name in
    kubernetes)
      local v=k8s.io/component-base/version minor=${K8S_VERSION#v1.}
      minor=${minor%%.*}
      go_build kubernetes "$out/bin" \
        "-X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kubectl
      ;;
    etcd)
      go_build etcd "$out/bin" "" .
      ;;
    argo)
      local v=github.com/argoproj/argo-workflows/v4 module
      go_build argo "$out/bin" "-X $v.version=$ARGO_VERSION -X $v.gitTag=$ARGO_VERSION -X $v.gitTreeState=clean" \
        "$v/cmd/workflow-controller"
      # The CRDs of the very release built: the README's install applies the same directory.
      module=$(cd e2e/build/argo && GOTOOLCHAIN=local go list -m -f '{{.Dir}}' "$v")
      mkdir -p "$out/crds"
      cp "$module"/manifests/base/crds/full/argoproj.io_*.yaml "$out/crds/"
      chmod u+w "$out"/crds/*
      ;;
  esac
}

build() {
  local name=$1 dir t0=$SECONDS
  dir=$(build_dir "$name")
  [ -e "$dir/.done" ] && return 0
  command -v go >/dev/null || die "go not found (the machine's Go toolchain is needed)"
  mkdir -p "$CACHE/build"
  # One build at a time per name: a second caller waits, then finds it done.
  exec 9>"$CACHE/build/.$name.lock"
  flock 9
  if [ ! -e "$dir/.done" ]; then
    log "building $name into $dir (cold: see CONTRIBUTING.md for the times; log: $dir.log)"
    rm -rf "$dir" "$dir.tmp"
    mkdir -p "$dir.tmp"
    if ! compile "$name" "$dir.tmp" >"$dir.log" 2>&1; then
      tail -n 30 "$dir.log" >&2
      rm -rf "$dir.tmp"
      die "building $name failed (full log: $dir.log)"
    fi
    touch "$dir.tmp/.done"
    mv "$dir.tmp" "$dir" # atomic: a half-built directory is never taken for a build
    log "built $name in $((SECONDS - t0))s"
  fi
  exec 9>&-
}

case ${1:-} in
  path)
    [ $# -eq 2 ] || die "usage: $0 path kubernetes|etcd|argo"
    build "$2"
    build_dir "$2"
    echo
    ;;
  "") for n in kubernetes etcd argo; do build "$n"; done ;;
  *) for n in "$@"; do build "$n"; done ;;
esac
