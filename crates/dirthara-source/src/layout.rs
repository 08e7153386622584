//! Other tools' layouts: which tool's files a directory holds, and how each file becomes
//! the up and down parts of a migration. Every part then goes through the same validation,
//! directives and checksum as dirthara's own files (see [`crate::files`]).

use std::path::{Path, PathBuf};

use crate::files::found::{Findings, Part};
use crate::files::read::read_text;
use crate::names::{check_name, format_of, parse_plain, parse_version, Role};
use crate::vocabulary::StepFormat;
pub use crate::vocabulary::{DirectoryLayout, Layout};

mod sections;
use sections::{dbmate_sections, goose_sections};

/// How to declare `dir` Flyway's, so that its `U<n>__` files are undo steps: the words the
/// advice about a `V<n>__` directory ends with.
///
/// ```
/// let how = dirthara_source::files::declare_flyway(std::path::Path::new("db"));
/// assert!(how.contains(r#"directories = [{ path = "db", format = "flyway" }]"#));
/// ```
pub fn declare_flyway(dir: &Path) -> String {
    format!(
        "declare the layout in dirthara.toml: `directories = [{{ path = \"{}\", format = \"flyway\" }}]`",
        dir.display().to_string().replace('\\', "/")
    )
}

/// Why an up step that sends nothing is refused, and where its statements go in `layout`.
///
/// Recording it would mark the migration applied while changing nothing, and the SQL
/// written into it afterwards would then fail `CHECKSUM_MISMATCH`: the first trap of an
/// unedited `dirthara new` template.
pub fn empty_up(layout: Option<Layout>) -> String {
    let fix = match layout {
        Some(Layout::Dbmate) => "write its statements below `-- migrate:up`, or delete the file",
        Some(Layout::Goose) => "write its statements below `-- +goose Up`, or delete the file",
        _ => "write the migration's statements in it, or delete it",
    };
    format!(
        "empty up: it has nothing to run (only comments, whitespace or `;`), so applying it \
         would record the migration and change nothing; {fix}"
    )
}

/// The parts one directory entry holds, and the layout they belong to.
pub(crate) struct Entry {
    pub layout: Layout,
    pub parts: Vec<Part>,
}

fn part(
    parsed: (i64, String, Role),
    format: StepFormat,
    path: &Path,
    text: Option<String>,
) -> Part {
    Part {
        version: parsed.0,
        name: parsed.1,
        role: parsed.2,
        format,
        path: path.to_path_buf(),
        text,
        no_transaction: false,
        layout: None,
        lines: (1, Vec::new()),
        envsub: Vec::new(),
        repeatable: false,
        baseline: false,
    }
}

/// A baseline migration, `B<V>__<name>.sql` (or `.json`), in any layout: what `dirthara
/// squash --to V` writes, named as Flyway names its baseline migrations. `None` for a name
/// that does not start with `B` and a digit.
pub(crate) fn baseline(path: &Path, file_name: &str, findings: &mut Findings) -> Option<Part> {
    let rest = file_name.strip_prefix('B')?;
    if !rest.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let format = crate::names::format_of(file_name)?;
    let stem = rest.rsplit_once('.').map_or(rest, |(stem, _)| stem);
    let parsed = stem
        .split_once("__")
        .ok_or_else(|| "no `__` after the version".to_string())
        .and_then(|(v, name)| Ok((parse_version(v)?, name)))
        .and_then(|(v, name)| check_name(name).map(|()| (v, name)));
    match parsed {
        Ok((version, name)) => {
            let mut part = part((version, name.into(), Role::UpOnly), format, path, None);
            part.baseline = true;
            Some(part)
        }
        Err(reason) => {
            findings.problem(
                path,
                format!(
                    "{reason}: a baseline migration is `B<version>__<name>.sql` (`.json` for \
                     MongoDB), as `dirthara squash --to <version>` writes it"
                ),
            );
            None
        }
    }
}

/// A repeatable migration, `R__<name>.sql` (or `.json`), in any layout: Flyway's name for
/// it, which no versioned name of any layout starts with. `None` for any other name.
pub(crate) fn repeatable(path: &Path, file_name: &str, findings: &mut Findings) -> Option<Part> {
    let rest = file_name.strip_prefix("R__")?;
    let format = crate::names::format_of(file_name)?;
    let name = rest.rsplit_once('.').map_or(rest, |(stem, _)| stem);
    if let Err(reason) = check_name(name) {
        findings.problem(
            path,
            format!("{reason}: a repeatable migration is `R__<name>.sql` (`.json` for MongoDB)"),
        );
        return None;
    }
    let mut part = part((0, name.into(), Role::UpOnly), format, path, None);
    part.repeatable = true;
    if format == StepFormat::Sql {
        part.no_transaction = flyway_script_config(path, findings)?;
    }
    Some(part)
}

