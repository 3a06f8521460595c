//! The e2e node stand-in as a program of its own, for `make demo`: it runs the stamped
//! workflow-controller pods of the local control plane as local processes (e2e/kubelet/) until
//! SIGTERM or Ctrl-C, then stops them and removes its Node.
//!
//!   cargo run --example node --features e2e -- --kubeconfig K --image I --argo DIR --dir D

#[path = "kubelet/mod.rs"]
#[allow(dead_code, unused_imports)]
mod kubelet;

use clap::Parser;
use std::path::PathBuf;

#[derive(Parser)]
struct Args {
    /// The admin kubeconfig of the local control plane.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The Node's name.
    #[arg(long, default_value = "flotilla-demo-node")]
    name: String,
    /// The image whose pods run the workflow-controller (the templates' controllerImage).
    #[arg(long)]
    image: String,
    /// Argo's build from e2e/build.sh (`e2e/build.sh path argo`).
    #[arg(long)]
    argo: PathBuf,
    /// Where the pods' files and logs go.
    #[arg(long)]
    dir: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &options).await?;
    let client = kube::Client::try_from(config)?;
    let server = kubeconfig
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .ok_or_else(|| anyhow::anyhow!("{}: no server", args.kubeconfig.display()))?;
    let api_server = server
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .parse()?;
    let program = kubelet::Program {
        image: args.image,
        bin: args.argo.join("bin"),
        entrypoint: vec!["workflow-controller".into()],
        user: (8737, 8737),
    };
    std::fs::create_dir_all(&args.dir)?;
    let node = kubelet::Node::start(&client, &args.name, vec![program], api_server, args.dir).await;
    eprintln!(
        "node {}: running the pods of its image; SIGTERM stops it",
        node.name
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    node.stop().await;
    Ok(())
}
