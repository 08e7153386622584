//! Servers that speak PostgreSQL's or MySQL's protocol but whose session locks cannot be
//! trusted, recognised from what they say about themselves when a connection opens.
//!
//! A `postgres://` or `mysql://` URL says nothing about what answers it. CockroachDB's
//! `pg_try_advisory_lock` answers true to every session, so two runners would both "hold"
//! the lock; YugabyteDB before 2025.1 refuses advisory locks (or, silenced, fakes them);
//! TiDB's named locks were no-ops before 6.1 and still lack `IS_USED_LOCK` in some releases;
//! Vitess routes `GET_LOCK` to one shard on a reserved connection that vtgate may kill. On all
//! of them `locking = true` takes the lease instead, and an explicit `session` is refused.
//!
//! The rules are prefix and substring tests on the server's own version text, checked below
//! against the strings these servers document (and against plain PostgreSQL and MariaDB,
//! which must never match).

use crate::lock::{LockSupport, SessionLockSupport};

/// What a PostgreSQL-protocol server offers, from its `version()`.
#[cfg(any(feature = "postgres", test))]
pub(crate) fn postgres_lock_support(version: &str) -> LockSupport {
    let unreliable = |server, reason| LockSupport {
        database: "postgres",
        session_lock: SessionLockSupport::Unreliable { server, reason },
        lease_is_native: false,
    };
    if version.starts_with("CockroachDB") {
        return unreliable(
            "CockroachDB",
            "its session-level advisory locks are documented no-ops (`pg_try_advisory_lock` \
             answers true to every session)",
        );
    }
    if let Some(yugabyte) = yugabyte_release(version) {
        if yugabyte < (2025, 1) {
            return unreliable(
                "YugabyteDB before 2025.1",
                "its advisory locks are not implemented (or, silenced, succeed without locking)",
            );
        }
    }
    LockSupport::session("postgres")
}

/// What a MySQL-protocol server offers, from its `VERSION()` and `@@version_comment`.
#[cfg(any(feature = "mysql", test))]
pub(crate) fn mysql_lock_support(version: &str, comment: &str) -> LockSupport {
    let unreliable = |server, reason| LockSupport {
        database: "mysql",
        session_lock: SessionLockSupport::Unreliable { server, reason },
        lease_is_native: false,
    };
    // TiDB's `server-version` setting can rewrite VERSION(); its comment stays.
    if version.contains("-TiDB-") || comment.starts_with("TiDB Server") {
        return unreliable(
            "TiDB",
            "its named locks were no-ops before 6.1 and since then have no deadlock detection \
             and no `IS_USED_LOCK` in some releases, which the lock check needs",
        );
    }
    // vtgate reports `8.0.30-Vitess` unless configured otherwise; its comment keeps the
    // `Version: ... (Git revision ...)` of the Vitess build.
    let vitess_comment = comment.starts_with("Version: ") && comment.contains("Git revision");
    if version.to_ascii_lowercase().contains("vitess") || vitess_comment {
        return unreliable(
            "Vitess (PlanetScale)",
            "`GET_LOCK` is routed to one shard on a reserved connection that vtgate may end",
        );
    }
    LockSupport::session("mysql")
}

