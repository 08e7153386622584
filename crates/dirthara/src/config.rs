//! Configuration: `dirthara.toml`, then the environment, then (in the CLI) flags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub use dirthara_source::files::Layout;

use crate::error::{Error, Result};
use crate::history::DEFAULT_HISTORY_TABLE;
use crate::migration::DEFAULT_CONNECTION;

/// Which lock a command takes (`locking`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Locking {
    /// `true`: the backend's native strategy (session lock on PostgreSQL and MySQL; on SQLite,
    /// which has none, the run is refused before anything is read).
    #[default]
    Auto,
    /// `false`: no lock at all. Only safe when a single runner can touch the database.
    Off,
    /// A named lock held by the history connection's session.
    Session,
    /// A lease row/document with an expiry.
    Lease,
}

impl Locking {
    /// Every accepted value, the same for `--locking`, `locking` in the file (where `true`
    /// and `false` may also be TOML booleans) and `DIRTHARA_LOCKING`.
    pub const VALUES: [&'static str; 6] = ["true", "false", "auto", "off", "session", "lease"];

    /// The one parser of `locking` values ([`Locking::VALUES`], any case).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "auto" => Some(Locking::Auto),
            "false" | "off" => Some(Locking::Off),
            "session" => Some(Locking::Session),
            "lease" => Some(Locking::Lease),
            _ => None,
        }
    }

    /// `expected one of true, false, auto, off, session, lease`.
    fn expected() -> String {
        format!("expected one of {}", Locking::VALUES.join(", "))
    }
}

/// The shortest lease: the heartbeat renews every third of it, and a shorter lease would
/// lapse at the first slow renewal (a round trip, a GC pause) and stop the run with
/// `LOCK_LEASE_LOST`.
pub const MIN_LOCK_TTL: Duration = Duration::from_secs(5);

/// Refuses a lease shorter than [`MIN_LOCK_TTL`]; `setting` names where it was set
/// (`--lock-ttl`, `dirthara.toml: \`lock_ttl\``, ...).
pub fn check_lock_ttl(ttl: Duration, setting: &str) -> Result<Duration> {
    if ttl >= MIN_LOCK_TTL {
        return Ok(ttl);
    }
    Err(Error::config(format!(
        "{setting}: a lease of {ttl:?} is shorter than the minimum of {}s: the heartbeat renews \
         it every third of its length, so it would lapse before the run could keep it. Use at \
         least {}s, e.g. 5m (the default is 30m)",
        MIN_LOCK_TTL.as_secs(),
        MIN_LOCK_TTL.as_secs()
    )))
}

/// How long to wait for a lock another runner holds (`lock_wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockWait {
    Forever,
    /// Up to this long; `Duration::ZERO` fails at once.
    For(Duration),
}

impl LockWait {
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "forever" | "inf" | "infinite" => Some(LockWait::Forever),
            other => parse_duration(other).map(LockWait::For),
        }
    }
}

/// Parses a duration as `humantime` does (`500ms`, `30s`, `5m`, `2h`, `1h 30m`, `1day`), or
/// a bare number of seconds (`0`, `30`), the form TOML integers and shell scripts use.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok().map(Duration::from_secs);
    }
    humantime::parse_duration(text).ok()
}

/// Everything a [`Migrator`](crate::Migrator) needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Directories to load migrations from, in order. An empty list loads nothing.
    pub directories: Vec<PathBuf>,
    /// The layout of a directory named with `format` (`{ path = "legacy", format = "goose" }`);
    /// a directory not in it has its layout detected from its files.
    pub layouts: BTreeMap<PathBuf, Layout>,
    pub locking: Locking,
    /// `None`: the strategy's default (session locks wait forever, leases not at all).
    pub lock_wait: Option<LockWait>,
    /// Lease length for `locking = "lease"`.
    pub lock_ttl: Duration,
    pub history_table: String,
    /// The connection holding the history and the lock.
    pub history_connection: String,
    /// Named connection URLs; `default` is `DATABASE_URL` / `--database-url`.
    pub connections: BTreeMap<String, String>,
    /// Refuse out-of-order pending migrations instead of warning.
    pub strict: bool,
    /// How long to keep retrying a database that is not reachable yet.
    pub connect_timeout: Duration,
    /// SQL run on every session dirthara opens on a connection, by connection name, before
    /// the lock is taken and again whenever a session is reset between migrations.
    pub init_sql: BTreeMap<String, String>,
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
            init_sql: BTreeMap::new(),
        }
    }
}

