//! `flotilla run`: the operator.

use super::CliError;
use flotilla::controller::RunOptions;
use flotilla::telemetry::Metrics;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct RunArgs {
    /// Where to serve /healthz, /readyz and /metrics.
    #[arg(long, env = "FLOTILLA_HTTP_ADDRESS", default_value = "0.0.0.0:8080")]
    http_address: SocketAddr,
    /// This replica's identity in the leader Lease (in a pod: its name, via the downward API).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
}

pub fn run(config_path: &Path, args: &RunArgs) -> Result<(), CliError> {
    let (config, renderer) = super::load(config_path)?;
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });
    tracing::info!(
        version = flotilla::version::VERSION,
        commit = flotilla::version::COMMIT,
        selector = %config.selector_text,
        instance = %config.instance,
        templates = %config.templates_dir.display(),
        %identity,
        "starting"
    );
    let options = RunOptions {
        http_address: args.http_address,
        identity,
        config_path: config_path.to_path_buf(),
    };
    let runtime = tokio::runtime::Runtime::new().map_err(|e| CliError(e.into()))?;
    runtime
        .block_on(async {
            let metrics = Arc::new(Metrics::default());
            let clients = flotilla::client::connect(&config, &metrics).await?;
            flotilla::controller::run(config, renderer, clients, metrics, options).await
        })
        .map_err(CliError)
}
