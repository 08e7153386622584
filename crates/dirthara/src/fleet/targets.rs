//! A fleet's targets: where they come from, what they are called, and which shard each one
//! belongs to.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use super::{Target, TargetSource};
use crate::backend::Namespaces;
use crate::engine::Migrator;
use crate::error::{Error, ErrorKind, Result};
use crate::redact::redact_url;

/// The largest targets file read (a list of 100,000 tenants is a few MiB).
const MAX_TARGETS_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The targets `source` names, checked: every name unique, every URL of a known kind.
pub(super) async fn find(migrator: &Migrator, source: &TargetSource) -> Result<Vec<Target>> {
    // A file's targets with their lines, for errors that name them (`tenants.txt:7`).
    let mut lines = Vec::new();
    let targets = match source {
        TargetSource::List(targets) => targets.clone(),
        TargetSource::File(path) => {
            let parsed = parse_targets(&read_targets(path)?, &source.describe())?;
            let (at, targets) = parsed.into_iter().unzip();
            lines = at;
            targets
        }
        TargetSource::Schemas(glob) | TargetSource::Databases(glob) => {
            let what = match source {
                TargetSource::Schemas(_) => Namespaces::Schemas,
                _ => Namespaces::Databases,
            };
            let url = migrator
                .config()
                .connection_url(&migrator.config().history_connection)?;
            let url = url.to_string();
            let mut listing = migrator.connect_for_listing().await?;
            let names = listing.list_namespaces(what).await;
            listing.close().await;
            let listed = names?;
            let names: Vec<String> = (listed.iter())
                .filter(|n| glob_matches(glob, n))
                .cloned()
                .collect();
            if names.is_empty() {
                return Err(empty(source, none_matching(what, glob, &listed)));
            }
            let mut targets = Vec::with_capacity(names.len());
            for name in names {
                targets.push(match what {
                    Namespaces::Schemas => Target::schema(url.clone(), name),
                    Namespaces::Databases => Target::new(name.clone(), with_database(&url, &name)?),
                });
            }
            targets
        }
        TargetSource::Query(sql) => {
            let mut listing = migrator.connect_for_listing().await?;
            let rows = listing.query_text(sql).await;
            listing.close().await;
            targets_from_rows(rows?, sql)?
        }
        // A source a newer dirthara-core knows and this engine does not.
        other => {
            return Err(Error::config(format!(
                "{}: this build cannot list targets that way",
                other.describe()
            )))
        }
    };
    if targets.is_empty() {
        let found = match source {
            TargetSource::File(_) => "the file has no target line",
            TargetSource::Query(_) => "the query returned no row",
            _ => "the list is empty",
        };
        return Err(empty(source, found.to_string()));
    }
    check(&targets, source, &lines)?;
    Ok(targets)
}

/// A target named by `flag` (`--canary`, `--target`) that is no target of the fleet (before
/// it is split into shards): an error naming it, with the nearest names, and `fix`.
pub(super) fn check_named(
    flag: &str,
    fix: &str,
    names: &[String],
    targets: &[Target],
    source: &TargetSource,
) -> Result<()> {
    for name in names {
        if targets.iter().any(|t| t.name == *name) {
            continue;
        }
        let known = targets.iter().map(|t| t.name.as_str());
        let hint = match dirthara_core::config::nearest(name, known) {
            Some(nearest) => format!(" (did you mean `{nearest}`?)"),
            None => String::new(),
        };
        return Err(Error::config(format!(
            "{flag}: `{name}` is not a target of {} ({} target(s)){hint}; {fix}",
            source.describe(),
            targets.len()
        )));
    }
    Ok(())
}

/// `FLEET_EMPTY` for `source`, which found `found` instead of a target.
fn empty(source: &TargetSource, found: String) -> Error {
    Error::new(ErrorKind::FleetEmpty {
        source: source.describe(),
        found,
    })
}

/// What a glob that matched nothing was matched against, to tell a typo from an empty
/// server: how many there are, and the names most like the pattern (the same but for case
/// first, as `Tenant_*` for `tenant_*`).
fn none_matching(what: Namespaces, glob: &str, listed: &[String]) -> String {
    let kind = match what {
        Namespaces::Schemas => "schema",
        Namespaces::Databases => "database",
    };
    if listed.is_empty() {
        return format!("the default connection's server lists no {kind} dirthara may use");
    }
    let lower = glob.to_lowercase();
    let mut like: Vec<&String> = (listed.iter())
        .filter(|n| glob_matches(&lower, &n.to_lowercase()))
        .collect();
    let prefix: String = lower.chars().take_while(|c| !"*?[".contains(*c)).collect();
    if like.is_empty() && !prefix.is_empty() {
        like = (listed.iter())
            .filter(|n| n.to_lowercase().starts_with(&prefix[..prefix.len().min(3)]))
            .collect();
    }
    let shown: Vec<String> = (like.iter().take(3)).map(|n| format!("`{n}`")).collect();
    let mut found = format!(
        "{} {kind}(s) on the default connection, none matching",
        listed.len()
    );
    if !shown.is_empty() {
        found.push_str(&format!("; nearest: {}", shown.join(", ")));
    }
    found
}

