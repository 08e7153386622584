//! Loading migrations from directories: every refusal of bad input, all reported at once.
//!
//! Everything here happens before any database is touched, so a typo in a file name costs
//! nothing but an error message; and one run names every bad file, not only the first.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

pub use crate::commands::{is_blank_commands, parse_commands, Commands};
pub use crate::directives::{parse_directives, valid_connection_name, Header};
pub use crate::names::check_name;

pub use crate::layout::Layout;
use crate::layout::{self, describe, is_flyway_name, Entry};
use crate::migration::{checksum, Migration, StepFormat, DEFAULT_CONNECTION};
use crate::names::{format_of, looks_like_migration, Role};
use crate::{Problem, SourceError};

type Result<T, E = SourceError> = std::result::Result<T, E>;

/// Something in a migration directory that looks like a migration but was not loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

/// The migrations of a set of directories, and what was skipped there (for warnings).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Loaded {
    pub migrations: Vec<Migration>,
    pub skipped: Vec<Skipped>,
}

/// One step of a migration as found on disk, before its pair is known.
#[derive(Debug)]
pub(crate) struct Part {
    pub version: i64,
    pub name: String,
    pub role: Role,
    pub format: StepFormat,
    pub path: PathBuf,
    /// The step's text when the layout already read it (a section of a file).
    pub text: Option<String>,
    /// The layout turned the transaction off (goose `NO TRANSACTION`, dbmate
    /// `transaction:false`, Diesel `run_in_transaction = false`).
    pub no_transaction: bool,
}

/// What one loading run found wrong, and what it skipped.
#[derive(Default)]
pub(crate) struct Findings {
    pub problems: Vec<Problem>,
    pub skipped: Vec<Skipped>,
}

impl Findings {
    pub fn problem(&mut self, file: impl Into<PathBuf>, reason: impl Into<String>) {
        self.problems.push(Problem {
            file: file.into(),
            reason: reason.into(),
        });
    }

    pub fn skip(&mut self, path: impl Into<PathBuf>, reason: impl Into<String>) {
        self.skipped.push(Skipped {
            path: path.into(),
            reason: reason.into(),
        });
    }
}

/// Loads every migration in `directories`, in order, and validates the set as a whole.
///
/// Files whose extension is not `.sql` or `.json` are ignored (a `README.md` may live beside
/// the migrations); such a file whose name does not parse is an error, never silently skipped.
pub fn load_directories(directories: &[PathBuf]) -> Result<Vec<Migration>> {
    load_directories_reporting(directories).map(|loaded| loaded.migrations)
}

/// [`load_directories`], also returning what looks like a migration but was not loaded.
/// `Err` lists every bad file at once.
pub fn load_directories_reporting(directories: &[PathBuf]) -> Result<Loaded> {
    let sources: Vec<(PathBuf, Option<Layout>)> =
        directories.iter().map(|d| (d.clone(), None)).collect();
    load_sources(&sources)
}

/// [`load_directories_reporting`] with each directory's layout: `None` detects it from the
/// files (a directory mixing layouts is refused, naming the files), `Some` requires it.
pub fn load_sources(sources: &[(PathBuf, Option<Layout>)]) -> Result<Loaded> {
    let mut findings = Findings::default();
    let mut parts = Vec::new();
    for (dir, layout) in sources {
        parts.extend(scan_directory(dir, *layout, &mut findings)?);
    }
    let migrations = assemble(parts, &mut findings);
    if findings.problems.is_empty() {
        Ok(Loaded {
            migrations,
            skipped: findings.skipped,
        })
    } else {
        Err(SourceError::Invalid(findings.problems))
    }
}

/// What the directory listing says an entry is, so that no `stat` per file is needed: the
/// kernel hands the type over with the name (`d_type`). Only a symbolic link (or a file
/// system that does not report types) costs a `stat`, to see what it points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    File,
    Dir,
    Other,
}

fn kind_of(entry: &fs::DirEntry) -> Kind {
    let listed = entry.file_type().ok();
    let file_type = match listed {
        Some(t) if !t.is_symlink() => Some(t),
        _ => fs::metadata(entry.path()).ok().map(|m| m.file_type()),
    };
    match file_type {
        Some(t) if t.is_file() => Kind::File,
        Some(t) if t.is_dir() => Kind::Dir,
        _ => Kind::Other,
    }
}

/// The entries of `dir` with their kinds, sorted so that messages come in a stable order.
fn entries(dir: &Path) -> Result<Vec<(PathBuf, Kind)>> {
    let read = fs::read_dir(dir).map_err(|e| SourceError::Directory {
        dir: dir.to_path_buf(),
        message: format!(
            "cannot read migration directory `{}`: {e}. Create it (`dirthara new <name>` does), or \
             point --dir / `directories` at the right place",
            dir.display()
        ),
    })?;
    let mut paths = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| SourceError::Directory {
            dir: dir.to_path_buf(),
            message: format!("cannot list migration directory `{}`: {e}", dir.display()),
        })?;
        paths.push((entry.path(), kind_of(&entry)));
    }
    paths.sort();
    Ok(paths)
}

