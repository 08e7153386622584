//! The blocking-DDL policy, as pure functions: a finding of `dirthara-ddl` on a table of a
//! known size becomes a [`StepFinding`] with the time the application would be blocked, and
//! [`Judge`] says which of a plan's findings refuse the run (`BLOCKING_DDL`), which are only
//! said, and which a directive or a flag allowed. The engine reads the sizes from the catalog;
//! `lint` and `preview` show the same findings.

use std::time::Duration;

use serde::Serialize;

pub use dirthara_ddl::{Blocks, Finding, Rule, Severity, Work};

use crate::migration::Direction;

mod judge;

pub use judge::{AskServer, Judge};

/// A table's size as the catalog has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[non_exhaustive]
pub struct TableSize {
    /// Its rows, as the catalog estimates them; `None` when it does not know yet (a table
    /// never analysed).
    pub rows: Option<u64>,
    /// Its bytes, with its indexes (and, for a partitioned table, every partition's).
    pub bytes: u64,
    /// The relations an `ALTER` of it locks one after the other: itself, and its partitions
    /// and inheritance children (PostgreSQL); 1 elsewhere.
    pub relations: u32,
}

impl TableSize {
    /// A table of `rows` (when known) and `bytes`, locked as one relation.
    pub fn new(rows: Option<u64>, bytes: u64) -> Self {
        TableSize {
            rows,
            bytes,
            relations: 1,
        }
    }

    /// It, locked as `relations` relations (at least one).
    pub fn with_relations(mut self, relations: u32) -> Self {
        self.relations = relations.max(1);
        self
    }
}

/// The table locks a step takes that the application can queue behind, as counted for
/// dividing its `table_lock_timeout` between them: every statement's, when the step runs in
/// one transaction (each lock is held until it ends); else the most any one statement takes
/// (each commits, and lets go, before the next).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StepLocks {
    pub version: i64,
    pub direction: Direction,
    /// At least 1.
    pub locks: u32,
}

/// How fast a server works through a table's bytes (with its indexes) while the application
/// waits, per kind of work: the documented defaults (docs/ddl-safety.md), about three quarters
/// of what PostgreSQL 15 did on the 2-core test machine with other builds running, on
/// `bench/ddl_stall.sh`'s 3-million-row table of 377 MB: a type change rewrote it in 5.1 s,
/// `CREATE INDEX` took 1.4 s, `ADD CHECK` 0.36 s. So an estimate errs long.
pub fn bytes_per_second(work: Work) -> u64 {
    const MB: u64 = 1024 * 1024;
    match work {
        Work::Rewrite => 50 * MB,
        Work::IndexBuild => 200 * MB,
        Work::Scan => 750 * MB,
        _ => u64::MAX,
    }
}

/// One finding on one step, with what the catalog said of its table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StepFinding {
    /// The migration's version and name, and which of its steps.
    pub version: i64,
    pub name: String,
    pub direction: Direction,
    /// The file the statement is in.
    pub file: String,
    /// Where in that file (1-based).
    pub line: usize,
    pub column: usize,
    /// The rule's name (`changing-column-type`).
    pub rule: &'static str,
    pub severity: Severity,
    /// The lock it takes and what the application cannot do meanwhile.
    pub lock: &'static str,
    pub blocks: Blocks,
    /// The table, where there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// Its rows and bytes, when the catalog was asked (`lint -d`, `preview`, a run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// How long the application would be blocked, estimated from the size
    /// (`blocking_ms` in JSON).
    #[serde(
        rename = "blocking_ms",
        serialize_with = "serialize_opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub blocking_for: Option<Duration>,
    /// What the statement does, and why that matters.
    pub message: String,
    /// The safe recipe.
    pub fix: &'static str,
    /// Why it may run anyway: the step's `-- dirthara:allow-blocking` reason, or
    /// `--allow-blocking`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<String>,
    /// Whether it stops the command it was judged for: a run refuses it (`BLOCKING_DDL`),
    /// `lint` exits 1 with it. Set by [`StepFinding::judged_for_run`] or
    /// [`StepFinding::judged_for_lint`].
    pub refuses: bool,
}

