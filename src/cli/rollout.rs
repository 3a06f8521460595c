//! `flotilla rollout`: the fleet's rollout, as `kubectl rollout` is a Deployment's. Pause,
//! resume and undo are written to the Fleet's spec, so they hold whichever replica leads, and
//! plain kubectl can do the same.

use super::{CliError, connect};
use flotilla::config::Config;
use flotilla::ownership;
use flotilla::rollout::Phase;
use flotilla::rollout::fleet::{Fleet, FleetStatus};
use flotilla::rollout::revision::{self, Stored};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

#[derive(clap::Args)]
pub struct RolloutArgs {
    #[command(subcommand)]
    command: RolloutCommand,
}

#[derive(clap::Subcommand)]
enum RolloutCommand {
    /// Show the rollout (exit 0: complete; 1: paused, failed, rolled back, reaping held or,
    /// without --watch, still in progress).
    Status {
        /// Wait, showing progress, until the rollout completes, pauses or fails.
        #[arg(long, short = 'w')]
        watch: bool,
    },
    /// Hold the rollout where it is.
    Pause,
    /// Go on with a paused rollout, and confirm the reaping the brake holds.
    Resume,
    /// Roll the fleet out to an earlier revision (default: the stable one, or the one before it).
    Undo {
        #[arg(long)]
        to_revision: Option<i64>,
    },
    /// The kept revisions: number, hash, when, and what changed from the one before.
    History,
}

/// Runs a `rollout` subcommand; the exit code.
pub fn rollout(config_path: &Path, args: &RolloutArgs) -> Result<u8, CliError> {
    let config = Config::load(config_path).map_err(|e| CliError(e.into()))?;
    connect::runtime()?.block_on(async {
        let client = connect::client().await?;
        let fleets: Api<Fleet> = Api::all(client.clone());
        let name = config.instance.as_str();
        match &args.command {
            RolloutCommand::Status { watch } => status(&fleets, name, *watch).await,
            RolloutCommand::Pause => set(&fleets, name, serde_json::json!({"paused": true})).await,
            RolloutCommand::Resume => {
                // Resuming also confirms the reaping the brake holds, as many as it shows.
                let held = get(&fleets, name).await?.status.map_or(0, |s| s.reap_held);
                let spec = if held > 0 {
                    serde_json::json!({"paused": false, "confirmReaping": held})
                } else {
                    serde_json::json!({"paused": false})
                };
                set(&fleets, name, spec).await
            }
            RolloutCommand::Undo { to_revision } => {
                let kept = history_of(&client, &config).await?;
                let fleet = get(&fleets, name).await?;
                let status = fleet.status.unwrap_or_default();
                let to = match to_revision {
                    Some(n) => *n,
                    None => undo_target(&status, &kept).ok_or_else(|| {
                        CliError(anyhow::anyhow!("there is no earlier revision to undo to"))
                    })?,
                };
                if !kept.iter().any(|r| r.number == to) {
                    return Err(CliError(anyhow::anyhow!(
                        "revision {to} is not kept; `flotilla rollout history` lists those that are"
                    )));
                }
                set(&fleets, name, serde_json::json!({"revision": to})).await?;
                println!("rolling back to revision {to}");
                Ok(0)
            }
            RolloutCommand::History => {
                print!(
                    "{}",
                    history_table(
                        &history_of(&client, &config).await?,
                        &get(&fleets, name).await?.status.unwrap_or_default()
                    )
                );
                Ok(0)
            }
        }
    })
}

async fn get(fleets: &Api<Fleet>, name: &str) -> Result<Fleet, CliError> {
    fleets.get(name).await.map_err(|e| {
        CliError(anyhow::anyhow!(
            "Fleet {name}: {e} (the running flotilla creates it when it first leads)"
        ))
    })
}

async fn set(fleets: &Api<Fleet>, name: &str, spec: serde_json::Value) -> Result<u8, CliError> {
    let patch = serde_json::json!({ "spec": spec });
    fleets
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| CliError(anyhow::anyhow!("Fleet {name}: {e}")))?;
    println!("fleet {name}: {spec}");
    Ok(0)
}

