//! Listing a migration directory and recognising each layout's entries in it.

use std::fs;
use std::path::{Path, PathBuf};

use super::found::{Findings, Part};
use crate::layout::{self, describe, is_flyway_name, DirectoryLayout, Entry, Layout};
use crate::names::{format_of, looks_like_migration};
use crate::SourceError;

type Result<T, E = SourceError> = std::result::Result<T, E>;

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
    let mut listed = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| SourceError::Directory {
            dir: dir.to_path_buf(),
            message: format!("cannot list migration directory `{}`: {e}", dir.display()),
        })?;
        listed.push((entry.file_name(), kind_of(&entry)));
    }
    // By name, as bytes: the order of the paths (they share `dir`), for a fraction of the
    // cost — comparing paths splits both into components at every comparison, which was a
    // quarter of a no-op `migrate`'s instructions with 1,000 migrations.
    listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(listed
        .into_iter()
        .map(|(name, kind)| (dir.join(name), kind))
        .collect())
}

pub(super) fn scan_directory(
    dir: &Path,
    wanted: Option<Layout>,
    findings: &mut Findings,
) -> Result<Vec<Part>> {
    let mut found: Vec<(PathBuf, Entry)> = Vec::new();
    // Repeatable and baseline migrations belong to no layout: they take the directory's once
    // it is known.
    let mut repeatables: Vec<Part> = Vec::new();
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
                folder_without_up(&path, file_name, wanted, findings);
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
            // Flyway's script configuration is read with its script (`layout::flyway`).
            let script = file_name.strip_suffix(layout::SCRIPT_CONFIG_SUFFIX);
            if script.is_some_and(|script| is_flyway_name(script) && dir.join(script).is_file()) {
                continue;
            }
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
        if file_name.starts_with("R__") {
            repeatables.extend(layout::repeatable(&path, file_name, findings));
            continue;
        }
        if let Some(baseline) = layout::baseline(&path, file_name, findings) {
            repeatables.push(baseline);
            continue;
        }
        if file_name.starts_with('B') && file_name[1..].starts_with(|c: char| c.is_ascii_digit()) {
            continue; // a malformed baseline name, reported
        }
        let entry = if is_flyway_name(file_name) {
            layout::flyway(&path, file_name, findings)
        } else {
            layout::plain_or_sectioned(&path, file_name, findings)
        };
        found.extend(entry.map(|e| (path, e)));
    }
    let layouts: std::collections::BTreeSet<Layout> = found.iter().map(|(_, e)| e.layout).collect();
    let directory_layout = DirectoryLayout {
        layout: (wanted.or_else(|| layouts.first().copied())).unwrap_or(Layout::Plain),
        declared: wanted.is_some(),
    };
    for part in &mut repeatables {
        part.layout = Some(directory_layout);
    }
    for (_, entry) in &mut found {
        let layout = DirectoryLayout {
            layout: entry.layout,
            declared: wanted.is_some(),
        };
        for part in &mut entry.parts {
            part.layout = Some(layout);
        }
    }
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
        parts.append(&mut repeatables);
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
    let mut parts: Vec<Part> = found.into_iter().flat_map(|(_, e)| e.parts).collect();
    parts.append(&mut repeatables);
    Ok(parts)
}

/// A folder named like a Diesel migration (`2024-01-01-120000_x`, `0001_x`) with no `up.sql`
/// is never passed over in silence: one with only a `down.sql` is refused (a down step without
/// its up step), any other (`up.sq`, empty) is named in a warning with what it holds.
fn folder_without_up(path: &Path, name: &str, wanted: Option<Layout>, findings: &mut Findings) {
    if !layout::is_diesel_name(name) {
        return;
    }
    let held = folder_entries(path);
    if wanted.is_some_and(|w| w != Layout::Diesel) {
        findings.skip(
            path,
            format!(
                "a folder named like a Diesel migration (holding {}), in a directory configured \
                 with another `format`",
                describe_entries(&held)
            ),
        );
    } else if held.iter().any(|n| n == "down.sql") {
        findings.problem(
            path,
            "a Diesel migration folder with `down.sql` but no `up.sql`; add `up.sql` with the \
             migration's statements, or remove the folder",
        );
    } else {
        findings.skip(
            path,
            format!(
                "a folder named like a Diesel migration, but without `up.sql` (it holds {}); \
                 name its forward step `up.sql` (and its reverse `down.sql`) if it is meant to run",
                describe_entries(&held)
            ),
        );
    }
}

/// The names in a folder, sorted (an unreadable folder holds nothing we can name).
fn folder_entries(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `nothing`, `` `up.sq` ``, `` `a`, `b` and 3 more ``.
fn describe_entries(names: &[String]) -> String {
    const SHOWN: usize = 3;
    if names.is_empty() {
        return "nothing".to_string();
    }
    let mut text = (names.iter().take(SHOWN))
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::fs;

    use crate::files::load_directories;

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