fn serialize_opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_millis().try_into().unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

/// Where a finding was made: which migration, step and file.
#[derive(Debug, Clone, Copy)]
pub struct StepPlace<'a> {
    pub version: i64,
    pub name: &'a str,
    pub direction: Direction,
    pub file: &'a str,
    /// The line of the file the step's text starts at (1 for a file of its own).
    pub first_line: usize,
}

impl StepFinding {
    /// `finding`, made in the step at `place`, on a table of `size` when known.
    pub fn new(place: StepPlace<'_>, finding: &Finding, size: Option<TableSize>) -> Self {
        let rule = finding.rule;
        let blocking_for = size
            .filter(|_| rule.severity == Severity::Blocking)
            .map(|size| {
                Duration::from_secs_f64(size.bytes as f64 / bytes_per_second(rule.work) as f64)
            });
        StepFinding {
            version: place.version,
            name: place.name.to_string(),
            direction: place.direction,
            file: place.file.to_string(),
            line: place.first_line + finding.line - 1,
            column: finding.column,
            rule: rule.name,
            severity: rule.severity,
            lock: rule.lock,
            blocks: rule.blocks,
            table: finding.table.clone(),
            rows: size.and_then(|s| s.rows),
            bytes: size.map(|s| s.bytes),
            blocking_for,
            message: format!("{}: {}", finding.message, rule.why),
            fix: rule.fix,
            allowed: None,
            refuses: false,
        }
    }

    /// Whether it stops a run: it blocks the application while it works through a table
    /// bigger than `limit`, or fails wherever it runs; and nothing allowed it.
    pub fn refuses(&self, limit: Option<u64>) -> bool {
        if self.allowed.is_some() {
            return false;
        }
        match self.severity {
            Severity::Error => true,
            Severity::Blocking => match (limit, self.bytes) {
                (Some(limit), Some(bytes)) => bytes > limit,
                _ => false,
            },
            _ => false,
        }
    }

    /// It, with [`StepFinding::refuses`] set as a run judges it.
    pub fn judged_for_run(mut self, limit: Option<u64>) -> Self {
        self.refuses = self.refuses(limit);
        self
    }

    /// It, with [`StepFinding::refuses`] set as `lint` judges it.
    pub fn judged_for_lint(mut self, limit: Option<u64>) -> Self {
        self.refuses = self.fails_lint(limit);
        self
    }

    /// Whether `lint` counts it against the files (exit 1): a blocking or failing statement
    /// that nothing allowed; with sizes known, only one over `limit`.
    pub fn fails_lint(&self, limit: Option<u64>) -> bool {
        if self.allowed.is_some() {
            return false;
        }
        match (self.severity, self.bytes) {
            (Severity::Error, _) => true,
            (Severity::Blocking, None) => true,
            (Severity::Blocking, Some(_)) => self.refuses(limit),
            _ => false,
        }
    }
}

impl std::fmt::Display for StepFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file,
            self.line,
            self.column,
            self.described()
        )
    }
}

impl StepFinding {
    /// What it is, without where: the message, the rule, the table's size and the wait.
    pub fn described(&self) -> String {
        let mut text = format!("{} [{}]", self.message, self.rule);
        if let Some(bytes) = self.bytes {
            text += &format!(
                "; `{}` holds {}",
                self.table.as_deref().unwrap_or("?"),
                size_words(self.rows, bytes)
            );
        }
        if let Some(blocking) = self.blocking_for {
            text += &format!(
                ", so the application would wait about {} ({} blocked)",
                crate::format_duration(blocking),
                match self.blocks {
                    Blocks::ReadsAndWrites => "reads and writes",
                    Blocks::Writes => "writes",
                    _ => "nothing",
                }
            );
        }
        text
    }
}

/// A statement the parser did not read, where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct UnreadStatement {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// Its first words.
    pub statement: String,
    /// Why the parser refused it.
    pub reason: String,
}

pub(crate) fn rule_work(name: &str) -> Work {
    dirthara_ddl::rule_named(name).map_or(Work::Rewrite, |rule| rule.work)
}

