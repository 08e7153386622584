//! dirthara-ddl: what a migration's statements do to the tables they touch, read on a real
//! SQL parser (sqlparser, for PostgreSQL and MySQL/MariaDB), before anything runs: the lock
//! each takes, what the application can still do meanwhile, whether it rewrites, scans or
//! indexes the table, and the safe recipe when it blocks. No I/O: sizing the tables and
//! asking the live server are the engine's (`dirthara`), which holds the connections.
//!
//! Statements are split by dirthara's own tokenizer (`dirthara-source`), the one the runner
//! sends them by, and each is parsed on its own: a statement the parser does not read is
//! reported as not analysed, never as a finding, and never silently. A few forms sqlparser
//! 0.64 does not read but that rewrite a table (`CLUSTER`, `SET TABLESPACE`, `VACUUM (FULL)`,
//! a type change with `COLLATE`, MySQL's `CONVERT TO CHARACTER SET`) are recognised from
//! their leading words, read by the same tokenizer (`heads.rs`).
//!
//! - `rules.rs`: the rule table (name, severity, lock, what it blocks, the safe recipe);
//! - `postgres.rs`, `mysql.rs`: each dialect's statements to findings;
//! - `heads.rs`: the statements the parser does not read, by their leading words;
//! - `server.rs`: the server a step runs on, as far as the rules depend on its version.

use std::collections::BTreeSet;

use serde::Serialize;

mod heads;
mod locks;
mod mysql;
mod postgres;
mod rehearse;
pub mod rules;
mod server;

pub use dirthara_source::sql::SqlDialect;
pub use locks::LockTarget;
pub use rehearse::{rehearsal, Rehearsal};
pub use rules::{rule_named, Blocks, Rule, Severity, Work, RULES};
pub use server::Server;

/// One statement the rules flag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Finding {
    /// The rule.
    #[serde(serialize_with = "serialize_rule")]
    pub rule: &'static Rule,
    /// Where, in the step's text (1-based).
    pub line: usize,
    pub column: usize,
    /// The table it blocks or changes, as written (`public.big`), where there is one.
    pub table: Option<String>,
    /// What this statement does, in a sentence (the rule says why that matters).
    pub message: String,
    /// The statement's code, as the migration wrote it (without the comments before it):
    /// what a rehearsal on the live server runs, retargeted ([`rehearsal`]).
    #[serde(skip)]
    pub statement: String,
}

fn serialize_rule<S: serde::Serializer>(rule: &&'static Rule, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(rule.name)
}

impl Finding {
    fn at(rule: &'static Rule, at: (usize, usize), table: Option<String>, message: String) -> Self {
        Finding {
            rule,
            line: at.0,
            column: at.1,
            table,
            message,
            statement: String::new(),
        }
    }
}

/// A statement the parser did not read: nothing is said about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NotAnalysed {
    pub line: usize,
    pub column: usize,
    /// Its first words.
    pub statement: String,
    /// The parser's reason.
    pub reason: String,
}

/// What one step's statements do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StepAnalysis {
    pub findings: Vec<Finding>,
    pub not_analysed: Vec<NotAnalysed>,
    /// Each statement's table locks the application can queue behind, in order.
    pub statement_locks: Vec<Vec<LockTarget>>,
}

/// What the analysis knows of the migration around a step: the tables it created, which
/// nobody else uses yet, so nothing done to them is flagged.
#[derive(Debug, Clone, Default)]
pub struct Context {
    created: BTreeSet<String>,
}

impl Context {
    /// Notes that the migration created `table`.
    fn created(&mut self, table: &str) {
        self.created.insert(bare_name(table));
    }

    /// Whether the migration created `table` itself.
    fn is_new(&self, table: &str) -> bool {
        self.created.contains(&bare_name(table))
    }
}

/// A table's name without its schema or quotes, lower-cased: how a table created in the
/// migration is recognised later in it.
fn bare_name(table: &str) -> String {
    let last = table.rsplit('.').next().unwrap_or(table);
    last.trim_matches(|c| c == '"' || c == '`').to_lowercase()
}