/// The file's text (`-`: standard input), at most [`MAX_TARGETS_FILE_BYTES`].
fn read_targets(path: &Path) -> Result<String> {
    let cannot = |e: std::io::Error| {
        Error::config(format!(
            "cannot read the targets file {}: {e}",
            path.display()
        ))
    };
    let mut text = String::new();
    let read = if path == Path::new("-") {
        (std::io::stdin().lock().take(MAX_TARGETS_FILE_BYTES + 1)).read_to_string(&mut text)
    } else {
        let file = std::fs::File::open(path).map_err(cannot)?;
        file.take(MAX_TARGETS_FILE_BYTES + 1)
            .read_to_string(&mut text)
    };
    read.map_err(cannot)?;
    if text.len() as u64 > MAX_TARGETS_FILE_BYTES {
        return Err(Error::config(format!(
            "the targets file {} is larger than {} MiB; split the fleet into shards or files",
            path.display(),
            MAX_TARGETS_FILE_BYTES / (1024 * 1024)
        )));
    }
    Ok(text)
}

/// One target a line: `name url` or just `url`; blank lines and `#` comments skipped. Each
/// target comes with its line (from 1).
pub(crate) fn parse_targets(text: &str, origin: &str) -> Result<Vec<(usize, Target)>> {
    let mut targets = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = strip_comment(line);
        let words: Vec<&str> = line.split_whitespace().collect();
        let target = match words.as_slice() {
            [] => continue,
            [url] => Target::new(redact_url(url), *url),
            [name, url] => Target::new(*name, *url),
            _ => {
                return Err(Error::config(format!(
                    "{origin}:{}: expected `name url` or `url`, found {} words; fix or remove \
                     that line (`#` starts a comment)",
                    index + 1,
                    words.len()
                )))
            }
        };
        targets.push((index + 1, target));
    }
    Ok(targets)
}

/// A line without its comment: `#` at its start or after white space.
fn strip_comment(line: &str) -> &str {
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        if c == '#' && previous.is_whitespace() {
            return &line[..at];
        }
        previous = c;
    }
    line
}

fn targets_from_rows(rows: Vec<Vec<Option<String>>>, sql: &str) -> Result<Vec<Target>> {
    let mut targets = Vec::with_capacity(rows.len());
    for (index, row) in rows.into_iter().enumerate() {
        let bad = |what: &str| {
            Error::config(format!(
                "--targets-sql `{sql}`: row {} {what}; return (name, url) or (url), both text",
                index + 1
            ))
        };
        targets.push(match row.as_slice() {
            [Some(url)] => Target::new(redact_url(url), url.clone()),
            [Some(name), Some(url)] => Target::new(name.clone(), url.clone()),
            [_] | [_, _] => return Err(bad("has a NULL")),
            _ => return Err(bad(&format!("has {} columns", row.len()))),
        });
    }
    Ok(targets)
}

/// Every name unique and plain (no white space), every URL of a database dirthara knows.
/// `lines`: a targets file's line of each target, which errors name (`tenants.txt:7`).
fn check(targets: &[Target], source: &TargetSource, lines: &[usize]) -> Result<()> {
    let at = |index: usize| match (source, lines.get(index)) {
        (TargetSource::File(path), Some(line)) => {
            format!("--targets {}:{line}", path.display())
        }
        _ => source.describe(),
    };
    let mut names = BTreeSet::new();
    for (index, target) in targets.iter().enumerate() {
        if target.name.is_empty() || target.name.chars().any(char::is_whitespace) {
            return Err(Error::config(format!(
                "{}: the target name `{}` is empty or has white space",
                at(index),
                target.name
            )));
        }
        if !names.insert(target.name.as_str()) {
            let first = (targets.iter().position(|t| t.name == target.name))
                .and_then(|first| lines.get(first))
                .map_or(String::new(), |line| {
                    format!(" (the first is on line {line})")
                });
            return Err(Error::config(format!(
                "{}: two targets are named `{}`{first}; every target needs a name of its own",
                at(index),
                target.name
            )));
        }
        crate::backend::kind_of(&target.url)
            .map_err(|e| Error::config(format!("{}: target `{}`: {e}", at(index), target.name)))?;
    }
    Ok(())
}

/// `url` with its database (the path) replaced by `database`, keeping everything else; the
/// name is percent-encoded as one path segment.
fn with_database(url: &str, database: &str) -> Result<String> {
    let refused = || {
        Error::config(format!(
            "`{}`: --databases needs a server URL (scheme://host/database)",
            redact_url(url)
        ))
    };
    let mut parsed = url::Url::parse(url).map_err(|_| refused())?;
    if !parsed.has_host() {
        return Err(refused());
    }
    parsed
        .path_segments_mut()
        .map_err(|()| refused())?
        .clear()
        .push(database);
    Ok(parsed.into())
}

