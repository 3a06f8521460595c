//! The `flotilla` binary: argument parsing and dispatch only.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod cli;

#[derive(Parser)]
#[command(
    name = "flotilla",
    version,
    about = "One namespaced Argo workflow-controller per opted-in namespace, stamped, kept in sync and reaped"
)]
struct Args {
    /// The config file (selector, templates directory, values).
    #[arg(
        long,
        global = true,
        env = "FLOTILLA_CONFIG",
        default_value = "flotilla.yaml"
    )]
    config: PathBuf,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = cli::LogFormat::Text, env = "FLOTILLA_LOG_FORMAT")]
    log_format: cli::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator against the cluster of the current kubeconfig (or in-cluster config).
    Run,
    /// Print, without a cluster, exactly the objects `run` would apply for a namespace.
    #[command(
        after_help = "Example:\n  flotilla render --namespace team-a --label flotilla.dev/enabled=true"
    )]
    Render(cli::render::RenderArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    cli::init_logging(args.log_format);
    let result = match args.command {
        Command::Run => cli::run::run(&args.config),
        Command::Render(render) => cli::render::render(&args.config, &render),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(e.exit_code())
        }
    }
}