/// One entry of `directories`: a path, or `{ path = "...", format = "goose" }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DirectoryEntry {
    Path(PathBuf),
    WithFormat { path: PathBuf, format: String },
}

/// The file format (`dirthara.toml`). Unknown keys are refused, so a typo is not ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    directories: Option<Vec<DirectoryEntry>>,
    locking: Option<toml::Value>,
    lock_wait: Option<toml::Value>,
    lock_ttl: Option<toml::Value>,
    history_table: Option<String>,
    history_connection: Option<String>,
    connections: Option<BTreeMap<String, String>>,
    strict: Option<bool>,
    connect_timeout: Option<toml::Value>,
    init_sql: Option<BTreeMap<String, String>>,
}

impl Config {
    /// A configuration with the default connection set to `url`.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut config = dirthara::Config::with_url("postgres://app@db/app");
    /// config.lock_wait = Some(dirthara::LockWait::For(std::time::Duration::from_secs(60)));
    /// config.merge_toml("history_table = \"schema_history\"", "inline", std::path::Path::new(""))?;
    /// assert_eq!(config.connection_url("default")?, "postgres://app@db/app");
    /// # Ok::<(), dirthara::Error>(())
    /// ```
    pub fn with_url(url: impl Into<String>) -> Self {
        let mut config = Config::default();
        config
            .connections
            .insert(DEFAULT_CONNECTION.to_string(), url.into());
        config
    }

