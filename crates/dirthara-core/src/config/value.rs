//! The one parser of each setting written as text, shared by `dirthara.toml`, the
//! environment and the command line, and the validated types they produce.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

/// Which lock a command takes (`locking`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
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
}

/// How long to wait for a lock another runner holds (`lock_wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockWait {
    /// Until the lock is free: its holder releases it, or its lease lapses.
    Forever,
    /// Up to this long; `Duration::ZERO` fails at once.
    For(Duration),
}

impl LockWait {
    /// The one parser of `lock_wait` values: `forever` (or `inf`, `infinite`), or a duration
    /// as [`parse_duration`] reads it.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "forever" | "inf" | "infinite" => Some(LockWait::Forever),
            other => parse_duration(other).map(LockWait::For),
        }
    }
}

/// Parses a duration as `humantime` does (`500ms`, `30s`, `5m`, `2h`, `1h 30m`, `1day`), or
/// a bare number of seconds (`0`, `30`), the form TOML integers and shell scripts use.
///
/// A duration too long for any clock (`99999999999999999999h`) is [`Duration::MAX`], not
/// `None`: it is a duration, and each setting's bound then refuses it by name.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Some(text.parse().map_or(Duration::MAX, Duration::from_secs));
    }
    match humantime::parse_duration(text) {
        Ok(duration) => Some(duration),
        Err(humantime::DurationError::NumberOverflow) => Some(Duration::MAX),
        Err(_) => None,
    }
}

/// The shortest lease: the heartbeat renews every third of it, and a shorter lease would
/// lapse at the first slow renewal (a round trip, a GC pause) and stop the run with
/// `LOCK_LEASE_LOST`.
pub const MIN_LOCK_TTL: Duration = Duration::from_secs(5);

/// The longest lease: 7 days. A runner that dies holding a lease holds the lock that long,
/// and a live run never needs more (the heartbeat renews the lease while it lasts). Within
/// it, every database stores the expiry and every clock adds it without overflow.
pub const MAX_LOCK_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest wait or timeout (`lock_wait`, `connect_timeout`): 30 days. Longer is never
/// meant (`lock_wait = "forever"` says "until the lock is free"), and a deadline that far
/// stays representable on every clock.
pub const MAX_WAIT: Duration = Duration::from_secs(30 * 24 * 3600);

/// Where a setting's value was written, as its errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin<'a> {
    /// `key` in the configuration file `file`: ``dirthara.toml: `lock_ttl` ``.
    File {
        /// The configuration file, as errors name it (its path).
        file: &'a str,
        /// The setting's key in that file.
        key: &'a str,
    },
    /// An environment variable: `environment variable DIRTHARA_LOCK_TTL`.
    Env(&'a str),
    /// A flag (`--lock-ttl`), or a field set in code (`` `lock_ttl` ``): named as given.
    Named(&'a str),
}

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { file, key } => write!(f, "{file}: `{key}`"),
            Origin::Env(name) => write!(f, "environment variable {name}"),
            Origin::Named(name) => f.write_str(name),
        }
    }
}

/// A setting written as text — in `dirthara.toml`, an environment variable or a flag — with
/// the one parser that turns the text into its validated value, wherever it was written.
///
/// # Examples
///
/// ```
/// use dirthara_core::config::{Origin, LOCK_TTL};
/// let ttl = LOCK_TTL.read("10m", Origin::Env("DIRTHARA_LOCK_TTL"))?;
/// assert_eq!(ttl, std::time::Duration::from_secs(600));
/// let error = LOCK_TTL.read("1s", Origin::Named("--lock-ttl")).unwrap_err();
/// assert!(error.to_string().starts_with("--lock-ttl: a lease of 1s is shorter"));
/// # Ok::<(), dirthara_core::Error>(())
/// ```
#[non_exhaustive]
pub struct Setting<T> {
    /// The key in `dirthara.toml`.
    pub key: &'static str,
    /// What the text must be, said after `expected`. Strings are written between single
    /// quotes: messages about `dirthara.toml` show them in TOML's double quotes, others bare.
    pub(crate) expected: &'static str,
    /// The syntax: `None` when the text is not a value of this setting at all.
    syntax: fn(&str) -> Option<T>,
    /// What a well-formed value must also be, or the reason it is refused.
    check: fn(&T) -> std::result::Result<(), String>,
}

