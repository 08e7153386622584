//! Statements the parser (sqlparser 0.64) does not read but that rewrite a table or cannot
//! run in a transaction, recognised by their leading words as dirthara's tokenizer reads them
//! (comments, strings and quoted names are single tokens there, never mistaken for words):
//! PostgreSQL's `CLUSTER`, `VACUUM (FULL ...)`, `ALTER TABLE ... SET TABLESPACE`,
//! `ALTER TABLE ... ALTER COLUMN ... TYPE ... COLLATE`, `DROP INDEX CONCURRENTLY` and
//! `REINDEX ... CONCURRENTLY`; MySQL's `ALTER TABLE ... CONVERT TO CHARACTER SET`. Anything
//! else the parser refuses is reported as not analysed, but for `CREATE TABLE` and
//! `CREATE [MATERIALIZED] VIEW`, whose name is noted as new.

use dirthara_source::sql::{words, SqlDialect, Word};

use crate::rules;
use crate::{Context, Finding, Place};

/// The findings of a statement the parser refused, when its leading words say what it is;
/// `None` when they do not.
pub(crate) fn statement(
    code: &str,
    place: &Place,
    dialect: SqlDialect,
    transactional: bool,
    context: &mut Context,
) -> Option<Vec<Finding>> {
    let all = words(code, dialect);
    let bare: Vec<String> = all
        .iter()
        .map(|w| match w.bare {
            true => w.text.to_ascii_uppercase(),
            false => String::new(),
        })
        .collect();
    let is = |i: usize, word: &str| bare.get(i).is_some_and(|w| w == word);
    let has = |word: &str| bare.iter().any(|w| w == word);
    let followed = |first: &str, second: &str| {
        bare.windows(2)
            .any(|pair| pair[0] == first && pair[1] == second)
    };
    // A table (or materialized view) the parser cannot read the definition of is still new:
    // nothing done to it later in the migration is flagged.
    if is(0, "CREATE") {
        let kinds = ["TABLE", "VIEW"];
        let at = (1..bare.len().min(4)).find(|&i| kinds.contains(&bare[i].as_str()))?;
        let skip = ["IF", "NOT", "EXISTS"];
        let name = (all.iter().skip(at + 1))
            .find(|w| !skip.iter().any(|s| w.text.eq_ignore_ascii_case(s)))?;
        context.created(name.text);
        return Some(Vec::new());
    }
    let context = &*context;
    let flag = |rule: &'static rules::Rule, table: Option<String>, message: String| {
        let fresh = table.as_deref().is_some_and(|t| context.is_new(t));
        (!fresh).then(|| Finding::at(rule, place.start(), table, message))
    };
    let found: Vec<Option<Finding>> = match dialect {
        SqlDialect::MySql if is(0, "ALTER") && is(1, "TABLE") && followed("CONVERT", "TO") => {
            let table = table_after_alter(&all);
            vec![flag(
                &rules::MYSQL_COPYING_ALTER,
                table.clone(),
                format!(
                    "`{}` is converted to another character set, row by row",
                    table.unwrap_or_default()
                ),
            )]
        }
        SqlDialect::MySql => return None,
        _ if is(0, "CLUSTER") => {
            let table = (all.iter().skip(1))
                .find(|w| !w.text.eq_ignore_ascii_case("VERBOSE") && w.text != "(")
                .filter(|w| !w.text.eq_ignore_ascii_case("USING"))
                .map(|w| w.text.to_string());
            vec![flag(
                &rules::CLUSTERING_TABLE,
                table.clone(),
                match table {
                    Some(table) => format!("`CLUSTER {table}`"),
                    None => "`CLUSTER` of every clustered table".into(),
                },
            )]
        }
        _ if is(0, "VACUUM") && has("FULL") => {
            let table = all
                .last()
                .filter(|w| w.text != ")")
                .map(|w| w.text.to_string());
            vec![flag(
                &rules::VACUUM_FULL,
                table.clone(),
                format!("`VACUUM FULL {}`", table.unwrap_or_default()),
            )]
        }
        _ if is(0, "ALTER") && is(1, "TABLE") && followed("SET", "TABLESPACE") => {
            let table = table_after_alter(&all);
            vec![flag(
                &rules::SETTING_TABLESPACE,
                table.clone(),
                format!(
                    "`{}` moves to another tablespace",
                    table.unwrap_or_default()
                ),
            )]
        }
        _ if is(0, "ALTER") && is(1, "TABLE") && has("TYPE") && has("COLLATE") => {
            let table = table_after_alter(&all);
            vec![flag(
                &rules::CHANGING_COLUMN_TYPE,
                table.clone(),
                format!("a column of `{}` changes type", table.unwrap_or_default()),
            )]
        }
        _ if (is(0, "DROP") && is(1, "INDEX") && is(2, "CONCURRENTLY"))
            || (is(0, "REINDEX") && has("CONCURRENTLY")) =>
        {
            if !transactional {
                return Some(Vec::new());
            }
            vec![Some(Finding::at(
                &rules::BAN_CONCURRENT_INDEX_CREATION_IN_TRANSACTION,
                place.start(),
                None,
                format!(
                    "`{} ... CONCURRENTLY` in a step that runs in a transaction",
                    bare[0]
                ),
            ))]
        }
        _ => return None,
    };
    Some(found.into_iter().flatten().collect())
}

/// The table of `ALTER TABLE [IF EXISTS] [ONLY] name ...`.
fn table_after_alter(all: &[Word<'_>]) -> Option<String> {
    let skip = ["IF", "EXISTS", "ONLY"];
    (all.iter().skip(2))
        .find(|w| !skip.iter().any(|s| w.text.eq_ignore_ascii_case(s)))
        .map(|w| {
            // `schema.table`: the parts are separate tokens.
            let mut name = w.text.to_string();
            let mut rest = all.iter().skip_while(|x| x.offset <= w.offset);
            while let (Some(dot), Some(part)) = (rest.next(), rest.next()) {
                if dot.text != "." {
                    break;
                }
                name.push('.');
                name.push_str(part.text);
            }
            name
        })
}
