//! The config file (`flotilla.yaml`): schema, defaults and validation. Everything wrong with it
//! is reported with the file name, the key, and the line that sets the key.

mod error;
mod locate;

pub use error::{ConfigError, ConfigProblem};

use crate::overrides::{Override, OverrideSpec};
use crate::selector;
use crate::yaml_error::YamlError;
use kube::core::Selector;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    #[serde(default = "defaults::api_qps")]
    api_qps: u32,
    #[serde(default = "defaults::api_burst")]
    api_burst: u32,
    #[serde(default = "defaults::resync_seconds")]
    resync_seconds: u64,
    #[serde(default = "defaults::degraded_after_seconds")]
    degraded_after_seconds: u64,
    #[serde(default)]
    values: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    overrides: BTreeMap<String, OverrideSpec>,
    #[serde(default)]
    leader_election: LeaderElection,
}

/// Lease-based leader election among replicas (the Lease is named after `instance` and lives in
/// `namespace`). With it off, every process writes: run exactly one.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElection {
    #[serde(default = "defaults::leader_election")]
    pub enabled: bool,
    /// A standby takes over at most this long after the leader died (at once on a clean stop).
    #[serde(default = "defaults::lease_duration_seconds")]
    pub lease_duration_seconds: u64,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            enabled: defaults::leader_election(),
            lease_duration_seconds: defaults::lease_duration_seconds(),
        }
    }
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
    pub fn api_qps() -> u32 {
        1000
    }
    pub fn api_burst() -> u32 {
        2000
    }
    pub fn resync_seconds() -> u64 {
        600
    }
    pub fn degraded_after_seconds() -> u64 {
        300
    }
    pub fn leader_election() -> bool {
        true
    }
    pub fn lease_duration_seconds() -> u64 {
        10
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
    /// Client-side rate limit on API requests: on average at most `api_qps` per second, with
    /// bursts of up to `api_burst`.
    pub api_qps: u32,
    pub api_burst: u32,
    /// Every namespace is re-checked this often, so drift the watches missed is still repaired.
    pub resync_seconds: u64,
    /// A worker whose Deployment stays unavailable this long is Degraded.
    pub degraded_after_seconds: u64,
    /// Free-form values handed to templates as `values`.
    pub values: serde_json::Map<String, serde_json::Value>,
    /// The values a Namespace may override for itself, by annotation.
    pub overrides: Vec<Override>,
    pub leader_election: LeaderElection,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.display().to_string(),
            error,
        })?;
        Config::parse(&text, path)
    }

    /// Parses and validates the text of the config file at `path`, which names it in errors;
    /// relative template paths resolve against its directory.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let yaml = if text.trim().is_empty() { "{}" } else { text };
        let file: ConfigFile = serde_saphyr::from_str(yaml).map_err(|e| {
            let error = YamlError::from(e);
            ConfigError::Yaml {
                path: path.display().to_string(),
                key: locate::key_named_at(text, &error),
                error,
            }
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        file.validate(dir)
            .map_err(|(key, problem)| ConfigError::Invalid {
                path: path.display().to_string(),
                line: locate::line_of_key(text, &key),
                key,
                problem,
            })
    }
}

impl ConfigFile {
    /// The first value flotilla refuses, with the key path that sets it.
    fn validate(self, dir: &Path) -> Result<Config, (String, ConfigProblem)> {
        let selector = selector::parse(&self.selector)
            .map_err(|e| refused("selector", ConfigProblem::Selector(e)))?;
        selector::valid_value(&self.instance)
            .map_err(|e| refused("instance", ConfigProblem::Label(e)))?;
        if self.instance.is_empty() {
            return Err(refused("instance", ConfigProblem::Empty));
        }
        if !is_dns_label(&self.namespace) {
            return Err(refused(
                "namespace",
                ConfigProblem::NamespaceName(self.namespace),
            ));
        }
        if self.field_manager.is_empty() || self.field_manager.len() > 128 {
            return Err(refused(
                "fieldManager",
                ConfigProblem::Length { min: 1, max: 128 },
            ));
        }
        for (key, value, minimum) in [
            ("concurrency", u64::from(self.concurrency), 1),
            ("apiQps", u64::from(self.api_qps), 1),
            ("apiBurst", u64::from(self.api_burst), 1),
            (
                "leaderElection.leaseDurationSeconds",
                self.leader_election.lease_duration_seconds,
                3,
            ),
            ("resyncSeconds", self.resync_seconds, 1),
        ] {
            if value < minimum {
                return Err(refused(key, ConfigProblem::AtLeast(minimum)));
            }
        }
        let mut overrides = Vec::new();
        for (key, spec) in self.overrides {
            let declaration = Override::new(&key, spec, &self.values).map_err(|e| {
                let path = match e.setting() {
                    Some(setting) => format!("overrides.{key}.{setting}"),
                    None => format!("overrides.{key}"),
                };
                refused(path, ConfigProblem::Override(e))
            })?;
            overrides.push(declaration);
        }
        let templates_dir = dir.join(&self.templates);
        if !templates_dir.is_dir() {
            return Err(refused(
                "templates",
                ConfigProblem::NotADirectory(templates_dir),
            ));
        }
        Ok(Config {
            selector,
            selector_text: self.selector,
            templates_dir,
            namespace: self.namespace,
            instance: self.instance,
            field_manager: self.field_manager,
            concurrency: self.concurrency,
            api_qps: self.api_qps,
            api_burst: self.api_burst,
            resync_seconds: self.resync_seconds,
            degraded_after_seconds: self.degraded_after_seconds,
            values: self.values,
            overrides,
            leader_election: self.leader_election,
        })
    }
}

