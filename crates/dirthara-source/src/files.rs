//! Loading migrations from directories: file names, directives, and every refusal of bad input.
//!
//! Everything here happens before any database is touched, so a typo in a file name costs
//! nothing but an error message.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::migration::{checksum, Migration, StepFormat, DEFAULT_CONNECTION};
use crate::SourceError;

type Result<T, E = SourceError> = std::result::Result<T, E>;

/// The prefix of every header directive, e.g. `-- dirthara:no-transaction`.
const DIRECTIVE_PREFIX: &str = "dirthara:";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileRole {
    Up,
    Down,
    /// `<version>_<name>.sql`: up only, irreversible.
    UpOnly,
}

/// A file name that parsed as a migration.
#[derive(Debug)]
struct MigrationFile {
    version: i64,
    name: String,
    role: FileRole,
    format: StepFormat,
    path: PathBuf,
}

fn format_of(file_name: &str) -> Option<StepFormat> {
    if file_name.ends_with(".sql") {
        Some(StepFormat::Sql)
    } else if file_name.ends_with(".json") {
        Some(StepFormat::MongoCommands)
    } else {
        None
    }
}

/// Loads every migration in `directories`, in order, and validates the set as a whole.
///
/// Files whose extension is not `.sql` or `.json` are ignored (a `README.md` may live beside
/// the migrations); such a file whose name does not parse is an error, never silently skipped.
pub fn load_directories(directories: &[PathBuf]) -> Result<Vec<Migration>> {
    let mut files = Vec::new();
    for dir in directories {
        files.extend(scan_directory(dir)?);
    }
    assemble(files)
}

fn scan_directory(dir: &Path) -> Result<Vec<MigrationFile>> {
    let entries = fs::read_dir(dir).map_err(|e| SourceError::Directory {
        dir: dir.to_path_buf(),
        message: format!(
            "cannot read migration directory `{}`: {e}. Create it (`dirthara new <name>` does), or \
             point --dir / `directories` at the right place",
            dir.display()
        ),
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| SourceError::invalid(dir, format!("cannot list directory: {e}")))?;
        let path = entry.path();
        let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else {
            if path
                .extension()
                .is_some_and(|ext| ext == "sql" || ext == "json")
            {
                return Err(SourceError::invalid(
                    &path,
                    "the file name is not valid UTF-8",
                ));
            }
            continue;
        };
        if file_name.starts_with('.') || format_of(file_name).is_none() {
            continue;
        }
        if !path.is_file() {
            return Err(SourceError::invalid(&path, "is not a regular file"));
        }
        files.push(parse_file_name(file_name, path.clone())?);
    }
    Ok(files)
}

fn parse_file_name(file_name: &str, path: PathBuf) -> Result<MigrationFile> {
    const EXPECTED: &str = "expected `<version>_<name>.up.sql`, `<version>_<name>.down.sql` or \
                            `<version>_<name>.sql` (`.json` for MongoDB), e.g. \
                            `20240101120000_create_users.up.sql`";
    let format = format_of(file_name).unwrap_or(StepFormat::Sql);
    let stem = file_name
        .strip_suffix(".sql")
        .or_else(|| file_name.strip_suffix(".json"))
        .unwrap_or(file_name);
    let (stem, role) = if let Some(stem) = stem.strip_suffix(".up") {
        (stem, FileRole::Up)
    } else if let Some(stem) = stem.strip_suffix(".down") {
        (stem, FileRole::Down)
    } else {
        (stem, FileRole::UpOnly)
    };
    let Some((version, name)) = stem.split_once('_') else {
        return Err(SourceError::invalid(
            &path,
            format!("the name does not parse as a migration: {EXPECTED}"),
        ));
    };
    if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SourceError::invalid(
            &path,
            format!("the version `{version}` is not a number: {EXPECTED}"),
        ));
    }
    let version: i64 = version.parse().map_err(|_| {
        SourceError::invalid(
            &path,
            format!("the version `{version}` is larger than 9223372036854775807 (2^63-1); use a smaller one"),
        )
    })?;
    if version == 0 {
        return Err(SourceError::invalid(
            &path,
            "version 0 is reserved (it means `before the first migration`); start at 1",
        ));
    }
    check_name(name)
        .map_err(|reason| SourceError::invalid(&path, format!("{reason}: {EXPECTED}")))?;
    Ok(MigrationFile {
        version,
        name: name.to_string(),
        role,
        format,
        path,
    })
}

