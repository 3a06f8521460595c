//! Templates -> objects. Each file in the templates directory is a minijinja template that
//! renders to at most one Kubernetes object. Every `{{ value }}` is serialized as JSON (which is
//! valid YAML), so no label, annotation or value can add structure: a newline, `---` or `{{`
//! inside a value stays part of one quoted string (see `escape`).

mod asleep;
mod dns_label;
mod error;
mod escape;
mod hash;
mod instance_id;
pub(crate) mod policy;
mod templates;

pub use asleep::scaled_to_zero;
pub use error::{Pinned, RenderError, RenderErrors, RenderProblem};
pub use escape::escape_non_printable;
pub use policy::{ObjectName, ObjectProblem, PolicyError};
pub use templates::{TemplatesError, load, load_dir};

use crate::config::{Config, Policy, RESERVED_NAMESPACES};
use crate::object::Stamped;
use crate::overrides::{self, Override};
use crate::yaml_error::YamlError;
use minijinja::{AutoEscape, Environment, UndefinedBehavior, Value, context};
use policy::Target;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The value the fleet's budget caps: the controller ConfigMap's `parallelism`.
pub const PARALLELISM: &str = "parallelism";

/// `values.parallelism`, if it is a count.
fn parallelism(values: &serde_json::Map<String, serde_json::Value>) -> Option<u32> {
    values
        .get(PARALLELISM)?
        .as_u64()
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// What a template knows about the namespace it renders for.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct NamespaceInput {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Its share of the fleet's budget (crate::budget), which caps `values.parallelism`; `None`
    /// without a budget. Not a template's to see: the cap is in the values.
    #[serde(skip)]
    pub share: Option<u32>,
}

pub struct Renderer {
    env: Environment<'static>,
    files: Vec<String>,
    /// (file name, source) as loaded: what a revision keeps.
    sources: Vec<(String, String)>,
    revision: String,
    values: serde_json::Map<String, serde_json::Value>,
    overrides: Vec<Override>,
    own_namespace: String,
    instance: String,
    policy: Policy,
}

/// Its revision says which templates and values it renders.
impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

impl Renderer {
    /// Loads the config's templates directory and compiles every template.
    pub fn load(config: &Config) -> Result<Renderer, RenderErrors> {
        Renderer::new(load_dir(&config.templates_dir)?, config)
    }

    /// Compiles `(file name, source)` pairs; syntax errors of all files are reported together.
    pub fn new(sources: Vec<(String, String)>, config: &Config) -> Result<Renderer, RenderErrors> {
        let revision = hash::revision(
            sources.iter().map(|(n, s)| (n.as_str(), s.as_str())),
            &config.values,
            &config.override_specs,
            &config.instance,
            &config.namespace,
        );
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // JSON escaping whatever the file is called: it is what keeps values inert. The
        // formatter also escapes what YAML does not allow, and nothing may turn it off.
        env.set_auto_escape_callback(|_| AutoEscape::Json);
        env.set_formatter(escape::formatter);
        env.add_filter("safe", escape::safe_filter);
        env.add_filter("escape", escape::escape_filter);
        env.add_filter("e", escape::escape_filter);
        env.add_filter("tojson", escape::tojson_filter);
        env.add_filter("yaml", yaml_filter);
        env.add_filter("dns_label", dns_label::dns_label_filter);
        env.add_function("fail", fail);
        let mut errors = Vec::new();
        let mut files = Vec::new();
        let kept = sources.clone();
        for (file, source) in sources {
            match env.add_template_owned(file.clone(), source) {
                Ok(()) => files.push(file),
                Err(e) => errors.push(template_error(&file, &e)),
            }
        }
        if !errors.is_empty() {
            return Err(RenderErrors(errors));
        }
        Ok(Renderer {
            env,
            files,
            sources: kept,
            revision,
            values: config.values.clone(),
            overrides: config.overrides.clone(),
            own_namespace: config.namespace.clone(),
            instance: config.instance.clone(),
            policy: config.policy.clone(),
        })
    }

    /// The templates as loaded: (file name, source).
    pub fn sources(&self) -> &[(String, String)] {
        &self.sources
    }

