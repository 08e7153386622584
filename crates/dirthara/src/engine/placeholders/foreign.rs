//! Other tools' placeholders, filled in as those tools fill them, without their pitfalls:
//!
//! - goose's `-- +goose ENVSUB ON` regions take environment variables
//!   ([`dirthara_source::placeholders::envsub`]); an unset bare `${VAR}` is refused where goose
//!   would write an empty string.
//! - A directory declared Flyway's (`format = "flyway"`) has `${name}` replaced in every file
//!   by default, as Flyway does, anywhere in the text, with values from dirthara's sources or
//!   Flyway's own `FLYWAY_PLACEHOLDERS_<NAME>`, and Flyway's `${flyway:…}` built-ins. One
//!   without a value is refused in code, as Flyway refuses it, but left as written inside a
//!   string literal, a dollar-quoted body or a comment, where Flyway would fail on a literal
//!   `${…}` it was never meant to touch. A detected `V<n>__` directory may be refinery's,
//!   which replaces nothing: only a declared one is Flyway's here.

use std::ops::Range;

use dirthara_source::placeholders::envsub::{self, Fallback, Unresolved};
use dirthara_source::placeholders::{self, Scope, Use};
use dirthara_source::sql::SqlDialect;

use super::{replace_uses, unset_problems, Filled, Unset};
use crate::engine::Migrator;
use crate::migration::{Direction, Migration, StepSource};

/// The namespace of Flyway's built-in placeholders: `${flyway:defaultSchema}`.
const FLYWAY_PREFIX: &str = "flyway:";

/// goose's `ENVSUB ON` regions of a step, filled from the environment.
pub(super) fn fill_goose(source: &StepSource, regions: &[Range<usize>], text: &str) -> Filled {
    let uses = envsub::uses(text, regions);
    if uses.is_empty() {
        return Filled::Unchanged;
    }
    let mut out = String::with_capacity(text.len());
    let mut unset = Vec::new();
    let mut copied = 0;
    for one in &uses {
        let value = std::env::var(&one.name).ok();
        match envsub::resolve(&one.fallback, value.as_deref()) {
            Ok(value) => {
                out.push_str(&text[copied..one.range.start]);
                out.push_str(&value);
                copied = one.range.end;
            }
            Err(why) => unset.push(Unset {
                shown: text[one.range.clone()].to_string(),
                line: one.line,
                why: why_unset_in_env(&one.name, &one.fallback, why),
            }),
        }
    }
    if !unset.is_empty() {
        return Filled::Unset(unset_problems(source, unset.into_iter()));
    }
    out.push_str(&text[copied..]);
    Filled::Text(out)
}

fn why_unset_in_env(name: &str, fallback: &Fallback, why: Unresolved) -> String {
    let state = match fallback {
        Fallback::ErrorIfUnsetOrEmpty(_) => "is unset or empty",
        _ => "is unset",
    };
    match why {
        Unresolved::Refused(message) if !message.is_empty() => {
            format!(" (goose `ENVSUB ON`): {message}; the environment variable {name} {state}")
        }
        Unresolved::Refused(_) => {
            format!(" (goose `ENVSUB ON`): the environment variable {name} {state}")
        }
        Unresolved::Unset => format!(
            " (goose `ENVSUB ON`): the environment variable {name} is unset; export it, or \
             write `${{{name}:-}}` to make it empty when unset (goose would have written an \
             empty string silently)"
        ),
    }
}

impl Migrator {
    /// A step of a declared Flyway directory: every `${name}` with a value is replaced,
    /// wherever it is; one without is refused in code and left as written elsewhere.
    pub(super) fn fill_flyway(
        &self,
        migration: &Migration,
        direction: Direction,
        text: &str,
        dialect: SqlDialect,
    ) -> Filled {
        let all = placeholders::uses(text, dialect, Scope::Everywhere);
        if all.is_empty() {
            return Filled::Unchanged;
        }
        let in_code = placeholders::uses(text, dialect, Scope::Code);
        let value = |one: &Use| self.flyway_value(&one.name, migration, direction, dialect);
        let replaced: Vec<Use> = (all.into_iter())
            .filter(|one| value(one).is_some() || in_code.iter().any(|c| c.range == one.range))
            .collect();
        if replaced.is_empty() {
            return Filled::Unchanged;
        }
        let why = |name: &str| self.why_unset_in_flyway(name);
        replace_uses(migration.source_of(direction), text, &replaced, value, why)
    }

    /// A Flyway placeholder's value: `${flyway:…}` built-ins, then dirthara's own values
    /// (`--placeholder`, `[placeholders]`, `DIRTHARA_PLACEHOLDER_*`, `${dirthara:…}`), then
    /// Flyway's `FLYWAY_PLACEHOLDERS_<NAME>`.
    fn flyway_value(
        &self,
        name: &str,
        migration: &Migration,
        direction: Direction,
        dialect: SqlDialect,
    ) -> Option<String> {
        let Some(built_in) = name.strip_prefix(FLYWAY_PREFIX) else {
            return (self.placeholder_value(name, migration, direction))
                .or_else(|| std::env::var(flyway_variable(name)).ok());
        };
        let ours = |name: &str| self.placeholder_value(name, migration, direction);
        match built_in {
            "defaultschema" => match dialect {
                SqlDialect::Postgres => Some(self.schema.clone().unwrap_or("public".into())),
                SqlDialect::MySql => ours("dirthara:database"),
                _ => Some("main".into()),
            },
            "user" => ours("dirthara:user"),
            "database" => ours("dirthara:database"),
            "filename" => ours("dirthara:filename"),
            "table" => Some(self.config.history_table.clone()),
            // Flyway writes the local time; UTC here, the same on every machine of a fleet.
            "timestamp" => {
                let now = dirthara_core::format_timestamp(std::time::SystemTime::now());
                Some(now[..19].replace('T', " "))
            }
            "workingdirectory" => std::env::current_dir()
                .ok()
                .map(|dir| dir.display().to_string()),
            _ => None,
        }
    }

    fn why_unset_in_flyway(&self, name: &str) -> String {
        match name.strip_prefix(FLYWAY_PREFIX) {
            Some("user") | Some("database") => {
                format!(
                    " (the connection's URL names no {})",
                    &name[FLYWAY_PREFIX.len()..]
                )
            }
            Some(other) => format!(
                " (`{FLYWAY_PREFIX}{other}` is no Flyway built-in dirthara fills; they are \
                 `flyway:defaultSchema`, `flyway:user`, `flyway:database`, `flyway:filename`, \
                 `flyway:timestamp`, `flyway:table` and `flyway:workingDirectory`)"
            ),
            None => {
                let mut why = self.why_unset(name);
                if !name.contains(':') {
                    why.push_str(&format!(" (or Flyway's {})", flyway_variable(name)));
                }
                why
            }
        }
    }
}

/// Flyway's environment variable for a placeholder: `FLYWAY_PLACEHOLDERS_<NAME>`.
fn flyway_variable(name: &str) -> String {
    format!("FLYWAY_PLACEHOLDERS_{}", name.to_ascii_uppercase())
}
