//! What the cluster-reading subcommands share: a client, a runtime, and reading a namespace.

use super::CliError;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PartialObjectMeta};

pub async fn client() -> Result<Client, CliError> {
    Client::try_default()
        .await
        .map_err(|e| CliError(anyhow::anyhow!("connecting to the cluster: {e}")))
}

/// The namespace's labels and annotations as the operator sees them, or `None` if it is gone.
pub async fn namespace(
    client: &Client,
    name: &str,
) -> Result<Option<PartialObjectMeta<Namespace>>, CliError> {
    Api::<Namespace>::all(client.clone())
        .get_metadata_opt(name)
        .await
        .map_err(|e| CliError(anyhow::anyhow!("reading namespace {name}: {e}")))
}

pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError(e.into()))
}
