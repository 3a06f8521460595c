//! The chart's pod stood in for: its two ConfigMap volumes as files, flotilla run on them under
//! the chart's ServiceAccount.

use super::{FULLNAME, NAMESPACE, OPTED_IN};
use crate::common::write_service_account_kubeconfig;
use crate::harness::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

/// The chart's config and templates as the pod's two volumes hold them: `config/flotilla.yaml`
/// and `templates/*.yaml` side by side.
pub struct Volumes {
    dir: tempfile::TempDir,
}

impl Volumes {
    pub fn new() -> Volumes {
        let dir = tempfile::tempdir().unwrap();
        for volume in ["config", "templates"] {
            std::fs::create_dir(dir.path().join(volume)).unwrap();
        }
        Volumes { dir }
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config/flotilla.yaml")
    }

    /// Copies the ConfigMaps' data in, each file written aside and renamed, as the kubelet swaps
    /// a volume's content whole; templates gone from the ConfigMap are removed.
    pub async fn sync(&self, client: &Client) {
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        for (volume, name) in [("config", "config"), ("templates", "templates")] {
            let map = config_maps
                .get(&format!("{FULLNAME}-{name}"))
                .await
                .unwrap();
            let data = map.data.unwrap_or_default();
            let dir = self.dir.path().join(volume);
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if !data.contains_key(path.file_name().unwrap().to_str().unwrap()) {
                    std::fs::remove_file(path).unwrap();
                }
            }
            for (file, content) in data {
                let aside = dir.join(format!(".{file}.new"));
                std::fs::write(&aside, content).unwrap();
                std::fs::rename(&aside, dir.join(file)).unwrap();
            }
        }
    }

    /// flotilla as the chart's pod runs it: the mounted config, the chart's ServiceAccount.
    pub fn start(&self) -> Flotilla {
        let kubeconfig = self.dir.path().join("flotilla.kubeconfig");
        write_service_account_kubeconfig(&env().admin_kubeconfig, NAMESPACE, FULLNAME, &kubeconfig);
        let log = self.dir.path().join("flotilla.log");
        Flotilla::start(
            &self.config(),
            &log,
            &format!("{FULLNAME}-pod"),
            &kubeconfig,
        )
    }

    /// What `flotilla render` makes of the mounted config for the opted-in namespace.
    pub fn rendered(&self, label: &str) -> BTreeSet<Identity> {
        let out = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args([
                "render",
                "--namespace",
                OPTED_IN,
                "--label",
                label,
                "--config",
            ])
            .arg(self.config())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let objects: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
        objects.iter().map(identity).collect()
    }
}