impl<T> Setting<T> {
    /// Parses and checks `text`; an error names `origin`.
    pub fn read(&self, text: &str, origin: Origin<'_>) -> Result<T> {
        let value = self.parse(text).ok_or_else(|| self.refuse(origin))?;
        self.accept(value, origin)
    }

    /// Only the syntax of [`Setting::read`], for a parser that reports malformed text its own
    /// way (clap, for flags); the value still goes through [`Setting::accept`].
    pub fn parse(&self, text: &str) -> Option<T> {
        (self.syntax)(text)
    }

    /// Checks a value that arrived already typed (parsed by clap, a TOML string, a field set
    /// in code); an error names `origin`.
    pub fn accept(&self, value: T, origin: Origin<'_>) -> Result<T> {
        match (self.check)(&value) {
            Ok(()) => Ok(value),
            Err(reason) => Err(Error::config(format!("{origin}: {reason}"))),
        }
    }

    /// The error for text that is not a value of this setting.
    pub fn refuse(&self, origin: Origin<'_>) -> Error {
        let expected = match origin {
            Origin::File { .. } => self.expected.replace('\'', "\""),
            Origin::Env(_) | Origin::Named(_) => self.expected.replace('\'', ""),
        };
        Error::config(format!("{origin}: expected {expected}"))
    }
}

fn any_value<T>(_: &T) -> std::result::Result<(), String> {
    Ok(())
}

/// `locking`: [`Locking::parse`]; in `dirthara.toml` also the booleans `true` and `false`.
pub const LOCKING: Setting<Locking> = Setting {
    key: "locking",
    expected: "one of true, false, auto, off, session, lease",
    syntax: Locking::parse,
    check: any_value,
};

/// `lock_wait`: [`LockWait::parse`], `forever` or at most [`MAX_WAIT`].
pub const LOCK_WAIT: Setting<LockWait> = Setting {
    key: "lock_wait",
    expected: "a duration such as '30s', 0, or 'forever'",
    syntax: LockWait::parse,
    check: bounded_lock_wait,
};

/// `lock_ttl`: a duration ([`parse_duration`]) from [`MIN_LOCK_TTL`] to [`MAX_LOCK_TTL`].
pub const LOCK_TTL: Setting<Duration> = Setting {
    key: "lock_ttl",
    expected: "a duration such as '30m'",
    syntax: parse_duration,
    check: bounded_lease,
};

/// `connect_timeout`: a duration ([`parse_duration`]) of at most [`MAX_WAIT`].
pub const CONNECT_TIMEOUT: Setting<Duration> = Setting {
    key: "connect_timeout",
    expected: "a duration such as '30s'",
    syntax: parse_duration,
    check: bounded_connect_timeout,
};

/// `wait --timeout`: a duration ([`parse_duration`]) of at most [`MAX_WAIT`].
pub const WAIT_TIMEOUT: Setting<Duration> = Setting {
    key: "timeout",
    expected: "a duration such as '5m'",
    syntax: parse_duration,
    check: bounded_connect_timeout,
};

/// `table_lock_timeout`: `off` (`None`: a statement waits for its table lock as long as it
/// takes), or a duration ([`parse_duration`]) of at least 1 ms and at most [`MAX_WAIT`]. A
/// zero is refused: PostgreSQL reads `lock_timeout = 0` as "no timeout", which is `off`.
pub const TABLE_LOCK_TIMEOUT: Setting<Option<Duration>> = Setting {
    key: "table_lock_timeout",
    expected: "a duration such as '2s', or 'off'",
    syntax: |text| match text.trim().to_ascii_lowercase().as_str() {
        "off" | "none" | "false" => Some(None),
        other => parse_duration(other).map(Some),
    },
    check: bounded_table_lock_timeout,
};

/// `table_lock_retry_for`: a duration ([`parse_duration`]) of at most [`MAX_WAIT`]; `0`
/// makes one attempt.
pub const TABLE_LOCK_RETRY_FOR: Setting<Duration> = Setting {
    key: "table_lock_retry_for",
    expected: "a duration such as '10m', or 0 for a single attempt",
    syntax: parse_duration,
    check: bounded_retry_for,
};

