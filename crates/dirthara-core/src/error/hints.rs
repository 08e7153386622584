//! The parts of error messages computed from facts: what would make a migration reversible,
//! in its layout's words, and how long a wait was.

use std::path::Path;

use dirthara_source::files::{declare_flyway, DirectoryLayout};

use crate::migration::{Migration, StepFormat};
use dirthara_source::files::Layout;

/// What would make `migration` reversible, as an instruction in the words of the layout its
/// files are in, so that following it literally works:
///
/// - dirthara/sqlx/golang-migrate: the `.down.sql` beside its `.up.sql`, the version spelled
///   as the file name spells it (`0002_after.json` → `0002_after.down.json`); a lone `.sql`
///   is renamed `.up.sql` to pair with it;
/// - Diesel: the folder's `down.sql`;
/// - dbmate and goose: a down section at the end of the file;
/// - Flyway: a `U<version>__<name>.sql` undo file, where the directory is declared Flyway's;
///   detected `V<n>__` files may be refinery's, which has no undo files (and runs a `U` file
///   as a migration of its own), so the advice says how to declare the directory first;
/// - a Rust migration: a `down`.
///
/// `None` for a migration built in code from text, which has no file to name.
pub(crate) fn reversal(migration: &Migration) -> Option<String> {
    if migration.is_baseline() {
        return Some(format!(
            "It is the baseline `{}`, which built this database in one step: there is no \
             migration below it to go back to. Build the database anew (`dirthara fresh` \
             destroys its data)",
            migration.origin
        ));
    }
    if migration.format == StepFormat::Rust {
        return Some("Add a `down` to the Rust migration".to_string());
    }
    let origin = Path::new(&migration.origin);
    let file_name = origin.file_name()?.to_str()?;
    let layout = migration.layout.unwrap_or(DirectoryLayout {
        layout: Layout::Plain,
        declared: false,
    });
    let beside = |name: String| origin.with_file_name(name).display().to_string();
    Some(match layout.layout {
        Layout::Plain => return plain_down(migration, origin, file_name),
        Layout::Diesel => format!("Add `{}` beside its `up.sql`", beside("down.sql".into())),
        Layout::Dbmate => down_section("-- migrate:down", migration, origin),
        Layout::Goose => down_section("-- +goose Down", migration, origin),
        Layout::Flyway => {
            let undo = beside(format!("U{}", file_name.get(1..)?));
            if layout.has_flyway_undo() {
                format!("Add the undo file `{undo}`")
            } else {
                let dir = origin.parent().unwrap_or(Path::new(""));
                format!(
                    "Its directory's `V<n>__` files may be Flyway's or refinery's, and refinery \
                     has no undo files (it runs a `U` file as a migration of its own): under \
                     refinery it stays irreversible. If the directory is Flyway's, {} and add \
                     the undo file `{undo}`",
                    declare_flyway(dir)
                )
            }
        }
        // A layout this build does not know by name: the plain advice.
        _ => return plain_down(migration, origin, file_name),
    })
}

/// dbmate's and goose's down section, added so that the up section keeps its text: its
/// checksum is that of every line between the markers, so a blank line before the new
/// marker, or a line break added after a last line that had none, would change it.
fn down_section(marker: &str, migration: &Migration, origin: &Path) -> String {
    let mut advice = format!(
        "Add a `{marker}` line at the end of `{}`, right below its last line, followed by the \
         statements that reverse its up section (a blank line above the `{marker}` line would \
         become part of the up section and change its checksum)",
        origin.display()
    );
    if !migration.up().ends_with('\n') {
        advice.push_str(&format!(
            "; its last line has no line break, and the one the new line needs changes the up \
             section's checksum, so then run `dirthara resolve {} --accept-checksum`",
            migration.version
        ));
    }
    advice
}

