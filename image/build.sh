#!/usr/bin/env bash
# Builds flotilla's OCI image from a release build, without a container daemon (`make image`):
#
#   image/build.sh   ->  ${CARGO_TARGET_DIR:-target}/image, an OCI layout tagged with the crate
#                        version, e.g.  skopeo copy oci:target/image:0.1.0 docker://REGISTRY/flotilla:0.1.0
#
# The image holds the binary, the shared libraries `ldd` lists for it, the CA certificates, and an
# /etc/passwd and /etc/group naming the nonroot user (65532:65532) it runs as: nothing else (no
# shell, no package manager), so there is little to patch and nothing to exec into.
#
# Reproducible: the same commit, toolchain and Debian packages (libc6, libgcc-s1,
# ca-certificates) give the same digest. Each file is copied with a fixed mode, owned by root,
# dated SOURCE_DATE_EPOCH (the commit's time unless set); umoci writes the layer's entries sorted
# by path, without atime, ctime or user names, gzip'ed without a name or time; the image config
# and its history are dated SOURCE_DATE_EPOCH too.
#
# Attached beside the image in the layout (not in it): a CycloneDX SBOM of the binary's crates,
# as reproducible as the image (image/sbom.sh; README, "The image's SBOM").
#
# umoci (Debian's, 0.4.7) builds the layer from a bundle with `unpack` + `repack`. Its `insert`
# would be shorter but writes layers without tar's end-of-archive blocks (fixed in umoci 0.5.0),
# which GNU tar and image scanners reject.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022

TARGET=${CARGO_TARGET_DIR:-target}
OUT=$TARGET/image
ENTRYPOINT=/usr/local/bin/flotilla
NONROOT=65532

log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

for tool in umoci ldd install; do
  command -v "$tool" >/dev/null || die "$tool not found; run e2e/deps.sh"
done
[ -f /etc/ssl/certs/ca-certificates.crt ] || die "no CA bundle; run e2e/deps.sh (ca-certificates)"

# --locked: the image is built from the committed Cargo.lock, never a freshly resolved one.
cargo build --release --locked
bin=$TARGET/release/flotilla

# The labels come from the binary itself, so they always name what it was built from.
read -r _ version _ commit <<<"$("$bin" --version)"
commit=${commit%)}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD 2>/dev/null) ||
    die "not a git checkout: set SOURCE_DATE_EPOCH"
fi
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  log "warning: uncommitted changes; the image is labelled $commit but holds them"
fi
# Where the source lives: Cargo.toml's `repository`, or IMAGE_SOURCE.
source=${IMAGE_SOURCE:-$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml)}
if [ -z "$source" ]; then
  log "warning: no repository in Cargo.toml (nor IMAGE_SOURCE): org.opencontainers.image.source=unknown"
  source=unknown
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/flotilla-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
layout=$work/layout
umoci init --layout "$layout"
umoci new --image "$layout:$version"
umoci unpack --image "$layout:$version" "$work/bundle"
root=$work/bundle/rootfs

# put MODE FILE PATH: FILE's content (a symlink followed) at PATH in the image.
put() { install -D -m "$1" "$2" "$root$3"; }

put 0755 "$bin" "$ENTRYPOINT"
# The dynamic loader and every library, at the paths the loader looks them up by.
libs=$(ldd "$bin") || die "ldd $bin failed"
if grep -q 'not found' <<<"$libs"; then die "missing libraries: $libs"; fi
while read -r lib; do
  put 0755 "$lib" "$lib"
done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$libs")
put 0644 /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
put 0644 <(printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/nonexistent:/sbin/nologin\n' $NONROOT $NONROOT) /etc/passwd
put 0644 <(printf 'root:x:0:\nnonroot:x:%s:\n' $NONROOT) /etc/group
chown -R 0:0 "$root"
find "$root" -type d -exec chmod 0755 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

umoci repack --image "$layout:$version" --history.created "$created" \
  --history.created_by "image/build.sh" --history.comment "flotilla $version ($commit)" "$work/bundle"
umoci config --image "$layout:$version" --no-history --created "$created" \
  --config.user "$NONROOT:$NONROOT" --config.entrypoint "$ENTRYPOINT" --config.workingdir / \
  --config.label "org.opencontainers.image.title=flotilla" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.revision=$commit" \
  --config.label "org.opencontainers.image.source=$source" \
  --config.label "org.opencontainers.image.created=$created"
umoci gc --layout "$layout"
SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH bash image/sbom.sh "$layout" "$version"

rm -rf "$OUT"
mkdir -p "$(dirname "$OUT")"
mv "$layout" "$OUT"
# The image's manifest is the first in index.json (the SBOM's follows it).
digest=$(grep -o '"digest":"sha256:[0-9a-f]*"' "$OUT/index.json" | head -n1 | cut -d'"' -f4)
log "flotilla $version ($commit): $OUT:$version, $digest, $(du -sb "$OUT/blobs" | cut -f1) bytes"
log "push: skopeo copy oci:$OUT:$version docker://REGISTRY/flotilla:$version"
