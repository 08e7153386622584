//! The settings, declared once: one row per setting with every name it goes by (its key in
//! `dirthara.toml`, its environment variable, its flag), its one parser, its default and the
//! line that documents it. The file, the environment and the CLI's flags all read this table,
//! and so do the docs' tests: a new setting is one row here plus the field it sets.
//!
//! Settings that are maps or lists keep their own syntax beside the table: `directories` (a
//! TOML array, `DIRTHARA_DIRECTORIES` comma-separated, `--dir` repeated), `[connections]`
//! (`DATABASE_URL`, `DIRTHARA_CONNECTION_<NAME>`), `[init_sql]` (`DIRTHARA_INIT_SQL_<NAME>`)
//! and `[fleet]`.

use super::value::{
    Locking, Origin, ALLOW_BLOCKING, BLOCKING_TABLE_SIZE, CONNECT_TIMEOUT, DUMP_SCHEMA,
    HISTORY_CONNECTION, HISTORY_TABLE, LINT_DISABLE, LOCKING, LOCK_TTL, LOCK_WAIT, SCHEMA_SNAPSHOT,
    STRICT, TABLE_LOCK_RETRY_FOR, TABLE_LOCK_TIMEOUT,
};
use super::Config;
use crate::error::{Error, Result};

/// How a setting is written in `dirthara.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileForm {
    /// A string, or an integer or boolean read as the same text would be (`lock_wait = 0`,
    /// `locking = false`).
    Text,
    /// A boolean only (`strict = true`); on the command line a switch without a value.
    Switch,
    /// An array of strings (or one string, comma-separated).
    List,
}

/// One setting: every name it goes by, its parser, its default and its documentation.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct SettingRow {
    /// The key in `dirthara.toml`: `lock_wait`.
    pub key: &'static str,
    /// The environment variable: `DIRTHARA_LOCK_WAIT`.
    pub env: &'static str,
    /// The flag, without its dashes: `lock-wait`.
    pub flag: &'static str,
    /// What the flag's value is called in `--help`: `WAIT`.
    pub value_name: &'static str,
    /// The default, as `--help` and the docs say it.
    pub default: &'static str,
    /// One line of documentation, for `--help` and the docs.
    pub doc: &'static str,
    /// How `dirthara.toml` writes it.
    pub file_form: FileForm,
    /// What the text must be, for a refusal ("a duration such as '30s'"); strings between
    /// single quotes.
    pub expected: &'static str,
    /// Every value there is, where the values are a fixed set (`locking`); else empty.
    pub values: &'static [&'static str],
    /// Whether `text` is a value of this setting at all (its syntax only): a flag refuses
    /// what is not as a usage error, before any setting is applied.
    pub parses: fn(&str) -> bool,
    /// Reads `text`, written at `origin`, into `config` through the setting's one parser and
    /// its checks; an error names `origin`.
    pub apply: fn(&mut Config, &str, Origin<'_>) -> Result<()>,
    /// The error for a value that is no text of this setting at all (a TOML array), saying
    /// what it expects.
    pub refuse: fn(Origin<'_>) -> Error,
}

/// A row of [`SETTINGS`] for the typed setting `$setting` (its key and its one parser), which
/// sets `$config.$field` (through `$wrap`, when the field holds more than the value).
macro_rules! row {
    (@values) => { &[] };
    (@values $values:expr) => { &$values };
    (
        $setting:expr, env: $env:literal, flag: $flag:literal, value: $value:literal,
        default: $default:literal, form: $form:ident, doc: $doc:literal,
        $(values: $values:expr,)? sets: $field:ident $(via $wrap:path)?
    ) => {
        SettingRow {
            key: $setting.key,
            env: $env,
            flag: $flag,
            value_name: $value,
            default: $default,
            doc: $doc,
            file_form: FileForm::$form,
            expected: $setting.expected,
            values: row!(@values $($values)?),
            parses: |text| $setting.parse(text).is_some(),
            apply: |config, text, origin| {
                config.$field = $($wrap)?($setting.read(text, origin)?);
                Ok(())
            },
            refuse: |origin| $setting.refuse(origin),
        }
    };
}

impl std::fmt::Debug for SettingRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettingRow")
            .field("key", &self.key)
            .finish()
    }
}

