//! A command's spans and metrics, folded from the events it emits: no clock of its own (every
//! time is an event's) and no I/O, so that what a run exports follows from what it reported.
//!
//! - one span for the command, the parent of everything else (or of the fleet's targets);
//! - over a fleet, one span per target (a target deferred because another runner held its
//!   lock gets a second span for its second turn);
//! - under those, one span per lock wait (its holder as attributes) and one per migration
//!   step (version, name, direction, outcome), each table-lock wait that gave way a child of
//!   its migration's span;
//! - counters: migrations applied, reverted, failed and retried; seconds waited for the lock
//!   and for table locks; fleet targets by outcome.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::events::{Event, EventKind};
use crate::migration::Direction;

/// An attribute's value, as OTLP types them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Text(String),
    Int(i64),
    Bool(bool),
}

pub(crate) type Attributes = Vec<(&'static str, Value)>;

/// A finished span.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanRecord {
    pub(crate) span_id: [u8; 8],
    /// `None`: the command's own span, whose parent is the caller's (if any).
    pub(crate) parent: Option<[u8; 8]>,
    pub(crate) name: &'static str,
    pub(crate) start: SystemTime,
    pub(crate) end: SystemTime,
    pub(crate) attributes: Attributes,
    /// Set when what the span stands for failed: the error's message.
    pub(crate) error: Option<String>,
}

/// A span not yet ended.
#[derive(Debug)]
struct OpenSpan {
    span_id: [u8; 8],
    parent: [u8; 8],
    start: SystemTime,
    attributes: Attributes,
}

impl OpenSpan {
    fn close(self, name: &'static str, end: SystemTime, error: Option<String>) -> SpanRecord {
        SpanRecord {
            span_id: self.span_id,
            parent: Some(self.parent),
            name,
            start: self.start,
            end: end.max(self.start),
            attributes: self.attributes,
            error,
        }
    }
}

/// What is open on one target (or, outside a fleet, on the command).
#[derive(Debug, Default)]
struct Scope {
    target: Option<OpenSpan>,
    /// Steps started and not yet finished: more than one where a step's record is written
    /// with the next step's marker (MySQL), which finishes it after the next one started.
    migrations: Vec<(i64, Direction, OpenSpan)>,
    /// The last `LockWaiting`'s holder, for the wait's span once the lock is acquired.
    holder: Option<crate::events::LockHolder>,
}

/// The counters of one run.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Counters {
    pub(crate) applied: u64,
    pub(crate) reverted: u64,
    pub(crate) failed: u64,
    pub(crate) retried: u64,
    pub(crate) lock_wait: Duration,
    pub(crate) table_lock_wait: Duration,
    /// Over a fleet: targets by outcome (`applied`, `up_to_date`, `failed`, ...).
    pub(crate) targets: BTreeMap<&'static str, u64>,
}

/// Folds a command's events into spans and counters.
#[derive(Debug)]
pub(crate) struct Recorder {
    /// The command's span: its id and start.
    pub(crate) root: [u8; 8],
    pub(crate) start: SystemTime,
    scopes: BTreeMap<Option<String>, Scope>,
    pub(crate) spans: Vec<SpanRecord>,
    pub(crate) counters: Counters,
    new_id: fn() -> [u8; 8],
}

impl Recorder {
    /// A recorder whose command began at `start`; `new_id` makes span ids.
    pub(crate) fn new(start: SystemTime, new_id: fn() -> [u8; 8]) -> Self {
        Recorder {
            root: new_id(),
            start,
            scopes: BTreeMap::new(),
            spans: Vec::new(),
            counters: Counters::default(),
            new_id,
        }
    }

    fn open(&self, scope_parent: [u8; 8], start: SystemTime, attributes: Attributes) -> OpenSpan {
        OpenSpan {
            span_id: (self.new_id)(),
            parent: scope_parent,
            start,
            attributes,
        }
    }

    /// The span the target's (or command's) spans hang under.
    fn parent_of(&self, target: &Option<String>) -> [u8; 8] {
        (self.scopes.get(target))
            .and_then(|scope| scope.target.as_ref())
            .map_or(self.root, |span| span.span_id)
    }

