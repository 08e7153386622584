//! The environment: `DATABASE_URL` and the `DIRTHARA_*` variables, read into a [`Config`]
//! through the settings' one parsers.

use super::value::{
    parse_directory_list, Origin, CONNECT_TIMEOUT, HISTORY_TABLE, LOCKING, LOCK_TTL, LOCK_WAIT,
    STRICT, TABLE_LOCK_RETRY_FOR, TABLE_LOCK_TIMEOUT,
};
use super::Config;
use crate::error::Result;
use crate::migration::DEFAULT_CONNECTION;

/// Sets the URL of the connection named by the rest of the variable's name, lower-cased.
const CONNECTION_PREFIX: &str = "DIRTHARA_CONNECTION_";
/// Sets the `init_sql` of the connection named by the rest of the variable's name, lower-cased.
const INIT_SQL_PREFIX: &str = "DIRTHARA_INIT_SQL_";

/// Whether [`Config::merge_env`] reads the variable `name`: `DATABASE_URL` and every
/// `DIRTHARA_*`. A caller collecting the environment can keep only these.
pub fn is_setting_variable(name: &str) -> bool {
    name == "DATABASE_URL" || name.starts_with("DIRTHARA_")
}

impl Config {
    /// Applies `DATABASE_URL` and the `DIRTHARA_*` variables among `vars`, in their order;
    /// other variables are ignored.
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
            let origin = Origin::Env(&key);
            match key.as_str() {
                "DATABASE_URL" => {
                    self.connections
                        .insert(DEFAULT_CONNECTION.to_string(), value);
                }
                "DIRTHARA_DIRECTORIES" => self.directories = parse_directory_list(&value),
                "DIRTHARA_LOCKING" => self.locking = LOCKING.read(&value, origin)?,
                "DIRTHARA_LOCK_WAIT" => self.lock_wait = Some(LOCK_WAIT.read(&value, origin)?),
                "DIRTHARA_LOCK_TTL" => self.lock_ttl = LOCK_TTL.read(&value, origin)?,
                "DIRTHARA_CONNECT_TIMEOUT" => {
                    self.connect_timeout = CONNECT_TIMEOUT.read(&value, origin)?
                }
                "DIRTHARA_TABLE_LOCK_TIMEOUT" => {
                    self.table_lock_timeout = TABLE_LOCK_TIMEOUT.read(&value, origin)?
                }
                "DIRTHARA_TABLE_LOCK_RETRY_FOR" => {
                    self.table_lock_retry_for = TABLE_LOCK_RETRY_FOR.read(&value, origin)?
                }
                "DIRTHARA_HISTORY_TABLE" => {
                    self.history_table = HISTORY_TABLE.read(&value, origin)?
                }
                "DIRTHARA_HISTORY_CONNECTION" => self.history_connection = value,
                "DIRTHARA_STRICT" => self.strict = STRICT.read(&value, origin)?,
                _ => {
                    if let Some(name) = key.strip_prefix(CONNECTION_PREFIX) {
                        self.connections.insert(name.to_ascii_lowercase(), value);
                    } else if let Some(name) = key.strip_prefix(INIT_SQL_PREFIX) {
                        self.init_sql.insert(name.to_ascii_lowercase(), value);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn vars<const N: usize>(pairs: [(&str, &str); N]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn named_connections_and_their_init_sql_come_lower_cased() {
        let mut c = Config::default();
        c.merge_env(vars([
            ("DIRTHARA_CONNECTION_ANALYTICS", "sqlite:a.db"),
            ("DIRTHARA_INIT_SQL_ANALYTICS", "PRAGMA foreign_keys = ON"),
            ("DIRTHARA_DIRECTORIES", " db/a, ,db/b,"),
            ("HOME", "/root"),
        ]))
        .unwrap();
        assert_eq!(c.connection_url("analytics").unwrap(), "sqlite:a.db");
        assert_eq!(c.init_sql["analytics"], "PRAGMA foreign_keys = ON");
        assert_eq!(
            c.directories,
            [PathBuf::from("db/a"), PathBuf::from("db/b")]
        );
        assert!(is_setting_variable("DIRTHARA_CONNECTION_ANALYTICS"));
        assert!(is_setting_variable("DATABASE_URL"));
        assert!(!is_setting_variable("HOME"));
    }

    #[test]
    fn a_bad_value_is_refused_naming_the_variable() {
        for (key, value, reason) in [
            ("DIRTHARA_LOCK_TTL", "0", "a lease of 0ns is shorter than"),
            (
                "DIRTHARA_LOCK_WAIT",
                "soon",
                "expected a duration such as 30s",
            ),
            ("DIRTHARA_STRICT", "maybe", "expected true or false"),
            ("DIRTHARA_HISTORY_TABLE", "a-b", "history table name `a-b`"),
        ] {
            let err = Config::default()
                .merge_env(vars([(key, value)]))
                .unwrap_err();
            assert_eq!(err.code(), crate::Code::ConfigError);
            assert!(
                err.to_string()
                    .starts_with(&format!("environment variable {key}: {reason}")),
                "{err}"
            );
        }
    }
}
