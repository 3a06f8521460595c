//! A controller Deployment as it is rendered while its namespace sleeps (crate::sleep).

use super::hash::stamp_hash;
use crate::object::Stamped;
use serde_json::{Value, json};

/// `deployment` at `replicas: 0`, with the hash of that content: stamped, owned and kept in
/// sync as any other object, and told from its awake form by its hash alone.
pub fn scaled_to_zero(deployment: &Stamped) -> Stamped {
    let mut body = deployment.body.clone();
    let hash = match body.as_object_mut() {
        Some(object) => {
            let spec = object.entry("spec").or_insert_with(|| json!({}));
            if let Some(spec) = spec.as_object_mut() {
                spec.insert("replicas".into(), Value::from(0));
            }
            stamp_hash(object)
        }
        None => deployment.hash.clone(),
    };
    Stamped {
        body,
        hash,
        ..deployment.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ownership::HASH;

    #[test]
    fn zero_replicas_and_its_own_hash() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
        let config = crate::config::Config::load(&path).unwrap();
        let renderer = crate::render::Renderer::load(&config).unwrap();
        let rendered = renderer
            .render(&crate::render::NamespaceInput {
                name: "team-a".into(),
                ..Default::default()
            })
            .unwrap();
        let awake = rendered
            .iter()
            .find(|o| o.key.name == "workflow-controller")
            .unwrap();
        let asleep = scaled_to_zero(awake);
        assert_eq!(asleep.body["spec"]["replicas"], 0);
        assert_eq!(awake.body["spec"]["replicas"], 1);
        assert_ne!(asleep.hash, awake.hash);
        assert_eq!(asleep.body["metadata"]["annotations"][HASH], asleep.hash);
        // Scaled twice, the same: its hash is of its content.
        assert_eq!(scaled_to_zero(&asleep), asleep);
        // Everything else is the awake form's.
        let mut back = asleep.body.clone();
        back["spec"]["replicas"] = 1.into();
        back["metadata"]["annotations"][HASH] = awake.hash.clone().into();
        assert_eq!(back, awake.body);
    }
}
