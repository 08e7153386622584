//! How each kind of database reads a migration's steps, at load, before anything runs: a SQL
//! step as its dialect's tokenizer reads it (a file that controls its own transaction, MySQL's
//! client `DELIMITER` scripts, what is blank to that database), a JSON command file as the
//! documents MongoDB will run. What a step parses into is kept with it
//! ([`Migration::set_parsed`]): its backend sends that, so each step is parsed once.

use std::path::PathBuf;

use super::BackendKind;
use crate::error::Problem;
use crate::migration::{Direction, Migration, ParsedStep, StepFormat, StepSource};
use crate::source::sql as tokens;
use crate::source::Layout;

/// Reads `migration`'s steps as a database of `kind` will run them; every problem found (an
/// up step with nothing to run there, a `DELIMITER` script that does not split, a command
/// that does not convert).
pub(crate) fn read_steps(kind: BackendKind, migration: &mut Migration) -> Vec<Problem> {
    let mut problems = Vec::new();
    let dialect = match (migration.format, kind.capabilities().sql_dialect) {
        (StepFormat::Sql, Some(dialect)) => dialect,
        (StepFormat::MongoCommands, _) => {
            if let Some(down) = &mut migration.down {
                down.is_blank = crate::source::is_blank_commands(&down.text);
            }
            return parse_commands(migration);
        }
        _ => return problems,
    };
    // Blank to every database is refused by the file rules; blank to this one (only
    // MySQL `#` comments, say) only here, where the database is known.
    if tokens::is_blank(migration.up(), dialect) {
        problems.push(Problem::new(
            PathBuf::from(&migration.origin),
            crate::source::empty_up(migration.layout.map(|l| l.layout)),
        ));
        return problems;
    }
    let layout = migration.layout.map(|l| l.layout);
    let up = read_sql_step(dialect, &migration.origin, Direction::Up, migration.up());
    match up {
        Ok(read) => {
            if let Some(control) = read.own_transaction {
                migration.own_transaction.get_or_insert(control);
                migration.transactional = false;
            }
            let source = &migration.up_source;
            let outside =
                outside_transaction(read.outside, migration.transactional, source, layout);
            match outside {
                Ok(runs_outside) => migration.transactional &= !runs_outside,
                Err(problem) => problems.push(problem),
            }
            migration.set_parsed(Direction::Up, read.parsed);
        }
        Err(problem) => problems.push(problem),
    }
    let mut down_parsed = None;
    if let Some(down) = &mut migration.down {
        let read = read_sql_step(dialect, &migration.origin, Direction::Down, &down.text);
        match read {
            Ok(read) => {
                if let Some(control) = read.own_transaction {
                    down.own_transaction.get_or_insert(control);
                    down.transactional = false;
                }
                let source = match down.source.file.is_empty() {
                    true => &migration.up_source,
                    false => &down.source,
                };
                match outside_transaction(read.outside, down.transactional, source, layout) {
                    Ok(runs_outside) => down.transactional &= !runs_outside,
                    Err(problem) => problems.push(problem),
                }
                down_parsed = Some(read.parsed);
            }
            Err(problem) => problems.push(problem),
        }
        down.is_blank = tokens::is_blank(&down.text, dialect);
    }
    if let Some(parsed) = down_parsed {
        migration.set_parsed(Direction::Down, parsed);
    }
    problems
}

/// Every step of a JSON command migration as MongoDB will get it: each command converted from
/// Extended JSON v2 by the parser the backend runs, so an invalid `$oid` or `$date` in
/// migration 2 is refused with the other bad files, before migration 1 is applied. The
/// documents are kept with the migration: the backend sends them without parsing again.
fn parse_commands(migration: &mut Migration) -> Vec<Problem> {
    let down = (migration.down.as_ref())
        .filter(|down| !down.is_blank)
        .map(|down| (Direction::Down, down.text.as_str()));
    let parsed: Vec<_> = [(Direction::Up, migration.up())]
        .into_iter()
        .chain(down)
        .map(|(direction, text)| (direction, crate::backend::parse_commands(text)))
        .collect();
    let mut problems = Vec::new();
    for (direction, parsed) in parsed {
        match parsed {
            Ok(parsed) => migration.set_parsed(direction, parsed),
            Err(reason) => problems.push(Problem::new(
                PathBuf::from(&migration.origin),
                format!("{direction} step: {reason}"),
            )),
        }
    }
    problems
}

/// Whether a step runs outside a transaction because of a statement the database refuses in
/// one (`found`): `true` when the step is made only of such statements (as golang-migrate,
/// goose and psql run it); `Err` when it mixes one with other statements and has no
/// no-transaction marker, naming the statement (file:line) and the marker its layout takes.
fn outside_transaction(
    found: Option<tokens::OutsideTransaction>,
    transactional: bool,
    source: &StepSource,
    layout: Option<Layout>,
) -> std::result::Result<bool, Problem> {
    let Some(found) = found else {
        return Ok(false);
    };
    if found.alone || !transactional {
        return Ok(true);
    }
    let marker = match layout {
        Some(Layout::Goose) => "`-- +goose NO TRANSACTION` to the file",
        Some(Layout::Dbmate) => {
            "` transaction:false` to its `-- migrate:up` (or `-- migrate:down`) line"
        }
        Some(Layout::Diesel) => "`run_in_transaction = false` to the folder's `metadata.toml`",
        Some(Layout::Flyway) => {
            "`executeInTransaction=false` to its Flyway script configuration, a file named as \
             the script with `.conf` added (`V1__x.sql.conf`)"
        }
        _ => "`-- dirthara:no-transaction` as its first line (sqlx: `-- no-transaction`)",
    };
    Err(Problem::new(
        PathBuf::from(&source.file),
        format!(
            "line {}: `{}` cannot run inside a transaction, and the step has other statements, \
             which would run in one; add {marker} to run them all without one, or move it to a \
             migration of its own",
            source.file_line(found.line),
            found.statement
        ),
    ))
}

/// What loading learnt of one SQL step.
struct SqlStepRead {
    /// How it controls its own transaction (e.g. `` `COMMIT` at line 3 of the up step``), if
    /// it does.
    own_transaction: Option<String>,
    /// Its first statement the database refuses inside a transaction block, if any.
    outside: Option<tokens::OutsideTransaction>,
    /// A MySQL `DELIMITER` script's statements, split once here.
    parsed: ParsedStep,
}

/// One SQL step as `dialect` reads it; `Err` why its MySQL `DELIMITER` script does not split.
fn read_sql_step(
    dialect: crate::source::sql::SqlDialect,
    origin: &str,
    direction: Direction,
    text: &str,
) -> std::result::Result<SqlStepRead, Problem> {
    use crate::source::sql::{self as tokens, ClientScript, SqlDialect};
    let script = match dialect {
        SqlDialect::MySql => ClientScript::parse(text).map_err(|reason| {
            Problem::new(
                PathBuf::from(origin),
                format!("{direction} step: its DELIMITER script does not split: {reason}"),
            )
        })?,
        _ => None,
    };
    let own_transaction = tokens::transaction_control(text, dialect).map(|found| {
        format!(
            "`{}` at line {} of the {direction} step",
            found.keyword, found.line
        )
    });
    Ok(SqlStepRead {
        outside: tokens::outside_transaction(text, dialect),
        own_transaction,
        parsed: script.map(ParsedStep::new).unwrap_or_default(),
    })
}
