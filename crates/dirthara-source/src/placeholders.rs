//! `${name}` placeholders: values filled in when a step runs (a schema owner, a role per
//! environment), in a SQL step that opts in with `-- dirthara:placeholders`, and only there.
//!
//! A file that does not opt in keeps every `${…}` as written, so a PL/pgSQL `format('${x}')`
//! or a JSON default is never touched by surprise. One that opts in has them replaced in its
//! code only: never inside a string literal, a dollar-quoted body or a comment, unless it says
//! `-- dirthara:placeholders everywhere`. Quoted identifiers are code (`CREATE SCHEMA
//! "${schema}"`).
//!
//! Names are letters, digits, `_`, `.` and `-`, starting with a letter or `_`, matched
//! without regard to ASCII case (as Flyway does); `dirthara:` names are the runner's
//! built-ins, and `flyway:` ones Flyway's. A `${…}` holding anything else is not a
//! placeholder and stays as written.
//!
//! Pure: which values exist is the runner's business ([`replace`] asks for each).

use std::ops::Range;

use crate::sql::{code_spans, SqlDialect};

pub mod envsub;

/// Where a step that opted in has its placeholders replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `-- dirthara:placeholders`: in code, not in literals, dollar-quoted bodies or comments.
    Code,
    /// `-- dirthara:placeholders everywhere`: wherever `${name}` is written.
    Everywhere,
}

/// The namespace of the runner's built-in placeholders: `${dirthara:database}`.
pub const BUILT_IN_PREFIX: &str = "dirthara:";

/// One `${name}` of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// The name, lower-cased: what a value is looked up by.
    pub name: String,
    /// The step's line it is on (1-based).
    pub line: usize,
    /// Where `${name}` is in the step's text.
    pub range: Range<usize>,
}

/// Every placeholder of `text` that `scope` replaces, in order. `dialect` is how the step's
/// database reads it (where its literals and comments are).
///
/// ```
/// use dirthara_source::placeholders::{uses, Scope};
/// use dirthara_source::sql::SqlDialect::Postgres;
/// let sql = "CREATE SCHEMA \"${Schema}\"; -- ${note}\nSELECT '${kept}', $$${body}$$;";
/// let found: Vec<_> = uses(sql, Postgres, Scope::Code).into_iter().map(|u| (u.name, u.line)).collect();
/// assert_eq!(found, [("schema".to_string(), 1)]);
/// assert_eq!(uses(sql, Postgres, Scope::Everywhere).len(), 4);
/// ```
pub fn uses(text: &str, dialect: SqlDialect, scope: Scope) -> Vec<Use> {
    let code = match scope {
        Scope::Code => Some(code_spans(text, dialect)),
        Scope::Everywhere => None,
    };
    find(text, code)
}

/// Every placeholder of `text`, wherever it is: a JSON command file's, whose `${…}` can only
/// be inside strings.
pub fn uses_anywhere(text: &str) -> Vec<Use> {
    find(text, None)
}

/// The placeholders of `text`, only those inside `code` when given.
fn find(text: &str, code: Option<Vec<Range<usize>>>) -> Vec<Use> {
    let mut found = Vec::new();
    let mut line = 1;
    let mut counted = 0;
    let mut from = 0;
    while let Some(at) = text[from..].find("${").map(|i| from + i) {
        from = at + 2;
        let Some(length) = text[from..].find('}') else {
            break;
        };
        let name = &text[from..from + length];
        if !is_name(name) {
            continue;
        }
        let range = at..from + length + 1;
        if let Some(code) = &code {
            // `${name}` is several tokens (`$`, `{`, the name, `}`), all of them code and
            // written together: the spans that cover its first and last bytes must leave no
            // gap between them.
            if !covered(code, &range) {
                continue;
            }
        }
        line += text.as_bytes()[counted..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        counted = at;
        found.push(Use {
            name: name.to_ascii_lowercase(),
            line,
            range: range.clone(),
        });
        from = range.end;
    }
    found
}

/// `text` with each of `uses` (from [`uses`] on the same text) replaced by `value`'s answer,
/// or every use `value` had no answer for.
///
/// ```
/// use dirthara_source::placeholders::{replace, uses, Scope};
/// use dirthara_source::sql::SqlDialect::MySql;
/// let sql = "GRANT SELECT ON t TO ${role};";
/// let found = uses(sql, MySql, Scope::Code);
/// assert_eq!(replace(sql, &found, |_| Some("app".into())).unwrap(), "GRANT SELECT ON t TO app;");
/// assert_eq!(replace(sql, &found, |_| None).unwrap_err()[0].name, "role");
/// ```
pub fn replace<'u>(
    text: &str,
    uses: &'u [Use],
    mut value: impl FnMut(&Use) -> Option<String>,
) -> Result<String, Vec<&'u Use>> {
    let mut out = String::with_capacity(text.len());
    let mut missing = Vec::new();
    let mut copied = 0;
    for one in uses {
        match value(one) {
            Some(value) => {
                out.push_str(&text[copied..one.range.start]);
                out.push_str(&value);
                copied = one.range.end;
            }
            None => missing.push(one),
        }
    }
    out.push_str(&text[copied..]);
    match missing.is_empty() {
        true => Ok(out),
        false => Err(missing),
    }
}

