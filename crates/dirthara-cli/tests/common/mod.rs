//! Shared helpers for the black-box tests of the `dirthara` binary.
//!
//! Every test gets its own [`Project`]: a temporary directory holding a `migrations/`
//! directory, used as the working directory of every `dirthara` it runs. The child's
//! environment is scrubbed of `DATABASE_URL` and `DIRTHARA_*`, so the developer's or CI's
//! settings never leak into a test.
//!
//! Include with `mod common;` from any file under `tests/`. Not every test file uses every
//! helper, hence the `dead_code` allowance.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use tempfile::TempDir;

/// Upper bound for one `dirthara` run: no test may hang the suite.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The path of the `dirthara` binary cargo built for these tests.
pub fn dirthara_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dirthara"))
}

/// A `dirthara` command run in `cwd`, with `DATABASE_URL` and every `DIRTHARA_*` variable
/// removed from its environment, `NO_COLOR` set, stdin not a terminal, and a timeout.
pub fn dirthara(cwd: impl AsRef<Path>) -> Command {
    let mut cmd = Command::new(dirthara_bin());
    cmd.current_dir(cwd.as_ref());
    cmd.env_remove("DATABASE_URL");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("DIRTHARA_") {
            cmd.env_remove(&key);
        }
    }
    cmd.env("NO_COLOR", "1");
    cmd.env_remove("RUST_BACKTRACE");
    cmd.timeout(RUN_TIMEOUT);
    cmd
}

/// The captured result of one run.
#[derive(Debug)]
pub struct Run {
    /// The exit code; `None` when the process was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The command line, for failure messages.
    pub command: String,
}

impl Run {
    fn context(&self) -> String {
        format!(
            "command: {}\nexit code: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command, self.code, self.stdout, self.stderr
        )
    }

    /// Asserts the exit code.
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(expected),
            "unexpected exit code\n{}",
            self.context()
        );
        self
    }

    /// Asserts exit code 0.
    #[track_caller]
    pub fn success(&self) -> &Self {
        self.code(0)
    }

    /// Asserts exit code 1 and an `Error [CODE]: ` line on stderr (and none on stdout).
    #[track_caller]
    pub fn error(&self, code: &str) -> &Self {
        self.code(1);
        let marker = format!("Error [{code}]: ");
        assert!(
            self.stderr.lines().any(|l| l.starts_with(&marker)),
            "expected a line starting with `{marker}` on stderr\n{}",
            self.context()
        );
        assert!(
            !self.stdout.contains("Error ["),
            "errors belong on stderr, not stdout\n{}",
            self.context()
        );
        self
    }

    /// Asserts a `warning [CODE]: ` line on stderr.
    #[track_caller]
    pub fn warning(&self, code: &str) -> &Self {
        let marker = format!("warning [{code}]: ");
        assert!(
            self.stderr.lines().any(|l| l.starts_with(&marker)),
            "expected a line starting with `{marker}` on stderr\n{}",
            self.context()
        );
        self
    }

    /// Asserts that stdout contains `text`.
    #[track_caller]
    pub fn stdout_has(&self, text: &str) -> &Self {
        assert!(
            self.stdout.contains(text),
            "expected stdout to contain {text:?}\n{}",
            self.context()
        );
        self
    }

    /// Asserts that stderr contains `text`.
    #[track_caller]
    pub fn stderr_has(&self, text: &str) -> &Self {
        assert!(
            self.stderr.contains(text),
            "expected stderr to contain {text:?}\n{}",
            self.context()
        );
        self
    }

    /// Asserts that neither stdout nor stderr contains `text`.
    #[track_caller]
    pub fn nowhere(&self, text: &str) -> &Self {
        assert!(
            !self.stdout.contains(text) && !self.stderr.contains(text),
            "{text:?} must not be printed\n{}",
            self.context()
        );
        self
    }

    /// Stdout parsed as exactly one JSON document.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not exactly one JSON document: {e}\n{}",
                self.context()
            )
        })
    }

    /// Stdout parsed as one JSON object per non-empty line.
    #[track_caller]
    pub fn ndjson(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| {
                    panic!("ndjson line {l:?} is not JSON: {e}\n{}", self.context())
                })
            })
            .collect()
    }
}

