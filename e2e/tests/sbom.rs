//! The SBOM `make image` attaches to the image (image/sbom.sh): an OCI artifact whose subject is
//! the image, listing every crate compiled into the binary, as `cargo tree` and Cargo.lock say,
//! and nothing that makes two builds differ.

use crate::pod::{self, Image};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

const CYCLONEDX: &str = "application/vnd.cyclonedx+json";

/// The checkout (no control plane needed here).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The crates `cargo tree` shows in the binary (normal dependencies, this host): `name version`.
fn crates_in_the_binary() -> BTreeSet<String> {
    let tree = pod::run(
        Command::new("cargo")
            .args([
                "tree", "-e", "normal", "--prefix", "none", "--format", "{p}",
            ])
            .current_dir(repo()),
    );
    tree.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let (name, version) = (words.next()?, words.next()?.strip_prefix('v')?);
            (name != "flotilla").then(|| format!("{name} {version}"))
        })
        .collect()
}

/// Cargo.lock's checksum of each registry crate: `name version` -> sha256.
fn lock_checksums() -> Vec<(String, String)> {
    let lock = std::fs::read_to_string(repo().join("Cargo.lock")).unwrap();
    lock.split("[[package]]")
        .filter_map(|package| {
            let field = |key: &str| {
                package
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
                    .map(|v| v.trim_end_matches('"').to_string())
            };
            Some((
                format!("{} {}", field("name")?, field("version")?),
                field("checksum")?,
            ))
        })
        .collect()
}

#[test]
fn the_image_carries_an_sbom_of_the_crates_in_its_binary() {
    let image = Image::built();
    let (_, manifest) = image.referrer(CYCLONEDX);
    assert_eq!(manifest["artifactType"], CYCLONEDX);
    assert_eq!(manifest["subject"]["digest"], image.digest().as_str());
    let layer = &manifest["layers"][0];
    assert_eq!(layer["mediaType"], CYCLONEDX);
    let sbom = image.blob(layer["digest"].as_str().unwrap());
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    assert_eq!(sbom["metadata"]["component"]["name"], "flotilla");
    assert_eq!(
        sbom["metadata"]["component"]["version"],
        env!("CARGO_PKG_VERSION")
    );
    let components = sbom["components"].as_array().unwrap();
    let listed: BTreeSet<String> = components
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["name"].as_str().unwrap(),
                c["version"].as_str().unwrap()
            )
        })
        .collect();
    // Every crate in the binary. cargo-cyclonedx reads `cargo metadata`, whose features are
    // unified with the dev-dependencies', so it may list a crate or two more; never a crate
    // only the tests use.
    let missing: Vec<_> = crates_in_the_binary()
        .difference(&listed)
        .cloned()
        .collect();
    assert!(missing.is_empty(), "the SBOM lacks {missing:?}");
    for dev_only in ["tempfile", "tower-test", "criterion", "promql-parser"] {
        assert!(
            !listed.iter().any(|l| l.split(' ').next() == Some(dev_only)),
            "{dev_only} is in the SBOM"
        );
    }
    // Each with the checksum Cargo.lock pins.
    let checksums = lock_checksums();
    for component in components {
        let id = format!(
            "{} {}",
            component["name"].as_str().unwrap(),
            component["version"].as_str().unwrap()
        );
        let (_, want) = checksums
            .iter()
            .find(|(name, _)| *name == id)
            .unwrap_or_else(|| panic!("{id} is not in Cargo.lock"));
        assert_eq!(component["hashes"][0]["content"], want.as_str(), "{id}");
        assert!(
            component["purl"]
                .as_str()
                .unwrap()
                .starts_with("pkg:cargo/"),
            "{id}"
        );
    }
    // Reproducible: no random serial number, no path of this checkout, dated the commit.
    assert!(
        sbom.get("serialNumber").is_none(),
        "{}",
        sbom["serialNumber"]
    );
    let text = sbom.to_string();
    let repo = repo().display().to_string();
    assert!(
        !text.contains(&repo),
        "the SBOM names the checkout's path {repo}"
    );
    let created = manifest["annotations"]["org.opencontainers.image.created"]
        .as_str()
        .unwrap();
    let timestamp = sbom["metadata"]["timestamp"].as_str().unwrap();
    assert!(
        timestamp.starts_with(created.trim_end_matches('Z')),
        "{timestamp} vs {created}"
    );
}