/// `history_table`: any text, then refused unless it is a plain identifier, because the
/// name is spliced into SQL.
pub const HISTORY_TABLE: Setting<String> = Setting {
    key: "history_table",
    // Never said: all text parses, and the check gives the reason for a refusal.
    expected: "a table name",
    syntax: |text| Some(text.to_string()),
    check: |name| check_table_name(name),
};

/// `history_connection`: the name of a connection; any text (an unknown name is refused once
/// the connections are all known, by [`Config::validate`](super::Config::validate)).
pub const HISTORY_CONNECTION: Setting<String> = Setting {
    key: "history_connection",
    expected: "a connection name",
    syntax: |text| Some(text.to_string()),
    check: any_value,
};

/// `blocking_table_size`: a size (`100MB`, `1.5GB`, a number of bytes) or `off`.
pub const BLOCKING_TABLE_SIZE: Setting<Option<u64>> = Setting {
    key: "blocking_table_size",
    expected: "a size such as '100MB' or '2GB', or 'off'",
    syntax: crate::blocking::parse_size,
    check: any_value,
};

/// `allow_blocking`: a switch, written as [`STRICT`] is.
pub const ALLOW_BLOCKING: Setting<bool> = Setting {
    key: "allow_blocking",
    expected: "true or false",
    syntax: parse_switch,
    check: any_value,
};

/// `lint_disable`: rule names, comma-separated (a TOML array in the file), or `none`; each
/// must be a rule.
pub const LINT_DISABLE: Setting<std::collections::BTreeSet<String>> = Setting {
    key: "lint_disable",
    expected: "rule names such as 'renaming-column,dropping-column', or 'none'",
    syntax: |text| {
        Some(
            (text.split(','))
                .map(str::trim)
                .filter(|name| !name.is_empty() && !name.eq_ignore_ascii_case("none"))
                .map(str::to_string)
                .collect(),
        )
    },
    check: |names| match names.iter().find(|n| dirthara_ddl::rule_named(n).is_none()) {
        None => Ok(()),
        Some(unknown) => {
            let known = dirthara_ddl::RULES.iter().map(|rule| rule.name);
            Err(match super::spelling::nearest(unknown, known) {
                Some(meant) => format!("`{unknown}` is no rule; did you mean `{meant}`?"),
                None => format!("`{unknown}` is no rule; `dirthara lint --rules` lists them"),
            })
        }
    },
};

/// `dump_schema`: the file `dump` is written to after every command that changed the schema
/// (`{target}` in it is a fleet target's name), or `none`.
pub const DUMP_SCHEMA: Setting<Option<std::path::PathBuf>> = Setting {
    key: "dump_schema",
    expected: "a file path such as 'db/schema.sql', or 'none'",
    syntax: |text| match text.trim() {
        "" => None,
        none if none.eq_ignore_ascii_case("none") => Some(None),
        path => Some(Some(std::path::PathBuf::from(path))),
    },
    check: any_value,
};

/// `schema_snapshot`: whether the commands that change the schema keep the snapshot `drift`
/// compares with: `on` (`true`, `yes`, `1`) or `off` (`false`, `no`, `0`), in any case; in
/// `dirthara.toml` also the booleans.
pub const SCHEMA_SNAPSHOT: Setting<bool> = Setting {
    key: "schema_snapshot",
    expected: "on or off",
    syntax: |text| match text.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Some(true),
        "off" | "false" | "no" | "0" => Some(false),
        _ => None,
    },
    check: any_value,
};

/// `strict` written as text (`DIRTHARA_STRICT`): `1`, `true`, `yes`, `on` or `0`, `false`,
/// `no`, `off`, empty, in any case. The file has TOML's own booleans and the command line a
/// switch, so neither needs text.
pub const STRICT: Setting<bool> = Setting {
    key: "strict",
    expected: "true or false",
    syntax: parse_switch,
    check: any_value,
};

fn parse_switch(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" | "" => Some(false),
        _ => None,
    }
}

