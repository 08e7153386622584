//! What `dirthara new` writes in each layout: the files a new migration consists of, their
//! names and the text they start with. The writing rules of a layout, beside its reading
//! rules (`layout.rs`), so that a file `new` writes is one the loader reads back in the
//! same layout.
//!
//! Pure: the caller lists the directory, reads the clock and writes the files (refusing to
//! overwrite one).

use std::path::{Path, PathBuf};

use crate::layout::{DirectoryLayout, Layout};
use crate::names::check_name;

/// What a new migration's steps are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    /// SQL files.
    Sql,
    /// JSON command files for MongoDB (dirthara's own layout only).
    Mongo,
}

impl Template {
    fn extension(self) -> &'static str {
        match self {
            Template::Sql => "sql",
            Template::Mongo => "json",
        }
    }

    /// A step file's text: a comment saying what goes in it, or for JSON (which has no
    /// comments) an empty command list, refused until it is filled in.
    fn body(self, name: &str, what: &str) -> String {
        match self {
            Template::Sql => sql_comment(name, what),
            Template::Mongo => "[]\n".to_string(),
        }
    }
}

const UP: &str = "write the change here";
const DOWN: &str = "write what reverses the up step here";
const IRREVERSIBLE: &str = "irreversible (no down step)";

fn sql_comment(name: &str, what: &str) -> String {
    format!("-- {name}: {what}\n")
}

/// What `new` was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewMigration<'a> {
    /// The migration's name (`create_users`).
    pub name: &'a str,
    /// Write no down step.
    pub irreversible: bool,
    pub template: Template,
}

/// One file of a new migration: where it goes and the text it starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    pub path: PathBuf,
    pub text: String,
}

/// Why a new migration cannot be written. Exhaustive, so that a new refusal cannot reach
/// `new` without words to say it in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The name is not one a migration file can have; why.
    BadName(String),
    /// JSON command files asked for in a directory of another tool's (SQL) layout.
    JsonInSqlLayout(Layout),
}

/// The files of the next migration in `dir`, whose layout is `layout`: the up step first.
/// `existing` are the names of the entries already in `dir` (for the next version), `now`
/// the Unix time in seconds (for a timestamp version).
///
/// `U<n>__` means "undo" to Flyway but "a migration of its own" to refinery, which shares
/// the `V<n>__` layout: an undo file is written only where the directory is declared
/// Flyway's ([`DirectoryLayout::has_flyway_undo`]).
///
/// ```
/// use dirthara_source::files::{DirectoryLayout, Layout};
/// use dirthara_source::scaffold::{new_migration_files, NewMigration, Template};
/// let dbmate = DirectoryLayout { layout: Layout::Dbmate, declared: false };
/// let asked = NewMigration { name: "users", irreversible: false, template: Template::Sql };
/// let files = new_migration_files("db".as_ref(), dbmate, &["1_setup.sql"], 0, asked).unwrap();
/// assert_eq!(files[0].path, std::path::Path::new("db").join("2_users.sql"));
/// assert!(files[0].text.starts_with("-- migrate:up\n"));
/// ```
pub fn new_migration_files(
    dir: &Path,
    layout: DirectoryLayout,
    existing: &[&str],
    now: i64,
    asked: NewMigration<'_>,
) -> Result<Vec<NewFile>, Refusal> {
    check_name(asked.name).map_err(Refusal::BadName)?;
    if asked.template == Template::Mongo && layout.layout != Layout::Plain {
        return Err(Refusal::JsonInSqlLayout(layout.layout));
    }
    let existing = existing_versions(layout.layout, existing);
    let version = next_version(layout.layout, &existing, now);
    Ok(files_for(dir, layout, &version.text, asked))
}

