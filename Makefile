# flotilla: `make demo` and `make test` are all a fresh machine needs.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
CLUSTER := bash e2e/cluster.sh

.PHONY: build image test lint unit check-manifests manifests e2e demo demo-down deps

build:
	cargo build --release

deps:
	bash e2e/deps.sh

# flotilla's OCI image, built without a daemon: an OCI layout in $CARGO_TARGET_DIR/image (default target/image),
# tagged with the crate version (image/build.sh says what is in it and why).
image: deps
	bash image/build.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets --features e2e -- -D warnings

unit:
	cargo test --lib --bins

manifests:
	bash manifests/generate.sh

# The generated ConfigMaps in manifests/ must match flotilla.yaml and templates/, and the
# Deployment must run the image `make image` tags (the crate version).
check-manifests:
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	bash manifests/generate.sh "$$tmp"; \
	diff -ru manifests/generated "$$tmp" || { echo "manifests/generated is stale: run make manifests"; exit 1; }; \
	echo "manifests/generated is up to date"
	version=$$(sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n1); \
	grep -q "^ *image: flotilla:$$version$$" manifests/deployment.yaml || \
	  { echo "manifests/deployment.yaml must run image flotilla:$$version (Cargo.toml's version)"; exit 1; }; \
	echo "manifests/deployment.yaml runs flotilla:$$version"

# End-to-end tests on the local control plane. A control plane that was already up (say from
# `make demo`) is reused and left running; one started here is torn down afterwards. The image
# is built first: e2e/tests/image.rs runs it the way a pod would.
e2e: deps image
	if $(CLUSTER) status >/dev/null 2>&1; then started=no; else started=yes; fi; \
	$(CLUSTER) up >/dev/null; \
	if [ $$started = yes ]; then trap '$(CLUSTER) down' EXIT; fi; \
	cargo test --features e2e --test e2e -- --test-threads=1 --show-output

test: lint unit check-manifests e2e

demo: deps build
	$(CLUSTER) up >/dev/null
	bash e2e/demo.sh

demo-down:
	bash e2e/demo.sh down
	$(CLUSTER) down

# Benchmarks: template rendering (criterion), then the fleet on a control plane of the bench's
# own (ports and state dir apart from the e2e suite's): cold converge, steady state, reaction,
# rollout and burst against a bare-client limit and a render|kubectl script. N=2000 make bench.
.PHONY: bench
bench: deps
	cargo bench --bench render
	bash e2e/bench/run.sh
