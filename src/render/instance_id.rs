//! `values.instanceID`: which Workflows a namespace's controller takes (crate::workflows).
//! `namespace` (the default) gives each controller its namespace's name, so that no other Argo
//! controller, say a cluster-wide one, also runs the namespace's Workflows (argo-workflows
//! #4036); `none` gives none, so that unlabelled Workflows run; any other string is a template
//! of the id, such as `argo-{{ namespace.name }}`. Templates see the result as
//! `controller.instanceID`, and flotilla counts the Workflows it makes the controller ignore.

use super::NamespaceInput;
use super::RenderProblem;
use crate::selector::is_label_value;
use minijinja::Environment;

/// The controller's instanceID for `namespace` under `values` (after the namespace's overrides).
pub fn instance_id(
    values: &serde_json::Map<String, serde_json::Value>,
    namespace: &NamespaceInput,
) -> Result<Option<String>, RenderProblem> {
    let choice = match values.get("instanceID") {
        None => "namespace",
        Some(serde_json::Value::String(choice)) => choice.as_str(),
        Some(other) => {
            return Err(RenderProblem::InstanceId(format!(
                "values.instanceID is {other}, not a string"
            )));
        }
    };
    let id = match choice {
        "namespace" => namespace.name.clone(),
        "none" => return Ok(None),
        template => {
            // A plain environment: the id is a label value, checked below, not YAML to escape.
            let env = Environment::new();
            let ctx = minijinja::context! {
                namespace => minijinja::Value::from(minijinja::value::Serde(namespace)),
            };
            env.render_str(template, ctx).map_err(|e| {
                RenderProblem::InstanceId(format!("values.instanceID {template:?} fails: {e}"))
            })?
        }
    };
    if id.is_empty() || !is_label_value(&id) {
        return Err(RenderProblem::InstanceId(format!(
            "values.instanceID {choice:?} gives {id:?} for namespace {}, which is not a label value",
            namespace.name
        )));
    }
    Ok(Some(id))
}