/// The file of a new repeatable migration `R__<name>` in `dir`, in every layout: applied
/// after the versioned migrations, and again whenever its text changes.
///
/// ```
/// use dirthara_source::scaffold::{new_repeatable_file, Template};
/// let file = new_repeatable_file("db".as_ref(), "user_views", Template::Sql).unwrap();
/// assert_eq!(file.path, std::path::Path::new("db").join("R__user_views.sql"));
/// ```
pub fn new_repeatable_file(dir: &Path, name: &str, template: Template) -> Result<NewFile, Refusal> {
    check_name(name).map_err(Refusal::BadName)?;
    let text = match template {
        Template::Sql => sql_comment(
            &format!("R__{name}"),
            "write statements that can run again (CREATE OR REPLACE VIEW ...): they are applied \
             after the versioned migrations, and again whenever this file changes",
        ),
        Template::Mongo => "[]\n".to_string(),
    };
    Ok(NewFile {
        path: dir.join(format!("R__{name}.{}", template.extension())),
        text,
    })
}

/// A version and how it is spelled in names (Diesel: `2024-01-01-120000`; sequential
/// versions keep the directory's zero padding).
#[derive(Debug, PartialEq, Eq)]
struct Version {
    value: i64,
    text: String,
}

/// The versions of the entries named `names`, each with the digits its name spells it with.
fn existing_versions(layout: Layout, names: &[&str]) -> Vec<(i64, String)> {
    names
        .iter()
        .filter_map(|&name| {
            // A baseline `B<V>__` counts in every layout: the next migration comes after it,
            // whose originals may be archived.
            let baseline = name
                .strip_prefix('B')
                .filter(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
            let name = match (baseline, layout) {
                (Some(rest), _) => rest,
                (None, Layout::Flyway) => name.strip_prefix(['V', 'U'])?,
                (None, _) => name,
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

/// The files of one new migration of version `v`, with their contents.
fn files_for(
    dir: &Path,
    layout: DirectoryLayout,
    v: &str,
    asked: NewMigration<'_>,
) -> Vec<NewFile> {
    let NewMigration {
        name,
        irreversible,
        template,
    } = asked;
    let file = |path: PathBuf, text: String| NewFile { path, text };
    let mut files = Vec::new();
    match layout.layout {
        Layout::Plain => {
            let ext = template.extension();
            if irreversible {
                let path = dir.join(format!("{v}_{name}.{ext}"));
                files.push(file(path, template.body(name, IRREVERSIBLE)));
            } else {
                let up = dir.join(format!("{v}_{name}.up.{ext}"));
                files.push(file(up, template.body(name, UP)));
                let down = dir.join(format!("{v}_{name}.down.{ext}"));
                files.push(file(down, template.body(name, DOWN)));
            }
        }
        Layout::Diesel => {
            let folder = dir.join(format!("{v}_{name}"));
            files.push(file(folder.join("up.sql"), sql_comment(name, UP)));
            if !irreversible {
                files.push(file(folder.join("down.sql"), sql_comment(name, DOWN)));
            }
        }
        Layout::Dbmate | Layout::Goose => {
            let (up, down) = match layout.layout {
                Layout::Dbmate => ("-- migrate:up", "-- migrate:down"),
                _ => ("-- +goose Up", "-- +goose Down"),
            };
            let mut text = format!("{up}\n{}", sql_comment(name, UP));
            if !irreversible {
                text.push_str(&format!("\n{down}\n{}", sql_comment(name, DOWN)));
            }
            files.push(file(dir.join(format!("{v}_{name}.sql")), text));
        }
        Layout::Flyway => {
            let up = dir.join(format!("V{v}__{name}.sql"));
            files.push(file(up, sql_comment(name, UP)));
            if layout.has_flyway_undo() && !irreversible {
                let undo = dir.join(format!("U{v}__{name}.sql"));
                files.push(file(undo, sql_comment(name, DOWN)));
            }
        }
    }
    files
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

    #[test]
    fn existing_versions_are_read_from_each_layouts_names() {
        let read = |layout, names: &[&str]| existing_versions(layout, names);
        assert_eq!(
            read(Layout::Flyway, &["V007__a.sql", "U007__a.sql", "README.md"]),
            [(7, "007".to_string()), (7, "007".to_string())]
        );
        assert_eq!(
            read(
                Layout::Diesel,
                &["2024-01-01-000100_a", "00000000000000_setup"]
            ),
            [
                (20240101000100, "2024".to_string()),
                (0, "00000000000000".to_string())
            ]
        );
        assert_eq!(
            read(Layout::Goose, &["00012_a.sql"]),
            [(12, "00012".to_string())]
        );
        // A baseline counts in every layout: its originals may be archived.
        for layout in [Layout::Plain, Layout::Flyway, Layout::Goose] {
            assert_eq!(
                read(layout, &["B0040__squash.sql", "Bad_name.sql"]),
                [(40, "0040".to_string())]
            );
        }
    }

    fn files(
        layout: Layout,
        declared: bool,
        irreversible: bool,
        template: Template,
    ) -> Vec<(String, String)> {
        let layout = DirectoryLayout { layout, declared };
        let asked = NewMigration {
            name: "users",
            irreversible,
            template,
        };
        let made = new_migration_files(
            Path::new("m"),
            layout,
            &["0001_setup.sql", "V0001__setup.sql"],
            NOW,
            asked,
        );
        (made.unwrap().into_iter())
            .map(|f| (f.path.display().to_string().replace('\\', "/"), f.text))
            .collect()
    }

    #[test]
    fn each_layout_writes_its_own_files() {
        let (sql, json) = (Template::Sql, Template::Mongo);
        assert_eq!(
            files(Layout::Plain, false, false, sql),
            [
                (
                    "m/0002_users.up.sql".into(),
                    "-- users: write the change here\n".into()
                ),
                (
                    "m/0002_users.down.sql".into(),
                    "-- users: write what reverses the up step here\n".into()
                ),
            ]
        );
        assert_eq!(
            files(Layout::Plain, false, true, json),
            [("m/0002_users.json".into(), "[]\n".into())]
        );
        let diesel = files(Layout::Diesel, false, false, sql);
        assert_eq!(diesel[0].0, "m/2024-01-01-000100_users/up.sql");
        assert_eq!(diesel[1].0, "m/2024-01-01-000100_users/down.sql");
        assert_eq!(
            files(Layout::Goose, false, false, sql),
            [(
                "m/0002_users.sql".into(),
                "-- +goose Up\n-- users: write the change here\n\n-- +goose Down\n\
                 -- users: write what reverses the up step here\n"
                    .into()
            )]
        );
        assert_eq!(
            files(Layout::Dbmate, false, true, sql),
            [(
                "m/0002_users.sql".into(),
                "-- migrate:up\n-- users: write the change here\n".into()
            )]
        );
    }

    #[test]
    fn flyway_undo_files_only_where_the_directory_is_declared_flyways() {
        let names = |declared| -> Vec<String> {
            (files(Layout::Flyway, declared, false, Template::Sql).into_iter())
                .map(|(path, _)| path)
                .collect()
        };
        assert_eq!(names(false), ["m/V0002__users.sql"]);
        assert_eq!(names(true), ["m/V0002__users.sql", "m/U0002__users.sql"]);
    }

    #[test]
    fn bad_names_and_json_in_another_tools_layout_are_refused() {
        let asked = |name, template| NewMigration {
            name,
            irreversible: false,
            template,
        };
        let plain = DirectoryLayout {
            layout: Layout::Plain,
            declared: false,
        };
        let refused =
            new_migration_files(Path::new("m"), plain, &[], NOW, asked("a b", Template::Sql));
        assert!(matches!(refused, Err(Refusal::BadName(_))), "{refused:?}");
        let goose = DirectoryLayout {
            layout: Layout::Goose,
            ..plain
        };
        let refused =
            new_migration_files(Path::new("m"), goose, &[], NOW, asked("a", Template::Mongo));
        assert_eq!(refused, Err(Refusal::JsonInSqlLayout(Layout::Goose)));
    }
}
