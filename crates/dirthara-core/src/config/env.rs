//! The environment: `DATABASE_URL` and the `DIRTHARA_*` variables, read into a [`Config`]
//! through the settings' one parsers.

use std::fmt;

use super::settings::SETTINGS;
use super::shard_auto::SHARD_COUNT_VARIABLE;
use super::spelling::nearest;
use super::value::{parse_directory_list, Origin};
use super::Config;
use crate::error::Result;
use crate::migration::DEFAULT_CONNECTION;

/// Sets the URL of the connection named by the rest of the variable's name, lower-cased.
const CONNECTION_PREFIX: &str = "DIRTHARA_CONNECTION_";
/// Sets the `init_sql` of the connection named by the rest of the variable's name, lower-cased.
const INIT_SQL_PREFIX: &str = "DIRTHARA_INIT_SQL_";
/// Sets the placeholder named by the rest of the variable's name, lower-cased.
const PLACEHOLDER_PREFIX: &str = "DIRTHARA_PLACEHOLDER_";
/// The list of directories, comma-separated.
const DIRECTORIES: &str = "DIRTHARA_DIRECTORIES";

/// Whether [`Config::merge_env`] reads the variable `name`: `DATABASE_URL` and every
/// `DIRTHARA_*`. A caller collecting the environment can keep only these.
pub fn is_setting_variable(name: &str) -> bool {
    name == "DATABASE_URL" || name.starts_with("DIRTHARA_")
}

/// A `DIRTHARA_*` variable that is no setting: most likely a typo, which would otherwise
/// leave the setting it meant at its default without a word.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnknownVariable {
    /// The variable as it is set.
    pub name: String,
    /// The setting's variable it most likely meant.
    pub nearest: Option<&'static str>,
}

impl fmt::Display for UnknownVariable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "environment variable {} is not a dirthara setting; it is ignored",
            self.name
        )?;
        match self.nearest {
            Some(nearest) => write!(f, " (did you mean `{nearest}`?)"),
            None => Ok(()),
        }
    }
}

impl Config {
    /// Applies `DATABASE_URL` and the `DIRTHARA_*` variables among `vars`, in their order;
    /// other variables are ignored, and so is a `DIRTHARA_*` variable that is no setting
    /// ([`unknown_variables`] names those, for the caller to say so).
    ///
    /// `DIRTHARA_DIRECTORIES` is a comma-separated list; `DIRTHARA_CONNECTION_<NAME>` sets a
    /// named connection's URL and `DIRTHARA_INIT_SQL_<NAME>` its `init_sql` (name lower-cased).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut config = dirthara_core::Config::default();
    /// // In an application: `config.merge_env(std::env::vars())?`.
    /// config.merge_env([
    ///     ("DATABASE_URL".to_string(), "postgres://app@db/app".to_string()),
    ///     ("DIRTHARA_CONNECTION_ANALYTICS".to_string(), "postgres://app@warehouse/facts".to_string()),
    /// ])?;
    /// assert_eq!(config.connection_url("analytics")?, "postgres://app@warehouse/facts");
    /// # Ok::<(), dirthara_core::Error>(())
    /// ```
    pub fn merge_env(&mut self, vars: impl IntoIterator<Item = (String, String)>) -> Result<()> {
        for (key, value) in vars {
            if key == "DATABASE_URL" {
                self.connections
                    .insert(DEFAULT_CONNECTION.to_string(), value);
            } else if key == DIRECTORIES {
                self.directories = parse_directory_list(&value);
            } else if let Some(row) = SETTINGS.iter().find(|row| row.env == key) {
                (row.apply)(self, &value, Origin::Env(&key))?;
            } else if let Some(name) = key.strip_prefix(CONNECTION_PREFIX) {
                self.connections.insert(name.to_ascii_lowercase(), value);
            } else if let Some(name) = key.strip_prefix(INIT_SQL_PREFIX) {
                self.init_sql.insert(name.to_ascii_lowercase(), value);
            } else if let Some(name) = key.strip_prefix(PLACEHOLDER_PREFIX) {
                super::check_placeholder_name(name)
                    .map_err(|e| crate::error::Error::config(format!("{key}: {e}")))?;
                self.placeholders.insert(name.to_ascii_lowercase(), value);
            }
        }
        Ok(())
    }
}

