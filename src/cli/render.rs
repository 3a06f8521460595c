//! `flotilla render`: the objects `run` would apply for a namespace, without a cluster (or,
//! with `--live`, for a namespace as it is in the cluster).

use super::{CliError, connect};
use flotilla::config::is_dns_label;
use flotilla::membership::{self, Membership};
use flotilla::plan::NamespaceState;
use flotilla::render::{NamespaceInput, to_yaml};
use flotilla::selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(clap::Args)]
pub struct RenderArgs {
    /// The namespace to render for.
    #[arg(long, short = 'n')]
    namespace: String,
    /// A label of the namespace, as key=value (repeatable). Without any, the namespace gets the
    /// selector's `key=value` requirements, so that it counts as opted in.
    #[arg(long = "label", short = 'l', value_parser = key_value, conflicts_with = "live")]
    labels: Vec<(String, String)>,
    /// An annotation of the namespace, as key=value (repeatable), e.g. an override.
    #[arg(long = "annotation", short = 'a', value_parser = key_value, conflicts_with = "live")]
    annotations: Vec<(String, String)>,
    /// Read the namespace's labels and annotations from the cluster instead.
    #[arg(long)]
    live: bool,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not key=value"))?;
    selector::valid_key(k).map_err(|e| e.to_string())?;
    Ok((k.to_string(), v.to_string()))
}

pub fn render(config_path: &Path, args: &RenderArgs) -> Result<(), CliError> {
    // No Namespace can have such a name: what it would render could never be applied.
    if !is_dns_label(&args.namespace) {
        return Err(CliError(anyhow::anyhow!(
            "namespace {:?} is not a valid namespace name (a DNS label: at most 63 characters of lowercase letters, digits and '-', starting and ending with a letter or digit)",
            args.namespace
        )));
    }
    let (config, renderer) = super::load(config_path)?;
    let (input, membership) = if args.live {
        connect::runtime()?.block_on(async {
            let client = connect::client().await?;
            connect::namespace(&client, &args.namespace)
                .await?
                .map(|ns| {
                    let state = NamespaceState::of(&ns.metadata, &config.selector);
                    (state.input, state.membership)
                })
                .ok_or_else(|| {
                    CliError(anyhow::anyhow!(
                        "namespace {} does not exist",
                        args.namespace
                    ))
                })
        })?
    } else {
        let mut labels: BTreeMap<String, String> = args.labels.iter().cloned().collect();
        if labels.is_empty() {
            labels = selector::required_labels(&config.selector);
        }
        let meta = ObjectMeta {
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        };
        let membership = membership::of(&meta, &config.selector);
        let input = NamespaceInput {
            name: args.namespace.clone(),
            labels,
            annotations: args.annotations.iter().cloned().collect(),
            share: None,
        };
        (input, membership)
    };
    let input = match membership {
        Membership::Member => input,
        Membership::OptingOut => {
            return Err(CliError(anyhow::anyhow!(
                "namespace {} with labels {:?} does not match the selector {:?}: flotilla stamps nothing there",
                input.name,
                input.labels,
                config.selector_text
            )));
        }
        Membership::Terminating => {
            return Err(CliError(anyhow::anyhow!(
                "namespace {} is being deleted: flotilla stamps nothing there, and reaps what it stamped",
                input.name
            )));
        }
    };
    let objects = renderer
        .render(&input)
        .map_err(|e| CliError(anyhow::anyhow!("rendering for {}:\n{e}", input.name)))?;
    print!("{}", to_yaml(&objects));
    Ok(())
}
