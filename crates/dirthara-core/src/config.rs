//! Configuration: `dirthara.toml`, then the environment, then (in the CLI) flags.
//!
//! Each setting written as text has one parser ([`Setting`], in `config/value.rs`) shared by
//! the file (`config/file.rs`), the environment (`config/env.rs`) and the CLI's flags, so a
//! value means the same and is refused with the same reason wherever it is written; what
//! they produce is already validated. [`Config::validate`] checks what only the merged whole
//! can show (a connection without a URL) and what code may have set directly.

mod env;
mod file;
mod fleet;
mod read;
mod settings;
mod shard_auto;
mod spelling;
mod value;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

pub use dirthara_source::files::Layout;

pub use env::{is_setting_variable, unknown_variables, UnknownVariable};
pub use file::check_jobs;
pub use fleet::{Canary, FleetOptions, FleetSettings, SearchPath, Shard, Target, TargetSource};
pub use read::{read_config_file, MAX_CONFIG_FILE_BYTES};
pub use settings::{setting_named, FileForm, SettingRow, SETTINGS};
pub use shard_auto::{ShardSpec, SHARD_COUNT_VARIABLE, SHARD_INDEX_VARIABLES};
pub use spelling::nearest;
pub use value::{is_plain_identifier, validate_table_name};
pub use value::{
    parse_duration, LockWait, Locking, Origin, Setting, ALLOW_BLOCKING, BLOCKING_TABLE_SIZE,
    CONNECT_TIMEOUT, DUMP_SCHEMA, HISTORY_CONNECTION, HISTORY_TABLE, LINT_DISABLE, LOCKING,
    LOCK_TTL, LOCK_WAIT, MAX_LOCK_TTL, MAX_WAIT, MIN_LOCK_TTL, SCHEMA_SNAPSHOT, STRICT,
    TABLE_LOCK_RETRY_FOR, TABLE_LOCK_TIMEOUT, WAIT_TIMEOUT,
};

use crate::error::{Error, Result};
use crate::history::DEFAULT_HISTORY_TABLE;
use crate::migration::DEFAULT_CONNECTION;

/// The default `blocking_table_size`: about what the 2-core test machine's PostgreSQL
/// rewrites in the default `table_lock_timeout` of 2 s (`bench/stall.sh`: 50 MB/s).
pub const DEFAULT_BLOCKING_TABLE_SIZE: u64 = 100 * 1024 * 1024;