/// Whether `name` matches the glob `pattern`: `*` any run of characters, `?` one, `[abc]`,
/// `[a-z]` and `[!a-z]` one of (or not of) a set; anything else itself.
pub(crate) fn glob_matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    // Iterative, with one backtrack point for the last `*`: linear in practice.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() {
            match pattern[p] {
                '*' => {
                    star = Some((p, n));
                    p += 1;
                    continue;
                }
                '?' => {
                    p += 1;
                    n += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = class_matches(&pattern[p..], name[n]) {
                        if matched {
                            p += next;
                            n += 1;
                            continue;
                        }
                    } else if name[n] == '[' {
                        p += 1;
                        n += 1;
                        continue;
                    }
                }
                c if c == name[n] => {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((star_p, star_n)) => {
                p = star_p + 1;
                n = star_n + 1;
                star = Some((star_p, star_n + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// `[...]` at the start of `pattern` against `c`: whether it matches, and the class's length;
/// `None` when the `[` opens no class (no closing `]`).
fn class_matches(pattern: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 1;
    let negated = matches!(pattern.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while let Some(&start) = pattern.get(i) {
        if start == ']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        if pattern.get(i + 1) == Some(&'-') && pattern.get(i + 2).is_some_and(|&e| e != ']') {
            let end = pattern[i + 2];
            matched |= start <= c && c <= end;
            i += 3;
        } else {
            matched |= start == c;
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_shells_do() {
        for (pattern, name, expected) in [
            ("tenant_*", "tenant_1", true),
            ("tenant_*", "tenant_", true),
            ("tenant_*", "tenants", false),
            ("tenant_*", "xtenant_1", false),
            ("*", "anything", true),
            ("t?", "t1", true),
            ("t?", "t12", false),
            ("t[0-9]", "t7", true),
            ("t[0-9]", "tx", false),
            ("t[!0-9]", "tx", true),
            ("t[!0-9]", "t7", false),
            ("t[ab]c", "tbc", true),
            ("*_eu_*", "acme_eu_1", true),
            ("*_eu_*", "acme_us_1", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("t[", "t[", true),
            ("tenant_1", "tenant_1", true),
            ("tenant_1", "tenant_10", false),
        ] {
            assert_eq!(glob_matches(pattern, name), expected, "{pattern} ~ {name}");
        }
    }

    #[test]
    fn a_targets_file_has_names_urls_comments_and_clear_errors() {
        let text = "# tenants\n\nacme postgres://u:secret@db/acme  # the first\n\
                    postgres://u@db/globex\n  \n";
        let (lines, targets): (Vec<usize>, Vec<Target>) = parse_targets(text, "tenants.txt")
            .unwrap()
            .into_iter()
            .unzip();
        assert_eq!(lines, [3, 4]);
        assert_eq!(targets.len(), 2);
        assert_eq!(targets[0].name, "acme");
        assert_eq!(targets[0].url, "postgres://u:secret@db/acme");
        assert_eq!(targets[1].name, "postgres://u@db/globex");
        assert!(!format!("{:?}", targets[0]).contains("secret"));

        let error = parse_targets("# t\na b c\n", "tenants.txt")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("tenants.txt:2: expected `name url`"),
            "{error}"
        );

        let twice = TargetSource::File("tenants.txt".into());
        let dup = [
            Target::new("a", "sqlite:a.db"),
            Target::new("a", "sqlite:b.db"),
        ];
        let error = check(&dup, &twice, &[2, 5]).unwrap_err().to_string();
        assert!(
            error.contains(
                "--targets tenants.txt:5: two targets are named `a` (the first is on line 2)"
            ),
            "{error}"
        );
        let error = check(&[Target::new("x", "oracle://u:pw@h/d")], &twice, &[7])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("tenants.txt:7: target `x`") && !error.contains("pw@"),
            "{error}"
        );
    }

    #[test]
    fn a_database_replaces_the_urls_path_and_nothing_else() {
        let cases = [
            (
                "postgres://u:p@h:5432/app?sslmode=require",
                "t1",
                "postgres://u:p@h:5432/t1?sslmode=require",
            ),
            (
                "mysql://root@127.0.0.1:3306/mysql",
                "acme",
                "mysql://root@127.0.0.1:3306/acme",
            ),
            ("postgres://h", "t 2", "postgres://h/t%202"),
        ];
        for (url, database, expected) in cases {
            assert_eq!(with_database(url, database).unwrap(), expected);
        }
    }

    #[test]
    fn a_database_name_is_one_encoded_path_segment_and_a_url_without_a_host_is_refused() {
        assert_eq!(
            with_database("postgres://h:5432/app?x=1#f", "a/b?c#d").unwrap(),
            "postgres://h:5432/a%2Fb%3Fc%23d?x=1#f"
        );
        let error = with_database("sqlite:app.db", "t1").unwrap_err();
        assert!(error.to_string().contains("needs a server URL"), "{error}");
    }
}
