//! MySQL's and MariaDB's statements to findings, after the servers' online-DDL tables
//! ("Online DDL Operations", MySQL 8.0/8.4; MariaDB's `ALTER TABLE` algorithms): most
//! `ALTER`s run `INPLACE` with concurrent reads and writes (`LOCK=NONE`); what does not is
//! flagged. Without a server's answer a column's old type is unknown, so a `MODIFY` or
//! `CHANGE` that names a type is taken as a type change; with a connection the engine asks the
//! server (`ALGORITHM=INSTANT`/`INPLACE, LOCK=NONE` on an empty copy) and drops what it allows.

use sqlparser::ast::{
    AlterTableAlgorithm, AlterTableLock, AlterTableOperation, ColumnOption,
    GeneratedExpressionMode, ObjectType, Spanned, Statement, TableConstraint,
};

use crate::rules::{self, Rule};
use crate::{Context, Finding, Place, Server};

/// The findings of one parsed statement.
pub(crate) fn statement(
    statement: &Statement,
    place: &Place,
    _server: Server,
    context: &mut Context,
    found: &mut Vec<Finding>,
) {
    match statement {
        Statement::CreateTable(create) => context.created(&create.name.to_string()),
        Statement::AlterTable(alter) => {
            let table = alter.name.to_string();
            if !context.is_new(&table) {
                alter_table(&alter.operations, &table, place, found);
            }
        }
        Statement::CreateIndex(index) => {
            let table = index.table_name.to_string();
            let fulltext = matches!(&index.using, Some(using) if {
                let using = using.to_string().to_ascii_uppercase();
                using == "FULLTEXT" || using == "SPATIAL"
            });
            if fulltext && !context.is_new(&table) {
                found.push(Finding::at(
                    &rules::MYSQL_LOCKING_ALTER,
                    place.of_span(index.table_name.span()),
                    Some(table.clone()),
                    format!("a FULLTEXT or SPATIAL index on `{table}`, built with LOCK=SHARED"),
                ));
            }
        }
        Statement::Drop {
            object_type: ObjectType::Table,
            names,
            ..
        } => {
            for name in names.iter().filter(|n| !context.is_new(&n.to_string())) {
                found.push(Finding::at(
                    &rules::DROPPING_TABLE,
                    place.start(),
                    Some(name.to_string()),
                    format!("`DROP TABLE {name}`"),
                ));
            }
        }
        Statement::RenameTable(renames) => {
            for rename in renames
                .iter()
                .filter(|r| !context.is_new(&r.old_name.to_string()))
            {
                found.push(Finding::at(
                    &rules::RENAMING_TABLE,
                    place.start(),
                    Some(rename.old_name.to_string()),
                    format!("table `{}` becomes `{}`", rename.old_name, rename.new_name),
                ));
            }
        }
        _ => {}
    }
}

fn alter_table(
    operations: &[AlterTableOperation],
    table: &str,
    place: &Place,
    found: &mut Vec<Finding>,
) {
    let flag = |rule: &'static Rule, at: (usize, usize), message: String| {
        Finding::at(rule, at, Some(table.to_string()), message)
    };
    // The clauses that say how: asked for explicitly, they decide.
    let algorithm = operations.iter().find_map(|op| match op {
        AlterTableOperation::Algorithm { algorithm, .. } => Some(*algorithm),
        _ => None,
    });
    let copy = algorithm == Some(AlterTableAlgorithm::Copy);
    // INSTANT or INPLACE asked: the server refuses the ALTER at once if it cannot honour it.
    let online = matches!(
        algorithm,
        Some(AlterTableAlgorithm::Instant | AlterTableAlgorithm::Inplace)
    );
    let lock = operations.iter().find_map(|op| match op {
        AlterTableOperation::Lock { lock, .. } => Some(*lock),
        _ => None,
    });
    let mut copying = Vec::new();
    for operation in operations {
        read_operation(operation, operations, table, place, found, &mut copying);
    }
    if copy {
        found.push(flag(
            &rules::MYSQL_COPYING_ALTER,
            place.start(),
            format!("`ALTER TABLE {table}` asks for ALGORITHM=COPY"),
        ));
    } else if matches!(
        lock,
        Some(AlterTableLock::Exclusive | AlterTableLock::Shared)
    ) {
        found.push(flag(
            &rules::MYSQL_LOCKING_ALTER,
            place.start(),
            format!("`ALTER TABLE {table}` asks for a LOCK that stops writes"),
        ));
    } else if lock != Some(AlterTableLock::None) && !online {
        // `LOCK=NONE` asked: likewise refused at once rather than run locked.
        for (at, message) in copying {
            found.push(flag(&rules::MYSQL_COPYING_ALTER, at, message));
        }
    }
}