/// Everything a `dirthara::Migrator` needs to know.
///
/// Built with [`Config::with_url`] (or `Default`) and then set field by field; new settings
/// are added without breaking code written that way (the type is `#[non_exhaustive]`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Directories to load migrations from, in order. An empty list loads nothing.
    pub directories: Vec<PathBuf>,
    /// The layout of a directory named with `format` (`{ path = "legacy", format = "goose" }`);
    /// a directory not in it has its layout detected from its files.
    pub layouts: BTreeMap<PathBuf, Layout>,
    /// Which lock commands take; the default is the backend's native strategy.
    pub locking: Locking,
    /// `None`: the strategy's default (session locks wait forever, leases not at all).
    pub lock_wait: Option<LockWait>,
    /// Lease length for `locking = "lease"`.
    pub lock_ttl: Duration,
    /// The history table (collection on MongoDB), default `dirthara_migrations`; runners
    /// sharing it exclude each other.
    pub history_table: String,
    /// The connection holding the history and the lock.
    pub history_connection: String,
    /// Named connection URLs; `default` is `DATABASE_URL` / `--database-url`.
    pub connections: BTreeMap<String, String>,
    /// Refuse out-of-order pending migrations instead of warning.
    pub strict: bool,
    /// How long to keep retrying a database that is not reachable yet.
    pub connect_timeout: Duration,
    /// The longest one statement of a migration waits for a table (PostgreSQL) or metadata
    /// (MySQL/MariaDB) lock before it gives way to the application's queries, which queue
    /// behind it meanwhile; `None`: as long as it takes. A step's own
    /// `-- dirthara:table-lock-timeout` directive overrides it.
    pub table_lock_timeout: Option<Duration>,
    /// How long to keep retrying a step that gave way, with jittered backoff; zero makes one
    /// attempt.
    pub table_lock_retry_for: Duration,
    /// SQL run on every session dirthara opens on a connection, by connection name, before
    /// the lock is taken and again whenever a session is reset between migrations.
    pub init_sql: BTreeMap<String, String>,
    /// `[fleet]`: the targets commands run over, and how (see `dirthara::fleet`).
    pub fleet: FleetSettings,
    /// A pending statement that would block the application while it rewrites, scans or
    /// indexes a table larger than this many bytes refuses the run (`BLOCKING_DDL`) before
    /// anything runs; `None`: never.
    pub blocking_table_size: Option<u64>,
    /// Let every blocking statement run (a maintenance window), as each step's
    /// `-- dirthara:allow-blocking <reason>` lets its own.
    pub allow_blocking: bool,
    /// Rules of `lint` (and of the checks before a run) switched off, by name.
    pub lint_disabled: std::collections::BTreeSet<String>,
    /// Values of `${name}` placeholders, by lower-cased name, for steps that say
    /// `-- dirthara:placeholders` (`[placeholders]`, `DIRTHARA_PLACEHOLDER_<NAME>`,
    /// `--placeholder name=value`).
    pub placeholders: BTreeMap<String, String>,
    /// Where to write the schema, as `dump` prints it, after every command that changed it
    /// (`dump_schema`); `None`: nowhere.
    pub dump_schema: Option<PathBuf>,
    /// Whether the commands that change the schema keep the snapshot `drift` compares with
    /// (`schema_snapshot`); `false` also removes the one kept, which would be stale.
    pub schema_snapshot: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            directories: vec![PathBuf::from("migrations")],
            layouts: BTreeMap::new(),
            locking: Locking::Auto,
            lock_wait: None,
            lock_ttl: Duration::from_secs(30 * 60),
            history_table: DEFAULT_HISTORY_TABLE.to_string(),
            history_connection: DEFAULT_CONNECTION.to_string(),
            connections: BTreeMap::new(),
            strict: false,
            connect_timeout: Duration::from_secs(30),
            table_lock_timeout: Some(Duration::from_secs(2)),
            table_lock_retry_for: Duration::from_secs(10 * 60),
            init_sql: BTreeMap::new(),
            fleet: FleetSettings::default(),
            blocking_table_size: Some(DEFAULT_BLOCKING_TABLE_SIZE),
            allow_blocking: false,
            lint_disabled: Default::default(),
            placeholders: BTreeMap::new(),
            dump_schema: None,
            schema_snapshot: true,
        }
    }
}

impl Config {
    /// A configuration with the default connection set to `url`.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut config = dirthara_core::Config::with_url("postgres://app@db/app");
    /// config.lock_wait = Some(dirthara_core::LockWait::For(std::time::Duration::from_secs(60)));
    /// config.merge_toml("history_table = \"schema_history\"", "inline", std::path::Path::new(""))?;
    /// assert_eq!(config.connection_url("default")?, "postgres://app@db/app");
    /// # Ok::<(), dirthara_core::Error>(())
    /// ```
    pub fn with_url(url: impl Into<String>) -> Self {
        let mut config = Config::default();
        config
            .connections
            .insert(DEFAULT_CONNECTION.to_string(), url.into());
        config
    }

