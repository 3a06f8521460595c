//! A Context for tests of the loops: watch stores that show what a test puts in them, a scripted
//! API that fails on any request it does not expect, the templates in force recorded as
//! revision 2 (the newest; [`Fixture::keep_older`] records revision 1) and the rollout settled
//! there, and the Events kept for the test to read.

use super::Context;
use super::cron_watch::CronWorkflows;
use super::events::{Events, Recorded};
use super::history::History;
use super::in_force::InForce;
use super::queue::WorkQueue;
use super::rollout_task::Rollout;
use super::stores::Shown;
use super::watch::Feed;
use super::workflow_watch::Workflows;
use crate::object::{ObjectKey, Stamped};
use crate::render::{NamespaceInput, Renderer};
use crate::rollout::State;
use crate::rollout::revision::{Content, controller_revision};
use crate::telemetry::Metrics;
use crate::testing::{Exchange, serve};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PartialObjectMeta;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The instance of the default config.
pub const INSTANCE: &str = "flotilla";
/// One ConfigMap per namespace.
pub const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  id: {{ controller.instanceID }}\n";

pub struct Fixture {
    pub ctx: Context,
    pub shown: Shown,
    pub events: Recorded,
    server: JoinHandle<Vec<Value>>,
}

/// A Context under the config `text` with the templates `files`, the name of each object in
/// `names` watched (taken by another's object or not), against an API that expects exactly
/// `script`.
pub fn fixture(
    text: &str,
    files: &[(&str, &str)],
    names: &[(ObjectKey, bool)],
    script: Vec<Exchange>,
) -> Fixture {
    let config = crate::testing::config(text);
    let renderer = crate::testing::renderer(&config, files);
    let (client, server) = serve(script);
    let metrics = Arc::new(Metrics::default());
    let feed = Feed::new(&WorkQueue::start(), &metrics);
    let (stores, shown) = Shown::stores(&client, &config.instance, names, feed);
    let history = History::new(&config);
    let content = Content::of(&config, renderer.sources());
    history.keep(&controller_revision(
        &config,
        renderer.revision(),
        2,
        &content,
    ));
    let rollout = Rollout::default();
    rollout.set(Some(State::settled(renderer.revision())));
    let (events, recorded) = Events::recorded();
    let ctx = Context {
        client,
        in_force: InForce::new(config.clone(), renderer),
        config,
        history,
        rollout,
        brake: Default::default(),
        stores,
        memory: Arc::default(),
        events,
        metrics,
        workflows: Workflows::unlisted(Default::default()),
        crons: CronWorkflows::unlisted(Default::default()),
        budget: Default::default(),
    };
    Fixture {
        ctx,
        shown,
        events: recorded,
        server,
    }
}

/// The names `queue` holds now, sorted, each taken and marked done.
pub async fn drain(queue: &WorkQueue) -> Vec<String> {
    let mut queued = Vec::new();
    while let Ok(name) =
        tokio::time::timeout(std::time::Duration::from_millis(20), queue.next()).await
    {
        queue.done(&name);
        queued.push(name);
    }
    queued.sort();
    queued
}

impl Fixture {
    /// The request bodies the API received; fails if it expected more, or got others.
    pub async fn requests(self) -> Vec<Value> {
        drop(self.ctx);
        self.server
            .await
            .expect("the API saw only what it expected")
    }

    /// Records `files` as revision 1, under the config in force; returns its hash.
    pub fn keep_older(&self, files: &[(&str, &str)]) -> String {
        let config = &self.ctx.in_force.get().config;
        let renderer = crate::testing::renderer(config, files);
        let content = Content::of(config, renderer.sources());
        let revision = renderer.revision();
        let object = controller_revision(config, revision, 1, &content);
        self.ctx.history.keep(&object);
        revision.to_string()
    }

    /// The revision of the templates in force.
    pub fn revision(&self) -> String {
        self.ctx.in_force.get().renderer.revision().to_string()
    }

    /// What the templates in force render for namespace `name`.
    pub fn rendered(&self, name: &str) -> Vec<Stamped> {
        rendered(&self.ctx.in_force.get().renderer, name)
    }
}

pub fn rendered(renderer: &Renderer, name: &str) -> Vec<Stamped> {
    let input = NamespaceInput {
        name: name.into(),
        ..NamespaceInput::default()
    };
    renderer.render(&input).expect("the templates render")
}

/// A Namespace's metadata: labelled in (`flotilla.dev/enabled=true`) or not, terminating or not.
pub fn namespace(name: &str, opted_in: bool, terminating: bool) -> PartialObjectMeta<Namespace> {
    let labels = [("flotilla.dev/enabled".to_string(), opted_in.to_string())];
    let metadata = ObjectMeta {
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        resource_version: Some("100".into()),
        labels: Some(BTreeMap::from(labels)),
        deletion_timestamp: terminating.then_some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        ),
        ..ObjectMeta::default()
    };
    PartialObjectMeta {
        metadata,
        ..PartialObjectMeta::default()
    }
}

/// The metadata the watch shows of `object` once stamped, at `rv`.
pub fn stamped_meta(object: &Stamped, rv: &str) -> ObjectMeta {
    let mut meta: ObjectMeta =
        serde_json::from_value(object.body["metadata"].clone()).expect("rendered metadata");
    meta.resource_version = Some(rv.into());
    meta.uid = Some(format!("uid-{}", object.key.name));
    meta
}
