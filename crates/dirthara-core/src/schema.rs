//! A database's schema as dirthara reads it from the catalog: objects, each with a canonical
//! text, in an order that does not depend on how the database was built, and the versions its
//! history holds. This is the model that `dump`, `dump --check` and `drift` share (issue 30):
//! rendered as a file, read back from one, and compared object by object. It is pure; the
//! readers, one per backend, live with the backends.
//!
//! The file is SQL (or, for MongoDB, JSON texts) under one comment line per object, so it can
//! be reviewed in a pull request and read back without a parser of each database's language:
//!
//! ```text
//! -- dirthara schema dump
//! -- object table public.users
//! CREATE TABLE public.users (id bigint NOT NULL);
//!
//! -- applied versions
//! -- 1 create_users
//! ```

mod baseline;
mod diff;
mod snapshot;
#[cfg(test)]
mod tests;

use std::fmt;

use serde::Serialize;

pub use baseline::{write_baseline, BaselineDialect, BaselineFacts, ObjectName};
pub use diff::line_diff;
pub use snapshot::{server_major, snapshot_table, SchemaSnapshot, StoredSnapshot};

const FIRST_LINE: &str = "-- dirthara schema dump";
const OBJECT: &str = "-- object ";
const APPLIED: &str = "-- applied versions";

/// The kinds in the order a dump lists them: what others depend on first. A kind not listed
/// here comes after these, in name order.
const KIND_ORDER: [&str; 17] = [
    "schema",
    "extension",
    "type",
    "domain",
    "sequence",
    "table",
    "collection",
    "view",
    "materialized_view",
    "function",
    "procedure",
    "index",
    "constraint",
    "foreign_key",
    "trigger",
    "policy",
    "event",
];

/// One object of a schema: its kind (`table`, `index`, ...; lower case, `_` for a space), its
/// key (the qualified name, unique within the kind) and its canonical text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaObject {
    pub kind: String,
    pub key: String,
    pub text: String,
}

impl SchemaObject {
    /// The object; its text is made canonical by [`SchemaDump::new`], which every object
    /// goes through.
    pub fn new(kind: impl Into<String>, key: impl Into<String>, text: impl Into<String>) -> Self {
        SchemaObject {
            kind: kind.into(),
            key: key.into(),
            text: text.into(),
        }
    }

    /// `kind key`, as a report names the object.
    pub fn name(&self) -> String {
        format!("{} {}", self.kind, self.key)
    }
}

/// One applied version of the history, as the dump's last section lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppliedVersion {
    pub version: i64,
    pub description: String,
}

/// A schema, its objects sorted by kind and key, each key once.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct SchemaDump {
    objects: Vec<SchemaObject>,
    applied: Vec<AppliedVersion>,
}

/// Why a schema could not be made or read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError(pub String);

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SchemaError {}

impl SchemaDump {
    /// The schema of `objects` and `applied`, in canonical order whatever order they came in.
    /// Refuses a kind that is not a lower-case word, a key or description over more than one
    /// line, and an object or version given twice: each would make the file ambiguous.
    pub fn new(
        mut objects: Vec<SchemaObject>,
        mut applied: Vec<AppliedVersion>,
    ) -> Result<Self, SchemaError> {
        for object in &mut objects {
            if object.kind.is_empty()
                || !(object.kind.bytes()).all(|b| b.is_ascii_lowercase() || b == b'_')
            {
                return Err(SchemaError(format!(
                    "object kind `{}` is not a lower-case word",
                    object.kind
                )));
            }
            if object.key.is_empty() || object.key.contains(['\n', '\r']) {
                return Err(SchemaError(format!(
                    "the key of {} `{}` is empty or spans lines",
                    object.kind,
                    object.key.escape_debug()
                )));
            }
            object.text = canonical_text(&object.text);
        }
        objects.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
        if let Some(pair) = objects
            .windows(2)
            .find(|p| p[0].kind == p[1].kind && p[0].key == p[1].key)
        {
            return Err(SchemaError(format!("{} is listed twice", pair[0].name())));
        }
        applied.sort_by_key(|a| a.version);
        if let Some(pair) = applied.windows(2).find(|p| p[0].version == p[1].version) {
            return Err(SchemaError(format!(
                "version {} is listed twice",
                pair[0].version
            )));
        }
        if let Some(a) = applied
            .iter()
            .find(|a| a.description.contains(['\n', '\r']))
        {
            return Err(SchemaError(format!(
                "the description of version {} spans lines",
                a.version
            )));
        }
        Ok(SchemaDump { objects, applied })
    }

    pub fn objects(&self) -> &[SchemaObject] {
        &self.objects
    }

    pub fn applied(&self) -> &[AppliedVersion] {
        &self.applied
    }

    /// The file: the first line, each object under its header line and followed by a blank
    /// line, then the applied versions. A text line that would read as one of those lines is
    /// written with one more leading space, which [`SchemaDump::parse`] takes away again.
    pub fn render(&self) -> String {
        let mut out = String::from(FIRST_LINE);
        out.push('\n');
        for object in &self.objects {
            out.push_str(&format!("{OBJECT}{} {}\n", object.kind, object.key));
            for line in object.text.lines() {
                if is_reserved(line.trim_start_matches(' ')) {
                    out.push(' ');
                }
                out.push_str(line);
                out.push('\n');
            }
            out.push('\n');
        }
        out.push_str(APPLIED);
        out.push('\n');
        for a in &self.applied {
            out.push_str(&format!("-- {} {}\n", a.version, a.description));
        }
        out
    }