/// Every setting written as text, in the order the docs list them.
pub const SETTINGS: &[SettingRow] = &[
    row!(
        LOCKING, env: "DIRTHARA_LOCKING", flag: "locking", value: "LOCKING",
        default: "true", form: Text,
        doc: "Which lock to take: true or auto (the database's native lock), session, lease, or \
              false or off (none)",
        values: Locking::VALUES, sets: locking
    ),
    row!(
        LOCK_WAIT, env: "DIRTHARA_LOCK_WAIT", flag: "lock-wait", value: "WAIT",
        default: "forever for session locks, 0 for leases", form: Text,
        doc: "How long to wait for a lock another runner holds: 0, a duration (30s, 5m), or \
              forever",
        sets: lock_wait via Some
    ),
    row!(
        LOCK_TTL, env: "DIRTHARA_LOCK_TTL", flag: "lock-ttl", value: "DURATION",
        default: "30m", form: Text,
        doc: "Lease length for --locking lease, at least 5s; renewed every third of it while the \
              command runs",
        sets: lock_ttl
    ),
    row!(
        HISTORY_TABLE, env: "DIRTHARA_HISTORY_TABLE", flag: "history-table", value: "NAME",
        default: "dirthara_migrations", form: Text,
        doc: "Name of the history table",
        sets: history_table
    ),
    row!(
        HISTORY_CONNECTION, env: "DIRTHARA_HISTORY_CONNECTION", flag: "history-connection", value: "NAME",
        default: "default", form: Text,
        doc: "The named connection that holds the history and the lock",
        sets: history_connection
    ),
    row!(
        CONNECT_TIMEOUT, env: "DIRTHARA_CONNECT_TIMEOUT", flag: "connect-timeout", value: "DURATION",
        default: "30s", form: Text,
        doc: "How long to keep retrying a database that is not reachable yet",
        sets: connect_timeout
    ),
    row!(
        TABLE_LOCK_TIMEOUT, env: "DIRTHARA_TABLE_LOCK_TIMEOUT", flag: "table-lock-timeout", value: "DURATION|off",
        default: "2s", form: Text,
        doc: "The longest one statement of a migration waits for a table (or MySQL metadata) \
              lock before it gives way to the application's queries and is tried again: a \
              duration, or off (wait as long as it takes). MySQL counts whole seconds (rounded \
              up)",
        sets: table_lock_timeout
    ),
    row!(
        TABLE_LOCK_RETRY_FOR, env: "DIRTHARA_TABLE_LOCK_RETRY_FOR", flag: "table-lock-retry-for", value: "DURATION",
        default: "10m", form: Text,
        doc: "How long to keep retrying a migration that gave way to the application's locks, \
              with jittered backoff; 0 makes one attempt",
        sets: table_lock_retry_for
    ),
    row!(
        BLOCKING_TABLE_SIZE, env: "DIRTHARA_BLOCKING_TABLE_SIZE", flag: "blocking-table-size",
        value: "SIZE|off", default: "100MB", form: Text,
        doc: "A pending statement that would block the application while it rewrites, scans or \
              indexes a table larger than this refuses the run (BLOCKING_DDL) before anything \
              runs; off never refuses",
        sets: blocking_table_size
    ),
    row!(
        ALLOW_BLOCKING, env: "DIRTHARA_ALLOW_BLOCKING", flag: "allow-blocking", value: "",
        default: "false", form: Switch,
        doc: "Let blocking statements run on tables of any size, for one command (a maintenance \
              window); a file can say so for itself with `-- dirthara:allow-blocking <reason>`",
        sets: allow_blocking
    ),
    row!(
        LINT_DISABLE, env: "DIRTHARA_LINT_DISABLE", flag: "lint-disable", value: "RULES",
        default: "none", form: List,
        doc: "Rules of lint and of the checks before a run switched off, by name \
              (comma-separated)",
        sets: lint_disabled
    ),
    row!(
        DUMP_SCHEMA, env: "DIRTHARA_DUMP_SCHEMA", flag: "dump-schema", value: "FILE",
        default: "none", form: Text,
        doc: "Write the schema, as `dump` prints it, to this file after every command that \
              changed it, under the same lock (only when its content changed); over a fleet, \
              {target} in it is each target's name, else it is the first target's",
        sets: dump_schema
    ),
    row!(
        SCHEMA_SNAPSHOT, env: "DIRTHARA_SCHEMA_SNAPSHOT", flag: "schema-snapshot", value: "on|off",
        default: "on", form: Text,
        doc: "Keep the schema snapshot `drift` compares with at the end of every command that \
              changed the schema; off skips its catalog read and removes the one kept, so that \
              `drift` never compares with a schema older than the history (use `drift --against`)",
        sets: schema_snapshot
    ),
    row!(
        STRICT, env: "DIRTHARA_STRICT", flag: "strict", value: "",
        default: "false", form: Switch,
        doc: "Refuse pending migrations older than the newest applied one instead of warning; \
              in a fleet, count targets already dirty toward --max-failures",
        sets: strict
    ),
];

/// The setting whose key, environment variable or flag is `name`.
pub fn setting_named(name: &str) -> Option<&'static SettingRow> {
    SETTINGS
        .iter()
        .find(|row| row.key == name || row.env == name || row.flag == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::nearest;

    #[test]
    fn every_name_is_unique_and_follows_from_the_key() {
        let mut names = std::collections::BTreeSet::new();
        for row in SETTINGS {
            assert_eq!(
                row.env,
                format!("DIRTHARA_{}", row.key.to_ascii_uppercase())
            );
            assert_eq!(row.flag, row.key.replace('_', "-"));
            for name in [row.key, row.env] {
                assert!(names.insert(name), "{name} twice");
            }
            assert!(
                !row.doc.is_empty() && !row.default.is_empty(),
                "{}",
                row.key
            );
        }
    }

    #[test]
    fn the_default_a_row_documents_is_the_default_it_applies() {
        for row in SETTINGS {
            let mut written = Config::default();
            let text = row.default.split(' ').next().unwrap();
            (row.apply)(&mut written, text, Origin::Named(row.key)).unwrap();
            let mut expected = Config::default();
            if row.key == "lock_wait" {
                // Not set means "the strategy's default", which `forever` is for a session lock.
                expected.lock_wait = Some(crate::config::LockWait::Forever);
            }
            assert_eq!(written, expected, "{}", row.key);
        }
    }

    #[test]
    fn a_typo_finds_the_name_that_was_meant_and_nothing_far_off() {
        let envs = || SETTINGS.iter().map(|row| row.env);
        assert_eq!(
            nearest("DIRTHARA_TABLE_LOCK_TIMOUT", envs()),
            Some("DIRTHARA_TABLE_LOCK_TIMEOUT")
        );
        assert_eq!(
            nearest("dirthara_lock_wait", envs()),
            Some("DIRTHARA_LOCK_WAIT")
        );
        assert_eq!(nearest("DIRTHARA_COLOUR", envs()), None);
    }
}
