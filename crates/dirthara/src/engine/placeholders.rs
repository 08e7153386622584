//! Filling in `${name}` placeholders ([`dirthara_source::placeholders`]) with this
//! migrator's values, after the files are loaded and before the lock is taken: every value
//! missing anywhere is one `PLACEHOLDER_UNSET`, naming each file, line and name, and nothing
//! runs. A fleet loads its files once and fills them per target, so that a target's name,
//! schema and database are its own.
//!
//! Three ways of asking for it, one per step, by what its file says:
//! - `-- dirthara:placeholders [everywhere]` in the step's header (any layout);
//! - goose's `-- +goose ENVSUB ON` regions: environment variables ([`foreign`]);
//! - a directory declared Flyway's (`format = "flyway"`): `${name}` by default, as Flyway
//!   does, with its `${flyway:…}` built-ins ([`foreign`]).
//!
//! The checksum stays the one of the text as written ([`Migration::set_step_text`]), and a
//! secret's value (a name holding `password`, `secret`, `token` or `key`) is shown as `****`
//! by `preview` and in a failed step's error.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dirthara_source::placeholders::{self, Scope, Use, BUILT_IN_PREFIX};
use dirthara_source::sql::SqlDialect;

use super::{Connections, Migrator};
use crate::error::{Error, ErrorKind, Problem, Result};
use crate::migration::{Direction, Migration, StepFormat, StepSource};
use crate::Layout;

mod foreign;

/// What a secret's value is shown as.
pub(crate) const MASK: &str = "****";

/// The directive that opts a step in: a step without it is never looked at further.
const DIRECTIVE: &str = "dirthara:placeholders";

impl Migrator {
    /// `migrations` with every placeholder filled in: the same `Arc` when no step opts in.
    pub(super) fn fill_placeholders(
        &self,
        migrations: Arc<Vec<Migration>>,
        connections: &Connections,
    ) -> Result<Arc<Vec<Migration>>> {
        let mut filled: Option<Vec<Migration>> = None;
        let mut changed = Vec::new();
        let mut missing = Vec::new();
        for (index, migration) in migrations.iter().enumerate() {
            let dialect = match migration.format {
                StepFormat::Sql => {
                    let Ok(kind) = connections.kind(&migration.connection) else {
                        continue; // a connection without a URL is reported when it is needed
                    };
                    let Some(dialect) = kind.capabilities().sql_dialect else {
                        continue;
                    };
                    Some(dialect)
                }
                StepFormat::MongoCommands => None,
                _ => continue,
            };
            for direction in [Direction::Up, Direction::Down] {
                let Some(text) = migration.step(direction) else {
                    continue;
                };
                let step = match dialect {
                    Some(dialect) => self.fill_step(migration, direction, text, dialect),
                    None => self.fill_commands(migration, direction, text),
                };
                match step {
                    Filled::Unchanged => {}
                    Filled::Text(text) => {
                        let all = filled.get_or_insert_with(|| migrations.to_vec());
                        all[index].set_step_text(direction, text);
                        changed.push(index);
                    }
                    Filled::Unset(problems) => missing.extend(problems),
                }
            }
        }
        if !missing.is_empty() {
            return Err(Error::new(ErrorKind::PlaceholderUnset {
                problems: missing,
            }));
        }
        let Some(mut filled) = filled else {
            return Ok(migrations);
        };
        // The filled-in text is what runs: read it again as its database reads it.
        changed.dedup();
        let mut problems = Vec::new();
        for index in changed {
            let migration = &mut filled[index];
            if let Ok(kind) = connections.kind(&migration.connection) {
                problems.extend(crate::backend::read_steps(kind, migration));
            }
        }
        if !problems.is_empty() {
            return Err(Error::new(ErrorKind::InvalidMigration { problems }));
        }
        Ok(Arc::new(filled))
    }

    /// A step's text with its placeholders filled in, in the way its file asks for.
    fn fill_step(
        &self,
        migration: &Migration,
        direction: Direction,
        text: &str,
        dialect: SqlDialect,
    ) -> Filled {
        if let Some(scope) = opted_in(text) {
            return self.fill_directive(migration, direction, text, dialect, scope);
        }
        let envsub = migration.envsub_in(direction);
        if !envsub.is_empty() {
            return foreign::fill_goose(migration.source_of(direction), envsub, text);
        }
        let flyway = (migration.layout).is_some_and(|l| l.layout == Layout::Flyway && l.declared);
        if flyway {
            return self.fill_flyway(migration, direction, text, dialect);
        }
        Filled::Unchanged
    }

