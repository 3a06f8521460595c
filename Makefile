# flotilla: `make demo` and `make test` are all a fresh machine needs.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
CLUSTER := bash e2e/cluster.sh
# helm, promtool and cargo-cyclonedx on PATH, built once into ~/.cache/flotilla/tools (e2e/tools.sh).
TOOLS := eval "$$(bash e2e/tools.sh)"

.PHONY: build image test lint unit check-manifests manifests check-install chart e2e demo demo-down deps tools

build:
	cargo build --release

deps:
	bash e2e/deps.sh

tools:
	bash e2e/tools.sh

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
	bash manifests/generate.sh "$$tmp/generated" "$$tmp/chart"; \
	diff -ru manifests/generated "$$tmp/generated" || { echo "manifests/generated is stale: run make manifests"; exit 1; }; \
	for d in crds files; do \
	  diff -ru charts/flotilla/$$d "$$tmp/chart/$$d" || { echo "charts/flotilla/$$d is stale: run make manifests"; exit 1; }; \
	done; \
	echo "manifests/generated and the chart's copies are up to date"
	version=$$(sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n1); \
	grep -q "^ *image: flotilla:$$version$$" manifests/deployment.yaml || \
	  { echo "manifests/deployment.yaml must run image flotilla:$$version (Cargo.toml's version)"; exit 1; }; \
	echo "manifests/deployment.yaml runs flotilla:$$version"
	version=$$(sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n1); \
	grep -q "^version: $$version$$" charts/flotilla/Chart.yaml && grep -q "^appVersion: \"$$version\"$$" charts/flotilla/Chart.yaml || \
	  { echo "charts/flotilla/Chart.yaml must say version: $$version and appVersion: \"$$version\" (Cargo.toml's version)"; exit 1; }; \
	echo "charts/flotilla is version $$version"

# How admins install and watch flotilla: the chart (lint, the render against kustomize, values
# and schema: tests/chart.rs), the alerts and dashboard (promtool check and test rules:
# tests/monitoring.rs), `kubectl flotilla` (tests/kubectl_plugin.rs).
check-install:
	$(TOOLS); cargo test --features tools --test chart --test monitoring --test kubectl_plugin

# The chart packaged as flotilla-<version>.tgz in $CARGO_TARGET_DIR/chart (default target/chart).
chart:
	$(TOOLS); helm package charts/flotilla --destination "$${CARGO_TARGET_DIR:-target}/chart"

# End-to-end tests on the local control plane. A control plane that was already up (say from
# `make demo`) is reused and left running; one started here is torn down afterwards. The image
# is built first: e2e/tests/image.rs runs it the way a pod would.
e2e: deps image
	bash e2e/build.sh
	$(TOOLS); \
	if $(CLUSTER) status >/dev/null 2>&1; then started=no; else started=yes; fi; \
	eval "$$($(CLUSTER) up)"; \
	if [ $$started = yes ]; then trap '$(CLUSTER) down' EXIT; fi; \
	cargo test --features e2e --test e2e -- --test-threads=1 --show-output

test: lint unit check-manifests check-install e2e

demo: deps build
	bash e2e/build.sh
	cargo build --release --example node --features e2e
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
