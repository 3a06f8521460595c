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
        let fail = |message: String| ConfigError {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read: {e}")))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Config::parse(&text, dir).map_err(|message| fail(locate(&text, message)))
    }

    /// Parses and validates config text; relative template paths resolve against `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<Config, String> {
        let file: ConfigFile = if text.trim().is_empty() {
            serde_saphyr::from_str("{}")
        } else {
            serde_saphyr::from_str(text)
        }
        .map_err(|e| yaml_error(text, &e))?;
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
        if file.api_qps == 0 {
            return Err("apiQps: must be at least 1".into());
        }
        if file.api_burst == 0 {
            return Err("apiBurst: must be at least 1".into());
        }
        if file.leader_election.lease_duration_seconds < 3 {
            return Err("leaderElection.leaseDurationSeconds: must be at least 3".into());
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
            api_qps: file.api_qps,
            api_burst: file.api_burst,
            resync_seconds: file.resync_seconds,
            degraded_after_seconds: file.degraded_after_seconds,
            values: file.values,
            overrides,
            leader_election: file.leader_election,
        })
    }
}

/// The parser's message, naming the key where it names only the problem ("line 1 column 14:
/// invalid u16" -> "line 1 column 14: concurrency: invalid u16"). The quoted source lines that
/// follow are kept: they show the spot on a terminal.
fn yaml_error(text: &str, e: &serde_saphyr::Error) -> String {
    let message = e.to_string();
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    let (first, rest) = message.split_once('\n').unwrap_or((message, ""));
    let key = e
        .location()
        .and_then(|l| key_at(text, l.line() as usize))
        .filter(|key| !first.contains(&format!("`{key}`")));
    let first = match (key, first.split_once(": ")) {
        (Some(key), Some((at, problem))) if at.starts_with("line ") => {
            format!("{at}: {key}: {problem}")
        }
        _ => first.to_string(),
    };
    if rest.is_empty() {
        first
    } else {
        format!("{first}\n{rest}")
    }
}

/// The key set on 1-based `line`, or, for a list item or continuation line, the key it belongs
/// to (the nearest line above that is indented less).
fn key_at(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().take(line).collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut limit = usize::MAX;
    for l in lines.iter().rev() {
        let content = l.trim_start();
        if content.is_empty() || content.starts_with('#') || indent(l) >= limit {
            continue;
        }
        if let Some((key, _)) = content.split_once(':') {
            let key = key.trim().trim_matches(['"', '\''].as_slice());
            if !key.is_empty() && !key.contains([' ', '[', '{']) {
                return Some(key.to_string());
            }
        }
        limit = indent(l);
    }
    None
}

/// Prefixes a validation message that starts with a key path (`selector: …`,
/// `overrides.parallelism: …`) with the line where the config file sets that key, if it does
/// (in block style).
fn locate(text: &str, message: String) -> String {
    let Some((path, _)) = message.split_once(": ") else {
        return message;
    };
    let is_path = !path.is_empty()
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_');
    if !is_path || message.starts_with("line ") {
        return message;
    }
    match line_of(text, path) {
        Some(line) => format!("line {line}: {message}"),
        None => message,
    }
}

/// The 1-based line of a dotted key path in block-style YAML, or of the deepest part of it that
/// has a line of its own. Keys may contain dots themselves (`overrides: {resources.limits.cpu:
/// …}`), so at each level the longest matching key wins.
fn line_of(text: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let segments: Vec<&str> = path.split('.').collect();
    let (mut at, mut from, mut parent_indent) = (0, 0, None::<usize>);
    let mut found = None;
    while at < segments.len() {
        let mut matched = None;
        'lines: for (i, line) in lines.iter().enumerate().skip(from) {
            let indent = line.len() - line.trim_start().len();
            let content = line.trim_start();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            if parent_indent.is_some_and(|p| indent <= p) {
                break;
            }
            for end in (at + 1..=segments.len()).rev() {
                let key = segments[at..end].join(".");
                if content.starts_with(&format!("{key}:")) {
                    matched = Some((i, indent, end));
                    break 'lines;
                }
            }
        }
        // A key not on a line of its own (in a flow mapping): the line of its parent.
        let Some((i, indent, end)) = matched else {
            break;
        };
        found = Some(i + 1);
        (at, from, parent_indent) = (end, i + 1, Some(indent));
    }
    found
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
    fn errors_name_the_key() {
        for (text, needle) in [
            ("selectr: a=b\n", "selectr"),
            ("concurrency: many\n", "concurrency"),
            ("selector: 'a in (b'\n", "selector"),
            ("namespace: Bad_NS\n", "namespace"),
            ("concurrency: 0\n", "concurrency"),
            ("apiQps: 0\n", "apiQps"),
            ("apiBurst: -1\n", "apiBurst"),
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
    fn errors_name_the_line_of_the_key() {
        let text = "# flotilla\nselector: 'a in (b'\n";
        assert!(locate(text, "selector: unbalanced".into()).starts_with("line 2: selector: "));
        let text =
            "values:\n  n: 1\noverrides:\n  other: {}\n  resources.limits.cpu:\n    type: x\n";
        assert_eq!(line_of(text, "overrides.resources.limits.cpu"), Some(5));
        assert_eq!(line_of(text, "overrides.n"), Some(3));
        assert_eq!(line_of(text, "nothing.here"), None);
        assert_eq!(line_of(text, "values.n"), Some(2));
        // A message that is not about a key is left as it is.
        assert_eq!(
            locate(text, "cannot read: gone".into()),
            "cannot read: gone"
        );
        // Wrong types: the parser names the line, flotilla adds the key.
        let err = parse("selector: a=b\nconcurrency: many\n").unwrap_err();
        assert!(
            err.starts_with("line 2 column 14: concurrency: invalid"),
            "{err}"
        );
    }

    #[test]
    fn yaml_errors_name_the_line() {
        let err = parse("selector: a=b\nvalues:\n  x: [1, 2\n").unwrap_err();
        assert!(
            err.starts_with("line 3 column 6: x: unclosed bracket '['\n"),
            "{err}"
        );
    }
}