    pub(crate) fn record(&mut self, event: &Event) {
        let key = event.target.clone();
        let parent = self.parent_of(&key);
        let at = event.at;
        match &event.kind {
            EventKind::TargetStarted { deferred } => {
                let mut attributes = vec![(
                    "dirthara.target",
                    Value::Text(key.clone().unwrap_or_default()),
                )];
                if *deferred {
                    attributes.push(("dirthara.target.second_turn", Value::Bool(true)));
                }
                let span = self.open(self.root, at, attributes);
                self.scopes.entry(key).or_default().target = Some(span);
            }
            EventKind::TargetDeferred { holder } => {
                let scope = self.scopes.entry(key).or_default();
                if let Some(mut span) = scope.target.take() {
                    span.attributes
                        .push(("dirthara.outcome", Value::Text("deferred".into())));
                    if let Some(holder) = holder {
                        span.attributes
                            .push(("dirthara.lock.holder", Value::Text(holder.clone())));
                    }
                    self.spans.push(span.close("dirthara.target", at, None));
                }
            }
            EventKind::TargetFinished {
                outcome,
                applied,
                reverted,
                error,
                ..
            } => {
                *self.counters.targets.entry(outcome.as_str()).or_default() += 1;
                let error = error.map(|code| code.to_string());
                let mut scope = self.scopes.remove(&key).unwrap_or_default();
                for (_, direction, span) in scope.migrations.drain(..) {
                    self.fail_migration(span, direction, at, error.clone());
                }
                if let Some(mut span) = scope.target.take() {
                    span.attributes.extend([
                        ("dirthara.outcome", Value::Text(outcome.as_str().into())),
                        ("dirthara.migrations.applied", Value::Int(*applied as i64)),
                        ("dirthara.migrations.reverted", Value::Int(*reverted as i64)),
                    ]);
                    if let Some(code) = &error {
                        span.attributes
                            .push(("error.type", Value::Text(code.clone())));
                    }
                    self.spans.push(span.close("dirthara.target", at, error));
                }
            }
            EventKind::LockWaiting { holder, .. } => {
                self.scopes.entry(key).or_default().holder = holder.clone();
            }
            EventKind::LockAcquired {
                lock,
                connection,
                waited,
            } => {
                self.counters.lock_wait += *waited;
                let holder = self.scopes.entry(key).or_default().holder.take();
                let mut attributes = vec![
                    ("dirthara.lock.name", Value::Text(lock.clone())),
                    ("dirthara.connection", Value::Text(connection.clone())),
                    ("dirthara.lock.waited_ms", Value::Int(millis(*waited))),
                ];
                if let Some(holder) = holder {
                    attributes.extend(holder_attributes(&holder));
                }
                let start = at.checked_sub(*waited).unwrap_or(at);
                let span = self.open(parent, start, attributes);
                self.spans.push(span.close("dirthara.lock.wait", at, None));
            }
            EventKind::MigrationStarted {
                version,
                name,
                direction,
                connection,
            } => {
                let span = self.open(
                    parent,
                    at,
                    vec![
                        ("dirthara.migration.version", Value::Int(*version)),
                        ("dirthara.migration.name", Value::Text(name.clone())),
                        (
                            "dirthara.migration.direction",
                            Value::Text(direction.to_string()),
                        ),
                        ("dirthara.connection", Value::Text(connection.clone())),
                    ],
                );
                let scope = self.scopes.entry(key).or_default();
                scope.migrations.push((*version, *direction, span));
            }
            EventKind::MigrationFinished {
                version,
                direction,
                duration,
                ..
            } => {
                let scope = self.scopes.entry(key).or_default();
                let open =
                    (scope.migrations.iter()).position(|(v, d, _)| (v, d) == (version, direction));
                if let Some((_, _, mut span)) = open.map(|at| scope.migrations.remove(at)) {
                    match direction {
                        Direction::Up => self.counters.applied += 1,
                        Direction::Down => self.counters.reverted += 1,
                    }
                    span.attributes.extend([
                        ("dirthara.outcome", Value::Text(finished(*direction).into())),
                        (
                            "dirthara.migration.duration_ms",
                            Value::Int(millis(*duration)),
                        ),
                    ]);
                    // The step's own time: its record may be written later, with the next
                    // step's marker.
                    let end = span.start.checked_add(*duration).unwrap_or(at);
                    self.spans.push(span.close("dirthara.migration", end, None));
                }
            }
            EventKind::TableLockTimeout {
                version,
                direction,
                attempt,
                waited,
                table,
                blocker,
                deadlock,
                retry_in,
                ..
            } => {
                self.counters.retried += 1;
                self.counters.table_lock_wait += *waited;
                let migration = (self.scopes.get(&key))
                    .and_then(|scope| {
                        (scope.migrations.iter()).find(|(v, d, _)| (v, d) == (version, direction))
                    })
                    .map_or(parent, |(_, _, span)| span.span_id);
                let mut attributes = vec![
                    ("dirthara.attempt", Value::Int(i64::from(*attempt))),
                    ("dirthara.table_lock.waited_ms", Value::Int(millis(*waited))),
                    ("dirthara.retry_in_ms", Value::Int(millis(*retry_in))),
                    ("dirthara.deadlock", Value::Bool(*deadlock)),
                ];
                if let Some(table) = table {
                    attributes.push(("dirthara.table", Value::Text(table.clone())));
                }
                if let Some(blocker) = blocker {
                    attributes.push(("dirthara.blocker", Value::Text(blocker.to_string())));
                    if let Some(id) = blocker.session_id {
                        attributes.push(("dirthara.blocker.session_id", Value::Int(id)));
                    }
                }
                let start = at.checked_sub(*waited).unwrap_or(at);
                let span = self.open(migration, start, attributes);
                self.spans
                    .push(span.close("dirthara.table_lock.wait", at, None));
            }
            _ => {}
        }
    }

