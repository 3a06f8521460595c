//! `flotilla status`: the fleet, from the NamespaceWorkers, as a table, JSON or YAML.

use super::{CliError, connect};
use flotilla::ownership;
use flotilla::status::{NamespaceWorker, Phase};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Table)]
    output: Format,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Table,
    Json,
    Yaml,
}

pub fn status(config_path: &Path, args: &StatusArgs) -> Result<(), CliError> {
    let config = flotilla::config::Config::load(config_path).map_err(|e| CliError(e.into()))?;
    let workers = connect::runtime()?.block_on(async {
        let client = connect::client().await?;
        list(&client, &ownership::watch_selector(&config.instance)).await
    })?;
    match args.output {
        Format::Table => print!("{}", table(&workers)),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&workers).map_err(|e| CliError(e.into()))?
        ),
        Format::Yaml => print!(
            "{}",
            serde_saphyr::to_string(&workers).map_err(|e| CliError(anyhow::anyhow!("{e}")))?
        ),
    }
    Ok(())
}

/// Lists page by page, showing progress on a terminal: large fleets take a moment.
async fn list(client: &kube::Client, selector: &str) -> Result<Vec<NamespaceWorker>, CliError> {
    let api: Api<NamespaceWorker> = Api::all(client.clone());
    let progress = std::io::stderr().is_terminal();
    let mut params = ListParams::default().labels(selector).limit(500);
    let mut workers = Vec::new();
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|e| CliError(anyhow::anyhow!("listing NamespaceWorkers: {e}")))?;
        workers.extend(page.items);
        if progress {
            eprint!("\rscanned {} namespaces…", workers.len());
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    if progress {
        eprint!("\r\x1b[K");
    }
    Ok(workers)
}

fn table(workers: &[NamespaceWorker]) -> String {
    let mut rows = vec![[
        "NAMESPACE".to_string(),
        "PHASE".into(),
        "READY".into(),
        "REVISION".into(),
        "IMAGE".into(),
        "MESSAGE".into(),
    ]];
    let mut phases: BTreeMap<String, usize> = BTreeMap::new();
    for worker in workers {
        let status = worker.status.clone().unwrap_or_default();
        let phase = if worker.status.is_some() {
            format!("{:?}", status.phase)
        } else {
            "Unknown".into()
        };
        *phases.entry(phase.clone()).or_default() += 1;
        let message: String = status.message.chars().take(100).collect();
        rows.push([
            worker.name_any(),
            phase,
            status.ready,
            status.revision,
            status.image,
            message,
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    let summary: Vec<String> = phases.iter().map(|(p, n)| format!("{n} {p}")).collect();
    let healthy = phases
        .get(&format!("{:?}", Phase::Ready))
        .copied()
        .unwrap_or(0);
    let asleep = phases
        .get(&format!("{:?}", Phase::Sleeping))
        .map(|n| format!(", {n} asleep"))
        .unwrap_or_default();
    out.push_str(&format!(
        "\n{} namespaces: {} ({healthy} ready{asleep})\n",
        workers.len(),
        if summary.is_empty() {
            "none".into()
        } else {
            summary.join(", ")
        }
    ));
    out
}