/// `directories` written as text (`DIRTHARA_DIRECTORIES`): comma-separated, blanks dropped.
pub(crate) fn parse_directory_list(text: &str) -> Vec<PathBuf> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect()
}

fn bounded_lease(ttl: &Duration) -> std::result::Result<(), String> {
    if *ttl > MAX_LOCK_TTL {
        return Err(format!(
            "a lease of {} is longer than the maximum of 7 days: a runner that dies holding it \
             would keep every other runner out that long, and a run needs no long lease (the \
             heartbeat renews it while the run lasts). Use at most 7d, e.g. 30m (the default)",
            spoken(*ttl)
        ));
    }
    if *ttl >= MIN_LOCK_TTL {
        return Ok(());
    }
    Err(format!(
        "a lease of {ttl:?} is shorter than the minimum of {}s: the heartbeat renews it every \
         third of its length, so it would lapse before the run could keep it. Use at least {}s, \
         e.g. 5m (the default is 30m)",
        MIN_LOCK_TTL.as_secs(),
        MIN_LOCK_TTL.as_secs()
    ))
}

fn bounded_lock_wait(wait: &LockWait) -> std::result::Result<(), String> {
    match wait {
        LockWait::For(limit) if *limit > MAX_WAIT => Err(format!(
            "a wait of {} is longer than the maximum of 30 days; to wait until the lock is free \
             however long that takes, use `forever`, else a wait of at most 30d, e.g. 10m",
            spoken(*limit)
        )),
        _ => Ok(()),
    }
}

fn bounded_connect_timeout(timeout: &Duration) -> std::result::Result<(), String> {
    if *timeout <= MAX_WAIT {
        return Ok(());
    }
    Err(format!(
        "a connect timeout of {} is longer than the maximum of 30 days; use at most 30d, e.g. \
         5m (the default is 30s)",
        spoken(*timeout)
    ))
}

fn bounded_table_lock_timeout(timeout: &Option<Duration>) -> std::result::Result<(), String> {
    match timeout {
        Some(timeout) if timeout.is_zero() => Err(
            "a table-lock timeout of 0 would make every statement wait as long as it takes \
             (PostgreSQL reads 0 as no timeout); write `off` for that, or a duration such as \
             2s (the default)"
                .to_string(),
        ),
        Some(timeout) if *timeout > MAX_WAIT => Err(format!(
            "a table-lock timeout of {} is longer than the maximum of 30 days; it bounds how \
             long the application's queries may queue behind one statement: use seconds, \
             e.g. 2s (the default), or `off`",
            spoken(*timeout)
        )),
        _ => Ok(()),
    }
}

fn bounded_retry_for(budget: &Duration) -> std::result::Result<(), String> {
    if *budget <= MAX_WAIT {
        return Ok(());
    }
    Err(format!(
        "a retry budget of {} is longer than the maximum of 30 days; use at most 30d, e.g. 10m \
         (the default), or 0 for a single attempt",
        spoken(*budget)
    ))
}

/// A duration as a refusal says it: as humantime writes it, up to a century. A refusal of a
/// setting quotes durations in the setting's own syntax (`8days 2h`, `4.9s`), so that what it
/// quotes and what it advises can be written back as they are; every other duration shown to
/// people is [`crate::format_duration`]'s.
fn spoken(duration: Duration) -> String {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    if duration > CENTURY {
        "more than 100 years".to_string()
    } else {
        humantime::format_duration(duration).to_string()
    }
}

fn check_table_name(name: &str) -> std::result::Result<(), String> {
    if is_plain_identifier(name, 48) {
        return Ok(());
    }
    Err(format!(
        "history table name `{name}` is not a plain identifier: use at most 48 letters, digits \
         and `_`, starting with a letter or `_`"
    ))
}

/// History table names are spliced into SQL, so they are plain identifiers.
pub fn validate_table_name(name: &str) -> Result<()> {
    check_table_name(name).map_err(Error::config)
}

/// A name safe to splice into SQL (quoted) on every dialect: letters, digits and `_`,
/// starting with a letter or `_`, at most `max_len` long.
pub fn is_plain_identifier(name: &str, max_len: usize) -> bool {
    !name.is_empty()
        && name.len() <= max_len
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests;