async fn status(fleets: &Api<Fleet>, name: &str, watch: bool) -> Result<u8, CliError> {
    let terminal = std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let fleet = get(fleets, name).await?;
        let status = fleet.status.clone().unwrap_or_default();
        let line = line(&status, terminal);
        if line != last {
            if terminal {
                print!("\r\x1b[2K{line}");
                use std::io::Write;
                let _ = std::io::stdout().flush();
            } else {
                println!("{line}");
            }
            last = line;
        }
        // A pause, resume or undo flotilla has not acted on yet: the phase shown is the old one.
        let observed = (status.phase == Phase::Paused) == fleet.spec.paused
            && fleet
                .spec
                .revision
                .is_none_or(|n| n == status.target_revision);
        let code = match status.phase {
            // Held by the brake on mass reaping: waiting for an admin, as a pause is.
            _ if status.reap_held > 0 => Some(1),
            _ if !observed && watch => None,
            _ if !observed => Some(1),
            Phase::Complete => Some(0),
            Phase::Paused | Phase::Failed | Phase::RolledBack => Some(1),
            Phase::Progressing if !watch => Some(1),
            Phase::Progressing => None,
        };
        if let Some(code) = code {
            if terminal {
                println!();
            }
            return Ok(code);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// One line of status; with a progress bar on a terminal.
fn line(status: &FleetStatus, terminal: bool) -> String {
    let updated: usize = status
        .updated
        .split('/')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let total = usize::try_from(status.total).unwrap_or(0);
    let bar = if terminal && total > 0 {
        let filled = updated * 30 / total;
        format!("[{}{}] ", "#".repeat(filled), "-".repeat(30 - filled))
    } else {
        String::new()
    };
    format!(
        "{bar}{:?}: revision {} (stable {}): {} updated, {} ready, {} failed: {}",
        status.phase,
        status.target_revision,
        status.stable_revision,
        status.updated,
        status.ready,
        status.failed,
        status.message
    )
}

/// `undo` without a number: the stable revision while another rolls out, else the one before.
fn undo_target(status: &FleetStatus, kept: &[Stored]) -> Option<i64> {
    if status.stable_revision != status.target_revision && status.stable_revision > 0 {
        return Some(status.stable_revision);
    }
    kept.iter()
        .map(|r| r.number)
        .filter(|n| *n < status.target_revision)
        .max()
}

async fn history_of(client: &kube::Client, config: &Config) -> Result<Vec<Stored>, CliError> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &config.namespace);
    let params = ListParams::default().labels(&ownership::watch_selector(&config.instance));
    let listed = api.list(&params).await.map_err(|e| {
        CliError(anyhow::anyhow!(
            "listing ControllerRevisions in {}: {e}",
            config.namespace
        ))
    })?;
    let mut kept: Vec<Stored> = listed
        .items
        .iter()
        .filter_map(|o| revision::read(o).ok())
        .collect();
    kept.sort_by_key(|r| r.number);
    Ok(kept)
}

/// REVISION HASH CREATED CHANGES, oldest first; the stable and target revisions marked.
fn history_table(kept: &[Stored], status: &FleetStatus) -> String {
    let mut out = format!(
        "{:<9} {:<17} {:<21} {}\n",
        "REVISION", "HASH", "CREATED", "CHANGES"
    );
    for (i, r) in kept.iter().enumerate() {
        let changes = match i.checked_sub(1).and_then(|p| kept.get(p)) {
            Some(before) => {
                let changed = r.content.changes_from(&before.content);
                if changed.is_empty() {
                    "none".to_string()
                } else {
                    changed.join(", ")
                }
            }
            None => "first".to_string(),
        };
        let mut mark = String::new();
        if r.hash == status.target_hash {
            mark.push_str(" (target)");
        }
        if r.hash == status.stable_hash {
            mark.push_str(" (stable)");
        }
        out.push_str(&format!(
            "{:<9} {:<17} {:<21} {changes}{mark}\n",
            r.number,
            r.hash,
            r.created.as_deref().unwrap_or("-"),
        ));
    }
    out
}
