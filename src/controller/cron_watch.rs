//! The watch of every CronWorkflow in the cluster (argo_watch.rs), kept as their schedules per
//! namespace (crate::cron_workflows): a sleeping controller is woken ahead of their runs, and a
//! new or changed one is news for its namespace.

use super::argo_watch::{Kind, Listing, Watched};
use crate::cron_workflows::{CronWorkflowView, Tally};
use crate::sleep::CronEntry;
use crate::sync::{read, write};
use kube::Client;
use kube::api::Api;
use std::sync::RwLock;

pub type CronWorkflows = Watched<CronTally>;

#[derive(Default)]
pub struct CronTally(RwLock<Tally>);

impl Watched<CronTally> {
    /// `namespace`'s CronWorkflows with their instanceid label, or why they cannot be seen.
    pub fn seen(&self, namespace: &str) -> Result<Vec<(Option<String>, CronEntry)>, String> {
        match self.listing() {
            Listing::Listed => Ok(read(&self.tally.0).of(namespace)),
            // No CRD, no CronWorkflow.
            Listing::CrdMissing => Ok(Vec::new()),
            Listing::NotListed => Err("flotilla has not listed the CronWorkflows yet".into()),
            Listing::Failed(reason) => Err(format!("flotilla cannot list CronWorkflows: {reason}")),
        }
    }
}

impl Kind for CronTally {
    type Object = CronWorkflowView;
    const PLURAL: &'static str = "cronworkflows";
    const KIND: &'static str = "CronWorkflow";
    const NAME: &'static str = "CronWorkflows";

    fn api(client: &Client) -> Api<CronWorkflowView> {
        Api::all(client.clone())
    }

    fn relist_started(&self) {
        write(&self.0).relist_started();
    }

    fn relisted(&self, cron: &CronWorkflowView) {
        write(&self.0).relisted(cron);
    }

    fn relist_done(&self) -> Vec<String> {
        write(&self.0).relist_done()
    }

    fn apply(&self, cron: &CronWorkflowView) -> Option<String> {
        write(&self.0).apply(cron)
    }

    fn delete(&self, cron: &CronWorkflowView) -> Option<String> {
        write(&self.0).delete(cron)
    }

    fn clear(&self) {
        *write(&self.0) = Tally::default();
    }
}
