//! The facts events, reports and errors share: a warning, who holds the migration lock, and
//! who holds a table lock a migration waits for.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::json::{serialize_code, serialize_opt_ms};
use crate::vocabulary::Code;

/// A warning: the run goes on, but someone should look.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Warning {
    /// The stable code, e.g. [`Code::OutOfOrder`] or [`Code::LockLeaseExpired`].
    #[serde(serialize_with = "serialize_code")]
    pub code: Code,
    /// What happened and what, if anything, to do about it.
    pub message: String,
}

impl Warning {
    /// A warning of `code`, saying `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Warning {
            code,
            message: message.into(),
        }
    }

    pub fn out_of_order(versions: &[i64], newest_applied: i64) -> Self {
        let list: Vec<String> = versions.iter().map(i64::to_string).collect();
        Warning {
            code: Code::OutOfOrder,
            message: format!(
                "pending migration(s) {} are older than the newest applied migration {newest_applied} \
                 (merged from another branch?); applying them anyway (--strict refuses instead)",
                list.join(", ")
            ),
        }
    }
}

impl Warning {
    /// `wait` found migrations applied that its files do not have (`MISSING_MIGRATION`): a
    /// newer build migrated the database, as happens during every rolling deploy and every
    /// rollback of one. `newer`: each one's version and name, oldest first.
    pub fn newer_database(newer: &[(i64, &str)]) -> Self {
        const NAMED: usize = 5;
        let mut list: Vec<String> = (newer.iter().take(NAMED))
            .map(|(version, name)| format!("{version} ({name})"))
            .collect();
        if newer.len() > NAMED {
            list.push(format!("and {} more", newer.len() - NAMED));
        }
        Warning {
            code: Code::MissingMigration,
            message: format!(
                "the database is newer than these files: {} applied that they do not have; \
                 fine for a rolling deploy (--strict refuses it)",
                list.join(", ")
            ),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "warning [{}]: {}", self.code, self.message)
    }
}

/// Who holds a lock, as far as the database can tell.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[non_exhaustive]
pub struct LockHolder {
    /// The database's identifier of the holding session (PostgreSQL backend pid, MySQL connection id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<i64>,
    /// `dirthara <operation> <host>:<pid>` when the holder announced itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// The address the holding session connected from (session locks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_address: Option<String>,
    /// When the holding session started (UTC, RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// What the holder is doing, where the database can tell (MySQL: its statement and for how long).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activity: Option<String>,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(app) = &self.application {
            parts.push(format!("`{app}`"));
        }
        if let Some(id) = self.session_id {
            parts.push(format!("session {id}"));
        }
        if let Some(addr) = &self.client_address {
            parts.push(format!("from {addr}"));
        }
        if let Some(since) = &self.since {
            parts.push(format!("since {since}"));
        }
        if let Some(activity) = &self.activity {
            parts.push(activity.clone());
        }
        if parts.is_empty() {
            f.write_str("an unidentified session")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// A session that holds a lock a migration's statement waits for, as the database reports it
/// (PostgreSQL `pg_blocking_pids` and `pg_stat_activity`; MySQL/MariaDB the metadata-lock
/// holder, or — where the server does not expose metadata locks — the oldest open
/// transaction in the database, flagged as likely).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[non_exhaustive]
pub struct Blocker {
    /// The session's id (PostgreSQL backend pid, MySQL connection id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<i64>,
    /// Its `application_name` (PostgreSQL) or user (MySQL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// Where it connected from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_address: Option<String>,
    /// What it is doing: `idle in transaction`, `active`, `Sleep`, `Query`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// How long its transaction has been open (`transaction_age_ms` in JSON).
    #[serde(
        rename = "transaction_age_ms",
        serialize_with = "serialize_opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub transaction_age: Option<Duration>,
    /// The start of its current (or last) statement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The database could not say which session holds the lock; this is the session most
    /// likely to (MariaDB, and MySQL without `performance_schema`: the oldest transaction
    /// open since before the statement began to wait).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub likely: bool,
    /// Which of its transactions held the lock (when it started, in the database's words):
    /// while the engine pauses before the next attempt, it asks whether this transaction
    /// is still open, and tries again at once when it is not.
    #[serde(skip)]
    pub transaction: Option<String>,
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A guess is never written as a fact: it comes after "another session".
        if self.likely {
            f.write_str("another session; a guess, not certain: perhaps ")?;
        }
        match self.session_id {
            Some(id) => write!(f, "session {id}")?,
            None => f.write_str("a session")?,
        }
        let mut facts = Vec::new();
        if let Some(application) = self.application.as_deref().filter(|a| !a.is_empty()) {
            facts.push(format!("`{application}`"));
        }
        if let Some(address) = &self.client_address {
            facts.push(format!("from {address}"));
        }
        if let Some(state) = &self.state {
            facts.push(state.clone());
        }
        if let Some(age) = self.transaction_age {
            facts.push(format!(
                "transaction open for {}",
                crate::format_duration(age)
            ));
        }
        if !facts.is_empty() {
            write!(f, " ({})", facts.join(", "))?;
        }
        if let Some(query) = &self.query {
            let query = query.split_whitespace().collect::<Vec<_>>().join(" ");
            write!(f, ": `{}`", crate::text::cut_at_char_boundary(&query, 120))?;
        }
        if self.likely {
            f.write_str(
                ", the oldest transaction open since before the statement began to wait. The \
                 server does not report who holds metadata locks: on MariaDB, \
                 `INSTALL SONAME 'metadata_lock_info'` (no restart) makes the answer certain; on \
                 MySQL, `performance_schema = ON` with the `wait/lock/metadata/sql/mdl` \
                 instrument",
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blockers_transaction_age_is_said_as_every_duration_is() {
        let blocker = Blocker {
            session_id: Some(4127),
            application: Some("report-job".into()),
            client_address: None,
            state: Some("idle in transaction".into()),
            transaction_age: Some(Duration::from_millis(3020)),
            query: None,
            likely: false,
            transaction: None,
        };
        assert_eq!(
            blocker.to_string(),
            "session 4127 (`report-job`, idle in transaction, transaction open for 3.02 s)"
        );
    }
}
