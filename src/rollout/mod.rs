//! Changing the fleet safely: revisions, the rollout strategy, and the rollout itself as a pure
//! function of what the fleet's NamespaceWorkers show.

pub mod brake;
pub mod clock;
pub mod fleet;
pub mod fleet_snapshot;
pub mod kept;
pub mod member;
pub mod message;
pub mod plan;
pub mod revision;
pub mod strategy;
pub mod turn;

pub use brake::{Brake, ReapBrake, Seen};
pub use fleet_snapshot::{FleetSnapshot, WrittenStatus};
pub use kept::KeptRevisions;
pub use plan::{Counts, Member, Phase, State, Step, step};
pub use strategy::{Amount, AmountFile, OnFailure, Strategy};
pub use turn::{News, Turn, turn};

#[cfg(test)]
mod tests;
