//! `dirthara new`: the next migration's files, written in the layout of the directory they
//! go to (configured with `format`, or detected from the files already there), so a project
//! still shared with its previous tool keeps one layout per directory.

use std::io::Write;
use std::path::{Path, PathBuf};

use dirthara::Layout;
use dirthara_source::files::check_name;

use crate::error::{CliError, IoAction, NewRefused};

/// What `new` writes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Template {
    Sql,
    Mongo,
}

impl Template {
    fn ext(self) -> &'static str {
        match self {
            Template::Sql => "sql",
            Template::Mongo => "json",
        }
    }

    fn body(self, name: &str, what: &str) -> String {
        match self {
            Template::Sql => format!("-- {name}: {what}\n"),
            // JSON has no comments; an empty command list is refused until it is filled in.
            Template::Mongo => "[]\n".to_string(),
        }
    }
}

const UP: &str = "write the change here";
const DOWN: &str = "write what reverses the up step here";
const IRREVERSIBLE: &str = "irreversible (no down step)";

/// What `new` wrote, and what to know about it.
pub struct Created {
    /// The files written, the up step first.
    pub paths: Vec<PathBuf>,
    /// Notices for stderr: the template is refused until filled in; a `V<n>__` directory
    /// not declared Flyway's got no undo file, and how to declare it.
    pub notes: Vec<String>,
}

/// Writes the next migration `name` into `dir` (created if needed) in `layout` (declared with
/// `format` in dirthara.toml), or in the layout detected from `dir`'s files when `None`.
pub fn create_migration(
    dir: &Path,
    declared: Option<Layout>,
    name: &str,
    irreversible: bool,
    template: Template,
) -> Result<Created, CliError> {
    check_name(name).map_err(|reason| NewRefused::BadName {
        name: name.to_string(),
        reason,
    })?;
    let layout = match declared {
        Some(layout) => layout,
        None => detect_layout(dir)?,
    };
    // `U<n>__` means "undo" to Flyway but "a migration of its own" to refinery, which shares
    // the `V<n>__` layout: write one only where the directory is declared Flyway's.
    let undo = declared == Some(Layout::Flyway);
    if template == Template::Mongo && layout != Layout::Plain {
        return Err(NewRefused::MongoInSqlLayout {
            dir: dir.to_path_buf(),
            layout,
        }
        .into());
    }
    std::fs::create_dir_all(dir).map_err(CliError::io(IoAction::CreateMigrationDirectory(
        dir.to_path_buf(),
    )))?;
    let existing = existing_versions(dir, layout);
    let version = next_version(layout, &existing, unix_seconds());
    let files = files_for(dir, (layout, undo), &version, name, irreversible, template);
    for (path, text) in &files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(CliError::io(IoAction::CreateDirectory(
                parent.to_path_buf(),
            )))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(CliError::io(IoAction::CreateFile(path.clone())))?;
        file.write_all(text.as_bytes())
            .map_err(CliError::io(IoAction::WriteFile(path.clone())))?;
    }
    let mut notes = Vec::new();
    if let Some((up, _)) = files.first() {
        let what = match template {
            Template::Sql => "statements",
            Template::Mongo => "commands",
        };
        notes.push(format!(
            "write the migration's {what} in `{}`: until it has something to run, it is \
             refused (INVALID_MIGRATION, empty up)",
            up.display()
        ));
    }
    if layout == Layout::Flyway && !undo && !irreversible {
        notes.push(format!(
            "no undo file was written: `V<n>__` files are Flyway's or refinery's, and refinery \
             runs a `U` file as a migration of its own. If this directory is Flyway's, {}, and \
             `new` writes a `U<n>__` undo file with each migration",
            dirthara_source::files::declare_flyway(dir)
        ));
    }
    Ok(Created {
        paths: files.into_iter().map(|(path, _)| path).collect(),
        notes,
    })
}

/// The one layout of the files in `dir`; dirthara's own for a new or empty directory. Told
/// from the names and section markers only, so templates not yet filled in do not stop the
/// next `new`.
fn detect_layout(dir: &Path) -> Result<Layout, NewRefused> {
    if !dir.is_dir() {
        return Ok(Layout::Plain);
    }
    match dirthara_source::files::detect_layout(dir) {
        Ok(layout) => Ok(layout.unwrap_or(Layout::Plain)),
        Err(source) => Err(NewRefused::UnknownLayout {
            dir: dir.to_path_buf(),
            source: dirthara::Error::from(source),
        }),
    }
}

/// A version and how it is spelled in names (Diesel: `2024-01-01-120000`; sequential
/// versions keep the directory's zero padding).
#[derive(Debug, PartialEq, Eq)]
struct Version {
    value: i64,
    text: String,
}

/// The versions already in `dir`, each with the digits its name spells it with.
fn existing_versions(dir: &Path, layout: Layout) -> Vec<(i64, String)> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let name = match layout {
                Layout::Flyway => name.strip_prefix(['V', 'U'])?.to_string(),
                _ => name,
            };
            let digits: String = name
                .chars()
                .take_while(|c| c.is_ascii_digit() || (layout == Layout::Diesel && *c == '-'))
                .filter(char::is_ascii_digit)
                .collect();
            let width = name.chars().take_while(char::is_ascii_digit).count();
            Some((digits.parse().ok()?, name[..width].to_string()))
        })
        .collect()
}