/// What one operation of an `ALTER TABLE` does: a hazard is found at once; a change that needs
/// `ALGORITHM=COPY` goes to `copying`, flagged only when the statement asks for no online
/// algorithm.
fn read_operation(
    operation: &AlterTableOperation,
    operations: &[AlterTableOperation],
    table: &str,
    place: &Place,
    found: &mut Vec<Finding>,
    copying: &mut Vec<((usize, usize), String)>,
) {
    let flag = |rule: &'static Rule, at: (usize, usize), message: String| {
        Finding::at(rule, at, Some(table.to_string()), message)
    };
    match operation {
        AlterTableOperation::ModifyColumn {
            col_name,
            data_type,
            ..
        } => copying.push((
            place.of_span(col_name.span),
            format!("column `{col_name}` of `{table}` is redefined as `{data_type}`"),
        )),
        AlterTableOperation::ChangeColumn {
            old_name,
            new_name,
            data_type,
            ..
        } => copying.push((
            place.of_span(old_name.span),
            format!("column `{old_name}` of `{table}` is redefined as `{new_name} {data_type}`"),
        )),
        AlterTableOperation::AddColumn { column_def, .. } => {
            let stored = column_def.options.iter().any(|o| {
                matches!(
                    o.option,
                    ColumnOption::Generated {
                        generation_expr_mode: Some(GeneratedExpressionMode::Stored),
                        ..
                    }
                )
            });
            if stored {
                copying.push((
                    place.of_span(column_def.name.span),
                    format!(
                        "column `{}` of `{table}` is a STORED generated column",
                        column_def.name
                    ),
                ));
            }
        }
        AlterTableOperation::AddConstraint { constraint, .. } => match constraint {
            TableConstraint::ForeignKey(fk) => copying.push((
                place.of_span(constraint.span()),
                format!(
                    "a foreign key from `{table}` to `{}` (INPLACE only with \
                     foreign_key_checks off)",
                    fk.foreign_table
                ),
            )),
            TableConstraint::FulltextOrSpatial(_) => found.push(flag(
                &rules::MYSQL_LOCKING_ALTER,
                place.of_span(constraint.span()),
                format!("a FULLTEXT or SPATIAL index on `{table}`, built with LOCK=SHARED"),
            )),
            _ => {}
        },
        AlterTableOperation::DropPrimaryKey { .. } => {
            let replaced = operations.iter().any(|op| {
                matches!(
                    op,
                    AlterTableOperation::AddConstraint {
                        constraint: TableConstraint::PrimaryKey(_),
                        ..
                    }
                )
            });
            if !replaced {
                copying.push((
                    place.start(),
                    format!("the primary key of `{table}` is dropped without a new one"),
                ));
            }
        }
        AlterTableOperation::DropColumn { column_names, .. } => {
            for column in column_names {
                found.push(flag(
                    &rules::DROPPING_COLUMN,
                    place.of_span(column.span),
                    format!("column `{column}` of `{table}` is dropped"),
                ));
            }
        }
        AlterTableOperation::RenameColumn {
            old_column_name,
            new_column_name,
        } => found.push(flag(
            &rules::RENAMING_COLUMN,
            place.of_span(old_column_name.span),
            format!("column `{old_column_name}` of `{table}` becomes `{new_column_name}`"),
        )),
        AlterTableOperation::RenameTable { .. } => found.push(flag(
            &rules::RENAMING_TABLE,
            place.start(),
            format!("table `{table}` is renamed"),
        )),
        _ => {}
    }
}
