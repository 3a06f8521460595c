//! Subcommands, one file each, and what they share: config loading, exit codes, logging.

pub mod render;
pub mod run;

use flotilla::config::Config;
use flotilla::render::Renderer;
use std::path::Path;

/// An error at the binary's edge, with the exit code it maps to.
pub enum CliError {
    /// Bad config or templates: the user must fix input (exit 2).
    Input(anyhow::Error),
    /// Anything else, e.g. the cluster is unreachable (exit 1).
    Runtime(anyhow::Error),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Input(_) => 2,
            CliError::Runtime(_) => 1,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Input(e) | CliError::Runtime(e) => write!(f, "{e:#}"),
        }
    }
}

/// Loads and validates the config and compiles its templates.
pub fn load(config_path: &Path) -> Result<(Config, Renderer), CliError> {
    let config = Config::load(config_path).map_err(|e| CliError::Input(e.into()))?;
    let renderer = Renderer::load(&config).map_err(|e| {
        CliError::Input(anyhow::anyhow!(
            "templates in {}:\n{e}",
            config.templates_dir.display()
        ))
    })?;
    Ok((config, renderer))
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
