//! Subcommands, one file each, and what they share: config loading, exit codes, logging.

pub mod check;
mod connect;
pub mod crd;
pub mod diff;
pub mod plugin;
pub mod rbac;
pub mod render;
pub mod rollout;
pub mod run;
pub mod status;

use flotilla::config::Config;
use flotilla::render::Renderer;
use std::path::Path;

/// An error at the binary's edge. Every failure exits with code 2, as `kubectl diff` does, since
/// `diff` uses 1 for "there are differences".
pub struct CliError(pub anyhow::Error);

impl CliError {
    pub fn exit_code(&self) -> u8 {
        2
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

/// Loads and validates the config and compiles its templates.
pub fn load(config_path: &Path) -> Result<(Config, Renderer), CliError> {
    let config = Config::load(config_path).map_err(|e| CliError(e.into()))?;
    let renderer = flotilla::render::load(&config).map_err(|e| CliError(anyhow::anyhow!("{e}")))?;
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
    // Colours only on a terminal: log files and collectors get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
