//! `flotilla status`: the fleet, from the NamespaceWorkers, as a table, JSON or YAML.

use super::{CliError, connect};
use flotilla::ownership;
use flotilla::rollout::fleet::{BudgetStatus, Fleet};
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
    let (workers, budget) = connect::runtime()?.block_on(async {
        let client = connect::client().await?;
        let workers = list(&client, &ownership::watch_selector(&config.instance)).await?;
        Ok::<_, CliError>((workers, budget(&client, &config.instance).await?))
    })?;
    match args.output {
        Format::Table => print!("{}", table(&workers, budget.as_ref())),
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

/// The fleet's budget as the Fleet shows it (`None`: no budget, or no Fleet yet).
async fn budget(client: &kube::Client, instance: &str) -> Result<Option<BudgetStatus>, CliError> {
    let api: Api<Fleet> = Api::all(client.clone());
    let fleet = api
        .get_opt(instance)
        .await
        .map_err(|e| CliError(anyhow::anyhow!("reading Fleet {instance}: {e}")))?;
    Ok(fleet.and_then(|f| f.status?.budget))
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

fn table(workers: &[NamespaceWorker], budget: Option<&BudgetStatus>) -> String {
    // The share column only where the fleet has a budget.
    let shares = workers
        .iter()
        .any(|w| w.status.as_ref().is_some_and(|s| s.share.is_some()));
    let mut header = vec!["NAMESPACE", "PHASE", "READY", "REVISION", "IMAGE"];
    header.extend(shares.then_some("SHARE"));
    header.push("MESSAGE");
    let mut rows: Vec<Vec<String>> = vec![header.into_iter().map(String::from).collect()];
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
        let mut row = vec![
            worker.name_any(),
            phase,
            status.ready,
            status.revision,
            status.image,
        ];
        if shares {
            row.push(status.share.map_or("-".into(), |s| s.to_string()));
        }
        row.push(message);
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
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
    if let Some(b) = budget {
        out.push_str(&format!(
            "budget: {} of {} running, {} waiting, {} held\n",
            b.running, b.limit, b.waiting, b.held
        ));
    }
    out
}
