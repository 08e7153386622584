//! goose's `-- +goose ENVSUB ON` / `OFF`: environment variables substituted into the lines
//! between the two (or to the end of the file), wherever they are written there, string
//! literals and routine bodies included, as goose does.
//!
//! goose's forms: `$VAR`, `${VAR}`, `${VAR:-default}` (the default when unset or empty),
//! `${VAR-default}` (when unset), `${VAR:?message}` (an error when unset or empty) and
//! `${VAR?message}` (when unset). Two deliberate differences, both refusing what goose would
//! run wrongly:
//! - a bare `${VAR}` or `$VAR` whose variable is unset is an error, where goose writes an empty
//!   string (`DROP TABLE ${PREFIX}users` must not become `DROP TABLE users`); write
//!   `${VAR:-}` for "empty when unset";
//! - `$name$` is a dollar-quote tag, never a variable, so an `ENVSUB ON` region may hold a
//!   PL/pgSQL body.
//!
//! Pure: the runner answers each variable ([`resolve`]).

use std::ops::Range;

/// What a use says to do when its variable is unset (or empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// `$VAR`, `${VAR}`: the variable must be set (it may be empty).
    Required,
    /// `${VAR-text}`: `text` when unset.
    IfUnset(String),
    /// `${VAR:-text}`: `text` when unset or empty.
    IfUnsetOrEmpty(String),
    /// `${VAR?message}`: an error saying `message` when unset.
    ErrorIfUnset(String),
    /// `${VAR:?message}`: an error saying `message` when unset or empty.
    ErrorIfUnsetOrEmpty(String),
}

/// One variable of an `ENVSUB ON` region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvUse {
    /// The variable's name, as written (environment names are case-sensitive).
    pub name: String,
    pub fallback: Fallback,
    /// The step's line it is on (1-based).
    pub line: usize,
    /// Where the use is in the step's text.
    pub range: Range<usize>,
}

/// Every variable used in `regions` (byte ranges of `text`, ascending and disjoint).
///
/// ```
/// use dirthara_source::placeholders::envsub::{uses, Fallback};
/// let sql = "CREATE TABLE ${P}t (a int DEFAULT ${N:-0});\nSELECT $$x$$, $body$ $Q $body$;";
/// let found = uses(sql, &[0..sql.len()]);
/// let names: Vec<_> = found.iter().map(|u| (u.name.as_str(), u.line)).collect();
/// assert_eq!(names, [("P", 1), ("N", 1), ("Q", 2)]);
/// assert_eq!(found[1].fallback, Fallback::IfUnsetOrEmpty("0".into()));
/// ```
pub fn uses(text: &str, regions: &[Range<usize>]) -> Vec<EnvUse> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for region in regions {
        // Regions are the step's own; one past its end (a text replaced since) reads nothing.
        let end = region.end.min(text.len());
        let mut at = region.start;
        while at < end {
            if bytes[at] != b'$' {
                at += 1;
                continue;
            }
            match parse_one(&text[at..end]) {
                Some((length, name, fallback)) => {
                    found.push(EnvUse {
                        name,
                        fallback,
                        line: 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count(),
                        range: at..at + length,
                    });
                    at += length;
                }
                // `$$` and `$tag$`: skip the whole delimiter, so that its closing `$` is
                // not read as the start of a variable.
                None => at += dollar_run(&bytes[at..end]),
            }
        }
    }
    found
}

/// Why a use has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// The variable is unset (bare form).
    Unset,
    /// `${VAR?message}` / `${VAR:?message}` fired.
    Refused(String),
}

/// The text a use stands for, given its variable's value (`None`: unset).
///
/// ```
/// use dirthara_source::placeholders::envsub::{resolve, Fallback, Unresolved};
/// assert_eq!(resolve(&Fallback::IfUnsetOrEmpty("d".into()), Some("")), Ok("d".into()));
/// assert_eq!(resolve(&Fallback::IfUnset("d".into()), Some("")), Ok("".into()));
/// assert_eq!(resolve(&Fallback::Required, None), Err(Unresolved::Unset));
/// ```
pub fn resolve(fallback: &Fallback, value: Option<&str>) -> Result<String, Unresolved> {
    let empty = value.is_none_or(str::is_empty);
    match (fallback, value) {
        (Fallback::IfUnsetOrEmpty(text), _) if empty => Ok(text.clone()),
        (Fallback::IfUnset(text), None) => Ok(text.clone()),
        (Fallback::ErrorIfUnsetOrEmpty(message), _) if empty => {
            Err(Unresolved::Refused(message.clone()))
        }
        (Fallback::ErrorIfUnset(message), None) => Err(Unresolved::Refused(message.clone())),
        (Fallback::Required, None) => Err(Unresolved::Unset),
        (_, Some(value)) => Ok(value.to_string()),
        // Only the fallbacks matched above can meet an unset variable.
        (Fallback::IfUnsetOrEmpty(_) | Fallback::ErrorIfUnsetOrEmpty(_), None) => {
            unreachable!("unset is empty")
        }
    }
}