/// A Diesel folder: `<version>_<name>/up.sql` (+ `down.sql`); the version's dashes
/// (`2022-07-27-110000`) are dropped, which keeps the order of Diesel's timestamps.
pub(crate) fn diesel(dir: &Path, folder: &str, findings: &mut Findings) -> Option<Entry> {
    let (version, name) = match folder.split_once('_') {
        Some((v, name)) => (v.replace('-', ""), name),
        None => (String::new(), folder),
    };
    let parsed = parse_version(&version)
        .and_then(|v| check_name(name).map(|()| v))
        .map_err(|reason| {
            format!("{reason}: a Diesel migration folder is `<version>_<name>`, e.g. `2024-01-01-120000_create_users`")
        });
    let version = match parsed {
        Ok(v) => v,
        Err(reason) => {
            findings.problem(dir, reason);
            return None;
        }
    };
    // Diesel's `metadata.toml` may turn the transaction off for the migration.
    let no_transaction = std::fs::read_to_string(dir.join("metadata.toml")).is_ok_and(|t| {
        t.lines()
            .any(|l| l.split_whitespace().collect::<String>() == "run_in_transaction=false")
    });
    let mut parts = vec![part(
        (version, name.into(), Role::Up),
        StepFormat::Sql,
        &dir.join("up.sql"),
        None,
    )];
    if dir.join("down.sql").is_file() {
        parts.push(part(
            (version, name.into(), Role::Down),
            StepFormat::Sql,
            &dir.join("down.sql"),
            None,
        ));
    }
    for p in &mut parts {
        p.no_transaction = no_transaction;
    }
    Some(Entry {
        layout: Layout::Diesel,
        parts,
    })
}

/// Flyway: `V<n>__<name>.sql` (up), `U<n>__<name>.sql` (undo, as the down step); dotted
/// versions are refused. Repeatable `R__` files are every layout's ([`repeatable`]).
pub(crate) fn flyway(path: &Path, file_name: &str, findings: &mut Findings) -> Option<Entry> {
    let stem = file_name.strip_suffix(".sql")?;
    let (kind, rest) = stem.split_at(1);
    let (version, name) = rest.split_once("__")?;
    let role = match kind {
        "V" => Role::Up,
        "U" => Role::Down,
        _ => return None,
    };
    if version.contains(['.', '_']) {
        findings.problem(
            path,
            format!(
                "the dotted Flyway version `{version}` has no integer that keeps Flyway's order for \
                 every later file; rename it (and its `U` file) to an integer version that sorts \
                 where it belongs, e.g. `{kind}{}__{name}.sql`, keeping later versions larger",
                version.replace(['.', '_'], "0")
            ),
        );
        return None;
    }
    match parse_version(version).and_then(|v| check_name(name).map(|()| v)) {
        Ok(v) => {
            let mut part = part((v, name.into(), role), StepFormat::Sql, path, None);
            part.no_transaction = flyway_script_config(path, findings)?;
            Some(Entry {
                layout: Layout::Flyway,
                parts: vec![part],
            })
        }
        Err(reason) => {
            findings.problem(
                path,
                format!("{reason}: a Flyway migration is `V<version>__<name>.sql`"),
            );
            None
        }
    }
}

/// The extension of Flyway's script configuration file, `V1__x.sql.conf` beside `V1__x.sql`.
pub(crate) const SCRIPT_CONFIG_SUFFIX: &str = ".conf";