/// YugabyteDB's release (`2.18`, `2025.1`) from `PostgreSQL 11.2-YB-2.18.0.1-b0 on ...`.
#[cfg(any(feature = "postgres", test))]
fn yugabyte_release(version: &str) -> Option<(u32, u32)> {
    let (_, release) = version.split_once("-YB-")?;
    let mut numbers = release.split(['.', '-', ' ']);
    let major = numbers.next()?.parse().ok()?;
    let minor = numbers.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreliable(support: LockSupport) -> Option<&'static str> {
        match support.session_lock {
            SessionLockSupport::Unreliable { server, .. } => Some(server),
            _ => None,
        }
    }

    #[test]
    fn plain_postgresql_and_mariadb_keep_their_session_locks() {
        for version in [
            "PostgreSQL 15.19 (Debian 15.19-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc \
             (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit",
            "PostgreSQL 18.1 on x86_64-pc-linux-gnu, compiled by gcc (GCC) 8.5.0, 64-bit",
            "PostgreSQL 16.4 on aarch64-unknown-linux-gnu, compiled by aarch64-unknown-linux-gnu-gcc \
             (GCC) 9.5.0, 64-bit",
        ] {
            assert_eq!(postgres_lock_support(version), LockSupport::session("postgres"));
        }
        for (version, comment) in [
            ("10.11.19-MariaDB-0+deb12u1", "Debian 12"),
            ("8.0.36", "MySQL Community Server - GPL"),
            ("8.0.35-0ubuntu0.22.04.1", "(Ubuntu)"),
            ("11.4.2-MariaDB-log", "MariaDB Server"),
        ] {
            assert_eq!(
                mysql_lock_support(version, comment),
                LockSupport::session("mysql")
            );
        }
    }

    #[test]
    fn cockroachdb_is_recognised_from_its_version_text() {
        for version in [
            "CockroachDB CCL v22.1.0 (x86_64-pc-linux-gnu, built 2022/05/23 16:27:47, go1.17.6)",
            "CockroachDB CCL v23.1.8 (x86_64-pc-linux-gnu, built 2023/08/04 18:11:44, go1.19.10)",
            "CockroachDB CCL v24.3.0 (aarch64-unknown-linux-gnu, built 2024/11/21 17:04:09, \
             go1.22.8 X:nocoverageredesign)",
            "CockroachDB OSS v20.2.19 (x86_64-unknown-linux-gnu, built 2022/02/09, go1.13.14)",
        ] {
            assert_eq!(
                unreliable(postgres_lock_support(version)),
                Some("CockroachDB")
            );
        }
    }

    #[test]
    fn yugabytedb_before_2025_1_is_recognised_and_later_releases_are_trusted() {
        for version in [
            "PostgreSQL 11.2-YB-2.0.0.0-b0 on x86_64-pc-linux-gnu, compiled by gcc (Homebrew gcc \
             5.5.0_4) 5.5.0, 64-bit",
            "PostgreSQL 11.2-YB-2.13.1.0-b0 on x86_64-pc-linux-gnu, compiled by clang version \
             12.0.1, 64-bit",
            "PostgreSQL 11.2-YB-2.18.0.1-b0 on x86_64-pc-linux-gnu, compiled by clang, 64-bit",
            "PostgreSQL 15.2-YB-2.25.1.0-b0 on x86_64-pc-linux-gnu, compiled by clang, 64-bit",
            "PostgreSQL 11.2-YB-2024.2.2.1-b0 on x86_64-pc-linux-gnu, compiled by clang, 64-bit",
        ] {
            assert_eq!(
                unreliable(postgres_lock_support(version)),
                Some("YugabyteDB before 2025.1"),
                "{version}"
            );
        }
        let newer = "PostgreSQL 15.2-YB-2025.1.0.0-b0 on x86_64-pc-linux-gnu, compiled by clang";
        assert_eq!(
            postgres_lock_support(newer),
            LockSupport::session("postgres")
        );
    }

    #[test]
    fn tidb_is_recognised_by_its_version_or_by_its_comment() {
        for (version, comment) in [
            (
                "8.0.11-TiDB-v8.1.0",
                "TiDB Server (Apache License 2.0) Community Edition, MySQL 8.0 compatible",
            ),
            (
                "5.7.25-TiDB-v4.0.8-dirty",
                "TiDB Server (Apache License 2.0) Community Edition, MySQL 5.7 compatible",
            ),
            ("8.0.11-TiDB-v8.5.3-serverless", ""),
            // `server-version` rewrote VERSION(); the comment still says TiDB.
            (
                "8.0.33",
                "TiDB Server (Apache License 2.0) Enterprise Edition, MySQL 8.0 compatible",
            ),
        ] {
            assert_eq!(
                unreliable(mysql_lock_support(version, comment)),
                Some("TiDB")
            );
        }
    }

    #[test]
    fn vitess_is_recognised_by_its_version_or_by_its_comment() {
        for (version, comment) in [
            (
                "8.0.30-Vitess",
                "Version: 18.0.0-SNAPSHOT (Git revision 122ee758 branch 'main') built on Tue Jul 4",
            ),
            (
                "5.7.9-vitess-10.0.0-SNAPSHOT",
                "Version: 10.0.0-SNAPSHOT (Git revision d54b87c83 branch 'master')",
            ),
            // `--mysql_server_version 8.0.22`: only the comment is left.
            (
                "8.0.22",
                "Version: 10.0.0-RC1 (Git revision 48dccf5 branch 'HEAD') built on Wed Feb 3",
            ),
        ] {
            assert_eq!(
                unreliable(mysql_lock_support(version, comment)),
                Some("Vitess (PlanetScale)")
            );
        }
    }
}