/// Timestamps where the directory uses them (and by default); the next integer, padded as
/// the newest one is, where it counts 1, 2, 3 (Flyway's default, goose `-s`).
fn next_version(layout: Layout, existing: &[(i64, String)], now: i64) -> Version {
    const TIMESTAMP_MIN: i64 = 10_000_000_000_000; // 14 digits: YYYYMMDDHHMMSS
    let newest = existing.iter().max_by_key(|(v, _)| *v);
    let sequential = match newest {
        Some((v, _)) => *v < TIMESTAMP_MIN,
        None => layout == Layout::Flyway,
    };
    if sequential && layout != Layout::Diesel {
        let (value, width) = newest.map_or((1, 1), |(v, text)| (v + 1, text.len()));
        return Version {
            value,
            text: format!("{value:0width$}"),
        };
    }
    // Two `new` in one second: take the next second, so the version stays a valid time.
    let value = (0..)
        .map(|offset| timestamp_version(now + offset))
        .find(|v| existing.iter().all(|(e, _)| e != v))
        .expect("some second is free");
    let text = match layout {
        Layout::Diesel => {
            let t = value.to_string();
            format!("{}-{}-{}-{}", &t[..4], &t[4..6], &t[6..8], &t[8..])
        }
        _ => value.to_string(),
    };
    Version { value, text }
}

/// The files of one new migration, with their contents; `undo`: Flyway `U` files are
/// undo steps there.
fn files_for(
    dir: &Path,
    (layout, undo): (Layout, bool),
    version: &Version,
    name: &str,
    irreversible: bool,
    template: Template,
) -> Vec<(PathBuf, String)> {
    let v = &version.text;
    let comment = |what: &str| format!("-- {name}: {what}\n");
    let mut files = Vec::new();
    match layout {
        Layout::Plain => {
            let ext = template.ext();
            if irreversible {
                files.push((
                    dir.join(format!("{v}_{name}.{ext}")),
                    template.body(name, IRREVERSIBLE),
                ));
            } else {
                files.push((
                    dir.join(format!("{v}_{name}.up.{ext}")),
                    template.body(name, UP),
                ));
                files.push((
                    dir.join(format!("{v}_{name}.down.{ext}")),
                    template.body(name, DOWN),
                ));
            }
        }
        Layout::Diesel => {
            let folder = dir.join(format!("{v}_{name}"));
            files.push((folder.join("up.sql"), comment(UP)));
            if !irreversible {
                files.push((folder.join("down.sql"), comment(DOWN)));
            }
        }
        Layout::Dbmate | Layout::Goose => {
            let (up, down) = match layout {
                Layout::Dbmate => ("-- migrate:up", "-- migrate:down"),
                _ => ("-- +goose Up", "-- +goose Down"),
            };
            let mut text = format!("{up}\n{}", comment(UP));
            if !irreversible {
                text.push_str(&format!("\n{down}\n{}", comment(DOWN)));
            }
            files.push((dir.join(format!("{v}_{name}.sql")), text));
        }
        Layout::Flyway => {
            files.push((dir.join(format!("V{v}__{name}.sql")), comment(UP)));
            if undo && !irreversible {
                files.push((dir.join(format!("U{v}__{name}.sql")), comment(DOWN)));
            }
        }
    }
    files
}

fn unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// `YYYYMMDDHHMMSS` in UTC for a Unix time (no time-zone database needed).
fn timestamp_version(secs: i64) -> i64 {
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp(secs) else {
        return 0; // outside year ±9999: no clock reads that
    };
    let date =
        i64::from(t.year()) * 10_000 + i64::from(u8::from(t.month())) * 100 + i64::from(t.day());
    let clock = i64::from(t.hour()) * 10_000 + i64::from(t.minute()) * 100 + i64::from(t.second());
    date * 1_000_000 + clock
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_versions_are_valid_times_across_minute_boundaries() {
        // 2024-01-01T00:00:59Z and the next second.
        assert_eq!(timestamp_version(1_704_067_259), 20240101000059);
        assert_eq!(timestamp_version(1_704_067_260), 20240101000100);
    }

    #[test]
    fn timestamp_versions_follow_the_calendar() {
        assert_eq!(timestamp_version(0), 19700101000000);
        assert_eq!(timestamp_version(951_782_400), 20000229000000); // a leap day
        assert_eq!(timestamp_version(1_772_323_199), 20260228235959);
    }

    const NOW: i64 = 1_704_067_260; // 2024-01-01T00:01:00Z

    fn next(layout: Layout, existing: &[(i64, &str)]) -> Version {
        let existing: Vec<(i64, String)> =
            existing.iter().map(|(v, t)| (*v, t.to_string())).collect();
        next_version(layout, &existing, NOW)
    }

    #[test]
    fn flyway_counts_on_in_the_directorys_padding() {
        assert_eq!(next(Layout::Flyway, &[]).text, "1");
        assert_eq!(next(Layout::Flyway, &[(1, "1"), (2, "2")]).text, "3");
        assert_eq!(next(Layout::Flyway, &[(9, "009")]).text, "010");
        // A directory of timestamped Flyway files gets a timestamp.
        assert_eq!(
            next(Layout::Flyway, &[(20230101000000, "20230101000000")]).value,
            20240101000100
        );
    }

    #[test]
    fn timestamps_by_default_and_sequential_goose_counts_on() {
        assert_eq!(next(Layout::Plain, &[]).value, 20240101000100);
        assert_eq!(next(Layout::Goose, &[]).value, 20240101000100);
        assert_eq!(next(Layout::Goose, &[(1, "00001")]).text, "00002");
        // A taken second moves to the next one.
        assert_eq!(
            next(Layout::Dbmate, &[(20240101000100, "20240101000100")]).value,
            20240101000101
        );
    }

    #[test]
    fn diesel_spells_its_timestamp_with_dashes() {
        assert_eq!(next(Layout::Diesel, &[(1, "1")]).text, "2024-01-01-000100");
    }
}