/// Migration names become part of file names and history records: keep them to a safe alphabet.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("the migration name is empty".into());
    }
    if name.len() > 200 {
        return Err("the migration name is longer than 200 characters".into());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(format!(
            "the migration name `{name}` contains `{bad}`; use letters, digits, `_` and `-`"
        ));
    }
    Ok(())
}

/// Groups files by version, pairs ups with downs, and refuses every inconsistent set.
fn assemble(files: Vec<MigrationFile>) -> Result<Vec<Migration>> {
    let mut by_version: BTreeMap<i64, (Option<MigrationFile>, Option<MigrationFile>)> =
        BTreeMap::new();
    for file in files {
        let slot = by_version.entry(file.version).or_default();
        let (place, other) = match file.role {
            FileRole::Up | FileRole::UpOnly => (&mut slot.0, &slot.1),
            FileRole::Down => (&mut slot.1, &slot.0),
        };
        if let Some(existing) = place.as_ref() {
            return Err(duplicate_version(file.version, &existing.path, &file.path));
        }
        if let Some(other) = other {
            if other.name != file.name {
                return Err(duplicate_version(file.version, &other.path, &file.path));
            }
        }
        *place = Some(file);
    }

    let mut migrations = Vec::with_capacity(by_version.len());
    for (version, pair) in by_version {
        let (up, down) = match pair {
            (Some(up), down) => (up, down),
            (None, Some(down)) => {
                return Err(SourceError::invalid(
                    &down.path,
                    format!(
                        "a down step without its up step; add `{version}_{}.up.sql` beside it or remove it",
                        down.name
                    ),
                ))
            }
            (None, None) => unreachable!("every version slot holds at least one file"),
        };
        if up.role == FileRole::UpOnly {
            if let Some(down) = &down {
                return Err(SourceError::invalid(
                    &down.path,
                    format!(
                        "`{}` is an up-only migration; rename it to `{version}_{}.up.sql` to pair it \
                         with this down step",
                        file_name(&up.path),
                        up.name
                    ),
                ));
            }
        }
        if let Some(down) = &down {
            if down.format != up.format {
                return Err(SourceError::invalid(
                    &down.path,
                    format!(
                        "its up step `{}` is written in another format; both steps of a migration \
                         are `.sql` or both are `.json`",
                        file_name(&up.path)
                    ),
                ));
            }
        }
        let up_text = read_text(&up.path)?;
        let up_header = header(&up, &up_text)?;
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
        };
        if let Some(down) = down {
            let down_text = read_text(&down.path)?;
            let down_header = header(&down, &down_text)?;
            if down_header.connection.is_some() && down_header.connection != up_header.connection {
                return Err(SourceError::invalid(
                    &down.path,
                    format!(
                        "declares connection `{}` but its up step runs on `{}`; both steps of a \
                         migration run on one connection",
                        down_header.connection.as_deref().unwrap_or_default(),
                        migration.connection
                    ),
                ));
            }
            migration.transactional &= !down_header.no_transaction;
            migration.down = Some(down_text);
        }
        migrations.push(migration);
    }
    Ok(migrations)
}

