#!/usr/bin/env bash
# Attaches a CycloneDX SBOM of the binary's crates to the image in an OCI layout, as the OCI 1.1
# way of attaching an artifact to an image does: an artifact manifest (artifactType
# application/vnd.cyclonedx+json) whose `subject` is the image's manifest, listed in the layout's
# index.json beside the image. The image and its digest do not change.
#
#   image/sbom.sh LAYOUT TAG        (image/build.sh runs it; SOURCE_DATE_EPOCH must be set)
#
# The SBOM is cargo-cyclonedx's (pinned in e2e/tools.sh) for the `flotilla` binary from
# Cargo.lock: every crate compiled into it, with version, checksum, licence and purl, and their
# dependency graph; no build-time or dev-only crate. Reproducible: dated SOURCE_DATE_EPOCH,
# with no random serial number (cargo-cyclonedx leaves it out when SOURCE_DATE_EPOCH is set),
# and the checkout's path, the one other thing that differs between two builds, written as `.`.
set -euo pipefail
cd "$(dirname "$0")/.."
layout=$1
tag=$2
: "${SOURCE_DATE_EPOCH:?image/sbom.sh needs SOURCE_DATE_EPOCH}"

log() { printf 'sbom: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

PATH=$(bash e2e/tools.sh path cargo-cyclonedx):$PATH
MEDIA=application/vnd.cyclonedx+json
MANIFEST=application/vnd.oci.image.manifest.v1+json
# The empty config of an artifact manifest: `{}`, as the image spec defines it.
EMPTY='{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2}'

# blob FILE: FILE into the layout's blobs; prints `digest size`.
blob() {
  local hex size
  hex=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  install -m 0644 "$1" "$layout/blobs/sha256/$hex"
  echo "sha256:$hex $size"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/flotilla-sbom.XXXXXX")
trap 'rm -rf "$work"' EXIT

# cargo-cyclonedx writes <bin>_bin.cdx.json beside Cargo.toml.
cargo cyclonedx --quiet --format json --spec-version 1.5 --describe binaries --no-build-deps
mv flotilla_bin.cdx.json "$work/raw.json"
# The checkout as cargo names it (its real path, whatever link the build was started through).
sed 's|path+file://[^#"]*#|path+file://.#|g' "$work/raw.json" >"$work/flotilla.cdx.json"
if grep -qF "$(pwd -P)" "$work/flotilla.cdx.json"; then die "the SBOM still names the checkout's path $(pwd -P)"; fi

# The image's manifest, as umoci listed it in index.json (one line, one manifest).
index=$(cat "$layout/index.json")
image_digest=$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' <<<"$index")
image_size=$(sed -n 's/.*"size":\([0-9]*\).*/\1/p' <<<"$index")
[ -n "$image_digest" ] && [ -n "$image_size" ] || die "no image manifest in $layout/index.json"
[ "$(grep -o '"digest"' <<<"$index" | wc -l)" = 1 ] || die "$layout/index.json lists more than the image"

printf '{}' >"$work/empty.json"
blob "$work/empty.json" >/dev/null
read -r sbom_digest sbom_size < <(blob "$work/flotilla.cdx.json")
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
printf '{"schemaVersion":2,"mediaType":"%s","artifactType":"%s","config":%s,"layers":[{"mediaType":"%s","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.title":"flotilla.cdx.json"}}],"subject":{"mediaType":"%s","digest":"%s","size":%s},"annotations":{"org.opencontainers.image.created":"%s"}}' \
  "$MANIFEST" "$MEDIA" "$EMPTY" "$MEDIA" "$sbom_digest" "$sbom_size" "$MANIFEST" "$image_digest" "$image_size" "$created" \
  >"$work/manifest.json"
read -r manifest_digest manifest_size < <(blob "$work/manifest.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"%s","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}},{"mediaType":"%s","digest":"%s","size":%s,"artifactType":"%s"}]}' \
  "$MANIFEST" "$image_digest" "$image_size" "$tag" "$MANIFEST" "$manifest_digest" "$manifest_size" "$MEDIA" \
  >"$layout/index.json"
log "attached $(grep -o '"bom-ref"' "$work/flotilla.cdx.json" | wc -l) components' SBOM to $tag: $manifest_digest ($sbom_digest)"
