//! The `flotilla` binary: argument parsing and dispatch only.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod cli;

#[derive(Parser)]
#[command(
    name = "flotilla",
    version = flotilla::version::VERSION_AND_COMMIT,
    about = "One namespaced Argo workflow-controller per opted-in namespace: stamped, kept in sync, reaped"
)]
struct Args {
    /// The config file (selector, templates directory, values, overrides).
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
    #[command(
        after_help = "Example:\n  flotilla run --config /etc/flotilla/config/flotilla.yaml --log-format json"
    )]
    Run(cli::run::RunArgs),
    /// Print exactly the objects `run` would apply for a namespace; no cluster needed.
    #[command(
        after_help = "Examples:\n  flotilla render --namespace team-a\n  flotilla render -n team-a -a override.flotilla.dev/parallelism=100\n  flotilla render -n team-a --live      # labels and annotations from the cluster"
    )]
    Render(cli::render::RenderArgs),
    /// Show what `run` would change on the live cluster (exit 0: nothing, 1: changes, 2: error).
    #[command(after_help = "Examples:\n  flotilla diff --namespace team-a\n  flotilla diff --all")]
    Diff(cli::diff::DiffArgs),
    /// Validate the config and templates offline; report every problem with file and line.
    #[command(after_help = "Example:\n  flotilla check --config flotilla.yaml")]
    Check,
    /// Print the ClusterRole that lets flotilla write exactly what its templates render, by name.
    #[command(
        after_help = "Example:\n  flotilla rbac --config flotilla.yaml --set argoServer.enabled=true > manifests/generated/clusterrole-stamp.yaml"
    )]
    Rbac(cli::rbac::RbacArgs),
    /// The fleet's rollout: status, pause, resume, undo, history (exit 0: complete).
    #[command(
        after_help = "Examples:\n  flotilla rollout status --watch\n  flotilla rollout pause\n  flotilla rollout undo --to-revision 3\n  flotilla rollout history"
    )]
    Rollout(cli::rollout::RolloutArgs),
    /// Show the fleet: one line per NamespaceWorker.
    #[command(after_help = "Examples:\n  flotilla status\n  flotilla status -o json")]
    Status(cli::status::StatusArgs),
    /// Print the NamespaceWorker and Fleet CustomResourceDefinitions (installed by manifests/).
    #[command(after_help = "Example:\n  flotilla crd | kubectl apply --server-side -f -")]
    Crd,
    /// Print shell completions (`kubectl flotilla` completes through kubectl_complete-flotilla).
    #[command(
        after_help = "Example:\n  flotilla completions bash > /etc/bash_completion.d/flotilla\nAs a kubectl plugin, kubectl completes it (kubectl 1.26 and later) with two links on the PATH:\n  ln -s $(command -v flotilla) /usr/local/bin/kubectl-flotilla\n  ln -s $(command -v flotilla) /usr/local/bin/kubectl_complete-flotilla"
    )]
    Completions { shell: clap_complete::Shell },
}

fn main() -> ExitCode {
    let mut argv = std::env::args_os();
    let args = match cli::plugin::invocation(argv.next().as_deref()) {
        cli::plugin::Invocation::Flotilla => Args::parse(),
        cli::plugin::Invocation::Plugin => {
            let matches = Args::command().bin_name("kubectl flotilla").get_matches();
            Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
        }
        cli::plugin::Invocation::Completion => {
            let words: Vec<String> = argv.map(|w| w.to_string_lossy().into_owned()).collect();
            print!("{}", cli::plugin::complete(&Args::command(), &words));
            return ExitCode::SUCCESS;
        }
    };
    cli::init_logging(args.log_format);
    let result = match args.command {
        Command::Run(run) => cli::run::run(&args.config, &run).map(|()| ExitCode::SUCCESS),
        Command::Render(render) => {
            cli::render::render(&args.config, &render).map(|()| ExitCode::SUCCESS)
        }
        Command::Diff(diff) => cli::diff::diff(&args.config, &diff).map(|changed| {
            if changed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }),
        Command::Check => cli::check::check(&args.config).map(|()| ExitCode::SUCCESS),
        Command::Rbac(rbac) => cli::rbac::rbac(&args.config, &rbac).map(|()| ExitCode::SUCCESS),
        Command::Status(status) => {
            cli::status::status(&args.config, &status).map(|()| ExitCode::SUCCESS)
        }
        Command::Rollout(rollout) => {
            cli::rollout::rollout(&args.config, &rollout).map(ExitCode::from)
        }
        Command::Crd => cli::crd::crd().map(|()| ExitCode::SUCCESS),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Args::command(),
                "flotilla",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        ExitCode::from(e.exit_code())
    })
}
