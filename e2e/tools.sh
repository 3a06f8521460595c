#!/usr/bin/env bash
# Builds the host tools the chart, alert and image checks need, from package registries only
# (no release downloads): helm and promtool from the Go module proxy, cargo-cyclonedx from
# crates.io. Each is pinned below and cached under
#   ${FLOTILLA_CACHE:-$HOME/.cache/flotilla}/tools/<name>-<version>/bin
# so it is built once per machine (CI caches that directory).
#
#   e2e/tools.sh [env] [NAME...]   build what is missing; print `export PATH=...` (eval it)
#   e2e/tools.sh path [NAME...]    build what is missing; print the bin directories, ':'-joined
#
# Idempotent: a tool already built costs a directory test. A lock per tool makes a second caller
# wait for the first one's build instead of building it again; a build goes to a temporary
# directory and is moved into place whole, so an interrupted one leaves nothing half-built.
# Needs a Go of 1.21 or newer (GOTOOLCHAIN=auto then fetches the Go a module asks for from the
# module proxy) and cargo.
set -euo pipefail

# name  version  how it is built
TOOLS=(
  "helm v4.3.2 go"
  "promtool v0.316.0 go"
  "cargo-cyclonedx 0.5.9 cargo"
)

cache=${FLOTILLA_CACHE:-$HOME/.cache/flotilla}/tools
log() { printf 'tools: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The Go package and linker flags of each Go tool, as its own release build sets them, so that
# `helm version` and `promtool --version` say what they are.
go_package() {
  case $1 in
    helm) echo "helm.sh/helm/v4/cmd/helm@$2" ;;
    promtool) echo "github.com/prometheus/prometheus/cmd/promtool@$2" ;;
  esac
}
go_ldflags() {
  case $1 in
    helm) echo "-s -w -X helm.sh/helm/v4/internal/version.version=$2 -X helm.sh/helm/v4/internal/version.metadata=" ;;
    # Prometheus tags its Go module v0.3MM.P for release 3.MM.P.
    promtool)
      local minor=${2#v0.3}
      echo "-s -w -X github.com/prometheus/common/version.Version=3.${minor%%.*}.${minor#*.}"
      ;;
  esac
}

find_go() {
  local go
  for go in go /usr/local/go/bin/go $(ls -d /usr/lib/go-1.*/bin/go 2>/dev/null | sort -V -r); do
    command -v "$go" >/dev/null || continue
    # go1.21 and newer can switch to the toolchain a module needs.
    if "$go" env GOVERSION | awk -F'[go.]' '{ exit !($3 > 1 || ($3 == 1 && $4 >= 21)) }'; then
      echo "$go"
      return
    fi
  done
  die "no Go 1.21 or newer found (PATH, /usr/local/go, /usr/lib/go-1.*)"
}

# build NAME VERSION KIND DIR: the tool into DIR/bin.
build() {
  local name=$1 version=$2 kind=$3 dir=$4
  case $kind in
    go)
      local go
      go=$(find_go)
      GOBIN=$dir/bin GOTOOLCHAIN=auto CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
        "$go" install -trimpath -ldflags "$(go_ldflags "$name" "$version")" \
        "$(go_package "$name" "$version")"
      ;;
    cargo)
      command -v cargo >/dev/null || die "cargo not found"
      CARGO_TARGET_DIR=$dir/target cargo install --quiet --locked --root "$dir" \
        --version "$version" "$name"
      rm -rf "$dir/target" "$dir/.crates.toml" "$dir/.crates2.json"
      ;;
  esac
}

# ensure NAME VERSION KIND: prints the tool's bin directory, building it first if missing.
ensure() {
  local name=$1 version=$2 kind=$3
  local home=$cache/$name-$version
  if [ ! -x "$home/bin/$name" ]; then
    mkdir -p "$cache"
    exec 9>"$cache/$name-$version.lock"
    flock 9
    # Built by another caller while this one waited for the lock.
    if [ ! -x "$home/bin/$name" ]; then
      local tmp start
      tmp=$(mktemp -d "$cache/.$name-$version.XXXXXX")
      start=$(date +%s)
      log "building $name $version (once; cached in $home)"
      if ! build "$name" "$version" "$kind" "$tmp" >&2; then
        rm -rf "$tmp"
        die "building $name $version failed"
      fi
      rm -rf "$home"
      mv "$tmp" "$home"
      log "built $name $version in $(($(date +%s) - start)) s"
    fi
    exec 9>&-
  fi
  echo "$home/bin"
}

mode=env
case ${1:-} in
  env | path) mode=$1; shift ;;
esac
wanted=("$@")
for name in "${wanted[@]}"; do
  printf '%s\n' "${TOOLS[@]}" | grep -q "^$name " || die "unknown tool $name (known: helm, promtool, cargo-cyclonedx)"
done
dirs=()
for entry in "${TOOLS[@]}"; do
  read -r name version kind <<<"$entry"
  if [ "${#wanted[@]}" -gt 0 ] && ! printf '%s\n' "${wanted[@]}" | grep -qx "$name"; then
    continue
  fi
  dirs+=("$(ensure "$name" "$version" "$kind")")
done
joined=$(IFS=:; echo "${dirs[*]}")
case $mode in
  env) echo "export PATH=\"$joined:\$PATH\"" ;;
  path) echo "$joined" ;;
esac