/// Runs `cmd` to completion and captures its output.
#[track_caller]
pub fn run_command(cmd: &mut Command) -> Run {
    let command = format!("{:?}", cmd);
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command}: {e}"));
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        command,
    }
}

/// A temporary project directory with a `migrations/` directory in it.
pub struct Project {
    dir: TempDir,
}

impl Default for Project {
    fn default() -> Self {
        Self::new()
    }
}

impl Project {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("dirthara-test-")
            .tempdir()
            .expect("create a temporary directory");
        fs::create_dir(dir.path().join("migrations")).expect("create migrations/");
        Project { dir }
    }

    /// The project's root (the working directory of every run).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `<root>/<rel>`.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path().join(rel)
    }

    /// `<root>/migrations`.
    pub fn migrations_dir(&self) -> PathBuf {
        self.join("migrations")
    }

    /// Writes `contents` to `<root>/<rel>`, creating parent directories.
    pub fn write(&self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create parent directory");
        }
        fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// Writes `migrations/<file_name>`.
    pub fn migration(&self, file_name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        self.write(Path::new("migrations").join(file_name), contents)
    }

    /// Writes `migrations/<version>_<name>.up.sql` and `.down.sql`.
    pub fn reversible(&self, version: i64, name: &str, up: &str, down: &str) {
        self.migration(&format!("{version}_{name}.up.sql"), up);
        self.migration(&format!("{version}_{name}.down.sql"), down);
    }

    /// Writes a reversible migration that creates table `table` (and drops it on the way down).
    pub fn table_migration(&self, version: i64, name: &str, table: &str) {
        self.reversible(
            version,
            name,
            &format!("CREATE TABLE {table} (id INTEGER PRIMARY KEY);\n"),
            &format!("DROP TABLE {table};\n"),
        );
    }

    /// Writes `migrations/<version>_<name>.sql`, an up-only (irreversible) migration.
    pub fn irreversible(&self, version: i64, name: &str, up: &str) {
        self.migration(&format!("{version}_{name}.sql"), up);
    }

    /// Removes `<root>/<rel>` (a file).
    pub fn remove(&self, rel: impl AsRef<Path>) {
        let path = self.join(rel);
        fs::remove_file(&path).unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
    }

    /// Whether `<root>/<rel>` exists.
    pub fn exists(&self, rel: impl AsRef<Path>) -> bool {
        self.join(rel).exists()
    }

    /// The file names in `<root>/<rel>`, sorted.
    pub fn list(&self, rel: impl AsRef<Path>) -> Vec<String> {
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

    /// A `dirthara` command with this project as its working directory.
    pub fn cmd(&self) -> Command {
        dirthara(self.path())
    }

    /// Runs `dirthara <args>` in this project.
    #[track_caller]
    pub fn run(&self, args: &[&str]) -> Run {
        run_command(self.cmd().args(args))
    }

    /// Runs `dirthara -d sqlite:<db> <args>` (locking left at its default).
    #[track_caller]
    pub fn sqlite(&self, db: &str, args: &[&str]) -> Run {
        let url = format!("sqlite:{db}");
        run_command(self.cmd().args(["-d", url.as_str()]).args(args))
    }

    /// Runs `dirthara -d sqlite:<db> --no-lock <args>`.
    #[track_caller]
    pub fn unlocked(&self, db: &str, args: &[&str]) -> Run {
        let url = format!("sqlite:{db}");
        run_command(
            self.cmd()
                .args(["-d", url.as_str(), "--no-lock"])
                .args(args),
        )
    }

    /// `status --output json` of `db` (unlocked), as `(version, state, batch)` rows.
    #[track_caller]
    pub fn states(&self, db: &str) -> Vec<(i64, String, Option<i64>)> {
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
    pub fn tables(&self, db: &str) -> Vec<String> {
        sqlite_tables(&self.join(db))
    }
}

/// The names of the tables in a SQLite database file, read straight from the file's schema
/// b-tree (`sqlite_schema`, rooted at page 1), so no SQLite library or `sqlite3` CLI is needed.
///
/// Only live cells are read (through each page's cell-pointer array), so dropped tables whose
/// bytes linger in free space are not reported. A missing or empty file has no tables. Panics
/// if the file is not a SQLite database, or if it has an uncheckpointed WAL, whose content
/// would be missed (dirthara closes its connections, so there is none after a run).
pub fn sqlite_tables(path: &Path) -> Vec<String> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal = PathBuf::from(wal);
    if fs::metadata(&wal).map(|m| m.len() > 0).unwrap_or(false) {
        panic!(
            "{} has a non-empty WAL; its schema cannot be read from the main file alone",
            path.display()
        );
    }
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("read {}: {e}", path.display()),
    };
    if bytes.is_empty() {
        return Vec::new();
    }
    assert!(
        bytes.len() >= 100 && &bytes[..16] == b"SQLite format 3\0",
        "{} is not a SQLite database",
        path.display()
    );
    let page_size = match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65_536,
        n => usize::from(n),
    };
    let mut entries = Vec::new();
    schema_page(&bytes, page_size, 1, &mut entries, 0);
    let mut tables: Vec<String> = entries
        .into_iter()
        .filter(|(kind, _)| kind == "table")
        .map(|(_, name)| name)
        .collect();
    tables.sort();
    tables
}

