//! Header directives: `-- dirthara:no-transaction`, `-- dirthara:connection <name>`,
//! `-- dirthara:table-lock-timeout <duration>|off`, `-- dirthara:allow-blocking <reason>` and
//! `-- dirthara:placeholders [everywhere]` in the leading comment lines of a SQL step.

use crate::placeholders::Scope;

/// The prefix of every header directive, e.g. `-- dirthara:no-transaction`.
const DIRECTIVE_PREFIX: &str = "dirthara:";

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub no_transaction: bool,
    pub connection: Option<String>,
    /// `-- dirthara:table-lock-timeout 5s|off`, as written: the runner reads it with the one
    /// parser of `table_lock_timeout`.
    pub table_lock_timeout: Option<String>,
    /// `-- dirthara:allow-blocking <reason>`: the step may block the application while it
    /// rewrites or scans a big table (a maintenance window); the reason is printed when it runs.
    pub allow_blocking: Option<String>,
    /// `-- dirthara:placeholders [everywhere]`: the step's `${name}` placeholders are
    /// replaced when it runs (see [`crate::placeholders`]).
    pub placeholders: Option<Scope>,
    /// `-- dirthara:squashes 1,2,3`: the versions a baseline migration (`B<V>__<name>.sql`)
    /// stands for, which `dirthara squash` writes.
    pub squashes: Option<Vec<i64>>,
}

/// Reads the `-- dirthara:...` directives from the leading comment lines of a file.
/// `Err` is the reason, for the caller to attach to the file.
pub fn parse_directives(text: &str) -> Result<Header, String> {
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
        if directive.split_whitespace().next() == Some("allow-blocking") {
            let reason = directive.trim().trim_start_matches("allow-blocking").trim();
            if reason.is_empty() {
                return Err(
                    "`-- dirthara:allow-blocking` needs a reason, printed when the step \
                            runs: e.g. `-- dirthara:allow-blocking maintenance window 2026-12-05`"
                        .into(),
                );
            }
            if header.allow_blocking.replace(reason.to_string()).is_some() {
                return Err("declares `-- dirthara:allow-blocking` twice".into());
            }
            continue;
        }
        match (words.next(), words.next(), words.next()) {
            (Some("no-transaction"), None, _) => header.no_transaction = true,
            (Some("placeholders"), scope, None) => {
                let scope = match scope {
                    None => Scope::Code,
                    Some("everywhere") => Scope::Everywhere,
                    Some(other) => {
                        return Err(format!(
                            "`-- dirthara:placeholders {other}`: write `-- dirthara:placeholders` \
                             (in code only) or `-- dirthara:placeholders everywhere` (in string \
                             literals and dollar-quoted bodies too)"
                        ))
                    }
                };
                if header.placeholders.replace(scope).is_some() {
                    return Err("declares `-- dirthara:placeholders` twice".into());
                }
            }
            (Some("table-lock-timeout"), Some(value), None) => {
                if header
                    .table_lock_timeout
                    .replace(value.to_string())
                    .is_some()
                {
                    return Err("declares `-- dirthara:table-lock-timeout` twice".into());
                }
            }
            (Some("squashes"), Some(list), None) => {
                let versions = parse_squashed(list)?;
                if header.squashes.replace(versions).is_some() {
                    return Err("declares `-- dirthara:squashes` twice".into());
                }
            }
            (Some("connection"), Some(name), None) => {
                if !valid_connection_name(name) {
                    return Err(format!(
                        "`-- dirthara:connection {name}`: a connection name uses letters, digits, `_` and `-`"
                    ));
                }
                if header.connection.replace(name.to_string()).is_some() {
                    return Err("declares `-- dirthara:connection` twice".into());
                }
            }
            _ => {
                return Err(format!(
                    "unknown directive `-- {DIRECTIVE_PREFIX}{}`; the known ones are \
                     `-- dirthara:no-transaction`, `-- dirthara:connection <name>`, \
                     `-- dirthara:table-lock-timeout <duration>|off`, \
                     `-- dirthara:allow-blocking <reason>`, \
                     `-- dirthara:placeholders [everywhere]` and, in a baseline that \
                     `dirthara squash` wrote, `-- dirthara:squashes <versions>`",
                    directive.trim()
                ))
            }
        }
    }
    Ok(header)
}

/// The versions of `-- dirthara:squashes 1,2,3`, in order and each once.
pub fn parse_squashed(list: &str) -> Result<Vec<i64>, String> {
    let mut versions = Vec::new();
    for word in list.split(',') {
        match word.trim().parse::<i64>() {
            Ok(v) if v >= 0 && versions.last().is_none_or(|last| *last < v) => versions.push(v),
            _ => {
                return Err(format!(
                    "`-- dirthara:squashes {list}`: the versions a baseline stands for are \
                     written in increasing order, separated by commas (`1,2,5`); write the \
                     baseline again with `dirthara squash --to <version>`"
                ))
            }
        }
    }
    Ok(versions)
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

    #[test]
    fn directives_are_read_from_the_leading_comments_only() {
        let h = parse_directives(
            "-- a comment\n-- dirthara:no-transaction\n--dirthara:connection analytics\n\nCREATE INDEX;\n-- dirthara:bogus\n",
        )
        .unwrap();
        assert_eq!(
            h,
            Header {
                no_transaction: true,
                connection: Some("analytics".into()),
                table_lock_timeout: None,
                allow_blocking: None,
                placeholders: None,
                squashes: None,
            }
        );
        let h = parse_directives("-- dirthara:squashes 1,2,20240101120000\nSELECT 1").unwrap();
        assert_eq!(h.squashes, Some(vec![1, 2, 20240101120000]));
        for bad in ["2,1", "1,1", "1,x", "-1", ""] {
            let text = format!("-- dirthara:squashes {bad}\nSELECT 1");
            assert!(parse_directives(&text).is_err(), "{bad}");
        }
        let h = parse_directives("-- dirthara:placeholders\nSELECT ${a}").unwrap();
        assert_eq!(h.placeholders, Some(Scope::Code));
        let h = parse_directives("-- dirthara:placeholders everywhere\nSELECT 1").unwrap();
        assert_eq!(h.placeholders, Some(Scope::Everywhere));
        assert_eq!(parse_directives("SELECT 1;").unwrap(), Header::default());
        let h = parse_directives("-- dirthara:allow-blocking  window of 5 Dec, small table\nALTER TABLE t ALTER c TYPE int").unwrap();
        assert_eq!(
            h.allow_blocking.as_deref(),
            Some("window of 5 Dec, small table")
        );
    }

    #[test]
    fn unknown_or_malformed_directives_are_refused() {
        for (text, needle) in [
            (
                "-- dirthara:no-transactions\nSELECT 1;",
                "unknown directive",
            ),
            ("-- dirthara:connection\nSELECT 1;", "unknown directive"),
            ("-- dirthara:connection a b\nSELECT 1;", "unknown directive"),
            (
                "-- dirthara:connection a\n-- dirthara:connection b\nSELECT 1;",
                "twice",
            ),
            (
                "-- dirthara:connection bad.name\nSELECT 1;",
                "connection name",
            ),
            ("-- dirthara:allow-blocking\nSELECT 1;", "needs a reason"),
            (
                "-- dirthara:placeholders anywhere\nSELECT 1;",
                "placeholders everywhere`",
            ),
            (
                "-- dirthara:placeholders\n-- dirthara:placeholders everywhere\nSELECT 1;",
                "twice",
            ),
        ] {
            let err = parse_directives(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
