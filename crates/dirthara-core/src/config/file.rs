//! `dirthara.toml`: its keys, read into a [`Config`] through the settings' one parsers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::settings::{FileForm, SettingRow, SETTINGS};
use super::spelling::nearest;
use super::value::Origin;
use super::{Canary, Config, FleetSettings, Layout, SearchPath, ShardSpec, TargetSource};
use crate::error::{Error, Result};

/// One entry of `directories`: a path, or `{ path = "...", format = "goose" }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DirectoryEntry {
    Path(PathBuf),
    WithFormat { path: PathBuf, format: String },
}

/// The keys of `dirthara.toml` that are not [`SETTINGS`] rows: lists and tables with a syntax
/// of their own.
const TABLE_KEYS: [&str; 5] = [
    "directories",
    "connections",
    "init_sql",
    "fleet",
    "placeholders",
];

/// `[fleet]`: one source of targets at most, and how to run them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetFile {
    targets: Option<PathBuf>,
    schemas: Option<String>,
    databases: Option<String>,
    targets_sql: Option<String>,
    jobs: Option<usize>,
    canary: Option<CanaryEntry>,
    max_failures: Option<usize>,
    keep_going: Option<bool>,
    allow_empty: Option<bool>,
    shard: Option<String>,
    search_path: Option<String>,
}

/// `[fleet] canary`: a number, target names comma-separated, or an array of names.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum CanaryEntry {
    Count(usize),
    Text(String),
    Names(Vec<String>),
}

impl FleetFile {
    /// Into `settings`, with a targets file taken from the configuration file's directory
    /// (`-`, standard input, as `--targets -` is).
    fn merge_into(self, settings: &mut FleetSettings, origin: &str, base: &Path) -> Result<()> {
        let sources = [
            self.targets.map(|path| match path == Path::new("-") {
                true => TargetSource::File(path),
                false => TargetSource::File(base.join(path)),
            }),
            self.schemas.map(TargetSource::Schemas),
            self.databases.map(TargetSource::Databases),
            self.targets_sql.map(TargetSource::Query),
        ];
        let mut sources = sources.into_iter().flatten();
        if let Some(source) = sources.next() {
            if sources.next().is_some() {
                return Err(Error::config(format!(
                    "{origin}: [fleet] names its targets more than one way; keep one of \
                     `targets`, `schemas`, `databases` and `targets_sql`"
                )));
            }
            settings.targets = Some(source);
        }
        let options = &mut settings.options;
        if let Some(jobs) = self.jobs {
            options.jobs =
                check_jobs(jobs).map_err(|e| Error::config(format!("{origin}: [fleet] {e}")))?;
        }
        if let Some(canary) = self.canary {
            let canary = match canary {
                CanaryEntry::Count(count) => Ok(Canary::Count(count)),
                CanaryEntry::Text(text) => Canary::parse(&text),
                CanaryEntry::Names(names) => Canary::names(names.iter().map(String::as_str)),
            };
            canary
                .map_err(|e| Error::config(format!("{origin}: [fleet] `canary`: {e}")))?
                .apply(options);
        }
        if let Some(search_path) = self.search_path {
            options.search_path = SearchPath::parse(&search_path)
                .map_err(|e| Error::config(format!("{origin}: [fleet] `search_path`: {e}")))?;
        }
        if let Some(allow_empty) = self.allow_empty {
            options.allow_empty = allow_empty;
        }
        match (self.max_failures, self.keep_going) {
            (Some(_), Some(true)) => {
                return Err(Error::config(format!(
                    "{origin}: [fleet] sets both `max_failures` and `keep_going = true`; keep one"
                )))
            }
            (Some(0), _) => {
                return Err(Error::config(format!(
                    "{origin}: [fleet] `max_failures` must be at least 1 (`keep_going = true` \
                     never stops)"
                )))
            }
            (Some(max), _) => options.max_failures = Some(max),
            (None, Some(true)) => options.max_failures = None,
            (None, _) => {}
        }
        if let Some(shard) = self.shard {
            let spec = ShardSpec::parse(&shard)
                .map_err(|e| Error::config(format!("{origin}: [fleet] `shard`: {e}")))?;
            match spec {
                ShardSpec::Fixed(shard) => {
                    options.shard = Some(shard);
                    settings.shard_auto = None;
                }
                auto => {
                    options.shard = None;
                    settings.shard_auto = Some(auto);
                }
            }
        }
        Ok(())
    }
}