/// Collects `(type, name)` of every row of the table b-tree page `page_no`.
fn schema_page(
    bytes: &[u8],
    page_size: usize,
    page_no: usize,
    out: &mut Vec<(String, String)>,
    depth: usize,
) {
    assert!(depth < 32, "SQLite schema b-tree is implausibly deep");
    let page_start = (page_no - 1) * page_size;
    let header = page_start + if page_no == 1 { 100 } else { 0 };
    let kind = bytes[header];
    let cells = usize::from(u16::from_be_bytes([bytes[header + 3], bytes[header + 4]]));
    let pointers = header + if kind == 0x05 { 12 } else { 8 };
    let cell_offset = |i: usize| {
        page_start
            + usize::from(u16::from_be_bytes([
                bytes[pointers + 2 * i],
                bytes[pointers + 2 * i + 1],
            ]))
    };
    match kind {
        // Interior table page: each cell is a 4-byte left child and a rowid; then the right child.
        0x05 => {
            for i in 0..cells {
                let at = cell_offset(i);
                let child =
                    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
                schema_page(bytes, page_size, child as usize, out, depth + 1);
            }
            let right = u32::from_be_bytes([
                bytes[header + 8],
                bytes[header + 9],
                bytes[header + 10],
                bytes[header + 11],
            ]);
            schema_page(bytes, page_size, right as usize, out, depth + 1);
        }
        // Leaf table page: payload size, rowid, then the record (type, name, tbl_name, ...).
        0x0d => {
            for i in 0..cells {
                let mut at = cell_offset(i);
                let (_payload, n) = varint(&bytes[at..]);
                at += n;
                let (_rowid, n) = varint(&bytes[at..]);
                at += n;
                let record = at;
                let (header_len, n) = varint(&bytes[record..]);
                let mut cursor = record + n;
                let mut serial_types = Vec::new();
                while cursor < record + header_len as usize && serial_types.len() < 2 {
                    let (serial, n) = varint(&bytes[cursor..]);
                    serial_types.push(serial);
                    cursor += n;
                }
                let mut body = record + header_len as usize;
                let mut columns = Vec::new();
                for serial in serial_types {
                    let len = serial_len(serial);
                    let text = if serial >= 13 && serial % 2 == 1 {
                        String::from_utf8_lossy(&bytes[body..body + len]).into_owned()
                    } else {
                        String::new()
                    };
                    columns.push(text);
                    body += len;
                }
                if let [kind, name] = columns.as_slice() {
                    out.push((kind.clone(), name.clone()));
                }
            }
        }
        other => panic!("unexpected SQLite b-tree page type {other:#x} in the schema"),
    }
}

/// SQLite's big-endian varint: up to 9 bytes, 7 bits each (8 in the ninth).
fn varint(bytes: &[u8]) -> (u64, usize) {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(9).enumerate() {
        if i == 8 {
            return ((value << 8) | u64::from(b), 9);
        }
        value = (value << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return (value, i + 1);
        }
    }
    (value, bytes.len().min(9))
}

/// The byte length of a record column of the given serial type.
fn serial_len(serial: u64) -> usize {
    match serial {
        0 | 8 | 9 | 10 | 11 => 0,
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5 => 6,
        6 | 7 => 8,
        n => ((n - 12) / 2) as usize,
    }
}
