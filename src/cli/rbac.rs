//! `flotilla rbac`: the ClusterRole that lets flotilla create, patch and delete exactly the
//! objects its templates render, by name (`manifests/generated/clusterrole-stamp.yaml` is its
//! output for the repository's templates; `make check-manifests` fails when that is stale).

use super::CliError;

pub fn rbac(config_path: &std::path::Path) -> Result<(), CliError> {
    let (config, renderer) = super::load(config_path)?;
    let names = flotilla::rbac::templated_names(&renderer, &config).map_err(|errors| {
        let lines: Vec<String> = errors
            .0
            .into_iter()
            .map(|e| e.in_dir(&config.templates_dir).to_string())
            .collect();
        CliError(anyhow::anyhow!(
            "templates in {}:\n{}",
            config.templates_dir.display(),
            lines.join("\n")
        ))
    })?;
    print!("{}", flotilla::rbac::cluster_role(&names));
    Ok(())
}
