//! The policy's bounds read from renders, and the document they make.

use super::*;
use serde_json::json;

fn config(text: &str) -> Config {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    Config::parse(text, &dir.path().join("flotilla.yaml")).unwrap()
}

fn bounds_of(config_text: &str, files: &[(&str, &str)]) -> Result<Bounds, NamesError> {
    let config = config(config_text);
    let sources = files
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
    bounds(&Renderer::new(sources, &config).unwrap(), &config, &[])
}

/// The repository's config and templates, argo-server on as well (as `make manifests` renders).
pub(super) fn repo() -> (Config, Bounds) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
    let config = Config::load(&path).unwrap();
    let renderer = Renderer::load(&config).unwrap();
    let sets = ["argoServer.enabled=true".parse().unwrap()];
    let bounds = bounds(&renderer, &config, &sets).unwrap();
    (config, bounds)
}

const ROLE: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [get]\n    resourceNames: [{{ NAMES }}]\n";

#[test]
fn the_repository_templates_pin_their_roles_bindings_and_service_accounts() {
    let (_, bounds) = repo();
    assert_eq!(
        bounds.roles.keys().collect::<Vec<_>>(),
        ["argo-role", "argo-server-role", "argo-workflow"]
    );
    assert!(
        bounds.roles.values().all(|v| v.len() == 1),
        "one set of rules each"
    );
    let accounts: Vec<(&str, Vec<&str>)> = bounds
        .accounts
        .iter()
        .map(|(d, a)| (d.as_str(), a.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        accounts,
        [
            ("argo-server", vec!["argo-server"]),
            ("workflow-controller", vec!["argo"])
        ]
    );
    let subjects = Pattern::List(vec![Pattern::Map(
        [
            ("kind".to_string(), Pattern::Value(json!("ServiceAccount"))),
            ("name".to_string(), Pattern::Value(json!("argo"))),
            ("namespace".to_string(), Pattern::Namespace),
        ]
        .into(),
    )]);
    let Pattern::Map(binding) = &bounds.bindings["argo-binding"][0] else {
        panic!("a map")
    };
    assert_eq!(
        binding["subjects"], subjects,
        "the subject's namespace is the request's"
    );
    assert!(bounds.own_objects.is_empty(), "nothing in flotilla-system");
    assert_eq!(
        bounds.reserved,
        ["kube-system", "kube-public", "kube-node-lease"]
    );
}

#[test]
fn what_the_policy_pins_must_not_depend_on_the_namespace() {
    let cases: [(&str, Result<Pattern, &str>); 3] = [
        // Fixed: pinned as it is.
        ("\"a\"", Ok(Pattern::Value(json!("a")))),
        // The namespace's own name stands for the request's namespace.
        ("{{ namespace.name }}", Ok(Pattern::Namespace)),
        // Composed from it: no one pattern holds it.
        (
            "{{ namespace.name ~ \"-x\" }}",
            Err(
                "r.yaml: renders Role flotilla-check/r with rules that differ between namespaces flotilla-check and sample-b beyond the namespace's own name",
            ),
        ),
    ];
    for (names, want) in cases {
        let template = ROLE.replace("{{ NAMES }}", names);
        let got = bounds_of("selector: a=b\n", &[("r.yaml", &template)]);
        match want {
            Ok(pattern) => {
                let Pattern::List(rules) = &got.unwrap().roles["r"][0] else {
                    panic!("a list")
                };
                let Pattern::Map(rule) = &rules[0] else {
                    panic!("a map")
                };
                assert_eq!(
                    rule["resourceNames"],
                    Pattern::List(vec![pattern]),
                    "{names}"
                );
            }
            Err(message) => {
                let error = got.unwrap_err().to_string();
                assert!(error.starts_with(message), "{names}: {error}");
            }
        }
    }
}

#[test]
fn objects_placed_in_flotillas_own_namespace_are_listed() {
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: flotilla-system\n";
    let bounds = bounds_of("selector: a=b\n", &[("cm.yaml", cm)]).unwrap();
    assert_eq!(
        bounds.own_objects,
        BTreeSet::from([(Kind::ConfigMap, "shared".to_string())])
    );
}

/// Whether every allowance of `config` is among those of `installed`.
fn covered(config: &Bounds, installed: &Bounds) -> bool {
    let installed = installed.allowances();
    config
        .allowances()
        .keys()
        .all(|k| installed.contains_key(k))
}

#[test]
fn a_policy_covers_a_config_when_it_allows_all_the_config_renders() {
    let template = ROLE.replace("{{ NAMES }}", "\"a\"");
    let files = [("r.yaml", template.as_str())];
    let base = bounds_of("selector: a=b\n", &files).unwrap();
    assert!(covered(
        &base,
        &bounds_of("selector: a=b\n", &files).unwrap()
    ));
    // Values the policy does not read change nothing.
    let values = bounds_of("selector: a=b\nvalues:\n  x: 1\n", &files).unwrap();
    assert!(covered(&values, &base));
    // A policy that allows more (another Service type) covers a config that needs less.
    let wider = bounds_of(
        "selector: a=b\npolicy:\n  allowServiceTypes: [ClusterIP, NodePort]\n",
        &files,
    )
    .unwrap();
    assert!(covered(&base, &wider));
    assert!(!covered(&wider, &base));
    for other in [
        "selector: a=c\n",
        "selector: a=b\ninstance: other\n",
        "selector: a=b\nnamespace: elsewhere\n",
        "selector: a=b\npolicy:\n  allowNamespaces: [kube-system]\n",
    ] {
        let changed = bounds_of(other, &files).unwrap();
        assert!(!covered(&changed, &base), "{other}");
    }
    let other_rules = ROLE.replace("{{ NAMES }}", "\"b\"");
    let changed = bounds_of("selector: a=b\n", &[("r.yaml", &other_rules)]).unwrap();
    assert!(!covered(&changed, &base));
    let missing = base.allowances();
    let named: Vec<String> = changed
        .allowances()
        .into_iter()
        .filter(|(k, _)| !missing.contains_key(k))
        .map(|(_, what)| what)
        .collect();
    assert_eq!(named, ["Role r's rules"]);
}

#[test]
fn the_repository_policy_generated_with_argo_server_covers_the_config_without_it() {
    let (config, with_server) = repo();
    let without = bounds(&Renderer::load(&config).unwrap(), &config, &[]).unwrap();
    assert!(covered(&without, &with_server));
    assert!(!covered(&with_server, &without));
}

#[test]
fn the_document_is_a_policy_and_its_binding_for_one_service_account() {
    let (_, bounds) = repo();
    let yaml = policy_yaml(&bounds, "flotilla-system/flotilla");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    assert_eq!(docs.len(), 2);
    let (policy, binding) = (&docs[0], &docs[1]);
    assert_eq!(policy["kind"], "ValidatingAdmissionPolicy");
    assert_eq!(policy["metadata"]["name"], POLICY);
    assert_eq!(
        policy["metadata"]["annotations"][SELECTOR_ANNOTATION],
        "flotilla.dev/enabled=true"
    );
    let digests: Vec<String> = bounds.allowances().into_keys().collect();
    assert_eq!(
        policy["metadata"]["annotations"][BOUNDS_ANNOTATION],
        digests.join(" ")
    );
    assert_eq!(
        policy["spec"]["matchConditions"][0]["expression"],
        "request.userInfo.username == \"system:serviceaccount:flotilla-system:flotilla\""
    );
    let resources: Vec<&Value> = policy["spec"]["matchConstraints"]["resourceRules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["resources"][0])
        .collect();
    assert_eq!(resources.len(), Kind::ALL.len());
    let validations = policy["spec"]["validations"].as_array().unwrap();
    assert!(
        validations.iter().all(|v| v["reason"] == "Forbidden"),
        "403, not 422"
    );
    assert_eq!(binding["kind"], "ValidatingAdmissionPolicyBinding");
    assert_eq!(binding["spec"]["policyName"], POLICY);
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
}
