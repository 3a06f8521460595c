//! The config file (`flotilla.yaml`): schema, defaults and validation. Everything wrong with it
//! is reported with the file name, and the line where the YAML parser can tell.

use crate::overrides::{Override, OverrideSpec};
use crate::selector;
use kube::core::Selector;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

/// The file as written. Unknown keys are refused so that a typo never silently means "default".
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigFile {
    #[serde(default = "defaults::selector")]
    selector: String,
    #[serde(default = "defaults::templates")]
    templates: PathBuf,
    #[serde(default = "defaults::namespace")]
    namespace: String,
    #[serde(default = "defaults::instance")]
    instance: String,
    #[serde(default = "defaults::field_manager")]
    field_manager: String,
    #[serde(default = "defaults::concurrency")]
    concurrency: u16,
    #[serde(default = "defaults::resync_seconds")]
    resync_seconds: u64,
    #[serde(default = "defaults::degraded_after_seconds")]
    degraded_after_seconds: u64,
    #[serde(default)]
    values: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    overrides: BTreeMap<String, OverrideSpec>,
}

mod defaults {
    use std::path::PathBuf;
    pub fn selector() -> String {
        "flotilla.dev/enabled=true".into()
    }
    pub fn templates() -> PathBuf {
        "templates".into()
    }
    pub fn namespace() -> String {
        "flotilla-system".into()
    }
    pub fn instance() -> String {
        "flotilla".into()
    }
    pub fn field_manager() -> String {
        "flotilla".into()
    }
    pub fn concurrency() -> u16 {
        16
    }
    pub fn resync_seconds() -> u64 {
        600
    }
    pub fn degraded_after_seconds() -> u64 {
        300
    }
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Namespaces whose labels match are opted in.
    pub selector: Selector,
    pub selector_text: String,
    /// Resolved against the config file's directory.
    pub templates_dir: PathBuf,
    /// The namespace flotilla runs in; templates may place objects there explicitly.
    pub namespace: String,
    /// Distinguishes the objects of one flotilla fleet from another's (label value).
    pub instance: String,
    pub field_manager: String,
    /// How many namespaces are reconciled at once.
    pub concurrency: u16,
    /// Every namespace is re-checked this often, so drift the watches missed is still repaired.
    pub resync_seconds: u64,
    /// A worker whose Deployment stays unavailable this long is Degraded.
    pub degraded_after_seconds: u64,
    /// Free-form values handed to templates as `values`.
    pub values: serde_json::Map<String, serde_json::Value>,
    /// The values a Namespace may override for itself, by annotation.
    pub overrides: Vec<Override>,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let fail = |message: String| ConfigError {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read: {e}")))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Config::parse(&text, dir).map_err(fail)
    }

    /// Parses and validates config text; relative template paths resolve against `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<Config, String> {
        let file: ConfigFile = if text.trim().is_empty() {
            serde_saphyr::from_str("{}")
        } else {
            serde_saphyr::from_str(text)
        }
        .map_err(|e| e.to_string())?;
        let selector = selector::parse(&file.selector).map_err(|e| format!("selector: {e}"))?;
        selector::valid_value(&file.instance).map_err(|e| format!("instance: {e}"))?;
        if file.instance.is_empty() {
            return Err("instance: must not be empty".into());
        }
        if !is_dns_label(&file.namespace) {
            return Err(format!(
                "namespace: {:?} is not a valid namespace name (lowercase alphanumerics and '-', at most 63)",
                file.namespace
            ));
        }
        if file.field_manager.is_empty() || file.field_manager.len() > 128 {
            return Err("fieldManager: must be 1-128 characters".into());
        }
        if file.concurrency == 0 {
            return Err("concurrency: must be at least 1".into());
        }
        if file.resync_seconds == 0 {
            return Err("resyncSeconds: must be at least 1".into());
        }
        let overrides = file
            .overrides
            .into_iter()
            .map(|(key, spec)| Override::new(&key, spec, &file.values))
            .collect::<Result<Vec<_>, _>>()?;
        let templates_dir = dir.join(&file.templates);
        if !templates_dir.is_dir() {
            return Err(format!(
                "templates: {} is not a directory",
                templates_dir.display()
            ));
        }
        Ok(Config {
            selector,
            selector_text: file.selector,
            templates_dir,
            namespace: file.namespace,
            instance: file.instance,
            field_manager: file.field_manager,
            concurrency: file.concurrency,
            resync_seconds: file.resync_seconds,
            degraded_after_seconds: file.degraded_after_seconds,
            values: file.values,
            overrides,
        })
    }
}

/// RFC 1123 label: what namespace names must be.
pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("templates")).unwrap();
        Config::parse(text, dir.path())
    }

    #[test]
    fn defaults_apply_to_an_empty_file() {
        let config = parse("").unwrap();
        assert_eq!(config.selector_text, "flotilla.dev/enabled=true");
        assert_eq!(config.namespace, "flotilla-system");
        assert_eq!(config.instance, "flotilla");
        assert_eq!(config.concurrency, 16);
        assert!(config.templates_dir.ends_with("templates"));
    }

    #[test]
    fn values_are_kept_as_written() {
        let config = parse("values:\n  image: x:v1\n  replicas: 2\n").unwrap();
        assert_eq!(config.values["image"], "x:v1");
        assert_eq!(config.values["replicas"], 2);
    }

    #[test]
    fn errors_name_the_key() {
        for (text, needle) in [
            ("selectr: a=b\n", "selectr"),
            ("concurrency: many\n", "concurrency"),
            ("selector: 'a in (b'\n", "selector"),
            ("namespace: Bad_NS\n", "namespace"),
            ("concurrency: 0\n", "concurrency"),
            ("templates: nowhere\n", "templates"),
            ("instance: 'a b'\n", "instance"),
            ("overrides:\n  image: {type: string}\n", "no values.image"),
            (
                "values: {n: 1}\noverrides:\n  n: {type: number}\n",
                "unknown variant",
            ),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn yaml_errors_name_the_line() {
        let err = parse("selector: a=b\nvalues:\n  x: [1, 2\n").unwrap_err();
        assert!(err.contains("line"), "{err}");
    }
}
