//! `flotilla check`: validates the config and templates offline, reporting every problem at
//! once, each with its file and line.

use super::CliError;
use flotilla::config::Config;
use flotilla::render::{self, Renderer};
use std::path::Path;

pub fn check(config_path: &Path) -> Result<(), CliError> {
    let config = Config::load(config_path).map_err(|e| CliError(e.into()))?;
    let sources =
        render::load_dir(&config.templates_dir).map_err(|e| CliError(anyhow::anyhow!("{e}")))?;
    let count = sources.len();
    // Templates that do not compile are reported; the others are still rendered, so that one
    // run shows every problem.
    let (renderer, mut problems) = match Renderer::new(sources.clone(), &config) {
        Ok(renderer) => (renderer, Vec::new()),
        Err(errors) => {
            let broken: Vec<&str> = errors.0.iter().map(|e| e.origin.as_str()).collect();
            let rest = sources
                .into_iter()
                .filter(|(file, _)| !broken.contains(&file.as_str()))
                .collect();
            let renderer =
                Renderer::new(rest, &config).map_err(|e| CliError(anyhow::anyhow!("{e}")))?;
            (renderer, errors.0)
        }
    };
    // Rendered for two sample namespaces: a name that differs between them cannot be listed in
    // the ClusterRole (`flotilla rbac`), and is a problem too.
    let objects = match flotilla::rbac::templated_names(&renderer, &config) {
        Ok(names) => names.objects,
        Err(errors) => {
            problems.extend(errors.0);
            0
        }
    };
    if problems.is_empty() {
        println!(
            "ok: {} and {count} templates in {} ({objects} objects for a sample namespace)",
            config_path.display(),
            config.templates_dir.display()
        );
        return Ok(());
    }
    let count = problems.len();
    for problem in problems {
        println!("{}", problem.in_dir(&config.templates_dir));
    }
    Err(CliError(anyhow::anyhow!(
        "{count} problem(s) in {}",
        config.templates_dir.display()
    )))
}
