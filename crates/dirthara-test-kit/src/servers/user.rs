//! A login with a password, made for one test and dropped with its grants.

use sqlx::{Connection, Executor, MySqlConnection, PgConnection};

use super::{Server, TestDb};

/// A login of a test server's with a password, made for one test ([`TestDb::user`]) and
/// dropped on drop, with what it was granted.
pub struct TestUser {
    pub name: String,
    pub password: String,
    server: Server,
    admin_url: String,
    /// The database it was made from, where its PostgreSQL grants are.
    db_url: String,
}

impl TestDb {
    /// A login named `dt_<this name's unique part>_<suffix>` with `password` and no rights
    /// but to connect: grant it what the test needs. PostgreSQL or MySQL/MariaDB. Shorter
    /// than the database's name because Oracle MySQL refuses a user name over 32 characters
    /// (MariaDB allows 80).
    pub async fn user(&self, suffix: &str, password: &str) -> TestUser {
        let unique = self.name.strip_prefix("dirthara_t_").unwrap_or(&self.name);
        let name = format!("dt_{unique}_{suffix}");
        match self.server {
            Server::Postgres => {
                self.execute(&format!("CREATE ROLE {name} LOGIN PASSWORD '{password}'"))
                    .await
            }
            Server::Mysql => {
                self.execute(&format!(
                    "CREATE USER '{name}'@'%' IDENTIFIED BY '{password}'"
                ))
                .await
            }
            Server::Mongo => panic!("no SQL users on MongoDB"),
        }
        TestUser {
            name,
            password: password.to_string(),
            server: self.server,
            admin_url: self.admin_url.clone(),
            db_url: self.url.clone(),
        }
    }
}

impl TestUser {
    /// `url`, a URL of this user's server, with this user and password in it instead of its
    /// own.
    pub fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
        let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        let host = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        format!("{scheme}://{}:{}@{host}{path}", self.name, self.password)
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let (server, name) = (self.server, self.name.clone());
        let (admin_url, db_url) = (self.admin_url.clone(), self.db_url.clone());
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                match server {
                    Server::Postgres => {
                        // Its grants are in the database it was made from (if that is still
                        // there): a role with privileges cannot be dropped.
                        if let Ok(mut c) = PgConnection::connect(&db_url).await {
                            c.execute(format!("DROP OWNED BY {name}").as_str()).await?;
                        }
                        let mut c = PgConnection::connect(&admin_url).await?;
                        c.execute(format!("DROP ROLE IF EXISTS {name}").as_str())
                            .await?;
                    }
                    Server::Mysql => {
                        let mut c = MySqlConnection::connect(&admin_url).await?;
                        c.execute(format!("DROP USER IF EXISTS '{name}'@'%'").as_str())
                            .await?;
                    }
                    Server::Mongo => {}
                }
                Ok::<_, sqlx::Error>(())
            })
            .map_err(|e| e.to_string())
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!(
                "warning: could not drop test user {} ({dropped:?}); drop it by hand",
                self.name
            );
        }
    }
}
