//! The judge: a plan's steps read as the database each runs on will run them, then the
//! server asked about what the rules say rewrites or copies a table, then the catalog's sizes,
//! then the findings; and the table locks each step takes, counted for sharing its timeout.

use std::time::Duration;

use super::{
    bytes_per_second, rule_work, StepFinding, StepLocks, StepPlace, TableSize, UnreadStatement,
};
use crate::migration::Direction;
use dirthara_ddl::Severity;

/// Judges a plan's steps, in two halves around the I/O the engine does: [`Judge::analyze`]
/// each step as the database it runs on will run it, then [`Judge::sized`] each
/// connection's tables, then [`Judge::findings`].
#[derive(Debug, Default)]
pub struct Judge {
    /// Each finding, on the connection it was made on, with its size once known.
    found: Vec<Found>,
    /// The statements the parser did not read.
    not_analysed: Vec<UnreadStatement>,
    disabled: std::collections::BTreeSet<String>,
    allow_all: bool,
    /// What each migration created, so nothing done to those tables later is flagged.
    contexts: std::collections::BTreeMap<(i64, bool), dirthara_ddl::Context>,
    /// Each step read: its connection, whether it runs in one transaction, and each
    /// statement's table locks.
    steps: Vec<ReadStep>,
    /// The sizes read, by connection and table as written.
    sizes: std::collections::BTreeMap<(String, String), TableSize>,
}

/// A finding as the judge keeps it until the sizes and the server's answers are in.
#[derive(Debug)]
struct Found {
    connection: String,
    finding: StepFinding,
    size: Option<TableSize>,
    /// The statement as written, and the dialect it was read in: for a rehearsal.
    statement: String,
    dialect: dirthara_ddl::SqlDialect,
    /// The live server ran the statement's online form on an empty copy: it does not block.
    disproved: bool,
}

/// A statement the live server is asked about ([`Judge::rehearsals`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskServer {
    /// Which of the judge's findings it would confirm or disprove.
    pub finding: usize,
    /// The connection the statement runs on.
    pub connection: String,
    pub rehearsal: dirthara_ddl::Rehearsal,
}

#[derive(Debug)]
struct ReadStep {
    version: i64,
    direction: Direction,
    connection: String,
    transactional: bool,
    statement_locks: Vec<Vec<dirthara_ddl::LockTarget>>,
}

impl Judge {
    /// A judge with rules `disabled` switched off, and every statement allowed when
    /// `allow_all` (`--allow-blocking`).
    pub fn new(disabled: &std::collections::BTreeSet<String>, allow_all: bool) -> Self {
        Judge {
            disabled: disabled.clone(),
            allow_all,
            ..Judge::default()
        }
    }

    /// Reads the `direction` step of `migration`, which runs on `connection`, a database
    /// that can do what `capabilities` say and reports `version`. A database without table
    /// locks (SQLite, MongoDB) stalls nobody this way, and is not read.
    pub fn analyze(
        &mut self,
        migration: &crate::migration::Migration,
        direction: Direction,
        connection: &str,
        capabilities: &crate::kind::Capabilities,
        version: Option<&str>,
    ) {
        let (Some(dialect), true) = (capabilities.sql_dialect, capabilities.table_locks) else {
            return;
        };
        if migration.format != crate::migration::StepFormat::Sql {
            return;
        }
        let Some(text) = migration.step(direction) else {
            return;
        };
        let server = match version {
            Some(version) => dirthara_ddl::Server::from_version(dialect, version),
            None => dirthara_ddl::Server::oldest(dialect),
        };
        let transactional = capabilities.transactional_ddl
            && migration.transactional_in(direction)
            && migration.own_transaction_in(direction).is_none();
        let context = self
            .contexts
            .entry((migration.version, direction == Direction::Up))
            .or_default();
        let analysis = dirthara_ddl::analyze_step(text, server, transactional, context);
        let source = migration.source_of(direction);
        let place = StepPlace {
            version: migration.version,
            name: &migration.name,
            direction,
            file: if source.file.is_empty() {
                &migration.origin
            } else {
                &source.file
            },
            first_line: source.first_line.max(1),
        };
        let allowed = match (migration.allow_blocking_in(direction), self.allow_all) {
            (Some(reason), _) => Some(reason.to_string()),
            (None, true) => Some("--allow-blocking".to_string()),
            (None, false) => None,
        };
        self.steps.push(ReadStep {
            version: migration.version,
            direction,
            connection: connection.to_string(),
            transactional,
            statement_locks: analysis.statement_locks,
        });
        for unread in analysis.not_analysed {
            self.not_analysed.push(UnreadStatement {
                file: place.file.to_string(),
                line: place.first_line + unread.line - 1,
                column: unread.column,
                statement: unread.statement,
                reason: unread.reason,
            });
        }
        for finding in analysis.findings {
            if self.disabled.contains(finding.rule.name) {
                continue;
            }
            let mut step_finding = StepFinding::new(place, &finding, None);
            step_finding.allowed = allowed.clone();
            self.found.push(Found {
                connection: connection.to_string(),
                finding: step_finding,
                size: None,
                statement: finding.statement,
                dialect,
                disproved: false,
            });
        }
    }