    /// Reads a `dirthara.toml` over these settings. Relative directories are taken from the
    /// file's own directory, so the file means the same wherever the command is run from.
    ///
    /// # Examples
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let file = dir.path().join("dirthara.toml");
    /// std::fs::write(&file, "directories = [\"db\"]\nlocking = \"lease\"\n").unwrap();
    /// let mut config = dirthara::Config::default();
    /// config.merge_file(&file)?;
    /// assert_eq!(config.directories, vec![dir.path().join("db")]);
    /// assert_eq!(config.locking, dirthara::Locking::Lease);
    /// # Ok::<(), dirthara::Error>(())
    /// ```
    pub fn merge_file(&mut self, path: &Path) -> Result<()> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::config(format!("cannot read config file {}: {e}", path.display()))
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        self.merge_toml(&text, &path.display().to_string(), base)
    }

    /// Reads TOML text (see [`Config::merge_file`]); `origin` names it in errors.
    pub fn merge_toml(&mut self, text: &str, origin: &str, base: &Path) -> Result<()> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
        let bad =
            |key: &str, expected: &str| Error::config(format!("{origin}: `{key}`: {expected}"));
        if let Some(dirs) = file.directories {
            self.directories.clear();
            self.layouts.clear();
            for entry in dirs {
                match entry {
                    DirectoryEntry::Path(path) => self.directories.push(base.join(path)),
                    DirectoryEntry::WithFormat { path, format } => {
                        let layout = Layout::parse(&format).ok_or_else(|| {
                            bad(
                                &format!("format` of `{}", path.display()),
                                &format!("one of {}, not `{format}`", Layout::NAMES),
                            )
                        })?;
                        self.directories.push(base.join(&path));
                        self.layouts.insert(base.join(path), layout);
                    }
                }
            }
        }
        if let Some(value) = file.locking {
            self.locking = match value {
                toml::Value::Boolean(true) => Locking::Auto,
                toml::Value::Boolean(false) => Locking::Off,
                toml::Value::String(s) => {
                    Locking::parse(&s).ok_or_else(|| bad("locking", &Locking::expected()))?
                }
                _ => return Err(bad("locking", &Locking::expected())),
            };
        }
        if let Some(value) = file.lock_wait {
            self.lock_wait = Some(
                duration_value(&value)
                    .map(LockWait::For)
                    .or_else(|| value.as_str().and_then(LockWait::parse))
                    .ok_or_else(|| {
                        bad(
                            "lock_wait",
                            "expected a duration such as \"30s\", 0, or \"forever\"",
                        )
                    })?,
            );
        }
        if let Some(value) = file.lock_ttl {
            let ttl = duration_value(&value)
                .ok_or_else(|| bad("lock_ttl", "expected a duration such as \"30m\""))?;
            self.lock_ttl = check_lock_ttl(ttl, &format!("{origin}: `lock_ttl`"))?;
        }
        if let Some(value) = file.connect_timeout {
            self.connect_timeout = duration_value(&value)
                .ok_or_else(|| bad("connect_timeout", "expected a duration such as \"30s\""))?;
        }
        if let Some(table) = file.history_table {
            self.history_table = table;
        }
        if let Some(name) = file.history_connection {
            self.history_connection = name;
        }
        if let Some(connections) = file.connections {
            self.connections.extend(connections);
        }
        if let Some(strict) = file.strict {
            self.strict = strict;
        }
        if let Some(init_sql) = file.init_sql {
            self.init_sql.extend(init_sql);
        }
        Ok(())
    }

    /// Applies `DATABASE_URL` and the `DIRTHARA_*` variables, read through `lookup`.
    ///
    /// `DIRTHARA_DIRECTORIES` is a comma-separated list; `DIRTHARA_CONNECTION_<NAME>` sets a
    /// named connection's URL and `DIRTHARA_INIT_SQL_<NAME>` its `init_sql` (name lower-cased).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut config = dirthara::Config::default();
    /// // In an application: `config.merge_env(std::env::vars())?`.
    /// config.merge_env([
    ///     ("DATABASE_URL".to_string(), "postgres://app@db/app".to_string()),
    ///     ("DIRTHARA_CONNECTION_ANALYTICS".to_string(), "postgres://app@warehouse/facts".to_string()),
    /// ])?;
    /// assert_eq!(config.connection_url("analytics")?, "postgres://app@warehouse/facts");
    /// # Ok::<(), dirthara::Error>(())
    /// ```
    pub fn merge_env(&mut self, vars: impl IntoIterator<Item = (String, String)>) -> Result<()> {
        for (key, value) in vars {
            let bad =
                |expected: &str| Error::config(format!("environment variable {key}: {expected}"));
            match key.as_str() {
                "DATABASE_URL" => {
                    self.connections
                        .insert(DEFAULT_CONNECTION.to_string(), value);
                }
                "DIRTHARA_DIRECTORIES" => {
                    self.directories = value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(PathBuf::from)
                        .collect();
                }
                "DIRTHARA_LOCKING" => {
                    self.locking =
                        Locking::parse(&value).ok_or_else(|| bad(&Locking::expected()))?
                }
                "DIRTHARA_LOCK_WAIT" => {
                    self.lock_wait = Some(
                        LockWait::parse(&value)
                            .ok_or_else(|| bad("expected a duration such as 30s, 0, or forever"))?,
                    )
                }
                "DIRTHARA_LOCK_TTL" => {
                    let ttl = parse_duration(&value)
                        .ok_or_else(|| bad("expected a duration such as 30m"))?;
                    self.lock_ttl = check_lock_ttl(ttl, &format!("environment variable {key}"))?;
                }
                "DIRTHARA_CONNECT_TIMEOUT" => {
                    self.connect_timeout = parse_duration(&value)
                        .ok_or_else(|| bad("expected a duration such as 30s"))?
                }
                "DIRTHARA_HISTORY_TABLE" => self.history_table = value,
                "DIRTHARA_HISTORY_CONNECTION" => self.history_connection = value,
                "DIRTHARA_STRICT" => {
                    self.strict = match value.trim().to_ascii_lowercase().as_str() {
                        "1" | "true" | "yes" | "on" => true,
                        "0" | "false" | "no" | "off" | "" => false,
                        _ => return Err(bad("expected true or false")),
                    }
                }
                _ => {
                    if let Some(name) = key.strip_prefix("DIRTHARA_CONNECTION_") {
                        self.connections.insert(name.to_ascii_lowercase(), value);
                    } else if let Some(name) = key.strip_prefix("DIRTHARA_INIT_SQL_") {
                        self.init_sql.insert(name.to_ascii_lowercase(), value);
                    }
                }
            }
        }
        Ok(())
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

    /// Checks what can be checked without a database.
    pub fn validate(&self) -> Result<()> {
        validate_table_name(&self.history_table)?;
        check_lock_ttl(self.lock_ttl, "`lock_ttl`")?;
        self.connection_url(&self.history_connection)?;
        for (name, sql) in &self.init_sql {
            if sql.trim().is_empty() {
                return Err(Error::config(format!(
                    "init_sql for connection `{name}` is empty; remove it or give it statements"
                )));
            }
            let url = self.connections.get(name).ok_or_else(|| {
                Error::config(format!(
                    "init_sql is set for connection `{name}`, which has no URL; check the name \
                     under [init_sql] (or DIRTHARA_INIT_SQL_{}) against [connections]",
                    name.to_ascii_uppercase()
                ))
            })?;
            if url.starts_with("mongodb") {
                return Err(Error::config(format!(
                    "init_sql is SQL, but connection `{name}` is MongoDB; remove it for that connection"
                )));
            }
        }
        Ok(())
    }
}

