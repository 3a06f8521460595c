//! Rendering the default templates: namespaces rendered per second (`cargo bench --bench render`,
//! part of `make bench`). Pure CPU, no cluster: the cost flotilla pays on every reconcile.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flotilla::config::Config;
use flotilla::render::{NamespaceInput, Renderer};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

fn render(c: &mut Criterion) {
    let config_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
    let config = Config::load(&config_path).unwrap_or_else(|e| panic!("{e}"));
    let renderer = Renderer::load(&config).unwrap_or_else(|e| panic!("{e}"));
    let labels = BTreeMap::from([("flotilla.dev/enabled".to_string(), "true".to_string())]);
    let annotations = BTreeMap::from([("example.com/team".to_string(), "data".to_string())]);
    let inputs: Vec<NamespaceInput> = (0..1000)
        .map(|i| NamespaceInput {
            name: format!("team-{i:04}"),
            labels: labels.clone(),
            annotations: annotations.clone(),
            share: None,
        })
        .collect();
    let objects = renderer.render(&inputs[0]).unwrap().len();

    let mut group = c.benchmark_group("render");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    // One element = one namespace (all its templates): criterion prints namespaces per second.
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function(
        format!("default templates ({objects} objects) per namespace"),
        |b| {
            b.iter(|| {
                i = (i + 1) % inputs.len();
                black_box(renderer.render(black_box(&inputs[i])).unwrap())
            })
        },
    );
    group.finish();

    let mut group = c.benchmark_group("load");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("config + compile templates", |b| {
        b.iter(|| {
            let config = Config::load(&config_path).unwrap();
            black_box(Renderer::load(&config).map(|r| r.revision().len()).unwrap())
        })
    });
    group.finish();
}

criterion_group!(benches, render);
criterion_main!(benches);