    /// Reads back a file [`SchemaDump::render`] wrote (a committed dump, `--against FILE`).
    pub fn parse(text: &str) -> Result<Self, SchemaError> {
        let text = text.replace("\r\n", "\n");
        let mut lines = text.lines().enumerate().peekable();
        match lines.next() {
            Some((_, FIRST_LINE)) => {}
            _ => {
                return Err(SchemaError(format!(
                    "not a dirthara schema dump: its first line is not `{FIRST_LINE}`"
                )))
            }
        }
        let mut objects = Vec::new();
        let mut current: Option<(String, String, Vec<String>)> = None;
        let mut in_applied = false;
        let mut applied = Vec::new();
        for (index, line) in lines {
            let number = index + 1;
            if in_applied {
                applied.push(applied_line(line, number)?);
            } else if let Some(header) = line.strip_prefix(OBJECT) {
                objects.extend(current.take().map(finish));
                let (kind, key) = header.split_once(' ').ok_or_else(|| {
                    SchemaError(format!(
                        "line {number}: `{line}` names no key after the kind"
                    ))
                })?;
                current = Some((kind.to_string(), key.to_string(), Vec::new()));
            } else if line == APPLIED {
                objects.extend(current.take().map(finish));
                in_applied = true;
            } else if let Some((_, _, body)) = current.as_mut() {
                let unescaped = match line.strip_prefix(' ') {
                    Some(rest) if is_reserved(rest.trim_start_matches(' ')) => rest,
                    _ => line,
                };
                body.push(unescaped.to_string());
            } else if !line.trim().is_empty() {
                return Err(SchemaError(format!(
                    "line {number}: text before the first `{OBJECT}` line"
                )));
            }
        }
        if !in_applied {
            return Err(SchemaError(format!(
                "the dump ends without its `{APPLIED}` section: it is cut short"
            )));
        }
        SchemaDump::new(objects, applied)
    }
}

/// What is drifted between two schemas, for one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// In the live schema only.
    Added,
    /// In the expected schema only.
    Missing,
    /// In both, with another text.
    Changed,
}

/// One object that differs: `kind key`, how, and the lines that differ (`changed`) or its
/// text (`added`, `missing`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drift {
    pub object: String,
    pub change: Change,
    pub detail: String,
}

/// Every object of `live` that is not as in `expected`, in the dump's order. The applied
/// versions are not compared: a history is checked by `status`, not here.
pub fn compare(expected: &SchemaDump, live: &SchemaDump) -> Vec<Drift> {
    let (mut e, mut l) = (
        expected.objects.iter().peekable(),
        live.objects.iter().peekable(),
    );
    let mut drift = Vec::new();
    loop {
        let order = match (e.peek(), l.peek()) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(a), Some(b)) => sort_key(a).cmp(&sort_key(b)),
        };
        match order {
            std::cmp::Ordering::Less => drift.push(whole(e.next(), Change::Missing)),
            std::cmp::Ordering::Greater => drift.push(whole(l.next(), Change::Added)),
            std::cmp::Ordering::Equal => {
                let (a, b) = (e.next().expect("peeked"), l.next().expect("peeked"));
                if a.text != b.text {
                    drift.push(Drift {
                        object: a.name(),
                        change: Change::Changed,
                        detail: line_diff(&a.text, &b.text),
                    });
                }
            }
        }
    }
    drift
}

/// The lines of the applied versions that differ between `expected` and `live`, as
/// [`line_diff`] shows them; `None` when they are the same.
pub fn compare_versions(expected: &SchemaDump, live: &SchemaDump) -> Option<String> {
    let lines = |dump: &SchemaDump| -> String {
        (dump.applied.iter())
            .map(|a| format!("-- {} {}\n", a.version, a.description))
            .collect()
    };
    let (old, new) = (lines(expected), lines(live));
    (old != new).then(|| line_diff(&old, &new))
}

/// An object only one side has, its whole text as the detail.
fn whole(object: Option<&SchemaObject>, change: Change) -> Drift {
    let object = object.expect("peeked");
    Drift {
        object: object.name(),
        change,
        detail: object.text.clone(),
    }
}

fn sort_key(object: &SchemaObject) -> (usize, &str, &str) {
    let rank = KIND_ORDER
        .iter()
        .position(|k| *k == object.kind)
        .unwrap_or(KIND_ORDER.len());
    (rank, object.kind.as_str(), object.key.as_str())
}

/// Line ends as `\n`, no trailing spaces on a line, no blank lines before or after the text:
/// what differs between servers and editors and means nothing.
fn canonical_text(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let first = lines.iter().position(|l| !l.is_empty());
    let last = lines.iter().rposition(|l| !l.is_empty());
    match (first, last) {
        (Some(first), Some(last)) => lines[first..=last].join("\n"),
        _ => String::new(),
    }
}

/// A line the file's own structure uses, once its leading spaces are taken away.
fn is_reserved(line: &str) -> bool {
    line.starts_with(OBJECT) || line == APPLIED || line == FIRST_LINE
}

fn finish((kind, key, body): (String, String, Vec<String>)) -> SchemaObject {
    SchemaObject::new(kind, key, body.join("\n"))
}

fn applied_line(line: &str, number: usize) -> Result<AppliedVersion, SchemaError> {
    let parsed = line.strip_prefix("-- ").and_then(|rest| {
        let (version, description) = rest.split_once(' ').unwrap_or((rest, ""));
        Some(AppliedVersion {
            version: version.parse().ok()?,
            description: description.to_string(),
        })
    });
    parsed.ok_or_else(|| {
        SchemaError(format!(
            "line {number}: `{line}` is not `-- <version> <description>`"
        ))
    })
}