fn duration_value(value: &toml::Value) -> Option<Duration> {
    match value {
        toml::Value::Integer(n) if *n >= 0 => Some(Duration::from_secs(*n as u64)),
        toml::Value::String(s) => parse_duration(s),
        _ => None,
    }
}

/// A name safe to splice into SQL (quoted) on every dialect: letters, digits and `_`,
/// starting with a letter or `_`, at most `max_len` long.
pub(crate) fn is_plain_identifier(name: &str, max_len: usize) -> bool {
    !name.is_empty()
        && name.len() <= max_len
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// History table names are spliced into SQL, so they are plain identifiers.
/// A TOML error, which quotes the offending line: when that line holds a URL with a
/// password, the error says where instead of quoting it.
fn toml_error(origin: &str, text: &str, error: &toml::de::Error) -> Error {
    let full = error.to_string();
    if crate::redact::redact_urls_in(&full) == full {
        return Error::config(format!("{origin}: {}", full.trim_end()));
    }
    let at = error.span().map_or(String::new(), |span| {
        let before = text.get(..span.start).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        format!(" at line {line}, column {column}")
    });
    let message = crate::redact::redact_urls_in(error.message());
    Error::config(format!(
        "{origin}: TOML parse error{at}: {}",
        message.trim_end()
    ))
}

pub(crate) fn validate_table_name(name: &str) -> Result<()> {
    if is_plain_identifier(name, 48) {
        Ok(())
    } else {
        Err(Error::config(format!(
            "history table name `{name}` is not a plain identifier: use at most 48 letters, digits \
             and `_`, starting with a letter or `_`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(LockWait::parse("forever"), Some(LockWait::Forever));
    }

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
    fn bad_files_are_refused_with_the_key() {
        for (text, needle) in [
            ("locking = \"maybe\"", "`locking`"),
            ("lock_wait = \"soon\"", "`lock_wait`"),
            ("directorys = []", "directorys"),
        ] {
            let err = Config::default()
                .merge_toml(text, "dirthara.toml", Path::new(""))
                .unwrap_err();
            assert_eq!(err.code(), crate::Code::ConfigError);
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn a_directory_may_name_its_layout() {
        let mut c = Config::default();
        c.merge_toml(
            "directories = [\"db\", { path = \"legacy\", format = \"goose\" }]",
            "dirthara.toml",
            Path::new("/p"),
        )
        .unwrap();
        assert_eq!(
            c.directories,
            [PathBuf::from("/p/db"), PathBuf::from("/p/legacy")]
        );
        assert_eq!(
            c.layouts.into_iter().collect::<Vec<_>>(),
            [(PathBuf::from("/p/legacy"), Layout::Goose)]
        );
        let err = Config::default()
            .merge_toml(
                "directories = [{ path = \"x\", format = \"liquibase\" }]",
                "dirthara.toml",
                Path::new(""),
            )
            .unwrap_err();
        assert!(err.to_string().contains("not `liquibase`"), "{err}");
        assert!(err.to_string().contains("`goose`"), "{err}");
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
        // The undocumented spellings are gone, from both.
        for text in ["on", "none", "yes"] {
            assert_eq!(Locking::parse(text), None, "{text}");
        }
    }

    #[test]
    fn a_lease_below_the_minimum_is_refused_naming_where_it_was_set() {
        let err = Config::default()
            .merge_toml("lock_ttl = \"4s\"", "dirthara.toml", Path::new(""))
            .unwrap_err();
        assert_eq!(err.code(), crate::Code::ConfigError);
        assert!(
            err.to_string().contains("dirthara.toml: `lock_ttl`"),
            "{err}"
        );
        assert!(err.to_string().contains("minimum of 5s"), "{err}");
        let err = Config::default()
            .merge_env([("DIRTHARA_LOCK_TTL".to_string(), "0".to_string())])
            .unwrap_err();
        assert!(err.to_string().contains("DIRTHARA_LOCK_TTL"), "{err}");
        let mut c = Config::with_url("sqlite:x.db");
        c.merge_toml("lock_ttl = 5", "dirthara.toml", Path::new(""))
            .unwrap();
        assert_eq!(c.lock_ttl, MIN_LOCK_TTL);
        // Set in code, it is refused before any database is touched.
        c.lock_ttl = Duration::from_millis(1);
        assert!(c.validate().unwrap_err().to_string().contains("`lock_ttl`"));
    }

    #[test]
    fn table_names_must_be_identifiers() {
        assert!(validate_table_name("dirthara_migrations").is_ok());
        assert!(validate_table_name("x; DROP TABLE y").is_err());
        assert!(validate_table_name("1abc").is_err());
    }
}
