//! Stand-ins for the kubelet, which the local control plane lacks. Included by the e2e suite and
//! the fleet bench with `#[path]`.
//! - [`Node`] runs pods for real: the stamped workflow-controller as a local process, from its own
//!   pod spec, with a token from the TokenRequest API, in namespaces of its own.
//! - [`ReadyMarker`] only marks controller pods Ready, for fleets too large to run (the bench).
//!
//! Every other pod (workflow pods, argo-server) is left Pending.

mod inputs;
mod netns;
mod node;
mod place;
mod pod;
mod ready_marker;
pub mod sandbox;
mod spec;

pub use node::Node;
pub use pod::Program;
pub use ready_marker::ReadyMarker;
