//! Changing the fleet safely: revisions, the rollout strategy, and the rollout itself as a pure
//! function of what the fleet's NamespaceWorkers show.

pub mod brake;
pub mod fleet;
pub mod member;
pub mod plan;
pub mod revision;
pub mod strategy;

pub use brake::ReapBrake;
pub use plan::{Counts, Member, Phase, State, Step, step};
pub use strategy::{Amount, AmountFile, OnFailure, Strategy};

#[cfg(test)]
mod tests;