fn duplicate_version(version: i64, first: &Path, second: &Path) -> SourceError {
    SourceError::invalid(
        second,
        format!(
            "two migrations have version {version}: `{}` and `{}`; give one of them a new version",
            first.display(),
            second.display()
        ),
    )
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_text(path: &Path) -> Result<String> {
    let bytes =
        fs::read(path).map_err(|e| SourceError::invalid(path, format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        SourceError::invalid(
            path,
            format!(
                "is not valid UTF-8 (invalid byte at offset {}); save it as UTF-8",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    if text.trim_start_matches('\u{feff}').trim().is_empty() {
        return Err(SourceError::invalid(
            path,
            "is empty; write the migration's statements in it or delete it",
        ));
    }
    Ok(text)
}

/// A file's header: SQL directives, or what a JSON command file declares about itself.
fn header(file: &MigrationFile, text: &str) -> Result<Header> {
    match file.format {
        // `format_of` gives files only these two formats.
        StepFormat::Sql | StepFormat::Rust => parse_directives(&file.path, text),
        StepFormat::MongoCommands => {
            let commands =
                parse_commands(text).map_err(|reason| SourceError::invalid(&file.path, reason))?;
            Ok(Header {
                no_transaction: !commands.transaction,
                connection: commands.connection,
            })
        }
    }
}

/// A JSON command migration, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Commands {
    /// Each a database command document (Extended JSON v2).
    pub commands: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Run the commands and the history record in one transaction (replica sets).
    pub transaction: bool,
    pub connection: Option<String>,
}

/// Parses `[{...}, ...]` or `{"transaction": true, "commands": [{...}], "connection": "name"}`.
pub fn parse_commands(text: &str) -> std::result::Result<Commands, String> {
    let value: serde_json::Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| format!("is not valid JSON ({e})"))?;
    const SHAPE: &str = "a MongoDB migration is a JSON array of command documents, e.g. \
                         `[{\"create\": \"users\"}]`, or `{\"transaction\": true, \"commands\": [...]}`";
    let (list, transaction, connection) = match value {
        serde_json::Value::Array(list) => (list, false, None),
        serde_json::Value::Object(mut object) => {
            let list = match object.remove("commands") {
                Some(serde_json::Value::Array(list)) => list,
                _ => return Err(format!("has no `commands` array: {SHAPE}")),
            };
            let transaction = match object.remove("transaction") {
                None => false,
                Some(serde_json::Value::Bool(b)) => b,
                Some(_) => return Err("`transaction` must be true or false".into()),
            };
            let connection = match object.remove("connection") {
                None => None,
                Some(serde_json::Value::String(name)) if valid_connection_name(&name) => Some(name),
                Some(_) => {
                    return Err(
                        "`connection` must be a connection name (letters, digits, `_`, `-`)".into(),
                    )
                }
            };
            if let Some(key) = object.keys().next() {
                return Err(format!(
                    "unknown key `{key}`; the known ones are `commands`, `transaction` and `connection`"
                ));
            }
            (list, transaction, connection)
        }
        _ => return Err(format!("is not a JSON array of documents: {SHAPE}")),
    };
    if list.is_empty() {
        return Err("has no commands; write at least one or delete the file".into());
    }
    let mut commands = Vec::with_capacity(list.len());
    for (index, item) in list.into_iter().enumerate() {
        match item {
            serde_json::Value::Object(command) if !command.is_empty() => commands.push(command),
            _ => {
                return Err(format!(
                    "command #{} is not a non-empty document: {SHAPE}",
                    index + 1
                ))
            }
        }
    }
    Ok(Commands {
        commands,
        transaction,
        connection,
    })
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub no_transaction: bool,
    pub connection: Option<String>,
}

/// Reads the `-- dirthara:...` directives from the leading comment lines of a file.
pub fn parse_directives(path: &Path, text: &str) -> Result<Header> {
    let mut header = Header::default();
    for line in text.trim_start_matches('\u{feff}').lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some(comment) = line.strip_prefix("--") else {
            break; // the header ends at the first statement
        };
        let Some(directive) = comment.trim().strip_prefix(DIRECTIVE_PREFIX) else {
            continue;
        };
        let mut words = directive.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("no-transaction"), None, _) => header.no_transaction = true,
            (Some("connection"), Some(name), None) => {
                if !valid_connection_name(name) {
                    return Err(SourceError::invalid(
                        path,
                        format!("`-- dirthara:connection {name}`: a connection name uses letters, digits, `_` and `-`"),
                    ));
                }
                if header.connection.replace(name.to_string()).is_some() {
                    return Err(SourceError::invalid(
                        path,
                        "declares `-- dirthara:connection` twice",
                    ));
                }
            }
            _ => {
                return Err(SourceError::invalid(
                    path,
                    format!(
                        "unknown directive `-- {DIRECTIVE_PREFIX}{}`; the known ones are \
                         `-- dirthara:no-transaction` and `-- dirthara:connection <name>`",
                        directive.trim()
                    ),
                ))
            }
        }
    }
    Ok(header)
}

