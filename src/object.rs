//! The objects flotilla renders and stamps, and how they are identified.

pub mod packed;

use crate::kinds::Kind;
use std::fmt;

/// Identifies one stamped object across render, plan and the API.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// One rendered object, ready to be applied exactly as it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Stamped {
    pub key: ObjectKey,
    /// The full object, with flotilla's labels and annotations.
    pub body: serde_json::Value,
    /// The content hash also carried in the `flotilla.dev/hash` annotation.
    pub hash: String,
    /// The template file it came from, for messages.
    pub template: String,
}

/// A stamped object as a watch last showed it: metadata only, enough to know whether it must be
/// read, applied or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub key: ObjectKey,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// The namespace it was stamped for (its `flotilla.dev/namespace` label).
    pub stamped_for: String,
    /// The content hash it was last applied with (its `flotilla.dev/hash` annotation).
    pub hash: Option<String>,
}