    /// The revision of templates and values, stamped on every object.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// Renders every template for one namespace. Any error fails the whole set: a partial set
    /// would make the caller prune what the failed templates would have kept.
    pub fn render(&self, namespace: &NamespaceInput) -> Result<Vec<Stamped>, RenderErrors> {
        if namespace.name == self.own_namespace {
            return Err(RenderErrors(vec![RenderError {
                origin: format!("namespace {}", namespace.name),
                line: None,
                problem: RenderProblem::OwnNamespace,
            }]));
        }
        let reserved = RESERVED_NAMESPACES.contains(&namespace.name.as_str());
        if reserved && !self.policy.allow_namespaces.contains(&namespace.name) {
            return Err(RenderErrors(vec![RenderError {
                origin: format!("namespace {}", namespace.name),
                line: None,
                problem: RenderProblem::ReservedNamespace,
            }]));
        }
        let values = self.values_for(namespace)?;
        let instance_id =
            instance_id::instance_id(&values, namespace).map_err(instance_id_error)?;
        let ctx = context! {
            namespace => Value::from(minijinja::value::Serde(namespace)),
            values => Value::from(minijinja::value::Serde(&values)),
            flotilla => context! { namespace => &self.own_namespace, instance => &self.instance },
            controller => context! { instanceID => instance_id },
        };
        let target = Target {
            namespace: &namespace.name,
            own_namespace: &self.own_namespace,
            instance: &self.instance,
            revision: &self.revision,
            service_types: &self.policy.allow_service_types,
        };
        let mut errors = Vec::new();
        let mut objects: Vec<Stamped> = Vec::new();
        let mut seen: HashMap<_, String> = HashMap::new();
        for file in &self.files {
            match self.render_file(file, &ctx, &target) {
                Ok(Some(object)) => match seen.get(&object.key) {
                    Some(first) => errors.push(RenderError {
                        origin: file.clone(),
                        line: None,
                        problem: RenderProblem::RenderedAlready {
                            object: object.key,
                            first: first.clone(),
                        },
                    }),
                    None => {
                        seen.insert(object.key.clone(), file.clone());
                        objects.push(object);
                    }
                },
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            // What only the whole set can tell, once every object passed on its own.
            errors.extend(
                policy::admit_set(&objects)
                    .into_iter()
                    .map(|(template, error)| RenderError {
                        origin: template,
                        line: None,
                        problem: RenderProblem::Policy(Box::new(error)),
                    }),
            );
        }
        if !errors.is_empty() {
            return Err(RenderErrors(errors));
        }
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(objects)
    }

    /// The instanceID `namespace`'s controller gets (None: none), as `render` gives it to the
    /// templates.
    pub fn instance_id(&self, namespace: &NamespaceInput) -> Result<Option<String>, RenderErrors> {
        let values = self.values_for(namespace)?;
        instance_id::instance_id(&values, namespace).map_err(instance_id_error)
    }

    /// The values with the namespace's overrides applied, or why they are refused.
    fn values_for(
        &self,
        namespace: &NamespaceInput,
    ) -> Result<serde_json::Map<String, serde_json::Value>, RenderErrors> {
        let mut values = self.own_values(namespace)?;
        if let Some(share) = namespace.share {
            let own = parallelism(&values).unwrap_or(u32::MAX);
            values.insert(PARALLELISM.into(), own.min(share).into());
        }
        Ok(values)
    }

    /// What the fleet's budget needs of `namespace` at this revision: its controller's own
    /// `parallelism` (values and override; none: no cap) and its instanceID.
    pub fn budget_terms(&self, namespace: &NamespaceInput) -> Option<(u32, Option<String>)> {
        let values = self.own_values(namespace).ok()?;
        let instance_id = instance_id::instance_id(&values, namespace).ok()?;
        Some((parallelism(&values).unwrap_or(u32::MAX), instance_id))
    }

    /// The values for `namespace`: the config's, with its overrides.
    fn own_values(
        &self,
        namespace: &NamespaceInput,
    ) -> Result<serde_json::Map<String, serde_json::Value>, RenderErrors> {
        overrides::apply(&self.values, &self.overrides, &namespace.annotations).map_err(|refused| {
            RenderErrors(
                refused
                    .into_iter()
                    .map(|refused| RenderError {
                        origin: format!("annotation {}", refused.annotation),
                        line: None,
                        problem: RenderProblem::Override(refused.error),
                    })
                    .collect(),
            )
        })
    }

    fn render_file(
        &self,
        file: &str,
        ctx: &Value,
        target: &Target,
    ) -> Result<Option<Stamped>, RenderError> {
        let fail = |line, problem| RenderError {
            origin: file.to_string(),
            line,
            problem,
        };
        let template = self
            .env
            .get_template(file)
            .map_err(|e| template_error(file, &e))?;
        let text = template.render(ctx).map_err(|e| template_error(file, &e))?;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).map_err(|e| {
            let YamlError {
                position, reason, ..
            } = e.into();
            fail(
                position.map(|p| p.line),
                RenderProblem::NotYaml {
                    column: position.map(|p| p.column),
                    reason,
                },
            )
        })?;
        let mut docs: Vec<_> = docs.into_iter().filter(|d| !d.is_null()).collect();
        match docs.len() {
            // A template may render to nothing, e.g. behind an `{% if %}`.
            0 => Ok(None),
            1 => policy::admit(docs.remove(0), file, target)
                .map(Some)
                .map_err(|e| fail(None, RenderProblem::Policy(Box::new(e)))),
            n => Err(fail(None, RenderProblem::Documents(n))),
        }
    }
}

/// `{{ value | yaml }}`: the value as YAML text, emitted as one (quoted) string. For ConfigMap
/// keys that hold nested YAML, such as Argo's `workflowDefaults`.
fn yaml_filter(value: Value) -> Result<String, minijinja::Error> {
    serde_saphyr::to_string(&value)
        .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, e.to_string()))
}

/// `{{ fail("why") }}`: the template refuses to render, for a value it cannot use (an unknown
/// mode, say). Rendering fails as for any template error, naming the file and line, so the
/// namespace keeps what it has and `flotilla check` reports it offline. The message goes into
/// a NamespaceWorker's status and an Event, so it is cut short.
fn fail(message: String) -> Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(
        minijinja::ErrorKind::InvalidOperation,
        truncate(&message, 300),
    ))
}

/// At most `max` bytes of `text`, cut at a character boundary, marked when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

fn instance_id_error(problem: RenderProblem) -> RenderErrors {
    RenderErrors(vec![RenderError {
        origin: "values.instanceID".into(),
        line: None,
        problem,
    }])
}

fn template_error(file: &str, e: &minijinja::Error) -> RenderError {
    RenderError {
        origin: file.to_string(),
        line: e.line(),
        problem: RenderProblem::Template {
            kind: e.kind(),
            detail: e.detail().map(str::to_string),
        },
    }
}

/// Multi-document YAML of rendered objects, exactly as they are applied.
pub fn to_yaml(objects: &[Stamped]) -> String {
    objects
        .iter()
        .map(|o| {
            let yaml = serde_saphyr::to_string(&o.body).unwrap_or_else(|e| format!("# {e}\n"));
            format!("---\n# Source: {}\n{yaml}", o.template)
        })
        .collect()
}

#[cfg(test)]
mod argo_tests;
#[cfg(test)]
mod tests;