fn refused(key: impl Into<String>, problem: ConfigProblem) -> (String, ConfigProblem) {
    (key.into(), problem)
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

    /// Parses `text` as `<tmp>/flotilla.yaml`, next to a templates directory; errors as they
    /// are printed, with `<tmp>` for the directory.
    fn parse(text: &str) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("templates")).unwrap();
        Config::parse(text, &dir.path().join("flotilla.yaml")).map_err(|e| {
            let tmp = dir.path().display().to_string();
            e.to_string().replace(&tmp, "<tmp>")
        })
    }

    #[test]
    fn defaults_apply_to_an_empty_file() {
        let config = parse("").unwrap();
        assert_eq!(config.selector_text, "flotilla.dev/enabled=true");
        assert_eq!(config.namespace, "flotilla-system");
        assert_eq!(config.instance, "flotilla");
        assert_eq!(config.concurrency, 16);
        assert_eq!((config.api_qps, config.api_burst), (1000, 2000));
        assert!(config.templates_dir.ends_with("templates"));
    }

    #[test]
    fn values_are_kept_as_written() {
        let config = parse("values:\n  image: x:v1\n  replicas: 2\n").unwrap();
        assert_eq!(config.values["image"], "x:v1");
        assert_eq!(config.values["replicas"], 2);
    }

    #[test]
    fn refused_values_are_named_by_file_line_and_key() {
        let label =
            "must be at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric";
        for (text, message) in [
            (
                "# who opts in\nselector: 'env in (a'\n",
                "line 2: selector: invalid label selector \"env in (a\": unbalanced '('".to_string(),
            ),
            (
                "instance: 'a b'\n",
                format!("line 1: instance: label value \"a b\": {label}"),
            ),
            ("instance: ''\n", "line 1: instance: must not be empty".into()),
            (
                "namespace: Bad_NS\n",
                "line 1: namespace: \"Bad_NS\" is not a valid namespace name (lowercase alphanumerics and '-', at most 63)".into(),
            ),
            (
                "fieldManager: ''\n",
                "line 1: fieldManager: must be 1-128 characters".into(),
            ),
            ("concurrency: 0\n", "line 1: concurrency: must be at least 1".into()),
            ("apiQps: 0\n", "line 1: apiQps: must be at least 1".into()),
            ("apiBurst: 0\n", "line 1: apiBurst: must be at least 1".into()),
            ("\n\nresyncSeconds: 0\n", "line 3: resyncSeconds: must be at least 1".into()),
            (
                "leaderElection:\n  leaseDurationSeconds: 2\n",
                "line 2: leaderElection.leaseDurationSeconds: must be at least 3".into(),
            ),
            (
                "templates: nowhere\n",
                "line 1: templates: <tmp>/nowhere is not a directory".into(),
            ),
            (
                "values: {image: x}\noverrides:\n  registry: {type: string}\n",
                "line 3: overrides.registry: there is no values.registry to override".into(),
            ),
            (
                "values: {n: 1}\noverrides:\n  n:\n    type: integer\n    pattern: x\n",
                "line 3: overrides.n: pattern and enum apply to type string only".into(),
            ),
            (
                "values: {image: x}\noverrides:\n  image:\n    type: string\n    pattern: '('\n",
                "line 5: overrides.image.pattern: regex parse error:\n    ^(?:()$\n     ^\nerror: unclosed group".into(),
            ),
        ] {
            assert_eq!(parse(text).unwrap_err(), format!("<tmp>/flotilla.yaml: {message}"));
        }
    }

    #[test]
    fn a_key_the_file_does_not_set_is_named_without_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let err = Config::parse("selector: a=b\n", &dir.path().join("flotilla.yaml")).unwrap_err();
        let ConfigError::Invalid { key, line, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!((key.as_str(), *line), ("templates", None));
        assert!(
            err.to_string().ends_with("templates is not a directory"),
            "{err}"
        );
    }

    #[test]
    fn yaml_errors_name_line_column_and_key_then_show_the_spot() {
        for (text, first_line) in [
            (
                "selector: a=b\nconcurrency: many\n",
                "line 2 column 14: concurrency: invalid u16",
            ),
            (
                "selector: a=b\nresyncSeconds:\n  - 1\n",
                "line 3 column 3: resyncSeconds: expected string scalar",
            ),
            (
                "selector: a=b\nvalues:\n  x: [1, 2\n",
                "line 3 column 6: x: unclosed bracket '['",
            ),
            (
                "selector: a=b\nselector: c=d\n",
                "line 2 column 1: selector: duplicate mapping key: selector, set DuplicateKeyPolicy in Options if acceptable",
            ),
            // The parser names an unknown key itself.
            (
                "selectr: a=b\n",
                "line 1 column 1: unknown field `selectr`, expected one of selector, templates, namespace, instance, fieldManager, concurrency, apiQps, apiBurst, resyncSeconds, degradedAfterSeconds, values, overrides, leaderElection",
            ),
            (
                "values: {n: 1}\noverrides:\n  n: {type: number}\n",
                "line 3 column 13: n: unknown variant `number`, expected one of string, integer, boolean, quantity",
            ),
        ] {
            let err = parse(text).unwrap_err();
            let (first, spot) = err.split_once('\n').expect(&err);
            assert_eq!(first, format!("<tmp>/flotilla.yaml: {first_line}"));
            assert!(spot.starts_with(" --> <input>:"), "{err}");
        }
    }
}