    fn fail_migration(
        &mut self,
        mut span: OpenSpan,
        direction: Direction,
        at: SystemTime,
        error: Option<String>,
    ) {
        self.counters.failed += 1;
        span.attributes
            .push(("dirthara.outcome", Value::Text("failed".into())));
        let message = error.unwrap_or_else(|| format!("the {direction} step did not finish"));
        self.spans
            .push(span.close("dirthara.migration", at, Some(message)));
    }

    /// Ends the command at `end`: a migration still open failed with the command's `error`,
    /// a target still open is closed as unfinished; then the command's own span.
    pub(crate) fn finish(
        &mut self,
        command: &str,
        end: SystemTime,
        error: Option<(&str, &str)>,
    ) -> SpanRecord {
        let message = error.map(|(code, message)| format!("{code}: {message}"));
        for (_, mut scope) in std::mem::take(&mut self.scopes) {
            for (_, direction, span) in scope.migrations.drain(..) {
                self.fail_migration(span, direction, end, message.clone());
            }
            if let Some(mut span) = scope.target.take() {
                span.attributes
                    .push(("dirthara.outcome", Value::Text("unfinished".into())));
                self.spans.push(span.close("dirthara.target", end, None));
            }
        }
        let mut attributes = vec![("dirthara.command", Value::Text(command.to_string()))];
        if let Some((code, _)) = error {
            attributes.push(("error.type", Value::Text(code.to_string())));
        }
        SpanRecord {
            span_id: self.root,
            parent: None,
            name: "dirthara.command",
            start: self.start,
            end: end.max(self.start),
            attributes,
            error: message,
        }
    }
}

fn finished(direction: Direction) -> &'static str {
    match direction {
        Direction::Up => "applied",
        Direction::Down => "reverted",
    }
}

fn holder_attributes(holder: &crate::events::LockHolder) -> Attributes {
    let mut attributes = vec![("dirthara.lock.holder", Value::Text(holder.to_string()))];
    if let Some(application) = &holder.application {
        attributes.push((
            "dirthara.lock.holder.application",
            Value::Text(application.clone()),
        ));
    }
    if let Some(id) = holder.session_id {
        attributes.push(("dirthara.lock.holder.session_id", Value::Int(id)));
    }
    if let Some(address) = &holder.client_address {
        attributes.push(("dirthara.lock.holder.address", Value::Text(address.clone())));
    }
    attributes
}

pub(crate) fn millis(duration: Duration) -> i64 {
    duration.as_millis().try_into().unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
