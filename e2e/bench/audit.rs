//! Who made which requests, from the API server's audit log (Metadata level, JSON lines). Read
//! incrementally between phases (never during a timed one), following the log across rotation.

use crate::cluster::FLOTILLA_USER;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// Who sent a request, as far as the bench can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Actor {
    /// flotilla's ServiceAccount: flotilla itself, or the limit baseline (which runs alone).
    Flotilla,
    Kubectl,
    ControllerManager,
    /// Anything else: the bench's admin client, the API server's own loopback client.
    Other,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    stage: String,
    verb: String,
    #[serde(default)]
    user: User,
    #[serde(default)]
    user_agent: String,
    #[serde(default)]
    object_ref: Option<ObjectRef>,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(default)]
    username: String,
}

#[derive(Deserialize)]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
}

/// Completed requests in one window.
#[derive(Default, Debug, Clone)]
pub struct Window {
    /// (actor, verb) -> count.
    pub verbs: BTreeMap<(Actor, String), u64>,
    /// Writes (create, update, patch, delete, deletecollection): (actor, resource, verb) -> count.
    pub writes: BTreeMap<(Actor, String, String), u64>,
}

pub fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

impl Window {
    pub fn verbs_of(&self, actor: Actor) -> BTreeMap<String, u64> {
        self.verbs
            .iter()
            .filter(|((a, _), _)| *a == actor)
            .map(|((_, verb), n)| (verb.clone(), *n))
            .collect()
    }

    pub fn writes_of(&self, actor: Actor) -> u64 {
        self.writes
            .iter()
            .filter(|((a, ..), _)| *a == actor)
            .map(|(_, n)| n)
            .sum()
    }

    /// Writes by `actor` to `resources` (whole objects or their subresources).
    pub fn writes_to(&self, actor: Actor, resources: &[&str]) -> u64 {
        self.writes
            .iter()
            .filter(|((a, resource, _), _)| {
                *a == actor && resources.contains(&resource.split('/').next().unwrap_or(""))
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// "resource verb=n, ..." of every write by `actor`.
    pub fn describe_writes(&self, actor: Actor) -> String {
        let parts: Vec<String> = self
            .writes
            .iter()
            .filter(|((a, ..), _)| *a == actor)
            .map(|((_, resource, verb), n)| format!("{verb} {resource}={n}"))
            .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

pub struct AuditTail {
    path: PathBuf,
    file: Option<File>,
    pending: Vec<u8>,
}

impl AuditTail {
    /// Starts at the current end of the log: only later requests are counted.
    pub fn new(path: PathBuf) -> AuditTail {
        let mut tail = AuditTail {
            path,
            file: None,
            pending: Vec::new(),
        };
        tail.take();
        tail
    }

    /// Everything completed since the last call.
    pub fn take(&mut self) -> Window {
        let mut window = Window::default();
        loop {
            if self.file.is_none() {
                match File::open(&self.path) {
                    Ok(f) => self.file = Some(f),
                    Err(_) => return window,
                }
            }
            self.read_lines(&mut window);
            // Rotated (renamed away, a new file in its place)? Our handle still reads the old
            // file: finish it, then go on with the new one.
            let file = self.file.as_ref().unwrap();
            let ours = file.metadata().map(|m| m.ino()).ok();
            let current = std::fs::metadata(&self.path).map(|m| m.ino()).ok();
            if current.is_none() || current == ours {
                return window;
            }
            self.read_lines(&mut window);
            self.file = None;
            self.pending.clear();
        }
    }

    fn read_lines(&mut self, window: &mut Window) {
        let file = self.file.as_mut().unwrap();
        let mut buf = Vec::new();
        file.read_to_end(&mut buf).unwrap_or(0);
        self.pending.extend_from_slice(&buf);
        let complete = self
            .pending
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let lines: Vec<u8> = self.pending.drain(..complete).collect();
        for line in lines.split(|b| *b == b'\n') {
            count(window, line);
        }
    }
}

fn count(window: &mut Window, line: &[u8]) {
    if line.is_empty() {
        return;
    }
    let Ok(event) = serde_json::from_slice::<Event>(line) else {
        return;
    };
    if event.stage != "ResponseComplete" {
        return;
    }
    let actor = if event.user.username == FLOTILLA_USER {
        Actor::Flotilla
    } else if event.user_agent.starts_with("kubectl") {
        Actor::Kubectl
    } else if event.user_agent.starts_with("kube-controller-manager") {
        Actor::ControllerManager
    } else {
        Actor::Other
    };
    if is_write(&event.verb) {
        let resource = match &event.object_ref {
            Some(r) if r.subresource.is_empty() => r.resource.clone(),
            Some(r) => format!("{}/{}", r.resource, r.subresource),
            None => "-".into(),
        };
        *window
            .writes
            .entry((actor, resource, event.verb.clone()))
            .or_default() += 1;
    }
    *window.verbs.entry((actor, event.verb)).or_default() += 1;
}
