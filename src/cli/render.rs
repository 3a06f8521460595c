//! `flotilla render`: the objects `run` would apply for a namespace, without a cluster.

use super::CliError;
use flotilla::render::{NamespaceInput, to_yaml};
use flotilla::selector;
use kube::core::SelectorExt;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(clap::Args)]
pub struct RenderArgs {
    /// The namespace to render for.
    #[arg(long, short = 'n')]
    namespace: String,
    /// A label of the namespace, as key=value (repeatable). Without any, the namespace gets the
    /// selector's `key=value` requirements, so that it counts as opted in.
    #[arg(long = "label", short = 'l', value_parser = key_value)]
    labels: Vec<(String, String)>,
    /// An annotation of the namespace, as key=value (repeatable).
    #[arg(long = "annotation", short = 'a', value_parser = key_value)]
    annotations: Vec<(String, String)>,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not key=value"))?;
    selector::valid_key(k)?;
    Ok((k.to_string(), v.to_string()))
}

pub fn render(config_path: &Path, args: &RenderArgs) -> Result<(), CliError> {
    let (config, renderer) = super::load(config_path)?;
    let mut labels: BTreeMap<String, String> = args.labels.iter().cloned().collect();
    if labels.is_empty() {
        labels = config
            .selector
            .clone()
            .into_iter()
            .filter_map(|expr| match expr {
                kube::core::Expression::Equal(k, v) => Some((k, v)),
                _ => None,
            })
            .collect();
    }
    if !config.selector.matches(&labels) {
        return Err(CliError::Input(anyhow::anyhow!(
            "a namespace with labels {labels:?} does not match the selector {:?}: flotilla would stamp nothing there (pass --label)",
            config.selector_text
        )));
    }
    let input = NamespaceInput {
        name: args.namespace.clone(),
        labels,
        annotations: args.annotations.iter().cloned().collect(),
    };
    let objects = renderer
        .render(&input)
        .map_err(|e| CliError::Input(anyhow::anyhow!("rendering for {}:\n{e}", input.name)))?;
    print!("{}", to_yaml(&objects));
    Ok(())
}