/// `3,000,000 rows, 220 MB`, or only the bytes when the rows are not known.
pub fn size_words(rows: Option<u64>, bytes: u64) -> String {
    let size = human_bytes(bytes);
    match rows {
        Some(rows) => format!("{} rows, {size}", thousands(rows)),
        None => size,
    }
}

/// `220 MB`, `1.5 GB`, `512 kB` (powers of 1024, as PostgreSQL's `pg_size_pretty`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "kB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    match (unit, value < 10.0) {
        (0, _) => format!("{bytes} bytes"),
        (_, true) => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.0} {}", UNITS[unit]),
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `100MB`, `1.5 GB`, `512kB`, `0`, a number of bytes, or `off`: a `blocking_table_size`.
pub fn parse_size(text: &str) -> Option<Option<u64>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") {
        return Some(None);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        "g" | "gb" | "gib" => 1024 * 1024 * 1024,
        "t" | "tb" | "tib" => 1024 * 1024 * 1024 * 1024,
        _ => return None,
    };
    let bytes = number * factor as f64;
    (bytes.is_finite() && bytes >= 0.0).then_some(Some(bytes.min(u64::MAX as f64) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rule: &'static Rule) -> Finding {
        let analysis = dirthara_ddl::analyze_step(
            match rule.name {
                "changing-column-type" => "ALTER TABLE big ALTER COLUMN n TYPE bigint",
                _ => "CREATE INDEX CONCURRENTLY i ON big (n)",
            },
            dirthara_ddl::Server::oldest(dirthara_ddl::SqlDialect::Postgres),
            true,
            &mut dirthara_ddl::Context::default(),
        );
        analysis.findings.into_iter().next().unwrap()
    }

    fn place() -> StepPlace<'static> {
        StepPlace {
            version: 3,
            name: "widen",
            direction: Direction::Up,
            file: "db/3_widen.up.sql",
            first_line: 2,
        }
    }

    #[test]
    fn a_blocking_statement_refuses_only_over_the_limit_and_never_when_allowed() {
        let rewrite = finding(&dirthara_ddl::rules::CHANGING_COLUMN_TYPE);
        let size = TableSize::new(Some(3_000_000), 220 * 1024 * 1024);
        let mut found = StepFinding::new(place(), &rewrite, Some(size));
        assert_eq!(found.line, 2, "the step's first line in its file is added");
        assert_eq!(found.blocking_for, Some(Duration::from_secs_f64(4.4)));
        let limit = Some(100 * 1024 * 1024);
        assert!(found.refuses(limit) && found.fails_lint(limit));
        assert!(!found.refuses(Some(300 * 1024 * 1024)));
        assert!(!found.refuses(None), "off never refuses");
        found.allowed = Some("maintenance window".into());
        assert!(!found.refuses(limit) && !found.fails_lint(limit));
        let message = StepFinding::new(place(), &rewrite, Some(size)).to_string();
        assert!(
            message.contains("`big` holds 3,000,000 rows, 220 MB")
                && message.contains("about 4.40 s (reads and writes blocked)"),
            "{message}"
        );
        // A statement that fails wherever it runs refuses whatever the size.
        let error = finding(&dirthara_ddl::rules::BAN_CONCURRENT_INDEX_CREATION_IN_TRANSACTION);
        assert!(StepFinding::new(place(), &error, None).refuses(limit));
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_size("100MB"), Some(Some(100 * 1024 * 1024)));
        assert_eq!(parse_size("1.5 GB"), Some(Some(1536 * 1024 * 1024)));
        assert_eq!(parse_size("512kB"), Some(Some(512 * 1024)));
        assert_eq!(parse_size("0"), Some(Some(0)));
        assert_eq!(parse_size("off"), Some(None));
        assert_eq!(parse_size("big"), None);
        assert_eq!(parse_size("-1MB"), None);
        assert_eq!(human_bytes(220 * 1024 * 1024), "220 MB");
        assert_eq!(human_bytes(1536 * 1024 * 1024), "1.5 GB");
        assert_eq!(thousands(3_000_000), "3,000,000");
    }
}