    /// The URL of a named connection, or an error saying how to provide it.
    pub fn connection_url(&self, name: &str) -> Result<&str> {
        self.connections
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| {
                if name == DEFAULT_CONNECTION {
                    Error::config(
                        "no database URL: pass --database-url (-d), set DATABASE_URL, or add \
                     `[connections] default = \"...\"` to dirthara.toml",
                    )
                } else {
                    Error::config(format!(
                    "connection `{name}` has no URL: add `{name} = \"...\"` under [connections] in \
                     dirthara.toml, or set DIRTHARA_CONNECTION_{}",
                    name.to_ascii_uppercase()
                ))
                }
            })
    }

    /// Checks what can be checked without a database: what only the merged settings can show
    /// (the history connection and every `init_sql` need a URL), and the fields code may have
    /// set without a parser (through the same checks the parsers apply).
    pub fn validate(&self) -> Result<()> {
        validate_table_name(&self.history_table)?;
        LOCK_TTL.accept(self.lock_ttl, Origin::Named("`lock_ttl`"))?;
        if let Some(wait) = self.lock_wait {
            LOCK_WAIT.accept(wait, Origin::Named("`lock_wait`"))?;
        }
        CONNECT_TIMEOUT.accept(self.connect_timeout, Origin::Named("`connect_timeout`"))?;
        TABLE_LOCK_TIMEOUT.accept(
            self.table_lock_timeout,
            Origin::Named("`table_lock_timeout`"),
        )?;
        TABLE_LOCK_RETRY_FOR.accept(
            self.table_lock_retry_for,
            Origin::Named("`table_lock_retry_for`"),
        )?;
        self.connection_url(&self.history_connection)?;
        for name in self.placeholders.keys() {
            check_placeholder_name(name)?;
        }
        for (name, sql) in &self.init_sql {
            if sql.trim().is_empty() {
                return Err(Error::config(format!(
                    "init_sql for connection `{name}` is empty; remove it or give it statements"
                )));
            }
            // As in a migration: no database takes a NUL byte in a statement.
            if let Err(reason) = dirthara_source::files::refuse_nul(sql) {
                return Err(Error::config(format!(
                    "init_sql for connection `{name}` {reason}"
                )));
            }
            let url = self.connections.get(name).ok_or_else(|| {
                Error::config(format!(
                    "init_sql is set for connection `{name}`, which has no URL; check the name \
                     under [init_sql] (or DIRTHARA_INIT_SQL_{}) against [connections]",
                    name.to_ascii_uppercase()
                ))
            })?;
            if is_mongodb_url(url) {
                return Err(Error::config(format!(
                    "init_sql is SQL, but connection `{name}` is MongoDB; remove it for that connection"
                )));
            }
        }
        Ok(())
    }
}

/// A placeholder value's name must be one a step can write, and not a built-in's.
pub fn check_placeholder_name(name: &str) -> Result<()> {
    use dirthara_source::placeholders::{is_name, BUILT_IN_PREFIX};
    if name.to_ascii_lowercase().starts_with(BUILT_IN_PREFIX) {
        return Err(Error::config(format!(
            "placeholder `{name}`: `{BUILT_IN_PREFIX}` names are dirthara's built-ins and cannot \
             be set; choose another name"
        )));
    }
    if !is_name(name) {
        return Err(Error::config(format!(
            "placeholder `{name}`: a name is letters, digits, `_`, `.` and `-`, starting with a \
             letter or `_`"
        )));
    }
    Ok(())
}