/// Flyway's script configuration of `script`, the `<script>.conf` beside it, if there is one:
/// whether it runs the script outside a transaction (`executeInTransaction=false`, as Flyway
/// runs it). `encoding` may say UTF-8, what dirthara reads anyway. Any other key is refused,
/// naming it: the script would otherwise run differently from Flyway without a word. `None`
/// after reporting why the file is refused.
fn flyway_script_config(script: &Path, findings: &mut Findings) -> Option<bool> {
    let mut config = script.as_os_str().to_owned();
    config.push(SCRIPT_CONFIG_SUFFIX);
    let config = PathBuf::from(config);
    if !config.is_file() {
        return Some(false);
    }
    let text = match read_text(&config) {
        Ok(text) => text,
        Err(reason) => {
            findings.problem(&config, reason);
            return None;
        }
    };
    let mut outside = false;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', '!']) {
            continue;
        }
        let at = number + 1;
        let Some((key, value)) = line.split_once('=') else {
            findings.problem(&config, format!("line {at}: `{line}` is not `key=value`"));
            return None;
        };
        let (key, value) = (key.trim(), value.trim());
        let refused = match key {
            "executeInTransaction" if value.eq_ignore_ascii_case("false") => {
                outside = true;
                None
            }
            "executeInTransaction" if value.eq_ignore_ascii_case("true") => None,
            "executeInTransaction" => Some(format!("`{value}` is neither true nor false")),
            "encoding" if matches!(value.to_ascii_uppercase().as_str(), "UTF-8" | "UTF8") => None,
            "encoding" => Some(format!(
                "dirthara reads migrations as UTF-8, not `{value}`; convert the script and write \
                 encoding=UTF-8 (or remove the line)"
            )),
            other => Some(format!(
                "`{other}` is a Flyway script setting dirthara does not apply (it applies \
                 `executeInTransaction` and `encoding`); remove it, or keep running this \
                 migration with Flyway"
            )),
        };
        if let Some(reason) = refused {
            findings.problem(&config, format!("line {at}: {reason}"));
            return None;
        }
    }
    Some(outside)
}

/// Whether a folder name reads as a Diesel migration's: `<version>_<name>`, the version
/// digits with Diesel's dashes (`2024-01-01-120000_create_users`, `00000000000000_setup`).
pub(crate) fn is_diesel_name(folder: &str) -> bool {
    folder.split_once('_').is_some_and(|(version, name)| {
        version.starts_with(|c: char| c.is_ascii_digit())
            && version.bytes().all(|b| b.is_ascii_digit() || b == b'-')
            && !name.is_empty()
    })
}

/// Whether a file name is Flyway's (`V1__x.sql`, `U1__x.sql`, `R__x.sql`).
pub(crate) fn is_flyway_name(file_name: &str) -> bool {
    let mut chars = file_name.chars();
    matches!(chars.next(), Some('V' | 'U' | 'R'))
        && file_name.ends_with(".sql")
        && file_name[1..].split_once("__").is_some_and(|(v, _)| {
            v.chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == '_')
        })
}

/// A `<version>_<name>.sql|.json` or `.up/.down` file: plain, or a dbmate / goose file with
/// sections, told apart by its content.
pub(crate) fn plain_or_sectioned(
    path: &Path,
    file_name: &str,
    findings: &mut Findings,
) -> Option<Entry> {
    let parsed = match parse_plain(file_name) {
        Ok(parsed) => parsed,
        Err(reason) => {
            findings.problem(path, reason);
            return None;
        }
    };
    let key = (parsed.version, parsed.name.clone(), parsed.role);
    if parsed.role != Role::UpOnly || format_of(file_name) != Some(StepFormat::Sql) {
        return Some(Entry {
            layout: Layout::Plain,
            parts: vec![part(key, parsed.format, path, None)],
        });
    }
    let text = match read_text(path) {
        Ok(text) => text,
        Err(reason) => {
            findings.problem(path, reason);
            return None;
        }
    };
    let sections = if let Some(s) = dbmate_sections(&text) {
        Some((Layout::Dbmate, s))
    } else {
        goose_sections(&text).map(|s| (Layout::Goose, s))
    };
    let Some((layout, sections)) = sections else {
        return Some(Entry {
            layout: Layout::Plain,
            parts: vec![part(key, parsed.format, path, Some(text))],
        });
    };
    let sections = match sections {
        Ok(s) => s,
        Err(reason) => {
            findings.problem(path, reason);
            return None;
        }
    };
    let mut up = part(
        (key.0, key.1.clone(), Role::Up),
        StepFormat::Sql,
        path,
        Some(sections.up),
    );
    up.no_transaction = sections.up_no_transaction;
    up.lines = sections.up_lines;
    up.envsub = sections.up_envsub;
    let mut parts = vec![up];
    if let Some(down) = sections.down {
        let mut down = part(
            (key.0, key.1, Role::Down),
            StepFormat::Sql,
            path,
            Some(down),
        );
        down.no_transaction = sections.down_no_transaction;
        down.lines = sections.down_lines;
        down.envsub = sections.down_envsub;
        parts.push(down);
    }
    Some(Entry { layout, parts })
}

/// Where a directory's entries are, for messages.
pub(crate) fn describe(entries: &[(PathBuf, Layout)]) -> String {
    entries
        .iter()
        .map(|(p, l)| {
            format!(
                "`{}` ({l})",
                p.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
