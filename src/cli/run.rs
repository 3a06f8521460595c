//! `flotilla run`: the operator.

use super::CliError;
use std::path::Path;

pub fn run(config_path: &Path) -> Result<(), CliError> {
    let (config, renderer) = super::load(config_path)?;
    tracing::info!(
        selector = %config.selector_text,
        instance = %config.instance,
        templates = %config.templates_dir.display(),
        "starting"
    );
    let runtime = tokio::runtime::Runtime::new().map_err(|e| CliError(e.into()))?;
    runtime
        .block_on(async {
            let client = kube::Client::try_default().await?;
            flotilla::controller::run(config, renderer, client).await
        })
        .map_err(CliError)
}
