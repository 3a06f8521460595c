#!/usr/bin/env bash
# Install the host packages the e2e cluster needs (Debian bookworm, run as root).
# Idempotent: when everything is already installed it only runs dpkg-query.
set -euo pipefail

# The control plane, etcd and Argo's workflow-controller are built from the Go module proxy by
# e2e/build.sh with the machine's Go, not installed here.
# faketime: a replica with a skewed clock in the leader-election tests (libfaketime); make;
# openssl, curl: PKI and health checks; umoci, skopeo: to build flotilla's OCI image without a
# container daemon and copy it to a registry (image/build.sh); ca-certificates: also the image's
# CA bundle; iproute2 (ip) and util-linux (nsenter, unshare): the e2e node stand-in's network and
# mount namespaces (e2e/kubelet/); jq: the README's SBOM command.
PKGS=(faketime make openssl curl ca-certificates umoci skopeo iproute2 util-linux jq)

log() { printf 'deps: %s\n' "$*" >&2; }

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  log "all packages present"
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { log "need root (or sudo) to install: ${missing[*]}"; exit 1; }
  SUDO=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive

# etcd-server's postinst would start a system etcd on 2379/2380. A policy-rc.d that
# returns 101 ("action forbidden") makes invoke-rc.d/deb-systemd-invoke skip that.
# Only install ours if none exists, and always remove ours on exit.
POLICY=/usr/sbin/policy-rc.d
own_policy=0
cleanup() { if [ "$own_policy" = 1 ]; then "${SUDO[@]}" rm -f "$POLICY"; fi; }
trap cleanup EXIT
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$POLICY" >/dev/null
  "${SUDO[@]}" chmod 0755 "$POLICY"
  own_policy=1
fi

log "installing: ${missing[*]}"
# Refresh the lists first: on a fresh machine they may be empty or stale.
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null

# Belt and braces: if a service manager started etcd anyway, stop it again.
if command -v systemctl >/dev/null && systemctl is-active --quiet etcd 2>/dev/null; then
  "${SUDO[@]}" systemctl disable --now etcd >/dev/null 2>&1 || true
fi
if [ -x /etc/init.d/etcd ]; then
  "${SUDO[@]}" /etc/init.d/etcd stop >/dev/null 2>&1 || true
fi
log "done"