    /// `-- dirthara:placeholders [everywhere]`: every `${name}` of `scope` must have a value.
    fn fill_directive(
        &self,
        migration: &Migration,
        direction: Direction,
        text: &str,
        dialect: SqlDialect,
        scope: Scope,
    ) -> Filled {
        let uses = placeholders::uses(text, dialect, scope);
        if uses.is_empty() {
            return Filled::Unchanged;
        }
        let value = |one: &Use| self.placeholder_value(&one.name, migration, direction);
        let why = |name: &str| self.why_unset(name);
        replace_uses(migration.source_of(direction), text, &uses, value, why)
    }

    /// A JSON command file that says `"placeholders": true`: every `${name}` (all in its
    /// strings) must have a value, written into the string JSON-escaped.
    fn fill_commands(&self, migration: &Migration, direction: Direction, text: &str) -> Filled {
        let opted_in = text.contains("\"placeholders\"")
            && dirthara_source::commands::parse_commands(text).is_ok_and(|c| c.placeholders);
        if !opted_in {
            return Filled::Unchanged;
        }
        let uses = placeholders::uses_anywhere(text);
        if uses.is_empty() {
            return Filled::Unchanged;
        }
        let value = |one: &Use| {
            let value = self.placeholder_value(&one.name, migration, direction)?;
            let quoted = serde_json::Value::String(value).to_string();
            Some(quoted[1..quoted.len() - 1].to_string())
        };
        let why = |name: &str| self.why_unset(name);
        replace_uses(migration.source_of(direction), text, &uses, value, why)
    }

    /// The value of `${name}` in `migration`'s `direction` step, if it has one.
    fn placeholder_value(
        &self,
        name: &str,
        migration: &Migration,
        direction: Direction,
    ) -> Option<String> {
        let Some(built_in) = name.strip_prefix(BUILT_IN_PREFIX) else {
            return self.config.placeholders.get(name).cloned();
        };
        let url = || {
            let url = self.config.connection_url(&migration.connection).ok()?;
            url::Url::parse(url).ok()
        };
        let nonempty = |s: String| (!s.is_empty()).then_some(s);
        match built_in {
            "database" => url().and_then(|url| database_of(&url)),
            "user" => url().and_then(|url| {
                let user = url.username();
                let decoded = percent_decode(user);
                nonempty(decoded)
            }),
            "schema" => self.schema.clone(),
            "target" => self.target.clone(),
            "filename" => {
                let file = &migration.source_of(direction).file;
                Path::new(file)
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
            }
            _ => None,
        }
    }

    /// Why `name` has no value, and how to give it one.
    fn why_unset(&self, name: &str) -> String {
        match name.strip_prefix(BUILT_IN_PREFIX) {
            Some("schema") => " (it is the schema of a `--schemas` fleet target; this run has \
                               none)"
                .to_string(),
            Some("target") => " (it is a fleet target's name; this run is no fleet)".to_string(),
            Some("database") => " (the connection's URL names no database)".to_string(),
            Some("user") => " (the connection's URL names no user)".to_string(),
            Some(other) => format!(
                " (`{BUILT_IN_PREFIX}{other}` is no built-in; they are `dirthara:database`, \
                 `dirthara:schema`, `dirthara:user`, `dirthara:target` and `dirthara:filename`)"
            ),
            None => format!(
                "; set it with `--placeholder {name}=VALUE`, `{name} = \"...\"` under \
                 [placeholders] in dirthara.toml, or DIRTHARA_PLACEHOLDER_{}",
                name.to_ascii_uppercase().replace(['.', '-'], "_")
            ),
        }
    }

    /// The values of placeholders whose names say they are secrets: the configured ones, and
    /// the environment variables that goose's `ENVSUB` and Flyway's `FLYWAY_PLACEHOLDERS_*`
    /// may fill in (those of four characters or more: a shorter one would mask every
    /// occurrence of a common word).
    pub(crate) fn secret_values(&self) -> Vec<String> {
        let configured = (self.config.placeholders.iter())
            .filter(|(name, value)| is_secret_name(name) && !value.is_empty())
            .map(|(_, value)| value.clone());
        // `vars_os`: `vars` panics on a variable that is not UTF-8, which is no secret of ours.
        let environment = std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .filter(|(name, value)| is_secret_name(&name.to_ascii_lowercase()) && value.len() >= 4)
            .map(|(_, value)| value);
        configured.chain(environment).collect()
    }

