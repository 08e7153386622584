//! The parts of error messages computed from facts: the down file a migration lacks, and
//! how long a wait was.

use std::path::Path;
use std::time::Duration;

use crate::migration::Migration;

/// What would make `migration` reversible, in the words its origin calls for: the down file
/// beside its up file, spelled with the version exactly as the file name writes it
/// (`0002_after.json` → `0002_after.down.json`), or a `down` for a Rust migration.
pub(super) fn down_file(migration: &Migration) -> Option<String> {
    let Some(extension) = migration.format.file_extension() else {
        return Some("a `down` to the Rust migration".to_string());
    };
    let origin = Path::new(&migration.origin);
    let file_name = origin.file_name()?.to_str()?;
    let stem = file_name
        .strip_suffix(&format!(".{extension}"))
        .map(|stem| stem.strip_suffix(".up").unwrap_or(stem))?;
    let down = origin.with_file_name(format!("{stem}.down.{extension}"));
    let up_only = !file_name.ends_with(&format!(".up.{extension}"));
    Some(if up_only {
        // A single-file migration must become an up/down pair.
        format!(
            "`{}` and rename `{file_name}` to `{stem}.up.{extension}`",
            down.display()
        )
    } else {
        format!("`{}`", down.display())
    })
}

/// `500ms`, `30s`, `5m`, `1h 30m`: a wait as a person would say it.
pub(super) fn human(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0 => format!("{}ms", duration.as_millis()),
        1..=59 => format!("{secs}s"),
        60..=3599 if secs % 60 == 0 => format!("{}m", secs / 60),
        60..=3599 => format!("{}m {}s", secs / 60, secs % 60),
        _ if secs % 3600 == 0 => format!("{}h", secs / 3600),
        _ => format!("{}h {}m", secs / 3600, (secs % 3600) / 60),
    }
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
    fn waits_read_as_people_say_them() {
        assert_eq!(human(Duration::from_millis(250)), "250ms");
        assert_eq!(human(Duration::from_secs(30)), "30s");
        assert_eq!(human(Duration::from_secs(300)), "5m");
        assert_eq!(human(Duration::from_secs(90)), "1m 30s");
        assert_eq!(human(Duration::from_secs(7200)), "2h");
        assert_eq!(human(Duration::from_secs(5400)), "1h 30m");
    }
}