    /// The tables whose size would decide something, on each connection: those of blocking
    /// findings, and those a step locks (whose partitions count).
    pub fn tables(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        let mut tables: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        let mut add = |connection: &str, table: &str| {
            let list = tables.entry(connection.to_string()).or_default();
            if !list.iter().any(|t| t == table) {
                list.push(table.to_string());
            }
        };
        for found in self.found.iter().filter(|f| !f.disproved) {
            if let (Severity::Blocking, Some(table)) =
                (found.finding.severity, &found.finding.table)
            {
                add(&found.connection, table);
            }
        }
        for step in &self.steps {
            for lock in step.statement_locks.iter().flatten() {
                if let dirthara_ddl::LockTarget::Table { name, .. } = lock {
                    add(&step.connection, name);
                }
            }
        }
        tables
    }

    /// The sizes of `tables` on `connection`, as [`Judge::tables`] listed them.
    pub fn sized(&mut self, connection: &str, tables: &[String], sizes: &[Option<TableSize>]) {
        for (table, size) in tables.iter().zip(sizes) {
            if let Some(size) = size {
                (self.sizes).insert((connection.to_string(), table.clone()), *size);
            }
        }
        for found in &mut self.found {
            let Some(table) = &found.finding.table else {
                continue;
            };
            if found.connection != connection || found.finding.severity != Severity::Blocking {
                continue;
            }
            if let Some(at) = tables.iter().position(|t| t == table) {
                found.size = sizes.get(at).copied().flatten();
            }
        }
    }

    /// Each step's table locks, once sized: a table counts its partitions and children
    /// (unless `ONLY`), a table the catalog does not have counts one, and so does a lock on
    /// a table the analysis could not name.
    pub fn step_locks(&self) -> Vec<StepLocks> {
        (self.steps.iter())
            .map(|step| {
                let counted = |locks: &Vec<dirthara_ddl::LockTarget>| -> u32 {
                    (locks.iter())
                        .map(|lock| match lock {
                            dirthara_ddl::LockTarget::Table { name, only: false } => self
                                .sizes
                                .get(&(step.connection.clone(), name.clone()))
                                .map_or(1, |size| size.relations),
                            _ => 1,
                        })
                        .fold(0u32, u32::saturating_add)
                };
                let per_statement = step.statement_locks.iter().map(counted);
                let locks = match step.transactional {
                    true => per_statement.fold(0u32, u32::saturating_add),
                    false => per_statement.max().unwrap_or(0),
                };
                StepLocks {
                    version: step.version,
                    direction: step.direction,
                    locks: locks.max(1),
                }
            })
            .collect()
    }

    /// The statements the parser did not read, in plan order: nothing is said of them.
    pub fn not_analysed(&self) -> &[UnreadStatement] {
        &self.not_analysed
    }

    /// What to ask the live server: each blocking finding whose rule the server can confirm
    /// by rehearsing the statement on an empty copy of its table (see
    /// [`dirthara_ddl::rehearsal`]). `copy` names the copy.
    pub fn rehearsals(&self, copy: &str) -> Vec<AskServer> {
        (self.found.iter().enumerate())
            .filter(|(_, found)| found.finding.severity == Severity::Blocking)
            .filter_map(|(index, found)| {
                let rule = dirthara_ddl::rule_named(found.finding.rule)?;
                let rehearsal =
                    dirthara_ddl::rehearsal(rule, &found.statement, found.dialect, copy)?;
                Some(AskServer {
                    finding: index,
                    connection: found.connection.clone(),
                    rehearsal,
                })
            })
            .collect()
    }

    /// The server's answer to [`Judge::rehearsals`]' `finding`: `false` when it ran the
    /// statement online (no rewrite, or an online algorithm accepted), which drops the
    /// finding; `true` confirms it.
    pub fn rehearsed(&mut self, finding: usize, blocks: bool) {
        if let Some(found) = self.found.get_mut(finding) {
            found.disproved = !blocks;
        }
    }

    /// Every finding the server did not disprove, with its table's size where one was read,
    /// in plan order.
    pub fn findings(self) -> Vec<StepFinding> {
        (self.found.into_iter())
            .filter(|found| !found.disproved)
            .map(|Found { finding, size, .. }| (finding, size))
            .map(|(mut finding, size)| {
                if let Some(size) = size {
                    finding.rows = size.rows;
                    finding.bytes = Some(size.bytes);
                    finding.blocking_for = Some(Duration::from_secs_f64(
                        size.bytes as f64 / bytes_per_second(rule_work(finding.rule)) as f64,
                    ));
                }
                finding
            })
            .collect()
    }
}