/// A use at the start of `text` (which starts with `$`): its length, name and fallback.
fn parse_one(text: &str) -> Option<(usize, String, Fallback)> {
    let rest = &text[1..];
    if let Some(inner) = rest.strip_prefix('{') {
        let close = inner.find('}')?;
        let body = &inner[..close];
        let name_end = body
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(body.len());
        let (name, operator) = body.split_at(name_end);
        if !is_name(name) {
            return None;
        }
        let fallback = match operator {
            "" => Fallback::Required,
            _ if operator.starts_with(":-") => Fallback::IfUnsetOrEmpty(operator[2..].into()),
            _ if operator.starts_with(":?") => Fallback::ErrorIfUnsetOrEmpty(operator[2..].into()),
            _ if operator.starts_with('-') => Fallback::IfUnset(operator[1..].into()),
            _ if operator.starts_with('?') => Fallback::ErrorIfUnset(operator[1..].into()),
            // `${VAR:1:2}` (a substring) and the like: not goose's subset, left as written.
            _ => return None,
        };
        return Some((close + 3, name.to_string(), fallback));
    }
    let length = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..length];
    // `$tag$` opens or closes a dollar-quoted body.
    if !is_name(name) || rest[length..].starts_with('$') {
        return None;
    }
    Some((1 + length, name.to_string(), Fallback::Required))
}

/// The length of the `$…$` delimiter (or lone `$`) at the start of `bytes`.
fn dollar_run(bytes: &[u8]) -> usize {
    let tag = bytes[1..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    match bytes.get(1 + tag) {
        Some(b'$') => tag + 2,
        _ => 1,
    }
}

/// An environment variable's name as goose reads one: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(String, Fallback)> {
        uses(text, std::slice::from_ref(&(0..text.len())))
            .into_iter()
            .map(|u| (u.name, u.fallback))
            .collect()
    }

    #[test]
    fn goose_forms() {
        let text = "$A ${B} ${C:-x y} ${D-} ${E:?say} ${F?}";
        assert_eq!(
            found(text),
            [
                ("A".into(), Fallback::Required),
                ("B".into(), Fallback::Required),
                ("C".into(), Fallback::IfUnsetOrEmpty("x y".into())),
                ("D".into(), Fallback::IfUnset(String::new())),
                ("E".into(), Fallback::ErrorIfUnsetOrEmpty("say".into())),
                ("F".into(), Fallback::ErrorIfUnset(String::new())),
            ]
        );
    }

    #[test]
    fn dollar_quotes_positional_parameters_and_odd_forms_stay() {
        for text in [
            "$$ body $$",
            "$fn$ SELECT 1 $fn$",
            "$1, $2",
            "${1}",
            "${A:1:2}",
            "${ A }",
            "${A",
            "cost $",
        ] {
            assert_eq!(found(text), [], "{text}");
        }
        // A variable right after a dollar quote's closing tag is still one.
        assert_eq!(found("$q$x$q$$A").len(), 1);
    }

    #[test]
    fn only_the_regions_are_read() {
        let text = "${A}\n${B}\n${C}";
        let inside: Vec<_> = uses(text, std::slice::from_ref(&(5..10)))
            .into_iter()
            .map(|u| (u.name, u.line, u.range))
            .collect();
        assert_eq!(inside, [("B".to_string(), 2, 5..9)]);
    }

    #[test]
    fn resolution() {
        use Fallback::*;
        assert_eq!(resolve(&Required, Some("")), Ok(String::new()));
        assert_eq!(resolve(&IfUnset("d".into()), None), Ok("d".into()));
        assert_eq!(
            resolve(&IfUnsetOrEmpty("d".into()), Some("v")),
            Ok("v".into())
        );
        assert_eq!(
            resolve(&ErrorIfUnset("m".into()), None),
            Err(Unresolved::Refused("m".into()))
        );
        assert_eq!(
            resolve(&ErrorIfUnset("m".into()), Some("")),
            Ok(String::new())
        );
        assert_eq!(
            resolve(&ErrorIfUnsetOrEmpty("m".into()), Some("")),
            Err(Unresolved::Refused("m".into()))
        );
    }
}
