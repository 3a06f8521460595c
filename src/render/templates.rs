//! Reading the templates directory.

use super::{RenderError, RenderErrors, RenderProblem, Renderer};
use crate::config::Config;
use std::path::{Path, PathBuf};

/// Every `*.yaml` / `*.yml` file of `dir`, sorted by name. Dot-files are skipped: a mounted
/// ConfigMap keeps its real files under `..data`, behind symlinks that have the plain names.
pub fn load_dir(dir: &Path) -> Result<Vec<(String, String)>, RenderErrors> {
    let fail = |problem| {
        RenderErrors(vec![RenderError {
            origin: dir.display().to_string(),
            line: None,
            problem,
        }])
    };
    let entries = std::fs::read_dir(dir).map_err(|e| fail(RenderProblem::UnreadableDir(e)))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| fail(RenderProblem::UnreadableDir(e)))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_template = name.ends_with(".yaml") || name.ends_with(".yml");
        if name.starts_with('.') || !is_template || !entry.path().is_file() {
            continue;
        }
        let source = std::fs::read_to_string(entry.path()).map_err(|error| {
            fail(RenderProblem::UnreadableTemplate {
                file: name.clone(),
                error,
            })
        })?;
        files.push((name, source));
    }
    if files.is_empty() {
        return Err(fail(RenderProblem::NoTemplates));
    }
    files.sort();
    Ok(files)
}

/// A config's templates that do not load or compile.
#[derive(Debug, thiserror::Error)]
#[error("templates in {}:\n{errors}", dir.display())]
pub struct TemplatesError {
    pub dir: PathBuf,
    pub errors: RenderErrors,
}

/// Loads and compiles `config`'s templates; each problem names its file by its path.
pub fn load(config: &Config) -> Result<Renderer, TemplatesError> {
    let dir = &config.templates_dir;
    Renderer::load(config).map_err(|errors| TemplatesError {
        dir: dir.clone(),
        errors: RenderErrors(errors.0.into_iter().map(|e| e.in_dir(dir)).collect()),
    })
}
