//! `flotilla rbac`: the ClusterRole that lets flotilla create, patch and delete exactly the
//! objects its templates render, by name (`manifests/generated/clusterrole-stamp.yaml` is its
//! output for the repository's templates, with argo-server on as well; `make check-manifests`
//! fails when that is stale). With `--admission-policy`, the ValidatingAdmissionPolicy that
//! bounds where and what those names may be written (`manifests/generated/admission-policy.yaml`).

use super::CliError;
use flotilla::rbac::{NamesError, Set};

#[derive(clap::Args)]
pub struct RbacArgs {
    /// Also list the names rendered with this value set, as key=value, a dotted path into
    /// `values` (repeatable; all are set together): for a part the config leaves off that may
    /// be turned on while flotilla runs, e.g. argoServer.enabled=true.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<Set>,
    /// Print the ValidatingAdmissionPolicy and its binding instead of the ClusterRole
    /// (Kubernetes 1.30 or later; docs/security.md says what it refuses).
    #[arg(long)]
    admission_policy: bool,
    /// The ServiceAccount flotilla runs as, NAMESPACE/NAME or NAME in the config's namespace:
    /// the policy judges its requests only.
    #[arg(long, default_value = "flotilla", value_name = "ACCOUNT")]
    service_account: String,
}

pub fn rbac(config_path: &std::path::Path, args: &RbacArgs) -> Result<(), CliError> {
    let (config, renderer) = super::load(config_path)?;
    let located = |error: NamesError| match error {
        NamesError::Render { with, errors } => {
            let lines: Vec<String> = errors
                .0
                .into_iter()
                .map(|e| e.in_dir(&config.templates_dir).to_string())
                .collect();
            let with = match with.is_empty() {
                true => String::new(),
                false => format!(" with {}", with.join(", ")),
            };
            CliError(anyhow::anyhow!(
                "templates in {}{with}:\n{}",
                config.templates_dir.display(),
                lines.join("\n")
            ))
        }
        other => CliError(other.into()),
    };
    if args.admission_policy {
        let bounds =
            flotilla::admission::bounds(&renderer, &config, &args.sets).map_err(located)?;
        print!(
            "{}",
            flotilla::admission::policy_yaml(&bounds, &args.service_account)
        );
        return Ok(());
    }
    let names =
        flotilla::rbac::templated_names_with(&renderer, &config, &args.sets).map_err(located)?;
    print!("{}", flotilla::rbac::cluster_role(&names));
    Ok(())
}