    /// What shows a text with every secret value as [`MASK`]: the secrets (the environment's
    /// among them) gathered once, for every text it is given.
    pub(crate) fn masker(&self) -> impl Fn(&str) -> String {
        let secrets = self.secret_values();
        move |text| mask(text, &secrets)
    }

    /// `error` with every secret value in the database's words shown as [`MASK`].
    pub(crate) fn masked_error(&self, error: Error) -> Error {
        let secrets = self.secret_values();
        if secrets.is_empty() {
            return error;
        }
        error.map_database_text(|text| mask(text, &secrets))
    }
}

/// The step's placeholder scope, if its header opts in.
fn opted_in(text: &str) -> Option<placeholders::Scope> {
    if !text.contains(DIRECTIVE) {
        return None;
    }
    dirthara_source::directives::parse_directives(text)
        .ok()
        .and_then(|header| header.placeholders)
}

/// Whether a placeholder's name says its value is a secret.
pub(crate) fn is_secret_name(name: &str) -> bool {
    ["password", "passwd", "secret", "token", "key"]
        .iter()
        .any(|word| name.contains(word))
}

fn mask(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for secret in secrets {
        out = out.replace(secret.as_str(), MASK);
    }
    out
}

/// What filling a step's placeholders came to.
enum Filled {
    /// Nothing to fill: the step runs as written.
    Unchanged,
    Text(String),
    /// Values missing: one problem per name, with every line it is on.
    Unset(Vec<Problem>),
}

/// A use without a value: as written, on the step's `line`, and why it has none.
struct Unset {
    shown: String,
    line: usize,
    why: String,
}

/// `uses` of a step's `text` replaced by `value`'s answers; each without one is a problem,
/// told `why`.
fn replace_uses(
    source: &StepSource,
    text: &str,
    uses: &[Use],
    value: impl FnMut(&Use) -> Option<String>,
    why: impl Fn(&str) -> String,
) -> Filled {
    match placeholders::replace(text, uses, value) {
        Ok(text) => Filled::Text(text),
        Err(unset) => Filled::Unset(unset_problems(
            source,
            unset.into_iter().map(|one| Unset {
                shown: format!("${{{}}}", one.name),
                line: one.line,
                why: why(&one.name),
            }),
        )),
    }
}

/// One problem per name and file, with every line it is on.
fn unset_problems(source: &StepSource, unset: impl Iterator<Item = Unset>) -> Vec<Problem> {
    let mut names: Vec<(Unset, Vec<usize>)> = Vec::new();
    for one in unset {
        let line = source.file_line(one.line);
        match names.iter_mut().find(|(first, _)| first.shown == one.shown) {
            Some((_, lines)) if lines.last() != Some(&line) => lines.push(line),
            Some(_) => {}
            None => names.push((one, vec![line])),
        }
    }
    (names.into_iter())
        .map(|(one, lines)| {
            let at = lines.iter().map(usize::to_string).collect::<Vec<_>>();
            let at = match at.len() {
                1 => format!("line {}", at[0]),
                _ => format!("lines {}", at.join(", ")),
            };
            let reason = format!("{at}: `{}` has no value{}", one.shown, one.why);
            Problem::new(PathBuf::from(&source.file), reason)
        })
        .collect()
}

/// The database a URL names: its path (a server's database, a SQLite file), without `/`.
fn database_of(url: &url::Url) -> Option<String> {
    let path = percent_decode(url.path());
    let path = match url.scheme().to_ascii_lowercase().starts_with("sqlite") {
        true => path,
        false => path.trim_start_matches('/').to_string(),
    };
    (!path.is_empty()).then_some(path)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied(),
            bytes.get(i + 2).copied(),
        ) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap() * 16 + hex(l).unwrap()) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_named_so_and_masked() {
        assert!(is_secret_name("db_password") && is_secret_name("api_key"));
        assert!(!is_secret_name("owner"));
        assert_eq!(
            mask("x s3cr3t y s3cr3t", &["s3cr3t".to_string()]),
            "x **** y ****"
        );
    }

    #[test]
    fn the_database_and_user_come_from_the_url() {
        let url = url::Url::parse("postgres://app%40x@db:5432/shop?sslmode=off").unwrap();
        assert_eq!(database_of(&url).as_deref(), Some("shop"));
        assert_eq!(percent_decode(url.username()), "app@x");
        let url = url::Url::parse("mysql://root@db").unwrap();
        assert_eq!(database_of(&url), None);
    }
}
