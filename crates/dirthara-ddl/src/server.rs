//! The server a step runs on, as far as the rules depend on it: which dialect, which product
//! (MySQL and MariaDB differ), which version. Offline, the analysis judges by the oldest
//! version dirthara supports, so a finding made offline holds on every supported server.

use dirthara_source::sql::SqlDialect;

/// A server and its version (major, minor, patch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Server {
    Postgres { version: (u32, u32, u32) },
    MySql { version: (u32, u32, u32) },
    MariaDb { version: (u32, u32, u32) },
}

impl Server {
    /// The oldest server of `dialect` dirthara supports: what the rules judge by offline
    /// (PostgreSQL 13; MySQL 8.0, whose `ADD COLUMN` is instant only as the last column before
    /// 8.0.29). SQLite is read as PostgreSQL, whose grammar covers its DDL.
    pub fn oldest(dialect: SqlDialect) -> Server {
        match dialect {
            SqlDialect::MySql => Server::MySql { version: (8, 0, 0) },
            _ => Server::Postgres {
                version: (13, 0, 0),
            },
        }
    }

    /// The server that reports `version` (PostgreSQL's `server_version`, MySQL's or
    /// MariaDB's `VERSION()`); the oldest supported one when it cannot be read.
    ///
    /// ```
    /// use dirthara_ddl::{Server, SqlDialect};
    /// assert_eq!(Server::from_version(SqlDialect::MySql, "10.11.6-MariaDB-0+deb12u1"),
    ///            Server::MariaDb { version: (10, 11, 6) });
    /// // Oracle MySQL's (Debian's package) names no product: not MariaDB is MySQL.
    /// assert_eq!(Server::from_version(SqlDialect::MySql, "9.7.4-2"),
    ///            Server::MySql { version: (9, 7, 4) });
    /// assert_eq!(Server::from_version(SqlDialect::MySql, "9.7.4-2").to_string(), "MySQL 9.7.4");
    /// assert_eq!(Server::from_version(SqlDialect::Postgres, "15.19 (Debian 15.19-0+deb12u1)"),
    ///            Server::Postgres { version: (15, 19, 0) });
    /// assert_eq!(Server::from_version(SqlDialect::Postgres, "PostgreSQL 10.23 on x86_64-pc-linux-gnu"),
    ///            Server::Postgres { version: (10, 23, 0) });
    /// ```
    pub fn from_version(dialect: SqlDialect, version: &str) -> Server {
        // `PostgreSQL 15.19 (Debian ...) on x86_64`: the version is the first number.
        let from = version
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(version.len());
        let numbers: Vec<u32> = version[from..]
            .split(|c: char| !c.is_ascii_digit())
            .take_while(|part| !part.is_empty())
            .filter_map(|part| part.parse().ok())
            .collect();
        let Some(&major) = numbers.first() else {
            return Server::oldest(dialect);
        };
        let v = (
            major,
            numbers.get(1).copied().unwrap_or(0),
            numbers.get(2).copied().unwrap_or(0),
        );
        match dialect {
            SqlDialect::MySql if version.to_ascii_lowercase().contains("mariadb") => {
                Server::MariaDb { version: v }
            }
            SqlDialect::MySql => Server::MySql { version: v },
            _ => Server::Postgres { version: v },
        }
    }

    /// How its statements are read.
    pub fn dialect(self) -> SqlDialect {
        match self {
            Server::Postgres { .. } => SqlDialect::Postgres,
            Server::MySql { .. } | Server::MariaDb { .. } => SqlDialect::MySql,
        }
    }

    /// `ADD COLUMN` with a constant default changes only the catalog (PostgreSQL 11+).
    pub(crate) fn instant_constant_default(self) -> bool {
        matches!(self, Server::Postgres { version } if version.0 >= 11)
    }
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, (major, minor, patch)) = match *self {
            Server::Postgres { version } => ("PostgreSQL", version),
            Server::MySql { version } => ("MySQL", version),
            Server::MariaDb { version } => ("MariaDB", version),
        };
        write!(f, "{name} {major}.{minor}.{patch}")
    }
}
