//! The config file (`flotilla.yaml`): schema, defaults and validation. Everything wrong with it
//! is reported with the file name, the key, and the line that sets the key.

mod error;
mod locate;
mod reload;
mod sleep;
mod strategy;

pub use error::{ConfigError, ConfigProblem};

use crate::overrides::{Override, OverrideSpec};
use crate::rollout::Strategy;
use crate::selector;
use crate::yaml_error::YamlError;
use kube::core::Selector;
use serde::Deserialize;
use sleep::SleepFile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use strategy::RolloutFile;

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
    #[serde(default)]
    policy: PolicyFile,
    #[serde(default)]
    rollout: RolloutFile,
    sleep: Option<SleepFile>,
    fleet_parallelism: Option<u32>,
}

/// What a template may ask for beyond flotilla's fixed rules (`render::policy`), and which
/// reserved namespaces may be targets.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyFile {
    #[serde(default = "defaults::allow_service_types")]
    allow_service_types: Vec<ServiceType>,
    #[serde(default)]
    allow_namespaces: Vec<String>,
}

impl Default for PolicyFile {
    fn default() -> Self {
        PolicyFile {
            allow_service_types: defaults::allow_service_types(),
            allow_namespaces: Vec::new(),
        }
    }
}

/// The types a Service may have (`spec.type`), as Kubernetes spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ServiceType {
    ClusterIP,
    NodePort,
    LoadBalancer,
    ExternalName,
}

impl ServiceType {
    pub fn name(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
            ServiceType::ExternalName => "ExternalName",
        }
    }
}

/// Namespaces Kubernetes keeps for itself: never a target, even when the selector matches,
/// unless `policy.allowNamespaces` names them.
pub const RESERVED_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// The validated `policy`.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The Service types a template may stamp (default: ClusterIP only).
    pub allow_service_types: Vec<ServiceType>,
    /// The reserved namespaces that may be targets all the same.
    pub allow_namespaces: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            allow_service_types: defaults::allow_service_types(),
            allow_namespaces: Vec::new(),
        }
    }
}

/// Lease-based leader election among replicas (the Lease is named after `instance` and lives in
/// `namespace`). With it off, every process writes: run exactly one.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    /// No client-side limit: every supported API server has Priority and Fairness, which
    /// queues what it cannot take (the install gives flotilla FlowSchemas of its own), and
    /// `concurrency` bounds what flotilla asks at once.
    pub fn api_qps() -> u32 {
        0
    }
    pub fn api_burst() -> u32 {
        200
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
    pub fn allow_service_types() -> Vec<super::ServiceType> {
        vec![super::ServiceType::ClusterIP]
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
    /// bursts of up to `api_burst`; none at an `api_qps` of 0.
    pub api_qps: u32,
    pub api_burst: u32,
    /// Every namespace is looked at this often even without events, against the watch caches:
    /// namespaces known only from stamped objects' labels are reaped and status deadlines met.
    /// Objects are not re-read; drift reaches flotilla through the watches, which relist when
    /// they break.
    pub resync_seconds: u64,
    /// A worker whose Deployment stays unavailable this long is Degraded.
    pub degraded_after_seconds: u64,
    /// Free-form values handed to templates as `values`.
    pub values: serde_json::Map<String, serde_json::Value>,
    /// The values a Namespace may override for itself, by annotation.
    pub overrides: Vec<Override>,
    /// The same, as written: part of every revision.
    pub override_specs: BTreeMap<String, OverrideSpec>,
    pub leader_election: LeaderElection,
    pub policy: Policy,
    pub rollout: Strategy,
    /// Idle controllers scaled to zero (`None`: nothing sleeps).
    pub sleep: Option<crate::sleep::Policy>,
    /// Workflows running at once across the fleet, shared between namespaces (crate::budget);
    /// `None`: each controller counts its own only.
    pub fleet_parallelism: Option<u32>,
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
            ("apiBurst", u64::from(self.api_burst), 1),
            (
                "leaderElection.leaseDurationSeconds",
                self.leader_election.lease_duration_seconds,
                3,
            ),
            ("resyncSeconds", self.resync_seconds, 1),
            (
                "fleetParallelism",
                self.fleet_parallelism.map_or(1, u64::from),
                1,
            ),
        ] {
            if value < minimum {
                return Err(refused(key, ConfigProblem::AtLeast(minimum)));
            }
        }
        let rollout = self.rollout.validate()?;
        let sleep = self.sleep.map(SleepFile::validate).transpose()?;
        let mut overrides = Vec::new();
        let override_specs = self.overrides.clone();
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
        for name in &self.policy.allow_namespaces {
            let key = "policy.allowNamespaces";
            if *name == self.namespace {
                return Err(refused(
                    key,
                    ConfigProblem::OwnNamespaceAllowed(name.clone()),
                ));
            }
            if !RESERVED_NAMESPACES.contains(&name.as_str()) {
                return Err(refused(key, ConfigProblem::NotReserved(name.clone())));
            }
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
            override_specs,
            leader_election: self.leader_election,
            policy: Policy {
                allow_service_types: self.policy.allow_service_types,
                allow_namespaces: self.policy.allow_namespaces,
            },
            rollout,
            sleep,
            fleet_parallelism: self.fleet_parallelism,
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
mod tests;