fn scan_directory(
    dir: &Path,
    wanted: Option<Layout>,
    findings: &mut Findings,
) -> Result<Vec<Part>> {
    let mut found: Vec<(PathBuf, Entry)> = Vec::new();
    for (path, kind) in entries(dir)? {
        let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else {
            if path
                .extension()
                .is_some_and(|ext| ext == "sql" || ext == "json")
            {
                findings.problem(&path, "the file name is not valid UTF-8; rename it");
            }
            continue;
        };
        if file_name.starts_with('.') {
            continue;
        }
        if kind == Kind::Dir {
            if !path.join("up.sql").is_file() {
                continue;
            }
            if wanted.is_some_and(|w| w != Layout::Diesel) {
                findings.skip(
                    &path,
                    "a folder with `up.sql` (Diesel's layout), but the directory is configured with \
                     another `format`",
                );
            } else if let Some(entry) = layout::diesel(&path, file_name, findings) {
                found.push((path, entry));
            }
            continue;
        }
        if format_of(file_name).is_none() {
            if looks_like_migration(file_name) {
                findings.skip(
                    &path,
                    "named like a migration, but only `.sql` and `.json` files are loaded; rename it \
                     if it is meant to run",
                );
            }
            continue;
        }
        if kind != Kind::File {
            findings.problem(&path, "is not a regular file");
            continue;
        }
        let entry = if is_flyway_name(file_name) {
            layout::flyway(&path, file_name, findings)
        } else {
            layout::plain_or_sectioned(&path, file_name, findings)
        };
        found.extend(entry.map(|e| (path, e)));
    }
    let layouts: std::collections::BTreeSet<Layout> = found.iter().map(|(_, e)| e.layout).collect();
    if let Some(wanted) = wanted {
        let mut parts = Vec::new();
        for (path, entry) in found {
            if entry.layout == wanted {
                parts.extend(entry.parts);
            } else {
                findings.problem(
                    &path,
                    format!(
                        "is a {} migration, but `{}` is configured with `format` {wanted}; move it \
                         to a directory of its own layout",
                        entry.layout,
                        dir.display()
                    ),
                );
            }
        }
        return Ok(parts);
    }
    if layouts.len() > 1 {
        let listed: Vec<(PathBuf, Layout)> =
            found.iter().map(|(p, e)| (p.clone(), e.layout)).collect();
        findings.problem(
            dir,
            format!(
                "mixes migration layouts: {}; one directory holds one tool's layout, so move each \
                 set into a directory of its own (or name the layout with `format` in dirthara.toml)",
                describe(&listed)
            ),
        );
        return Ok(Vec::new());
    }
    Ok(found.into_iter().flat_map(|(_, e)| e.parts).collect())
}

/// Groups parts by version, pairs ups with downs, and reports every inconsistency.
fn assemble(parts: Vec<Part>, findings: &mut Findings) -> Vec<Migration> {
    let mut by_version: BTreeMap<i64, (Option<Part>, Option<Part>)> = BTreeMap::new();
    for part in parts {
        let slot = by_version.entry(part.version).or_default();
        let (place, other) = match part.role {
            Role::Up | Role::UpOnly => (&mut slot.0, &slot.1),
            Role::Down => (&mut slot.1, &slot.0),
        };
        let clash = place
            .as_ref()
            .or(other.as_ref().filter(|o| o.name != part.name));
        if let Some(existing) = clash {
            let reason = duplicate_version(part.version, &existing.path, &part.path);
            findings.problem(&part.path, reason);
            continue;
        }
        *place = Some(part);
    }

    let mut migrations = Vec::with_capacity(by_version.len());
    for (version, pair) in by_version {
        let (up, down) = match pair {
            (Some(up), down) => (up, down),
            (None, Some(down)) => {
                findings.problem(
                    &down.path,
                    format!(
                        "a down step without its up step; add `{version}_{}.up.sql` beside it or remove it",
                        down.name
                    ),
                );
                continue;
            }
            (None, None) => continue,
        };
        if let Some(migration) = build(version, up, down, findings) {
            migrations.push(migration);
        }
    }
    migrations
}

