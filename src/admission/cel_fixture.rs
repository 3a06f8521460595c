//! What the CEL tests share: the policy compiled and judged as the API server would, requests
//! built by hand, and the objects the repository's templates render.

use super::tests::repo;
use super::*;
use crate::render::NamespaceInput;
use ::cel::{Context, Program};
use serde_json::json;

pub(super) const FLOTILLA: &str = "system:serviceaccount:flotilla-system:flotilla";
pub(super) const OPTED_IN: &str = "team-a";

pub(super) struct Compiled {
    condition: Program,
    variables: Vec<(String, Program)>,
    validations: Vec<(Program, Value)>,
}

pub(super) fn compile(text: &Value) -> Program {
    Program::compile(text.as_str().unwrap()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

pub(super) fn load(bounds: &Bounds) -> Compiled {
    let yaml = policy_yaml(bounds, "flotilla-system/flotilla");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let spec = &docs[0]["spec"];
    Compiled {
        condition: compile(&spec["matchConditions"][0]["expression"]),
        variables: spec["variables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap().to_string(),
                    compile(&v["expression"]),
                )
            })
            .collect(),
        validations: spec["validations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (compile(&v["expression"]), v.clone()))
            .collect(),
    }
}

/// The API server's verdict: `None` when the policy does not apply or every validation
/// holds, else the message of the first that fails (an error fails it too).
pub(super) fn judge(policy: &Compiled, request: &Value) -> Option<String> {
    let mut context = Context::default();
    for name in ["request", "object", "oldObject", "namespaceObject"] {
        context
            .add_variable(name, ::cel::to_value(&request[name]).unwrap())
            .unwrap();
    }
    if policy.condition.execute(&context).unwrap() != true.into() {
        return None;
    }
    let mut variables = std::collections::HashMap::new();
    for (name, program) in &policy.variables {
        let value = program
            .execute(&context)
            .unwrap_or_else(|e| panic!("variable {name}: {e}"));
        variables.insert(name.clone(), value);
    }
    context.add_variable_from_value("variables", variables);
    for (program, validation) in &policy.validations {
        if program.execute(&context) != Ok(true.into()) {
            let message = match &validation["messageExpression"] {
                Value::String(text) => {
                    match Program::compile(text).unwrap().execute(&context).unwrap() {
                        ::cel::Value::String(s) => s.to_string(),
                        other => panic!("{other:?}"),
                    }
                }
                _ => validation["message"].as_str().unwrap().to_string(),
            };
            return Some(message);
        }
    }
    None
}

pub(super) fn namespace(name: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels}})
}

/// A request by `user` to write `object` (CREATE), as the API server shows it to the policy.
pub(super) fn write_by(user: &str, object: &Value, ns_labels: Value) -> Value {
    let kind = Kind::from_type(
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap(),
    )
    .unwrap();
    let resource = kind.api_resource();
    let ns = object["metadata"]["namespace"].as_str().unwrap();
    json!({
        "request": {
            "operation": "CREATE",
            "namespace": ns,
            "name": object["metadata"]["name"],
            "resource": {"group": resource.group, "version": resource.version, "resource": resource.plural},
            "userInfo": {"username": user},
        },
        "object": object,
        "oldObject": null,
        "namespaceObject": namespace(ns, ns_labels),
    })
}

pub(super) fn write(object: &Value, ns_labels: Value) -> Value {
    write_by(FLOTILLA, object, ns_labels)
}

pub(super) fn opted_in() -> Value {
    json!({"flotilla.dev/enabled": "true"})
}

/// Every object the repository's templates render for `team-a`, argo-server on.
pub(super) fn rendered() -> Vec<Value> {
    let (config, _) = repo();
    let mut varied = config.clone();
    varied.values["argoServer"]["enabled"] = json!(true);
    let renderer = Renderer::load(&varied).unwrap();
    let input = NamespaceInput {
        name: OPTED_IN.into(),
        labels: [("flotilla.dev/enabled".to_string(), "true".to_string())].into(),
        annotations: Default::default(),
        share: None,
    };
    renderer
        .render(&input)
        .unwrap()
        .into_iter()
        .map(|o| o.body)
        .collect()
}

pub(super) fn find(objects: &[Value], kind: &str, name: &str) -> Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name}"))
        .clone()
}