/// The `DIRTHARA_*` variables among `vars` that are no setting, each with the setting's
/// variable it most likely meant: what [`Config::merge_env`] ignores. `DIRTHARA_SHARD_COUNT`
/// is known, though `merge_env` does not read it: it is the count of `--shard auto`
/// ([`ShardSpec::resolve`](super::ShardSpec::resolve)), resolved where the flag is.
///
/// # Examples
///
/// ```
/// let vars = [("DIRTHARA_LOCK_WIAT".to_string(), "30s".to_string())];
/// let unknown = dirthara_core::config::unknown_variables(&vars);
/// assert_eq!(unknown[0].nearest, Some("DIRTHARA_LOCK_WAIT"));
/// ```
pub fn unknown_variables<'a>(
    vars: impl IntoIterator<Item = &'a (String, String)>,
) -> Vec<UnknownVariable> {
    let known = || (SETTINGS.iter().map(|row| row.env)).chain([DIRECTORIES, SHARD_COUNT_VARIABLE]);
    vars.into_iter()
        .map(|(name, _)| name)
        .filter(|name| name.starts_with("DIRTHARA_") && !known().any(|k| k == *name))
        .filter(|name| {
            ![CONNECTION_PREFIX, INIT_SQL_PREFIX, PLACEHOLDER_PREFIX]
                .iter()
                .any(|prefix| name.starts_with(prefix))
        })
        .map(|name| UnknownVariable {
            name: name.clone(),
            nearest: nearest(name, known()),
        })
        .collect()
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
        let env = vars([
            ("DIRTHARA_CONNECTION_ANALYTICS", "sqlite:a.db"),
            ("DIRTHARA_INIT_SQL_ANALYTICS", "PRAGMA foreign_keys = ON"),
            ("DIRTHARA_DIRECTORIES", " db/a, ,db/b,"),
            ("HOME", "/root"),
            ("DIRTHARA_TABLE_LOCK_TIMEOUTT", "5s"),
            ("DIRTHARA_SHARD_COUNT", "4"),
        ]);
        c.merge_env(env.clone()).unwrap();
        let unknown = unknown_variables(&env);
        assert_eq!(c.connection_url("analytics").unwrap(), "sqlite:a.db");
        assert_eq!(c.init_sql["analytics"], "PRAGMA foreign_keys = ON");
        assert_eq!(
            c.directories,
            [PathBuf::from("db/a"), PathBuf::from("db/b")]
        );
        assert!(is_setting_variable("DIRTHARA_CONNECTION_ANALYTICS"));
        assert!(is_setting_variable("DATABASE_URL"));
        assert!(!is_setting_variable("HOME"));
        // A typo is named with what it meant, and changes nothing.
        assert_eq!(
            unknown,
            [UnknownVariable {
                name: "DIRTHARA_TABLE_LOCK_TIMEOUTT".into(),
                nearest: Some("DIRTHARA_TABLE_LOCK_TIMEOUT"),
            }]
        );
        assert_eq!(c.table_lock_timeout, Config::default().table_lock_timeout);
        // `--shard auto`'s count is no typo, though no setting of the file reads it.
        assert!(unknown.iter().all(|u| u.name != "DIRTHARA_SHARD_COUNT"));
        assert_eq!(
            unknown_variables(&vars([("DIRTHARA_SHARD_CONT", "4")]))[0].nearest,
            Some("DIRTHARA_SHARD_COUNT")
        );
        assert!(unknown[0]
            .to_string()
            .contains("did you mean `DIRTHARA_TABLE_LOCK_TIMEOUT`?"));
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
