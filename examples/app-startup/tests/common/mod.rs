//! What the example's tests share: a throwaway PostgreSQL database.
//! Each test binary uses a part of it.
#![allow(dead_code)]

use sqlx::{Connection, Executor, PgConnection};

/// A database of the test's own, named `name`, on the server of `DIRTHARA_TEST_POSTGRES_URL`
/// (default: the local one); dropped by [`Scratch::drop_now`]. `None` (the test skips) when
/// the server is not usable, unless `DIRTHARA_REQUIRE_SERVERS=1`.
pub(crate) struct Scratch {
    admin: PgConnection,
    name: String,
    pub(crate) url: String,
}

impl Scratch {
    pub(crate) async fn create(name: &str) -> Option<Scratch> {
        let admin = std::env::var("DIRTHARA_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let mut conn = match PgConnection::connect(&admin).await {
            Ok(conn) => conn,
            Err(error) if std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref() != Ok("1") => {
                eprintln!("SKIPPED: PostgreSQL at {admin} is not usable ({error})");
                return None;
            }
            Err(error) => panic!(
                "PostgreSQL at {admin} is not usable ({error}); DIRTHARA_REQUIRE_SERVERS=1 \
                 requires it"
            ),
        };
        let name = format!("{name}_{}", std::process::id());
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .unwrap();
        let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap();
        let url = format!("{base}/{name}");
        Some(Scratch {
            admin: conn,
            name,
            url,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// A connection to the database itself.
    pub(crate) async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url).await.unwrap()
    }

    pub(crate) async fn drop_now(mut self) {
        let sql = format!("DROP DATABASE {} WITH (FORCE)", self.name);
        self.admin.execute(sql.as_str()).await.unwrap();
    }
}
