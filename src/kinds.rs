//! The kinds flotilla may stamp: a closed allowlist, each namespaced and served by every
//! supported Kubernetes. One shared, label-filtered metadata watch runs per kind.

use kube::core::ApiResource;
use std::fmt;

/// A stampable kind. The declaration order is the apply order: identities and configuration
/// first, then the RBAC that references them, then the workloads that use all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    ServiceAccount,
    ConfigMap,
    Role,
    RoleBinding,
    Service,
    Deployment,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::ServiceAccount,
        Kind::ConfigMap,
        Kind::Role,
        Kind::RoleBinding,
        Kind::Service,
        Kind::Deployment,
    ];

    /// (group, version, kind, plural)
    const fn parts(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Kind::ServiceAccount => ("", "v1", "ServiceAccount", "serviceaccounts"),
            Kind::ConfigMap => ("", "v1", "ConfigMap", "configmaps"),
            Kind::Role => ("rbac.authorization.k8s.io", "v1", "Role", "roles"),
            Kind::RoleBinding => (
                "rbac.authorization.k8s.io",
                "v1",
                "RoleBinding",
                "rolebindings",
            ),
            Kind::Service => ("", "v1", "Service", "services"),
            Kind::Deployment => ("apps", "v1", "Deployment", "deployments"),
        }
    }

    pub fn name(self) -> &'static str {
        self.parts().2
    }

    pub fn api_version(self) -> String {
        match self.parts() {
            ("", version, ..) => version.to_string(),
            (group, version, ..) => format!("{group}/{version}"),
        }
    }

    /// Looks a rendered object's `apiVersion` and `kind` up in the allowlist.
    pub fn from_type(api_version: &str, kind: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == kind && k.api_version() == api_version)
    }

    pub fn api_resource(self) -> ApiResource {
        let (group, version, kind, plural) = self.parts();
        ApiResource {
            group: group.to_string(),
            version: version.to_string(),
            api_version: self.api_version(),
            kind: kind.to_string(),
            plural: plural.to_string(),
        }
    }

    /// A human list of the allowlist, for error messages.
    pub fn allowlist() -> String {
        Kind::ALL
            .iter()
            .map(|k| format!("{}/{}", k.api_version(), k.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_core_and_grouped_kinds() {
        assert_eq!(Kind::from_type("v1", "ConfigMap"), Some(Kind::ConfigMap));
        assert_eq!(
            Kind::from_type("apps/v1", "Deployment"),
            Some(Kind::Deployment)
        );
        assert_eq!(
            Kind::from_type("rbac.authorization.k8s.io/v1", "RoleBinding"),
            Some(Kind::RoleBinding)
        );
    }

    #[test]
    fn rejects_cluster_scoped_and_unknown_kinds() {
        assert_eq!(
            Kind::from_type("rbac.authorization.k8s.io/v1", "ClusterRole"),
            None
        );
        assert_eq!(Kind::from_type("v1", "Namespace"), None);
        assert_eq!(Kind::from_type("v1", "Secret"), None);
        // A known kind under the wrong group is not the same kind.
        assert_eq!(Kind::from_type("extensions/v1beta1", "Deployment"), None);
    }

    #[test]
    fn api_resource_has_plural_and_group() {
        let ar = Kind::Deployment.api_resource();
        assert_eq!(
            (ar.group.as_str(), ar.plural.as_str()),
            ("apps", "deployments")
        );
        assert_eq!(Kind::ServiceAccount.api_resource().api_version, "v1");
    }
}
