//! A project directory for black-box runs against SQLite: every test gets its own
//! [`Project`], a scratch directory holding a `migrations/` directory, used as the working
//! directory of every `dirthara` it runs.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use tempfile::TempDir;

use super::run::{run_command, Run};
use super::{dirthara_command, scratch_dir};

/// Upper bound for one `dirthara` run: no test may hang the suite.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// A temporary project directory with a `migrations/` directory in it.
pub(crate) struct Project {
    dir: TempDir,
}

impl Default for Project {
    fn default() -> Self {
        Self::new()
    }
}

impl Project {
    pub(crate) fn new() -> Self {
        let dir = scratch_dir();
        fs::create_dir(dir.path().join("migrations")).expect("create migrations/");
        Project { dir }
    }

    /// The project's root (the working directory of every run).
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `<root>/<rel>`.
    pub(crate) fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path().join(rel)
    }

    /// `<root>/migrations`.
    pub(crate) fn migrations_dir(&self) -> PathBuf {
        self.join("migrations")
    }

    /// Writes `contents` to `<root>/<rel>`, creating parent directories.
    pub(crate) fn write(&self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create parent directory");
        }
        fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// Writes `migrations/<file_name>`.
    pub(crate) fn migration(&self, file_name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        self.write(Path::new("migrations").join(file_name), contents)
    }

    /// Writes `migrations/<version>_<name>.up.sql` and `.down.sql`.
    pub(crate) fn reversible(&self, version: i64, name: &str, up: &str, down: &str) {
        self.migration(&format!("{version}_{name}.up.sql"), up);
        self.migration(&format!("{version}_{name}.down.sql"), down);
    }

    /// Writes a reversible migration that creates table `table` (and drops it on the way down).
    pub(crate) fn table_migration(&self, version: i64, name: &str, table: &str) {
        self.reversible(
            version,
            name,
            &format!("CREATE TABLE {table} (id INTEGER PRIMARY KEY);\n"),
            &format!("DROP TABLE {table};\n"),
        );
    }

    /// Writes `migrations/<version>_<name>.sql`, an up-only (irreversible) migration.
    pub(crate) fn irreversible(&self, version: i64, name: &str, up: &str) {
        self.migration(&format!("{version}_{name}.sql"), up);
    }

    /// Removes `<root>/<rel>` (a file).
    pub(crate) fn remove(&self, rel: impl AsRef<Path>) {
        let path = self.join(rel);
        fs::remove_file(&path).unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
    }

    /// Whether `<root>/<rel>` exists.
    pub(crate) fn exists(&self, rel: impl AsRef<Path>) -> bool {
        self.join(rel).exists()
    }

    /// The file names in `<root>/<rel>`, sorted.
    pub(crate) fn list(&self, rel: impl AsRef<Path>) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.join(rel))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// A `dirthara` command with this project as its working directory, a clean environment
    /// (see [`scrub_env`](super::scrub_env)), stdin not a terminal, and a timeout.
    pub(crate) fn cmd(&self) -> Command {
        let mut cmd = Command::from_std(dirthara_command());
        cmd.current_dir(self.path()).timeout(RUN_TIMEOUT);
        cmd
    }

    /// Runs `dirthara <args>` in this project.
    #[track_caller]
    pub(crate) fn run(&self, args: &[&str]) -> Run {
        run_command(self.cmd().args(args))
    }

    /// Runs `dirthara -d sqlite:<db> <args>` (locking left at its default).
    #[track_caller]
    pub(crate) fn sqlite(&self, db: &str, args: &[&str]) -> Run {
        let url = format!("sqlite:{db}");
        run_command(self.cmd().args(["-d", url.as_str()]).args(args))
    }

    /// Runs `dirthara -d sqlite:<db> --no-lock <args>`.
    #[track_caller]
    pub(crate) fn unlocked(&self, db: &str, args: &[&str]) -> Run {
        let url = format!("sqlite:{db}");
        run_command(
            self.cmd()
                .args(["-d", url.as_str(), "--no-lock"])
                .args(args),
        )
    }

    /// `status --output json` of `db` (unlocked), as `(version, state, batch)` rows.
    #[track_caller]
    pub(crate) fn states(&self, db: &str) -> Vec<(i64, String, Option<i64>)> {
        let run = self.unlocked(db, &["status", "--output", "json"]);
        run.success();
        let doc = run.json();
        doc["migrations"]
            .as_array()
            .unwrap_or_else(|| panic!("status has no `migrations` array: {doc}"))
            .iter()
            .map(|m| {
                (
                    m["version"].as_i64().expect("version is a number"),
                    m["state"].as_str().expect("state is a string").to_string(),
                    m["batch"].as_i64(),
                )
            })
            .collect()
    }

    /// The tables of the SQLite database `<root>/<db>` (see [`sqlite_tables`]).
    pub(crate) fn tables(&self, db: &str) -> Vec<String> {
        sqlite_tables(&self.join(db))
    }
}

/// The names of the tables in a SQLite database file, asked of SQLite itself (sqlx's driver,
/// as dirthara uses it). A missing or empty file has no tables, and is not created.
pub(crate) fn sqlite_tables(path: &Path) -> Vec<String> {
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{ConnectOptions, Connection, Row};
    if fs::metadata(path).map(|m| m.len() == 0).unwrap_or(true) {
        return Vec::new();
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut conn = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(false)
            .connect()
            .await
            .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let rows = sqlx::query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("read the schema of {}: {e}", path.display()));
        let _ = conn.close().await;
        rows.iter().map(|row| row.get::<String, _>(0)).collect()
    })
}