/// dirthara's own layout: the `.down` file beside the `.up` file, with the version as the file
/// name writes it; a single-file migration becomes an up/down pair.
fn plain_down(migration: &Migration, origin: &Path, file_name: &str) -> Option<String> {
    let extension = match migration.format {
        StepFormat::MongoCommands => "json",
        _ => "sql",
    };
    let stem = file_name
        .strip_suffix(&format!(".{extension}"))
        .map(|stem| stem.strip_suffix(".up").unwrap_or(stem))?;
    let down = origin.with_file_name(format!("{stem}.down.{extension}"));
    let up_only = !file_name.ends_with(&format!(".up.{extension}"));
    Some(if up_only {
        format!(
            "Add `{}` and rename `{file_name}` to `{stem}.up.{extension}`",
            down.display()
        )
    } else {
        format!("Add `{}`", down.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::migration::StepFormat;

    fn irreversible(origin: &str, format: StepFormat) -> String {
        let mut migration = Migration::new(2, "after", "up");
        migration.origin = origin.to_string();
        migration.format = format;
        Error::irreversible(&migration).to_string()
    }

    fn irreversible_in(origin: &str, layout: Layout, declared: bool) -> String {
        let mut migration = Migration::new(2, "after", "CREATE TABLE after (id INT);\n");
        migration.origin = origin.to_string();
        migration.layout = Some(DirectoryLayout { layout, declared });
        Error::irreversible(&migration).to_string()
    }

    #[test]
    fn the_down_file_hint_keeps_the_file_names_version_and_format() {
        let text = irreversible("migrations/0002_after.up.json", StepFormat::MongoCommands);
        assert!(
            text.contains("Add `migrations/0002_after.down.json`, or"),
            "{text}"
        );
        let text = irreversible("db/0002_after.json", StepFormat::MongoCommands);
        assert!(
            text.contains(
                "Add `db/0002_after.down.json` and rename `0002_after.json` to `0002_after.up.json`"
            ),
            "{text}"
        );
        let text = irreversible("db/02_after.up.sql", StepFormat::Sql);
        assert!(text.contains("Add `db/02_after.down.sql`"), "{text}");
        let text = irreversible("Rust migration 2 (after)", StepFormat::Rust);
        assert!(
            text.contains("Add a `down` to the Rust migration"),
            "{text}"
        );
        // Built in code, with no file: both spellings.
        let text = Error::irreversible(&Migration::new(2, "after", "up")).to_string();
        assert!(
            text.contains("`2_after.down.sql` (`.down.json` for MongoDB)"),
            "{text}"
        );
    }

    #[test]
    fn the_hint_speaks_each_layout() {
        let text = irreversible_in("m/2024-01-01-000002_after/up.sql", Layout::Diesel, false);
        assert!(
            text.contains("Add `m/2024-01-01-000002_after/down.sql` beside its `up.sql`, or"),
            "{text}"
        );
        assert!(
            !text.contains("up.down.sql") && !text.contains(".up.sql`"),
            "{text}"
        );
        let text = irreversible_in("m/0002_after.sql", Layout::Dbmate, false);
        assert!(
            text.contains("Add a `-- migrate:down` line at the end of `m/0002_after.sql`"),
            "{text}"
        );
        let text = irreversible_in("m/0002_after.sql", Layout::Goose, true);
        assert!(
            text.contains("Add a `-- +goose Down` line at the end of `m/0002_after.sql`"),
            "{text}"
        );
        assert!(!text.contains("accept-checksum"), "{text}");
        // A last line without a line break: adding the section changes the checksum.
        let mut migration = Migration::new(2, "after", "CREATE TABLE after (id INT);");
        migration.origin = "m/0002_after.sql".into();
        migration.layout = Some(DirectoryLayout {
            layout: Layout::Dbmate,
            declared: false,
        });
        let text = Error::irreversible(&migration).to_string();
        assert!(
            text.contains("so then run `dirthara resolve 2 --accept-checksum`, or choose"),
            "{text}"
        );
        for text in [
            irreversible_in("m/V002__after.sql", Layout::Flyway, false),
            irreversible_in("m/V002__after.sql", Layout::Flyway, true),
        ] {
            assert!(text.contains("the undo file `m/U002__after.sql`"), "{text}");
            assert!(!text.contains(".down.sql"), "{text}");
        }
        let undeclared = irreversible_in("m/V002__after.sql", Layout::Flyway, false);
        assert!(
            undeclared.contains("refinery has no undo files")
                && undeclared.contains(r#"`directories = [{ path = "m", format = "flyway" }]`"#),
            "{undeclared}"
        );
        let declared = irreversible_in("m/V002__after.sql", Layout::Flyway, true);
        assert!(!declared.contains("refinery"), "{declared}");
    }
}