/// A placeholder's name: `[A-Za-z_][A-Za-z0-9_.-]*`, or a built-in `dirthara:` (or Flyway's
/// `flyway:`) one.
pub fn is_name(name: &str) -> bool {
    let prefix = [BUILT_IN_PREFIX, "flyway:"].into_iter().find_map(|prefix| {
        let found = name.get(..prefix.len())?.eq_ignore_ascii_case(prefix);
        found.then_some(prefix.len())
    });
    let bare = &name[prefix.unwrap_or(0)..];
    let mut chars = bare.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Whether the sorted, disjoint `spans` cover all of `range` without a gap.
fn covered(spans: &[Range<usize>], range: &Range<usize>) -> bool {
    let first = spans.partition_point(|s| s.end <= range.start);
    let mut reached = range.start;
    for span in &spans[first..] {
        if span.start > reached {
            return false;
        }
        reached = reached.max(span.end);
        if reached >= range.end {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use SqlDialect::{MySql, Postgres, Sqlite};

    fn names(text: &str, dialect: SqlDialect, scope: Scope) -> Vec<String> {
        uses(text, dialect, scope)
            .into_iter()
            .map(|u| u.name)
            .collect()
    }

    #[test]
    fn code_placeholders_are_found_in_code_and_quoted_identifiers_only() {
        let sql = "CREATE TABLE ${prefix}_users (id int);\n\
                   COMMENT ON TABLE \"${schema}\".t IS 'by ${owner}';\n\
                   /* ${in_comment} */ SELECT E'${escaped}', $f$ ${body} $f$, ${Dirthara:Target};";
        assert_eq!(
            names(sql, Postgres, Scope::Code),
            ["prefix", "schema", "dirthara:target"]
        );
        assert_eq!(names(sql, Postgres, Scope::Everywhere).len(), 7);
    }

    #[test]
    fn each_dialect_reads_its_own_literals() {
        // MySQL: "..." is a string, `...` an identifier and [...] no quote at all; SQLite:
        // "..." is an identifier.
        let sql = "SELECT \"${a}\", `${b}`, [${c}], '${d}'";
        assert_eq!(names(sql, MySql, Scope::Code), ["b", "c"]);
        assert_eq!(names(sql, Sqlite, Scope::Code), ["a", "b", "c"]);
        assert_eq!(names("# ${x}\nSELECT ${y}", MySql, Scope::Code), ["y"]);
    }

    #[test]
    fn what_is_no_placeholder_stays_as_written() {
        for text in [
            "SELECT '${}'",
            "${1x}",
            "${ a }",
            "${a",
            "$${a b}",
            "${a:b}",
        ] {
            let found = uses(text, Postgres, Scope::Everywhere);
            assert!(found.is_empty(), "{text}: {found:?}");
        }
        assert_eq!(
            names(
                "${a-b.c_9} ${Flyway:defaultSchema}",
                Postgres,
                Scope::Everywhere
            ),
            ["a-b.c_9", "flyway:defaultschema"]
        );
    }

    #[test]
    fn lines_and_replacement() {
        let sql = "SELECT 1;\n\nGRANT ${a} TO ${b};\n${a};";
        let found = uses(sql, Postgres, Scope::Code);
        let lines: Vec<_> = found.iter().map(|u| u.line).collect();
        assert_eq!(lines, [3, 3, 4]);
        let out = replace(sql, &found, |u| (u.name == "a").then(|| "x".to_string()));
        assert_eq!(
            out.unwrap_err().iter().map(|u| u.line).collect::<Vec<_>>(),
            [3]
        );
        let out = replace(sql, &found, |u| Some(u.name.to_uppercase())).unwrap();
        assert_eq!(out, "SELECT 1;\n\nGRANT A TO B;\nA;");
    }
}
