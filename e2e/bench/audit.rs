//! Who made which requests, from the API server's audit log (Metadata level, JSON lines). Read
//! incrementally between phases (never during a timed one), following the log across rotation.
//! A window that may miss requests says so (`Window::gap`): a count of zero from it proves
//! nothing.

use crate::cluster::FLOTILLA_USER;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
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
    #[serde(default, rename = "requestURI")]
    request_uri: String,
    #[serde(default)]
    stage_timestamp: String,
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
    #[serde(default)]
    namespace: String,
}

/// LIST requests to one resource: a (re)list is its first page, then a request per further page.
#[derive(Default, Debug, Clone, Copy)]
pub struct Lists {
    /// First pages: one per list (a watch's start or relist, or any other list).
    pub started: u64,
    /// Further pages of those lists (requests with a `continue` token).
    pub pages: u64,
    /// Lists of one fleet namespace's objects (started ones): a watch across the cluster makes
    /// none.
    pub namespaced: u64,
}

/// Completed requests in one window.
#[derive(Default, Debug, Clone)]
pub struct Window {
    /// (actor, verb) -> count.
    pub verbs: BTreeMap<(Actor, String), u64>,
    /// Writes (create, update, patch, delete, deletecollection): (actor, resource, verb) -> count.
    pub writes: BTreeMap<(Actor, String, String), u64>,
    /// (actor, resource) -> its LIST requests.
    pub lists: BTreeMap<(Actor, String), Lists>,
    /// When flotilla's Lease renewals (updates of a Lease) completed, by the API server's clock.
    pub renewals: Vec<Timestamp>,
    /// When flotilla's first write to anything but a Lease completed, by the API server's clock.
    pub first_write: Option<Timestamp>,
    /// Why requests of this window may be missing from it, if they may.
    pub gap: Option<String>,
}

pub fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// flotilla renews its leader Lease with a replace (`update`) every few seconds.
fn is_renewal(resource: &str, verb: &str) -> bool {
    resource == "leases" && verb == "update"
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

    /// Writes by `actor` other than Lease renewals.
    pub fn writes_but_renewals(&self, actor: Actor) -> u64 {
        self.writes
            .iter()
            .filter(|((a, resource, verb), _)| *a == actor && !is_renewal(resource, verb))
            .map(|(_, n)| n)
            .sum()
    }

    /// Writes by `actor` to anything but Leases: what a new leader must not make when nothing
    /// changed (taking the Lease over is its one write).
    pub fn writes_but_leases(&self, actor: Actor) -> u64 {
        self.writes
            .iter()
            .filter(|((a, resource, _), _)| *a == actor && resource != "leases")
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

    /// All of `actor`'s LISTs, and "resource started(+pages), ..." of them.
    pub fn lists_of(&self, actor: Actor) -> (Lists, String) {
        let mut total = Lists::default();
        let mut parts = Vec::new();
        for ((a, resource), lists) in &self.lists {
            if *a != actor {
                continue;
            }
            total.started += lists.started;
            total.pages += lists.pages;
            total.namespaced += lists.namespaced;
            parts.push(format!("{resource} {}(+{})", lists.started, lists.pages));
        }
        let described = if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        };
        (total, described)
    }

    /// A row's note if requests may be missing from this window.
    pub fn gap_note(&self) -> Option<String> {
        let gap = self.gap.as_ref()?;
        Some(format!(
            "AUDIT LOG INCOMPLETE ({gap}): requests by verb may be missing"
        ))
    }

    fn lost(&mut self, why: String) {
        eprintln!("bench: audit log: {why}");
        self.gap = Some(match self.gap.take() {
            Some(earlier) => format!("{earlier}; {why}"),
            None => why,
        });
    }
}

pub struct AuditTail {
    path: PathBuf,
    file: Option<File>,
    /// Bytes read from `file`.
    offset: u64,
    /// Rotated-away copies next to the log (`audit-<time>.log`), when last counted.
    backups: usize,
    pending: Vec<u8>,
}

impl AuditTail {
    /// Starts at the current end of the log: only later requests are counted.
    pub fn new(path: PathBuf) -> AuditTail {
        let mut tail = AuditTail {
            backups: 0,
            path,
            file: None,
            offset: 0,
            pending: Vec::new(),
        };
        tail.backups = tail.count_backups();
        if let Some(why) = tail.take().gap {
            panic!("the audit log cannot be followed: {why}");
        }
        tail
    }