pub fn valid_connection_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(name: &str) -> Result<MigrationFile> {
        parse_file_name(name, PathBuf::from(name))
    }

    #[test]
    fn file_names_parse_into_version_name_and_role() {
        let f = parse("20240101_create_users.up.sql").unwrap();
        assert_eq!(
            (f.version, f.name.as_str(), f.role),
            (20240101, "create_users", FileRole::Up)
        );
        assert_eq!(parse("2_x.down.sql").unwrap().role, FileRole::Down);
        assert_eq!(parse("3_seed-data.sql").unwrap().role, FileRole::UpOnly);
        assert_eq!(
            parse("9223372036854775807_max.sql").unwrap().version,
            i64::MAX
        );
    }

    #[test]
    fn bad_file_names_are_refused_with_the_reason() {
        for (name, needle) in [
            ("create_users.sql", "not a number"),
            ("1create.sql", "does not parse"),
            ("0_zero.sql", "reserved"),
            ("9223372036854775808_big.sql", "larger than"),
            ("1_.up.sql", "empty"),
            ("1_has space.sql", "contains ` `"),
            ("-1_neg.sql", "not a number"),
        ] {
            let err = parse(name).unwrap_err();
            assert!(matches!(err, SourceError::Invalid { .. }), "{name}");
            assert!(err.to_string().contains(needle), "{name}: {err}");
            assert!(err.to_string().starts_with(name), "{name}: {err}");
        }
    }

    #[test]
    fn json_command_files_parse_in_both_forms_and_bad_shapes_are_refused() {
        let plain = parse_commands(r#"[{"create": "users"}, {"drop": "old"}]"#).unwrap();
        assert_eq!((plain.commands.len(), plain.transaction), (2, false));
        let tx = parse_commands(
            r#"{"transaction": true, "commands": [{"insert": "u", "documents": [{"a": 1}]}]}"#,
        )
        .unwrap();
        assert!(tx.transaction);
        for (text, needle) in [
            ("{", "not valid JSON"),
            ("[]", "no commands"),
            ("[1]", "not a non-empty document"),
            ("[{}]", "not a non-empty document"),
            ("{\"x\": 1}", "no `commands`"),
            (
                "{\"commands\": [{\"a\": 1}], \"extra\": 1}",
                "unknown key `extra`",
            ),
            ("\"create\"", "not a JSON array"),
        ] {
            let err = parse_commands(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
        assert_eq!(
            parse_file_name("5_users.up.json", "5_users.up.json".into())
                .unwrap()
                .format,
            StepFormat::MongoCommands
        );
    }

    #[test]
    fn directives_are_read_from_the_leading_comments_only() {
        let p = Path::new("x.sql");
        let h = parse_directives(
            p,
            "-- a comment\n-- dirthara:no-transaction\n--dirthara:connection analytics\n\nCREATE INDEX;\n-- dirthara:bogus\n",
        )
        .unwrap();
        assert_eq!(
            h,
            Header {
                no_transaction: true,
                connection: Some("analytics".into())
            }
        );
        assert_eq!(parse_directives(p, "SELECT 1;").unwrap(), Header::default());
    }

    #[test]
    fn unknown_or_malformed_directives_are_refused() {
        let p = Path::new("x.sql");
        for text in [
            "-- dirthara:no-transactions\nSELECT 1;",
            "-- dirthara:connection\nSELECT 1;",
            "-- dirthara:connection a b\nSELECT 1;",
            "-- dirthara:connection a\n-- dirthara:connection b\nSELECT 1;",
            "-- dirthara:connection bad.name\nSELECT 1;",
        ] {
            assert!(
                matches!(parse_directives(p, text), Err(SourceError::Invalid { .. })),
                "{text}"
            );
        }
    }
}
