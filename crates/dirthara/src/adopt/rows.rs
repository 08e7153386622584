//! Each tool's history rows, read as that tool itself reads them.

use std::collections::BTreeSet;

use super::Tool;
use crate::error::{Error, Result};
use crate::plan::{ForeignFailure, ForeignHistory, Through};

/// A column as the tool wrote it: booleans come back as `true`/`t`/`1` depending on the
/// database.
fn flag(tool: Tool, table: &str, value: Option<&str>, column: &str) -> Result<bool> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        Some("true" | "t" | "1") => Ok(true),
        Some("false" | "f" | "0") => Ok(false),
        other => Err(malformed(
            tool,
            table,
            &format!("{column} `{}`", other.unwrap_or("NULL")),
        )),
    }
}

fn malformed(tool: Tool, table: &str, what: &str) -> Error {
    Error::config(format!(
        "{}'s history `{table}` has a row with {what}, which {} itself does not write; check \
         that --from names the tool that wrote this table",
        tool.name(),
        tool.name()
    ))
}

fn version(tool: Tool, table: &str, value: Option<&str>) -> Result<i64> {
    let text = value.map(str::trim).unwrap_or_default();
    // Diesel writes its folder's timestamp without the dashes; accept them anyway.
    let digits = match tool {
        Tool::Diesel => text.replace('-', ""),
        _ => text.to_string(),
    };
    if tool == Tool::Flyway && text.contains(['.', '_']) {
        return Err(Error::config(format!(
            "flyway's history `{table}` has the dotted version `{text}`: dirthara's versions are \
             integers, and a dotted Flyway version has none that keeps Flyway's order; rename the \
             files to integer versions as `dirthara status` advises, and adopt a database whose \
             history uses those versions"
        )));
    }
    digits
        .parse::<i64>()
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| malformed(tool, table, &format!("version `{text}`")))
}

/// What the rows say, per tool.
pub(super) fn parse(
    tool: Tool,
    table: &str,
    rows: &[Vec<Option<String>>],
) -> Result<ForeignHistory> {
    let col = |row: &Vec<Option<String>>, i: usize| row.get(i).cloned().flatten();
    let mut history = ForeignHistory {
        tool: tool.name().into(),
        table: table.into(),
        ..ForeignHistory::default()
    };
    match tool {
        Tool::Dbmate | Tool::Refinery | Tool::Diesel => {
            for row in rows {
                history
                    .applied
                    .insert(version(tool, table, col(row, 0).as_deref())?);
            }
        }
        Tool::Sqlx => {
            for row in rows {
                let v = version(tool, table, col(row, 0).as_deref())?;
                if flag(tool, table, col(row, 1).as_deref(), "success")? {
                    history.applied.insert(v);
                } else if history.failed.is_none() {
                    history.failed = Some(ForeignFailure::new(
                        v,
                        "failed (success = false)",
                        format!(
                            "Make the schema match that migration's file by hand (or undo its \
                             partial changes), delete its row (`DELETE FROM {table} WHERE version \
                             = {v}`) and run `sqlx migrate run`"
                        ),
                    ));
                }
            }
        }
        Tool::GolangMigrate => {
            if rows.len() > 1 {
                return Err(malformed(
                    tool,
                    table,
                    &format!("{} rows (it keeps exactly one)", rows.len()),
                ));
            }
            if let Some(row) = rows.first() {
                let v = version(tool, table, col(row, 0).as_deref())?;
                if flag(tool, table, col(row, 1).as_deref(), "dirty")? {
                    history.failed = Some(ForeignFailure::new(
                        v,
                        "dirty",
                        format!(
                            "Finish or undo migration {v} by hand, then clear the flag with \
                             `migrate force {v}` (its changes are in place) or `migrate force` \
                             with the version before it (they are not)"
                        ),
                    ));
                }
                history.through = Some(Through {
                    version: v,
                    needs_file: true,
                    reason: "golang-migrate keeps only its newest version, not the list of \
                             applied ones"
                        .into(),
                });
            }
        }
        Tool::Goose => {
            // goose appends a row per up (is_applied) and per down (not applied); the latest
            // row of a version decides. Version 0 is the row goose writes when it creates the
            // table, not a migration.
            let mut latest = std::collections::BTreeMap::new();
            for row in rows {
                let v = version(tool, table, col(row, 0).as_deref())?;
                let applied = flag(tool, table, col(row, 1).as_deref(), "is_applied")?;
                if v != 0 {
                    latest.insert(v, applied);
                }
            }
            history.applied = (latest.into_iter())
                .filter_map(|(v, applied)| applied.then_some(v))
                .collect();
        }
        Tool::Flyway => parse_flyway(table, rows, &mut history)?,
    }
    Ok(history)
}