/// Reads a step's statements as `server` will run them: `transactional` when the runner
/// wraps the step in a transaction. `context` carries what earlier steps of the migration
/// created.
///
/// # Examples
///
/// ```
/// use dirthara_ddl::{analyze_step, Context, Server, SqlDialect};
/// let server = Server::oldest(SqlDialect::Postgres);
/// let found = analyze_step("ALTER TABLE big ALTER COLUMN n TYPE bigint", server, true, &mut Context::default());
/// assert_eq!(found.findings[0].rule.name, "changing-column-type");
/// let found = analyze_step(
///     "CREATE TABLE t (id int);\nALTER TABLE t ALTER COLUMN id TYPE bigint",
///     server, true, &mut Context::default(),
/// );
/// assert!(found.findings.is_empty(), "a table created in the migration is never flagged");
/// ```
pub fn analyze_step(
    text: &str,
    server: Server,
    transactional: bool,
    context: &mut Context,
) -> StepAnalysis {
    let dialect = server.dialect();
    let statements = match dialect {
        SqlDialect::MySql if dirthara_source::sql::has_client_delimiter(text) => {
            dirthara_source::sql::mysql_client_statements(text).unwrap_or_default()
        }
        _ => dirthara_source::sql::split_statements(text, dialect),
    };
    let mut analysis = StepAnalysis::default();
    for statement in statements {
        let place = Place::of(text, &statement, dialect);
        let code = &statement.text[place.skipped..];
        let parsed = match dialect {
            SqlDialect::MySql => {
                sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::MySqlDialect {}, code)
            }
            _ => sqlparser::parser::Parser::parse_sql(
                &sqlparser::dialect::PostgreSqlDialect {},
                code,
            ),
        };
        let found = match parsed {
            Ok(parsed) => {
                let mut found = Vec::new();
                for parsed in &parsed {
                    // Before the statement is read: what it creates is new only after it.
                    (analysis.statement_locks).push(locks::statement_locks(parsed, context));
                    match dialect {
                        SqlDialect::MySql => {
                            mysql::statement(parsed, &place, server, context, &mut found)
                        }
                        _ => postgres::statement(
                            parsed,
                            &place,
                            server,
                            transactional,
                            context,
                            &mut found,
                        ),
                    }
                }
                found
            }
            Err(error) => {
                (analysis.statement_locks).push(vec![LockTarget::Unnamed]);
                match heads::statement(code, &place, dialect, transactional, context) {
                    Some(found) => found,
                    None => {
                        analysis.not_analysed.push(NotAnalysed {
                            line: place.line,
                            column: place.column,
                            statement: excerpt(code),
                            reason: error.to_string().replace("sql parser error: ", ""),
                        });
                        Vec::new()
                    }
                }
            }
        };
        analysis
            .findings
            .extend(found.into_iter().map(|mut finding| {
                finding.statement = code.trim_end().trim_end_matches(';').to_string();
                finding
            }));
    }
    analysis
}

/// Where a statement's code starts in the step, for positions: its leading comments and
/// blank lines skipped.
pub(crate) struct Place {
    /// 1-based line and column of the code's first character in the step.
    line: usize,
    column: usize,
    /// Bytes of comments and whitespace before the code, in the statement's text.
    skipped: usize,
}

impl Place {
    fn of(
        step: &str,
        statement: &dirthara_source::sql::Statement<'_>,
        dialect: SqlDialect,
    ) -> Place {
        let first = dirthara_source::sql::words(statement.text, dialect)
            .first()
            .map_or(0, |w| w.offset);
        let at = statement.offset + first;
        let before = &step[..at];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        Place {
            line,
            column,
            skipped: first,
        }
    }

    /// The step's position of a parser position (1-based line and column within the code);
    /// the statement's start when the parser gave none (line 0).
    fn of_span(&self, span: sqlparser::tokenizer::Span) -> (usize, usize) {
        let (line, column) = (span.start.line as usize, span.start.column as usize);
        match line {
            0 => (self.line, self.column),
            1 => (self.line, self.column + column - 1),
            _ => (self.line + line - 1, column),
        }
    }

    fn start(&self) -> (usize, usize) {
        (self.line, self.column)
    }
}

/// A statement's first line, cut to 80 characters.
fn excerpt(code: &str) -> String {
    let first = code.lines().next().unwrap_or_default().trim();
    match first.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &first[..cut]),
        None => first.to_string(),
    }
}

#[cfg(test)]
mod tests;