/// How many targets at a time: 1 to 1,024.
pub fn check_jobs(jobs: usize) -> std::result::Result<usize, String> {
    if (1..=1024).contains(&jobs) {
        Ok(jobs)
    } else {
        Err(format!("`jobs` is {jobs}; run 1 to 1024 targets at a time"))
    }
}

impl Config {
    /// Reads a `dirthara.toml` over these settings. Relative directories are taken from the
    /// file's own directory, so the file means the same wherever the command is run from.
    ///
    /// The file is read with a cap ([`read_config_file`](crate::config::read_config_file)): one
    /// larger than 1 MiB is refused, whatever it is (`/dev/zero` included).
    ///
    /// # Examples
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let file = dir.path().join("dirthara.toml");
    /// std::fs::write(&file, "directories = [\"db\"]\nlocking = \"lease\"\n").unwrap();
    /// let mut config = dirthara_core::Config::default();
    /// config.merge_file(&file)?;
    /// assert_eq!(config.directories, vec![dir.path().join("db")]);
    /// assert_eq!(config.locking, dirthara_core::Locking::Lease);
    /// # Ok::<(), dirthara_core::Error>(())
    /// ```
    pub fn merge_file(&mut self, path: &Path) -> Result<()> {
        let text = super::read_config_file(path).map_err(|e| {
            Error::config(format!("cannot read config file {}: {e}", path.display()))
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        self.merge_toml(&text, &path.display().to_string(), base)
    }

    /// Reads TOML text (see [`Config::merge_file`]); `origin` names it in errors. A key
    /// that is no setting is refused, naming the one it most likely meant.
    pub fn merge_toml(&mut self, text: &str, origin: &str, base: &Path) -> Result<()> {
        let table: toml::Table = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
        for (key, value) in table {
            if let Some(row) = SETTINGS.iter().find(|row| row.key == key) {
                read_setting(self, row, &value, origin)?;
                continue;
            }
            match key.as_str() {
                "directories" => {
                    self.merge_directories(typed(value, origin, &key)?, origin, base)?
                }
                "connections" => self
                    .connections
                    .extend(typed::<BTreeMap<String, String>>(value, origin, &key)?),
                "init_sql" => self
                    .init_sql
                    .extend(typed::<BTreeMap<String, String>>(value, origin, &key)?),
                "placeholders" => {
                    let values = typed::<BTreeMap<String, toml::Value>>(value, origin, &key)?;
                    for (name, value) in values {
                        // A number or a boolean is written as TOML writes it: `${port}` is 5432.
                        let text = match value {
                            toml::Value::String(text) => text,
                            toml::Value::Integer(number) => number.to_string(),
                            toml::Value::Float(number) => number.to_string(),
                            toml::Value::Boolean(flag) => flag.to_string(),
                            _ => {
                                return Err(Error::config(format!(
                                    "{origin}: [placeholders] `{name}` must be a string, a number \
                                     or a boolean"
                                )))
                            }
                        };
                        super::check_placeholder_name(&name)
                            .map_err(|e| Error::config(format!("{origin}: [placeholders] {e}")))?;
                        self.placeholders.insert(name.to_ascii_lowercase(), text);
                    }
                }
                "fleet" => typed::<FleetFile>(value, origin, &key)?.merge_into(
                    &mut self.fleet,
                    origin,
                    base,
                )?,
                _ => {
                    let known = SETTINGS.iter().map(|row| row.key).chain(TABLE_KEYS);
                    let hint = match nearest(&key, known) {
                        Some(meant) => format!("did you mean `{meant}`?"),
                        None => format!(
                            "the keys are {}",
                            (SETTINGS.iter().map(|row| row.key).chain(TABLE_KEYS))
                                .map(|k| format!("`{k}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    };
                    // The table forgets where a key was: its line is found again by its text.
                    let line = (text.lines())
                        .position(|line| line.trim_start().starts_with(key.as_str()))
                        .map_or(String::new(), |index| format!(" line {}:", index + 1));
                    return Err(Error::config(format!(
                        "{origin}:{line} unknown key `{key}`; {hint}"
                    )));
                }
            }
        }
        Ok(())
    }

    fn merge_directories(
        &mut self,
        dirs: Vec<DirectoryEntry>,
        origin: &str,
        base: &Path,
    ) -> Result<()> {
        self.directories.clear();
        self.layouts.clear();
        for entry in dirs {
            match entry {
                DirectoryEntry::Path(path) => self.directories.push(base.join(path)),
                DirectoryEntry::WithFormat { path, format } => {
                    let layout = Layout::parse(&format).ok_or_else(|| {
                        Error::config(format!(
                            "{origin}: `format` of `{}`: one of {}, not `{format}`",
                            path.display(),
                            Layout::NAMES
                        ))
                    })?;
                    self.directories.push(base.join(&path));
                    self.layouts.insert(base.join(path), layout);
                }
            }
        }
        Ok(())
    }
}

/// A TOML value of a setting row: a string is the setting's text. An integer or a boolean is
/// read as it is written (`lock_wait = 0`, `locking = false`), so that TOML's types mean what
/// the same text means in the environment; a switch takes a boolean only; any other TOML type
/// is refused.
fn read_setting(
    config: &mut Config,
    row: &SettingRow,
    value: &toml::Value,
    file: &str,
) -> Result<()> {
    let origin = Origin::File { file, key: row.key };
    let text = match (row.file_form, value) {
        (FileForm::Text, toml::Value::String(text)) => text.clone(),
        (FileForm::Text, toml::Value::Integer(number)) => number.to_string(),
        (FileForm::Text | FileForm::Switch, toml::Value::Boolean(switch)) => switch.to_string(),
        (FileForm::List, toml::Value::String(text)) => text.clone(),
        (FileForm::List, toml::Value::Array(items)) => {
            let texts: Option<Vec<&str>> = items.iter().map(toml::Value::as_str).collect();
            match texts {
                Some(texts) => texts.join(","),
                None => return Err((row.refuse)(origin)),
            }
        }
        _ => return Err((row.refuse)(origin)),
    };
    (row.apply)(config, &text, origin)
}

/// A table or list key's value, deserialized as its syntax says; a mismatch names the key.
fn typed<T: serde::de::DeserializeOwned>(value: toml::Value, file: &str, key: &str) -> Result<T> {
    value.try_into().map_err(|e: toml::de::Error| {
        Error::config(format!("{file}: `{key}`: {}", e.message().trim_end()))
    })
}

/// A TOML error, which quotes the offending line: when that line holds a URL with a
/// password, the error says where instead of quoting it.
fn toml_error(origin: &str, text: &str, error: &toml::de::Error) -> Error {
    let full = error.to_string();
    if crate::redact::redact_urls_in(&full) == full {
        return Error::config(format!("{origin}: {}", full.trim_end()));
    }
    let at = error.span().map_or(String::new(), |span| {
        let before = text.get(..span.start).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        format!(" at line {line}, column {column}")
    });
    let message = crate::redact::redact_urls_in(error.message());
    Error::config(format!(
        "{origin}: TOML parse error{at}: {}",
        message.trim_end()
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{LockWait, Locking, MIN_LOCK_TTL};

    #[test]
    fn bad_files_are_refused_with_the_key() {
        for (text, needle) in [
            ("locking = \"maybe\"", "`locking`"),
            ("lock_wait = \"soon\"", "`lock_wait`"),
            ("directorys = []", "directorys"),
        ] {
            let err = Config::default()
                .merge_toml(text, "dirthara.toml", Path::new(""))
                .unwrap_err();
            assert_eq!(err.code(), crate::Code::ConfigError);
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn toml_integers_and_booleans_mean_what_the_same_text_means() {
        let mut c = Config::default();
        c.merge_toml(
            "locking = false\nlock_wait = 0\nlock_ttl = 600\nconnect_timeout = 7",
            "dirthara.toml",
            Path::new(""),
        )
        .unwrap();
        assert_eq!(c.locking, Locking::Off);
        assert_eq!(c.lock_wait, Some(LockWait::For(Duration::ZERO)));
        assert_eq!(c.lock_ttl, Duration::from_secs(600));
        assert_eq!(c.connect_timeout, Duration::from_secs(7));
        // Other TOML types are no value of these settings, `inf` included.
        for text in [
            "lock_wait = inf",
            "lock_wait = -1",
            "locking = 1",
            "lock_ttl = 1.5",
        ] {
            let err = Config::default()
                .merge_toml(text, "dirthara.toml", Path::new(""))
                .unwrap_err();
            assert!(err.to_string().contains(": expected "), "{text}: {err}");
        }
    }

    #[test]
    fn a_fleet_targets_file_is_beside_the_configuration_file_and_dash_is_standard_input() {
        let targets = |text: &str| {
            let mut c = Config::default();
            c.merge_toml(text, "dirthara.toml", Path::new("/p"))
                .unwrap();
            c.fleet.targets
        };
        assert_eq!(
            targets("[fleet]\ntargets = \"tenants.txt\""),
            Some(TargetSource::File(PathBuf::from("/p/tenants.txt")))
        );
        assert_eq!(
            targets("[fleet]\ntargets = \"-\""),
            Some(TargetSource::File(PathBuf::from("-")))
        );
    }

    #[test]
    fn a_fleet_names_its_search_path_and_its_canary_by_count_or_by_name() {
        let options = |text: &str| {
            let mut c = Config::default();
            c.merge_toml(text, "dirthara.toml", Path::new("/p"))
                .map(|()| c.fleet.options)
        };
        let o = options("[fleet]\nsearch_path = \"{target}, public, extensions\"").unwrap();
        assert_eq!(o.search_path.schemas("t1"), ["t1", "public", "extensions"]);
        assert_eq!(
            options("").unwrap().search_path.schemas("t1"),
            ["t1", "public"]
        );
        let o = options("[fleet]\ncanary = 2").unwrap();
        assert_eq!((o.canary, o.canary_names.len()), (2, 0));
        for text in [
            "[fleet]\ncanary = \"a, b\"",
            "[fleet]\ncanary = [\"a\", \"b\"]",
        ] {
            assert_eq!(options(text).unwrap().canary_names, ["a", "b"], "{text}");
        }
        for (text, needle) in [
            (
                "[fleet]\nsearch_path = \"public, {target}\"",
                "dirthara.toml: [fleet] `search_path`: `public, {target}` does not start with {target}",
            ),
            (
                "[fleet]\nsearch_path = \"{target} public\"",
                "separate the schemas with commas",
            ),
            ("[fleet]\nsearch_path = \"{target}, a b\"", "is not a schema name"),
            ("[fleet]\ncanary = \"a,,b\"", "[fleet] `canary`: `` is no target name"),
        ] {
            let err = options(text).unwrap_err();
            assert_eq!(err.code(), crate::Code::ConfigError);
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn a_directory_may_name_its_layout() {
        let mut c = Config::default();
        c.merge_toml(
            "directories = [\"db\", { path = \"legacy\", format = \"goose\" }]",
            "dirthara.toml",
            Path::new("/p"),
        )
        .unwrap();
        assert_eq!(
            c.directories,
            [PathBuf::from("/p/db"), PathBuf::from("/p/legacy")]
        );
        assert_eq!(
            c.layouts.into_iter().collect::<Vec<_>>(),
            [(PathBuf::from("/p/legacy"), Layout::Goose)]
        );
        let err = Config::default()
            .merge_toml(
                "directories = [{ path = \"x\", format = \"liquibase\" }]",
                "dirthara.toml",
                Path::new(""),
            )
            .unwrap_err();
        assert!(err.to_string().contains("not `liquibase`"), "{err}");
        assert!(err.to_string().contains("`goose`"), "{err}");
    }

    #[test]
    fn a_lease_below_the_minimum_is_refused_naming_the_file_and_key() {
        let err = Config::default()
            .merge_toml("lock_ttl = \"4s\"", "dirthara.toml", Path::new(""))
            .unwrap_err();
        assert_eq!(err.code(), crate::Code::ConfigError);
        assert!(
            err.to_string().contains("dirthara.toml: `lock_ttl`"),
            "{err}"
        );
        assert!(err.to_string().contains("minimum of 5s"), "{err}");
        let mut c = Config::with_url("sqlite:x.db");
        c.merge_toml("lock_ttl = 5", "dirthara.toml", Path::new(""))
            .unwrap();
        assert_eq!(c.lock_ttl, MIN_LOCK_TTL);
    }

    #[test]
    fn a_history_table_that_is_not_a_plain_identifier_is_refused_naming_the_file_and_key() {
        let err = Config::default()
            .merge_toml("history_table = \"a b\"", "dirthara.toml", Path::new(""))
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("dirthara.toml: `history_table`: history table name `a b`"),
            "{err}"
        );
    }
}