/// One migration from its up and optional down part, or `None` after reporting why not.
fn build(
    version: i64,
    mut up: Part,
    mut down: Option<Part>,
    findings: &mut Findings,
) -> Option<Migration> {
    let before = findings.problems.len();
    if let Some(down) = &down {
        if up.role == Role::UpOnly {
            findings.problem(
                &down.path,
                format!(
                    "`{}` is an up-only migration; rename it to `{version}_{}.up.sql` to pair it \
                     with this down step",
                    file_name(&up.path),
                    up.name
                ),
            );
        } else if down.format != up.format {
            findings.problem(
                &down.path,
                format!(
                    "its up step `{}` is written in another format; both steps of a migration \
                     are `.sql` or both are `.json`",
                    file_name(&up.path)
                ),
            );
        }
    }
    let up_text = read_step(&mut up, false, findings);
    let down_text = down.as_mut().and_then(|d| read_step(d, true, findings));
    let (up_text, up_header) = up_text?;
    let mut migration = Migration {
        version,
        checksum: checksum(&up_text),
        up: up_text,
        down: None,
        transactional: !up_header.no_transaction,
        connection: up_header
            .connection
            .clone()
            .unwrap_or_else(|| DEFAULT_CONNECTION.to_string()),
        origin: up.path.display().to_string(),
        format: up.format,
        name: up.name,
        own_transaction: None,
        down_is_blank: false,
    };
    if let (Some(down), Some((down_text, down_header))) = (&down, down_text) {
        if down_header.connection.is_some() && down_header.connection != up_header.connection {
            findings.problem(
                &down.path,
                format!(
                    "declares connection `{}` but its up step runs on `{}`; both steps of a \
                     migration run on one connection",
                    down_header.connection.as_deref().unwrap_or_default(),
                    migration.connection
                ),
            );
        }
        migration.transactional &= !down_header.no_transaction;
        migration.down = Some(down_text);
    }
    (findings.problems.len() == before).then_some(migration)
}

fn duplicate_version(version: i64, first: &Path, second: &Path) -> String {
    format!(
        "two migrations have version {version}: `{}` and `{}`; give one of them a new version",
        first.display(),
        second.display()
    )
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A step's text and header, or `None` after reporting why not. A blank down step (empty,
/// only comments, or `[]`) is a deliberate "reverses nothing"; a blank up step is an error.
fn read_step(part: &mut Part, down: bool, findings: &mut Findings) -> Option<(String, Header)> {
    let text = match part.text.take().map_or_else(|| read_text(&part.path), Ok) {
        Ok(text) => text,
        Err(reason) => {
            findings.problem(&part.path, reason);
            return None;
        }
    };
    match step_header(part.format, &text, down) {
        Ok(mut header) => {
            header.no_transaction |= part.no_transaction;
            Some((text, header))
        }
        Err(reason) => {
            findings.problem(&part.path, reason);
            None
        }
    }
}

pub(crate) fn read_text(path: &Path) -> std::result::Result<String, String> {
    let bytes = read_regular_file(path).map_err(|e| format!("cannot read: {e}"))?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "is not valid UTF-8 (invalid byte at offset {}); save it as UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Bytes read at once; a migration file is nearly always smaller, so it costs one `read`.
const READ_CHUNK: usize = 64 * 1024;

/// The whole of a regular file in one `open`, usually one `read`, and a `close`.
///
/// `fs::read` asks for the size first (a `statx`) and then reads until a `read` returns 0
/// (two `read`s). Neither is needed for a regular file: POSIX lets `read` on one return fewer
/// bytes than asked only at the end of the file (or when a signal interrupts a read that had
/// already transferred data, which a local file system does not do mid-page), so a short read
/// is the end. Only a file that fills the buffer is read on.
pub(crate) fn read_regular_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    thread_local! {
        // Zeroed once per thread, not once per file.
        static CHUNK: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; READ_CHUNK]);
    }
    let mut file = fs::File::open(path)?;
    CHUNK.with_borrow_mut(|chunk| {
        let mut bytes = Vec::new();
        loop {
            let n = match file.read(chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            bytes.extend_from_slice(&chunk[..n]);
            if n < chunk.len() {
                return Ok(bytes);
            }
        }
    })
}

/// A step's header: SQL directives, or what a JSON command file declares about itself.
pub(crate) fn step_header(
    format: StepFormat,
    text: &str,
    down: bool,
) -> std::result::Result<Header, String> {
    let empty = text.trim_start_matches('\u{feff}').trim().is_empty();
    if empty && !down {
        return Err("is empty; write the migration's statements in it or delete it".into());
    }
    match format {
        StepFormat::Sql | StepFormat::Rust => parse_directives(text),
        StepFormat::MongoCommands if down && is_blank_commands(text) => Ok(Header::default()),
        StepFormat::MongoCommands => {
            let commands = parse_commands(text)?;
            Ok(Header {
                no_transaction: !commands.transaction,
                connection: commands.connection,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_of_any_size_read_whole_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        for size in [
            0,
            1,
            READ_CHUNK - 1,
            READ_CHUNK,
            READ_CHUNK + 1,
            3 * READ_CHUNK + 7,
        ] {
            let path = dir.path().join(format!("{size}.sql"));
            let bytes: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
            fs::write(&path, &bytes).unwrap();
            assert_eq!(read_regular_file(&path).unwrap(), bytes, "size {size}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_migration_is_followed_and_a_dangling_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        fs::write(elsewhere.path().join("real.sql"), "SELECT 1;").unwrap();
        std::os::unix::fs::symlink(
            elsewhere.path().join("real.sql"),
            dir.path().join("1_linked.sql"),
        )
        .unwrap();
        let loaded = load_directories(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(loaded[0].up, "SELECT 1;");

        std::os::unix::fs::symlink(dir.path().join("gone.sql"), dir.path().join("2_gone.sql"))
            .unwrap();
        let err = load_directories(&[dir.path().to_path_buf()]).unwrap_err();
        assert!(err.to_string().contains("is not a regular file"), "{err}");
    }
}
