//! `flotilla crd`: the NamespaceWorker and Fleet CustomResourceDefinitions, generated from the
//! Rust types.

use super::CliError;
use flotilla::rollout::fleet::Fleet;
use flotilla::status::NamespaceWorker;
use kube::CustomResourceExt;

pub fn crd() -> Result<(), CliError> {
    for (i, crd) in [NamespaceWorker::crd(), Fleet::crd()].iter().enumerate() {
        let yaml = serde_saphyr::to_string(crd)
            .map_err(|e| CliError(anyhow::anyhow!("serializing the CRD: {e}")))?;
        if i > 0 {
            println!("---");
        }
        print!("{yaml}");
    }
    Ok(())
}