/// `mongodb://` or `mongodb+srv://`, in any case: read here from the scheme alone, so the
/// configuration does not depend on the backends (which depend on the lock, which reads it).
fn is_mongodb_url(url: &str) -> bool {
    let scheme = url.split(':').next().unwrap_or_default();
    scheme.eq_ignore_ascii_case("mongodb") || scheme.eq_ignore_ascii_case("mongodb+srv")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn file_then_env_override_in_order() {
        let mut c = Config::default();
        c.merge_toml(
            "directories = [\"db/a\", \"db/b\"]\nlocking = false\nlock_wait = \"10s\"\n\
             history_table = \"schema_history\"\n[connections]\ndefault = \"sqlite:x.db\"\nother = \"sqlite:y.db\"\n",
            "dirthara.toml",
            Path::new("/proj"),
        )
        .unwrap();
        assert_eq!(
            c.directories,
            vec![PathBuf::from("/proj/db/a"), PathBuf::from("/proj/db/b")]
        );
        assert_eq!(c.locking, Locking::Off);
        assert_eq!(c.lock_wait, Some(LockWait::For(Duration::from_secs(10))));
        c.merge_env([
            ("DATABASE_URL".to_string(), "sqlite:z.db".to_string()),
            ("DIRTHARA_LOCKING".to_string(), "session".to_string()),
        ])
        .unwrap();
        assert_eq!(c.connection_url("default").unwrap(), "sqlite:z.db");
        assert_eq!(c.connection_url("other").unwrap(), "sqlite:y.db");
        assert_eq!(c.locking, Locking::Session);
        assert_eq!(c.history_table, "schema_history");
    }

    #[test]
    fn locking_has_one_set_of_values_in_the_file_and_the_environment() {
        for (text, expected) in [
            ("true", Locking::Auto),
            ("auto", Locking::Auto),
            ("false", Locking::Off),
            ("off", Locking::Off),
            ("session", Locking::Session),
            ("lease", Locking::Lease),
        ] {
            assert!(Locking::VALUES.contains(&text));
            let mut c = Config::default();
            c.merge_toml(&format!("locking = \"{text}\""), "f.toml", Path::new(""))
                .unwrap();
            assert_eq!(c.locking, expected, "file: {text}");
            let mut c = Config::default();
            c.merge_env([("DIRTHARA_LOCKING".to_string(), text.to_uppercase())])
                .unwrap();
            assert_eq!(c.locking, expected, "env: {text}");
        }
    }

    #[test]
    fn values_set_in_code_are_checked_before_any_database_is_touched() {
        let mut c = Config::with_url("sqlite:x.db");
        assert!(c.validate().is_ok());
        c.lock_ttl = Duration::from_millis(1);
        assert!(c.validate().unwrap_err().to_string().contains("`lock_ttl`"));
        let mut c = Config::with_url("sqlite:x.db");
        c.history_table = "x; DROP TABLE y".into();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("history table name"));
    }

    #[test]
    fn durations_set_in_code_are_bounded_like_those_parsed() {
        let mut c = Config::with_url("sqlite:x.db");
        c.lock_ttl = MAX_LOCK_TTL;
        c.lock_wait = Some(LockWait::For(MAX_WAIT));
        c.connect_timeout = MAX_WAIT;
        assert!(c.validate().is_ok());
        c.lock_wait = Some(LockWait::Forever);
        assert!(c.validate().is_ok());
        let mut too_long = [
            Config::with_url("sqlite:x.db"),
            Config::with_url("sqlite:x.db"),
            Config::with_url("sqlite:x.db"),
        ];
        too_long[0].lock_ttl = MAX_LOCK_TTL + Duration::from_secs(1);
        too_long[1].lock_wait = Some(LockWait::For(Duration::MAX));
        too_long[2].connect_timeout = Duration::MAX;
        let needles = [
            "`lock_ttl`: a lease of",
            "`lock_wait`: a wait of more than 100 years",
            "`connect_timeout`: a connect timeout",
        ];
        for (c, needle) in too_long.iter().zip(needles) {
            let error = c.validate().unwrap_err();
            assert_eq!(error.code(), crate::Code::ConfigError);
            assert!(error.to_string().starts_with(needle), "{error}");
        }
    }

    #[test]
    fn init_sql_with_a_nul_byte_is_refused() {
        let mut c = Config::with_url("sqlite:x.db");
        c.init_sql.insert("default".into(), "PRAGMA x;\0".into());
        let error = c.validate().unwrap_err().to_string();
        assert!(
            error
                .starts_with("init_sql for connection `default` holds a NUL byte at byte offset 9"),
            "{error}"
        );
    }

    #[test]
    fn init_sql_is_refused_for_a_mongodb_connection_whatever_the_scheme_case() {
        for url in ["mongodb://h/db", "MongoDB+srv://h/db"] {
            let mut c = Config::with_url(url);
            c.init_sql.insert("default".into(), "SET x = 1".into());
            let err = c.validate().unwrap_err().to_string();
            assert!(
                err.contains("connection `default` is MongoDB"),
                "{url}: {err}"
            );
        }
    }
}
