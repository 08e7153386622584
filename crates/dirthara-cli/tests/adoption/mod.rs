//! The fixtures of `tests/adopt.rs`: each tool's files, and its history table with the DDL
//! and rows that tool itself writes (from each tool's source), written here by hand.

use std::path::Path;

use crate::support::servers::Server;

/// How each tool lays out its files here; migration `i` creates table `adopt_t<i>`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Files {
    Plain,
    Dbmate,
    Goose,
    Diesel,
    Flyway,
    /// refinery's `V<n>__<name>.sql`, without undo files.
    Refinery,
}

pub(crate) fn write_files(dir: &Path, files: Files, versions: &[i64]) {
    for (i, v) in versions.iter().enumerate() {
        let n = i + 1;
        let (up, down) = (
            format!("CREATE TABLE adopt_t{n} (id INT);\n"),
            format!("DROP TABLE adopt_t{n};\n"),
        );
        let name = format!("create_t{n}");
        let write = |rel: String, text: String| {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        match files {
            Files::Plain => {
                write(format!("{v}_{name}.up.sql"), up);
                write(format!("{v}_{name}.down.sql"), down);
            }
            Files::Dbmate => write(
                format!("{v}_{name}.sql"),
                format!("-- migrate:up\n{up}\n-- migrate:down\n{down}"),
            ),
            Files::Goose => write(
                format!("{v}_{name}.sql"),
                format!("-- +goose Up\n{up}\n-- +goose Down\n{down}"),
            ),
            Files::Diesel => {
                let t = v.to_string();
                let folder = format!("{}-{}-{}-{}_{name}", &t[..4], &t[4..6], &t[6..8], &t[8..]);
                write(format!("{folder}/up.sql"), up);
                write(format!("{folder}/down.sql"), down);
            }
            Files::Flyway => {
                write(format!("V{v}__{name}.sql"), up);
                write(format!("U{v}__{name}.sql"), down);
            }
            Files::Refinery => write(format!("V{v}__{name}.sql"), up),
        }
    }
}

/// One tool: its files, and its history table with migrations 1 and 2 (of 3) applied,
/// written as the tool writes it on `server`.
pub(crate) struct Tool {
    pub name: &'static str,
    pub table: &'static str,
    pub files: Files,
    pub versions: [i64; 3],
}

pub(crate) const TS: [i64; 3] = [20240101000001, 20240101000002, 20240101000003];
pub(crate) const SEQ: [i64; 3] = [1, 2, 3];

pub(crate) fn tools() -> Vec<Tool> {
    let tool = |name, table, files, versions| Tool {
        name,
        table,
        files,
        versions,
    };
    vec![
        tool("sqlx", "_sqlx_migrations", Files::Plain, TS),
        tool("golang-migrate", "schema_migrations", Files::Plain, SEQ),
        tool("dbmate", "schema_migrations", Files::Dbmate, TS),
        tool("goose", "goose_db_version", Files::Goose, SEQ),
        tool("refinery", "refinery_schema_history", Files::Refinery, SEQ),
        tool("diesel", "__diesel_schema_migrations", Files::Diesel, TS),
        tool("flyway", "flyway_schema_history", Files::Flyway, SEQ),
    ]
}

/// The tool's table and rows for `applied` (each row marked good unless `failed`).
pub(crate) fn history_sql(
    tool: &str,
    server: Server,
    table: &str,
    applied: &[i64],
    failed: bool,
) -> String {
    let pg = server == Server::Postgres;
    let ok = if failed { "FALSE" } else { "TRUE" };
    let mut sql = Vec::new();
    match tool {
        "sqlx" => {
            // sqlx-postgres / sqlx-mysql `ensure_migrations_table`; checksum: SHA-384 bytes.
            sql.push(format!(
                "CREATE TABLE IF NOT EXISTS {table} (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
                 installed_on {} NOT NULL DEFAULT {}, success BOOLEAN NOT NULL, checksum {} NOT NULL, \
                 execution_time BIGINT NOT NULL)",
                if pg { "TIMESTAMPTZ" } else { "TIMESTAMP" },
                if pg { "now()" } else { "CURRENT_TIMESTAMP" },
                if pg { "BYTEA" } else { "BLOB" },
            ));
            let checksum = if pg {
                "decode('a1b2c3', 'hex')"
            } else {
                "X'a1b2c3'"
            };
            for (i, v) in applied.iter().enumerate() {
                let success = if i + 1 == applied.len() { ok } else { "TRUE" };
                sql.push(format!(
                    "INSERT INTO {table} (version, description, success, checksum, execution_time) \
                     VALUES ({v}, 'create t{}', {success}, {checksum}, 1234567)",
                    i + 1
                ));
            }
        }
        "golang-migrate" => {
            // database/postgres and database/mysql: one row, the newest version.
            sql.push(format!(
                "CREATE TABLE IF NOT EXISTS {table} (version bigint not null primary key, dirty boolean not null)"
            ));
            if let Some(v) = applied.last() {
                sql.push(format!(
                    "INSERT INTO {table} (version, dirty) VALUES ({v}, {})",
                    if failed { "TRUE" } else { "FALSE" }
                ));
            }
        }
        "dbmate" => {
            sql.push(format!(
                "create table if not exists {table} (version varchar(128) primary key){}",
                if pg {
                    ""
                } else {
                    " character set latin1 collate latin1_bin"
                }
            ));
            for v in applied {
                sql.push(format!("insert into {table} (version) values ('{v}')"));
            }
        }
        "goose" => {
            // goose writes version 0 when it creates the table, then a row per up and down.
            sql.push(format!(
                "CREATE TABLE {table} (id serial NOT NULL, version_id bigint NOT NULL, \
                 is_applied boolean NOT NULL, tstamp timestamp NULL default now(), PRIMARY KEY(id))"
            ));
            sql.push(format!(
                "INSERT INTO {table} (version_id, is_applied) VALUES (0, TRUE)"
            ));
            for v in applied {
                sql.push(format!(
                    "INSERT INTO {table} (version_id, is_applied) VALUES ({v}, TRUE)"
                ));
            }
            // Migration 3 went up and came down again: not applied.
            sql.push(format!(
                "INSERT INTO {table} (version_id, is_applied) VALUES (3, TRUE)"
            ));
            sql.push(format!(
                "INSERT INTO {table} (version_id, is_applied) VALUES (3, FALSE)"
            ));
        }
        "refinery" => {
            sql.push(format!(
                "CREATE TABLE IF NOT EXISTS {table} (version {} PRIMARY KEY, name VARCHAR(255), \
                 applied_on VARCHAR(255), checksum VARCHAR(255))",
                if pg { "INT4" } else { "INT" }
            ));
            for (i, v) in applied.iter().enumerate() {
                sql.push(format!(
                    "INSERT INTO {table} (version, name, applied_on, checksum) VALUES \
                     ({v}, 'create_t{}', '2024-01-01T00:00:00Z', '8150931219553470613')",
                    i + 1
                ));
            }
        }
        "diesel" => {
            sql.push(format!(
                "CREATE TABLE IF NOT EXISTS {table} (version VARCHAR(50) PRIMARY KEY NOT NULL, \
                 run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
            ));
            for v in applied {
                sql.push(format!("INSERT INTO {table} (version) VALUES ('{v}')"));
            }
        }
        "flyway" => {
            sql.push(format!(
                "CREATE TABLE {table} (installed_rank INT NOT NULL, version VARCHAR(50), \
                 description VARCHAR(200) NOT NULL, type VARCHAR(20) NOT NULL, script VARCHAR(1000) NOT NULL, \
                 checksum INT, installed_by VARCHAR(100) NOT NULL, installed_on TIMESTAMP NOT NULL DEFAULT {}, \
                 execution_time INT NOT NULL, success {} NOT NULL, PRIMARY KEY (installed_rank)){}",
                if pg { "now()" } else { "CURRENT_TIMESTAMP" },
                if pg { "BOOLEAN" } else { "BOOL" },
                if pg { "" } else { " ENGINE=InnoDB" }
            ));
            sql.push(format!("CREATE INDEX {table}_s_idx ON {table} (success)"));
            let row = |rank: usize,
                       version: &str,
                       description: &str,
                       kind: &str,
                       script: &str,
                       success: &str| {
                format!(
                    "INSERT INTO {table} (installed_rank, version, description, type, script, checksum, \
                     installed_by, execution_time, success) VALUES ({rank}, {version}, '{description}', \
                     '{kind}', '{script}', 1234, 'app', 12, {success})"
                )
            };
            sql.push(row(
                0,
                "'0'",
                "<< Flyway Schema Creation >>",
                "SCHEMA",
                "\"public\"",
                "TRUE",
            ));
            for (i, v) in applied.iter().enumerate() {
                let success = if i + 1 == applied.len() { ok } else { "TRUE" };
                let script = format!("V{v}__create_t{}.sql", i + 1);
                sql.push(row(
                    i + 1,
                    &format!("'{v}'"),
                    "create t",
                    "SQL",
                    &script,
                    success,
                ));
            }
            // A repeatable migration: no version, not a versioned migration.
            sql.push(row(
                applied.len() + 1,
                "NULL",
                "views",
                "SQL",
                "R__views.sql",
                "TRUE",
            ));
        }
        other => panic!("no history for {other}"),
    }
    sql.join(";\n")
}
