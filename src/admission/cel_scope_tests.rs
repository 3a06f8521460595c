//! Where the policy applies and what it leaves to the render policy: the namespace selector
//! against kube's own label-selector matching, and pods against the render policy's verdict.

use super::cel_fixture::*;
use super::tests::repo;
use super::*;
use kube::core::SelectorExt;
use serde_json::json;

#[test]
fn the_namespace_selector_means_what_kubes_does() {
    let label_sets = [
        json!({}),
        json!({"a": "x"}),
        json!({"a": "y"}),
        json!({"a": "z", "b": "1"}),
        json!({"b": "1"}),
    ];
    for text in [
        "a=x",
        "a!=x",
        "a in (x,y)",
        "a notin (x,y)",
        "a",
        "!a",
        "a=x,b",
        "a!=x,!b",
        "b,a notin (z)",
    ] {
        let mut config = config_with_selector(text);
        config.policy.allow_namespaces.clear();
        let bounds = Bounds::from_samples(&config, &[]).unwrap();
        let policy = load(&bounds);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "namespace": "team"}});
        for labels in &label_sets {
            let map: std::collections::BTreeMap<String, String> =
                serde_json::from_value(labels.clone()).unwrap();
            let want = config.selector.matches(&map);
            let verdict = judge(&policy, &write(&cm, labels.clone()));
            // Matched, a ConfigMap the templates do not render is refused for its name only
            // by RBAC; here the namespace rule is what is under test.
            let namespace_refused = verdict.is_some_and(|m| m.contains("is not opted in"));
            assert_eq!(!namespace_refused, want, "{text} on {labels}");
        }
    }
    // Without labels at all.
    let bounds = Bounds::from_samples(&config_with_selector("!a"), &[]).unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "namespace": "team"}});
    let mut request = write(&cm, Value::Null);
    request["namespaceObject"] = json!({"metadata": {"name": "team"}});
    assert_eq!(judge(&load(&bounds), &request), None);
}

fn config_with_selector(selector: &str) -> Config {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    Config::parse(
        &format!("selector: {selector:?}\n"),
        &dir.path().join("flotilla.yaml"),
    )
    .unwrap()
}

#[test]
fn pods_are_judged_as_the_render_policy_judges_them() {
    let (config, bounds) = repo();
    let policy = load(&bounds);
    let deployment = find(&rendered(), "Deployment", "workflow-controller");
    let target = crate::render::policy::Target {
        namespace: OPTED_IN,
        own_namespace: &config.namespace,
        instance: &config.instance,
        revision: "r",
        service_types: &config.policy.allow_service_types,
    };
    let container =
        |context: Value| json!([{"name": "c", "image": "x:1", "securityContext": context}]);
    let safe = json!({"allowPrivilegeEscalation": false});
    // (what the pod template's spec gets, whether it passes)
    let cases: Vec<(Value, bool)> = vec![
        (json!({}), true),
        (json!({"hostNetwork": false, "hostPID": false}), true),
        (json!({"hostNetwork": true}), false),
        (json!({"hostPID": true}), false),
        (json!({"hostIPC": true}), false),
        (json!({"volumes": [{"name": "t", "emptyDir": {}}]}), true),
        (
            json!({"volumes": [{"name": "t", "emptyDir": {}}, {"name": "r", "hostPath": {"path": "/"}}]}),
            false,
        ),
        (json!({"securityContext": {"sysctls": []}}), true),
        (
            json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
            false,
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
            true,
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
            false,
        ),
        (json!({"containers": container(safe.clone())}), true),
        (json!({"containers": container(json!({}))}), false),
        (
            json!({"containers": container(json!({"allowPrivilegeEscalation": true}))}),
            false,
        ),
        (
            json!({"containers": [{"name": "c", "image": "x:1"}]}),
            false,
        ),
        (
            json!({"containers": container(json!({"allowPrivilegeEscalation": false, "privileged": true}))}),
            false,
        ),
        (
            json!({"containers": container(json!({"allowPrivilegeEscalation": false, "privileged": false}))}),
            true,
        ),
        (
            json!({"initContainers": container(json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["SYS_ADMIN"]}}))}),
            false,
        ),
        (
            json!({"initContainers": container(json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": []}}))}),
            true,
        ),
        (
            json!({"containers": container(json!({"allowPrivilegeEscalation": false, "seccompProfile": {"type": "Unconfined"}}))}),
            false,
        ),
        (
            json!({"containers": [{"name": "c", "image": "x:1", "securityContext": safe, "ports": [{"containerPort": 80, "hostPort": 80}]}]}),
            false,
        ),
        (
            json!({"containers": [{"name": "c", "image": "x:1", "securityContext": safe, "ports": [{"containerPort": 80}]}]}),
            true,
        ),
        (
            json!({"ephemeralContainers": container(json!({"privileged": true}))}),
            false,
        ),
    ];
    for (change, passes) in cases {
        let mut object = deployment.clone();
        for (key, value) in change.as_object().unwrap() {
            object["spec"]["template"]["spec"][key] = value.clone();
        }
        let by_render = crate::render::policy::admit(object.clone(), "d.yaml", &target);
        assert_eq!(by_render.is_ok(), passes, "render policy on {change}");
        let by_policy = judge(&policy, &write(&object, opted_in()));
        assert_eq!(
            by_policy.is_none(),
            passes,
            "admission policy on {change}: {by_policy:?}"
        );
    }
}
