//! `flotilla diff`: per object, what `run` would change on the live cluster, as a unified diff
//! computed by the API server itself (server-side dry-run apply against the live object).
//! Exit code 0: no difference, 1: differences, 2: error (as `kubectl diff`).

use super::{CliError, connect};
use flotilla::config::Config;
use flotilla::plan::{self, NamespaceState, Step};
use flotilla::render::Renderer;
use flotilla::{cluster, diff, ownership};
use kube::Client;
use kube::ResourceExt;
use std::path::Path;

#[derive(clap::Args)]
pub struct DiffArgs {
    /// The namespace to compare.
    #[arg(
        long,
        short = 'n',
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    namespace: Option<String>,
    /// Every opted-in namespace, and every namespace something was stamped for.
    #[arg(long)]
    all: bool,
}

/// Returns whether anything differs.
pub fn diff(config_path: &Path, args: &DiffArgs) -> Result<bool, CliError> {
    let (config, renderer) = super::load(config_path)?;
    connect::runtime()?.block_on(async {
        let client = connect::client().await?;
        let namespaces = match &args.namespace {
            Some(name) => vec![name.clone()],
            None => fleet(&client, &config).await?,
        };
        let mut changed = false;
        for name in namespaces {
            changed |= diff_namespace(&client, &config, &renderer, &name).await?;
        }
        Ok(changed)
    })
}

fn api_error(what: String) -> impl FnOnce(kube::Error) -> CliError {
    move |e| CliError(anyhow::anyhow!("{what}: {e}"))
}

/// Opted-in namespaces plus those that still have stamped objects (they would be reaped).
async fn fleet(client: &Client, config: &Config) -> Result<Vec<String>, CliError> {
    let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .list_metadata(&Default::default())
        .await
        .map_err(api_error("listing namespaces".into()))?;
    let opted_in = namespaces
        .items
        .iter()
        .filter(|ns| NamespaceState::of(&ns.metadata, &config.selector).opted_in())
        .map(|ns| ns.name_any());
    let mut stamped_for = Vec::new();
    for kind in flotilla::kinds::Kind::ALL {
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(client.clone(), &kind.api_resource());
        let params =
            kube::api::ListParams::default().labels(&ownership::watch_selector(&config.instance));
        let list = api
            .list_metadata(&params)
            .await
            .map_err(api_error(format!("listing {kind}s")))?;
        stamped_for.extend(
            list.items
                .iter()
                .filter_map(|o| o.labels().get(ownership::FOR_NAMESPACE).cloned()),
        );
    }
    let names = plan::fleet(opted_in, stamped_for);
    Ok(names.into_iter().collect())
}

async fn diff_namespace(
    client: &Client,
    config: &Config,
    renderer: &Renderer,
    name: &str,
) -> Result<bool, CliError> {
    let namespace = connect::namespace(client, name)
        .await?
        .map(|ns| NamespaceState::of(&ns.metadata, &config.selector));
    let desired = match namespace.filter(NamespaceState::opted_in) {
        Some(ns) => renderer
            .render(&ns.input)
            .map_err(|e| CliError(anyhow::anyhow!("rendering for {name}:\n{e}")))?,
        None => Vec::new(),
    };
    let mut changed = false;
    for object in &desired {
        let live = cluster::get(client, &object.key, cluster::Read::Latest)
            .await
            .map_err(api_error(format!("reading {}", object.key)))?;
        match plan::after_read(
            object,
            live.as_ref(),
            &config.instance,
            &config.field_manager,
        ) {
            Step::Conflict { reason, .. } => {
                eprintln!("# {reason}: flotilla leaves it alone");
                continue;
            }
            Step::Create { .. } | Step::Apply { .. } => {}
            _ => continue,
        }
        let after = cluster::apply(client, &config.field_manager, object, cluster::Mode::DryRun)
            .await
            .map_err(api_error(format!("dry-run apply of {}", object.key)))?;
        if let Some(text) = diff::unified(&object.key.to_string(), live.as_ref(), Some(&after)) {
            print!("{text}");
            changed = true;
        }
    }
    let stamped = cluster::stamped_for(client, &config.instance, name)
        .await
        .map_err(api_error(format!("listing what was stamped for {name}")))?;
    for (key, live) in stamped {
        if !desired.iter().any(|d| d.key == key)
            && let Some(text) = diff::unified(&key.to_string(), Some(&live), None)
        {
            print!("{text}");
            changed = true;
        }
    }
    Ok(changed)
}
