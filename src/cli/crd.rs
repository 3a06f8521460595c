//! `flotilla crd`: the NamespaceWorker CustomResourceDefinition, generated from the Rust type.

use super::CliError;
use flotilla::status::NamespaceWorker;
use kube::CustomResourceExt;

pub fn crd() -> Result<(), CliError> {
    let yaml = serde_saphyr::to_string(&NamespaceWorker::crd())
        .map_err(|e| CliError(anyhow::anyhow!("serializing the CRD: {e}")))?;
    print!("{yaml}");
    Ok(())
}