/// A Flyway row without a version: a repeatable migration (`R__<name>.sql`, type `SQL`).
/// The latest successful one of a script is what Flyway compares its file with; a failed
/// one means Flyway would apply the file again, so it is not adopted.
fn repeatable_row(row: &[Option<String>], kind: &str, history: &mut ForeignHistory) {
    let col = |i: usize| row.get(i).cloned().flatten();
    let script = col(3).unwrap_or_default();
    let file = script.rsplit(['/', '\\']).next().unwrap_or_default();
    let Some(name) = (file.strip_prefix("R__")).and_then(|f| f.strip_suffix(".sql")) else {
        return;
    };
    let success = col(2).is_some_and(|s| matches!(s.as_str(), "1" | "t" | "true" | "TRUE"));
    match (
        kind,
        success,
        col(4).and_then(|c| c.trim().parse::<i32>().ok()),
    ) {
        ("SQL", true, Some(checksum)) => {
            history.repeatables.insert(name.to_string(), checksum);
        }
        _ => {
            history.repeatables.remove(name);
        }
    }
}

/// Flyway's rows, in `installed_rank` order, read as Flyway reads them: no version
/// (repeatable migrations) and the schema-creation marker are not versioned migrations; a
/// baseline stands for everything at or below its version (Flyway never runs those); a
/// `DELETE` row (written by `flyway repair` for a missing migration) and an undo take the
/// version back out.
fn parse_flyway(
    table: &str,
    rows: &[Vec<Option<String>>],
    history: &mut ForeignHistory,
) -> Result<()> {
    let tool = Tool::Flyway;
    let col = |row: &Vec<Option<String>>, i: usize| row.get(i).cloned().flatten();
    let mut failed: BTreeSet<i64> = BTreeSet::new();
    for row in rows {
        let kind = col(row, 1).unwrap_or_default().to_ascii_uppercase();
        let Some(text) = col(row, 0) else {
            repeatable_row(row, &kind, history);
            continue;
        };
        if kind == "SCHEMA" {
            continue;
        }
        let v = version(tool, table, Some(&text))?;
        match kind.as_str() {
            "BASELINE" | "SQL_BASELINE" | "JDBC_BASELINE" => {
                let newest = history.through.as_ref().map_or(v, |t| t.version.max(v));
                history.through = Some(Through {
                    version: newest,
                    needs_file: false,
                    reason: "flyway's baseline stands for every migration at or below its \
                             version (Flyway never runs those)"
                        .into(),
                });
            }
            "DELETE" => {
                history.applied.remove(&v);
                failed.remove(&v);
            }
            undo if undo.starts_with("UNDO") => {
                history.applied.remove(&v);
            }
            _ => {
                if flag(tool, table, col(row, 2).as_deref(), "success")? {
                    history.applied.insert(v);
                    failed.remove(&v);
                } else {
                    failed.insert(v);
                }
            }
        }
    }
    history.failed = failed.first().map(|&v| {
        ForeignFailure::new(
            v,
            "failed (success = false)",
            "Undo that migration's partial changes by hand, run `flyway repair` (it removes the \
              failed entry) and `flyway migrate`",
        )
    });
    Ok(())
}