    /// Everything completed since the last call.
    pub fn take(&mut self) -> Window {
        let mut window = Window::default();
        loop {
            if self.file.is_none() {
                match File::open(&self.path) {
                    Ok(f) => (self.file, self.offset) = (Some(f), 0),
                    Err(e) => {
                        window.lost(format!("cannot open {}: {e}", self.path.display()));
                        return window;
                    }
                }
            }
            self.read_lines(&mut window);
            // Rotated (renamed away, a new file in its place)? Our handle still reads the old
            // file, which the API server closed before renaming it: finish it, then go on with
            // the new one, if it is the only one since (one in between would be lost).
            let file = self.file.as_ref().unwrap();
            let ours = file.metadata().map(|m| m.ino()).ok();
            let current = std::fs::metadata(&self.path).ok();
            match current {
                Some(m) if Some(m.ino()) != ours => {}
                Some(m) if m.len() < self.offset => {
                    window.lost(format!(
                        "it shrank from {} to {} bytes (truncated?)",
                        self.offset,
                        m.len()
                    ));
                    // Go on from its end, as from a fresh start.
                    self.offset = m.len();
                    let file = self.file.as_mut().unwrap();
                    if let Err(e) = file.seek(SeekFrom::Start(self.offset)) {
                        window.lost(format!("seeking in {}: {e}", self.path.display()));
                    }
                    return window;
                }
                _ => return window,
            }
            self.read_lines(&mut window);
            let backups = self.count_backups();
            if backups != self.backups + 1 {
                window.lost(format!(
                    "rotated {} times since the last read: requests in between are lost",
                    backups.saturating_sub(self.backups)
                ));
            }
            self.backups = backups;
            self.file = None;
            self.pending.clear();
        }
    }

    /// lumberjack, the API server's log writer, names a rotated copy `<stem>-<time>.<ext>`.
    fn count_backups(&self) -> usize {
        let part =
            |p: Option<&std::ffi::OsStr>| p.unwrap_or_default().to_string_lossy().into_owned();
        let prefix = format!("{}-", part(self.path.file_stem()));
        let suffix = format!(".{}", part(self.path.extension()));
        let Some(dir) = self.path.parent().and_then(|d| std::fs::read_dir(d).ok()) else {
            return 0;
        };
        dir.filter_map(|e| e.ok())
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with(&prefix) && name.ends_with(&suffix)
            })
            .count()
    }

    fn read_lines(&mut self, window: &mut Window) {
        let file = self.file.as_mut().unwrap();
        let mut buf = Vec::new();
        if let Err(e) = file.read_to_end(&mut buf) {
            window.lost(format!("reading {}: {e}", self.path.display()));
        }
        self.offset += buf.len() as u64;
        // A file truncated while the API server writes it goes on at the writer's offset: what
        // was before it reads as NUL bytes.
        if buf.contains(&0) {
            window.lost("it has NUL bytes where lines were (truncated while written?)".into());
        }
        self.pending.extend_from_slice(&buf);
        let complete = self
            .pending
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let lines: Vec<u8> = self.pending.drain(..complete).collect();
        let unreadable = lines
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty() && !count(window, line))
            .count();
        if unreadable > 0 {
            window.lost(format!("{unreadable} lines are not audit events"));
        }
    }
}

/// Counts one line into `window`; false if it is not an audit event.
fn count(window: &mut Window, line: &[u8]) -> bool {
    let Ok(event) = serde_json::from_slice::<Event>(line) else {
        return false;
    };
    if event.stage != "ResponseComplete" {
        return true;
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
    // Flotilla's own namespace is not one of the fleet's: listing its revisions there once per
    // leadership is not a list per namespace.
    let (resource, subresource, namespace) = match &event.object_ref {
        Some(r) => (
            r.resource.as_str(),
            r.subresource.as_str(),
            !r.namespace.is_empty() && r.namespace != crate::cluster::FLOTILLA_NAMESPACE,
        ),
        None => ("-", "", false),
    };
    if is_write(&event.verb) {
        if actor == Actor::Flotilla && is_renewal(resource, &event.verb) {
            match event.stage_timestamp.parse() {
                Ok(t) => window.renewals.push(t),
                Err(e) => window.lost(format!("a Lease renewal without a time: {e}")),
            }
        }
        if actor == Actor::Flotilla && resource != "leases" {
            match event.stage_timestamp.parse::<Timestamp>() {
                Ok(t) => window.first_write = Some(window.first_write.map_or(t, |f| f.min(t))),
                Err(e) => window.lost(format!("a write without a time: {e}")),
            }
        }
        let resource = if subresource.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{subresource}")
        };
        *window
            .writes
            .entry((actor, resource, event.verb.clone()))
            .or_default() += 1;
    } else if event.verb == "list" {
        let lists = window
            .lists
            .entry((actor, resource.to_string()))
            .or_default();
        if continues(&event.request_uri) {
            lists.pages += 1;
        } else {
            lists.started += 1;
            lists.namespaced += u64::from(namespace);
        }
    }
    *window.verbs.entry((actor, event.verb)).or_default() += 1;
    true
}

/// Whether a request asks for a further page (`continue=<token>` in its query).
fn continues(uri: &str) -> bool {
    let query = uri.split_once('?').map_or("", |(_, q)| q);
    query.split('&').any(|p| {
        p.strip_prefix("continue=")
            .is_some_and(|token| !token.is_empty())
    })
}
