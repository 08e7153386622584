//! PostgreSQL's statements, as the parser reads them, to findings. The lock each form takes
//! and what it does to the rows follow PostgreSQL's documentation of `ALTER TABLE` and
//! `CREATE INDEX` (13 to 18 alike for every form here).

use sqlparser::ast::{
    AlterColumnOperation, AlterTableOperation, ColumnDef, ColumnOption, DataType, Expr,
    GeneratedAs, GeneratedExpressionMode, ObjectName, ObjectType, Spanned, Statement,
    TableConstraint,
};

use crate::rules::{self, Rule};
use crate::{Context, Finding, Place, Server};

/// The findings of one parsed statement.
pub(crate) fn statement(
    statement: &Statement,
    place: &Place,
    server: Server,
    transactional: bool,
    context: &mut Context,
    found: &mut Vec<Finding>,
) {
    match statement {
        Statement::CreateTable(create) => context.created(&create.name.to_string()),
        Statement::CreateView(view) => context.created(&view.name.to_string()),
        Statement::AlterTable(alter) => {
            let table = alter.name.to_string();
            if context.is_new(&table) {
                return;
            }
            for operation in &alter.operations {
                alter_table(operation, &alter.name, place, server, context, found);
            }
        }
        Statement::CreateIndex(index) => {
            let table = index.table_name.to_string();
            let at = place.of_span(index.table_name.span());
            if index.concurrently && transactional {
                found.push(Finding::at(
                    &rules::BAN_CONCURRENT_INDEX_CREATION_IN_TRANSACTION,
                    at,
                    Some(table),
                    "`CREATE INDEX CONCURRENTLY` in a step that runs in a transaction".into(),
                ));
            } else if !index.concurrently && !context.is_new(&table) {
                found.push(Finding::at(
                    &rules::REQUIRE_CONCURRENT_INDEX_CREATION,
                    at,
                    Some(table.clone()),
                    format!("`CREATE INDEX` on `{table}` without `CONCURRENTLY`"),
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
        Statement::Vacuum(vacuum) if vacuum.full => {
            let table = vacuum.table_name.as_ref().map(ToString::to_string);
            found.push(Finding::at(
                &rules::VACUUM_FULL,
                place.start(),
                table.clone(),
                match table {
                    Some(table) => format!("`VACUUM FULL {table}`"),
                    None => "`VACUUM FULL` of every table".into(),
                },
            ));
        }
        _ => {}
    }
}

fn alter_table(
    operation: &AlterTableOperation,
    name: &ObjectName,
    place: &Place,
    server: Server,
    context: &Context,
    found: &mut Vec<Finding>,
) {
    let table = name.to_string();
    let flag = |rule: &'static Rule, at: (usize, usize), message: String| {
        Finding::at(rule, at, Some(table.clone()), message)
    };
    match operation {
        AlterTableOperation::AddColumn { column_def, .. } => {
            found.extend(add_column(column_def, &table, place, server, context));
        }
        AlterTableOperation::AlterColumn { column_name, op } => {
            let at = place.of_span(column_name.span);
            match op {
                AlterColumnOperation::SetDataType { data_type, .. } => found.push(flag(
                    &rules::CHANGING_COLUMN_TYPE,
                    at,
                    format!("column `{column_name}` of `{table}` becomes `{data_type}`"),
                )),
                AlterColumnOperation::SetNotNull => found.push(flag(
                    &rules::SETTING_NOT_NULLABLE_FIELD,
                    at,
                    format!("`SET NOT NULL` on column `{column_name}` of `{table}`"),
                )),
                _ => {}
            }
        }
        AlterTableOperation::AddConstraint {
            constraint,
            not_valid,
        } => {
            let at = place.of_span(constraint.span());
            match constraint {
                TableConstraint::ForeignKey(fk) if !not_valid => found.push(flag(
                    &rules::ADDING_FOREIGN_KEY_CONSTRAINT,
                    at,
                    format!(
                        "a foreign key from `{table}` to `{}` without `NOT VALID`",
                        fk.foreign_table
                    ),
                )),
                TableConstraint::Check(_) if !not_valid => found.push(flag(
                    &rules::CONSTRAINT_MISSING_NOT_VALID,
                    at,
                    format!("a CHECK constraint on `{table}` without `NOT VALID`"),
                )),
                TableConstraint::Unique(_) | TableConstraint::PrimaryKey(_) => found.push(flag(
                    &rules::DISALLOWED_UNIQUE_CONSTRAINT,
                    at,
                    format!("a UNIQUE or PRIMARY KEY constraint on `{table}` built in place"),
                )),
                _ => {}
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

/// `ADD COLUMN`: the column's default, generated value and constraints decide whether
/// existing rows are rewritten, scanned or indexed.
fn add_column(
    column: &ColumnDef,
    table: &str,
    place: &Place,
    server: Server,
    context: &Context,
) -> Vec<Finding> {
    let at = place.of_span(column.name.span);
    let name = &column.name;
    let flag = |rule: &'static Rule, message: String| {
        Finding::at(rule, at, Some(table.to_string()), message)
    };
    if context.is_new(table) {
        return Vec::new();
    }
    let options: Vec<&ColumnOption> = column.options.iter().map(|o| &o.option).collect();
    let primary_key = options
        .iter()
        .any(|o| matches!(o, ColumnOption::PrimaryKey(_)));
    let serial = is_serial(&column.data_type)
        || options.iter().any(|o| {
            matches!(o, ColumnOption::Generated { generated_as, generation_expr: None, .. }
                if matches!(generated_as, GeneratedAs::Always | GeneratedAs::ByDefault))
        });
    let mut found = Vec::new();
    if serial {
        let rule = match primary_key {
            true => &rules::ADDING_SERIAL_PRIMARY_KEY_FIELD,
            false => &rules::ADDING_FIELD_WITH_DEFAULT,
        };
        found.push(flag(
            rule,
            format!("column `{name}` of `{table}` is filled from a sequence"),
        ));
        return found;
    }
    for option in &options {
        match option {
            ColumnOption::Default(expr) => {
                if let Some(why) = rewrites_every_row(expr, server) {
                    found.push(flag(
                        &rules::ADDING_FIELD_WITH_DEFAULT,
                        format!("column `{name}` of `{table}` gets {why}"),
                    ));
                }
            }
            ColumnOption::Generated {
                generation_expr: Some(_),
                generation_expr_mode: Some(GeneratedExpressionMode::Stored),
                ..
            } => found.push(flag(
                &rules::ADDING_GENERATED_STORED_COLUMN,
                format!("column `{name}` of `{table}` is `GENERATED ... STORED`"),
            )),
            ColumnOption::PrimaryKey(_) | ColumnOption::Unique(_) => found.push(flag(
                &rules::DISALLOWED_UNIQUE_CONSTRAINT,
                format!("column `{name}` of `{table}` is added with a unique index built in place"),
            )),
            ColumnOption::ForeignKey(fk) => found.push(flag(
                &rules::ADDING_FOREIGN_KEY_CONSTRAINT,
                format!(
                    "column `{name}` of `{table}` references `{}`",
                    fk.foreign_table
                ),
            )),
            ColumnOption::Check(_) => found.push(flag(
                &rules::CONSTRAINT_MISSING_NOT_VALID,
                format!("column `{name}` of `{table}` has a CHECK constraint"),
            )),
            _ => {}
        }
    }
    let not_null = options.iter().any(|o| matches!(o, ColumnOption::NotNull));
    let default = options
        .iter()
        .any(|o| matches!(o, ColumnOption::Default(_) | ColumnOption::Generated { .. }));
    if not_null && !default {
        found.push(flag(
            &rules::ADDING_NOT_NULLABLE_FIELD,
            format!("column `{name}` of `{table}` is NOT NULL without a default"),
        ));
    }
    found
}

fn is_serial(data_type: &DataType) -> bool {
    let name = data_type.to_string().to_ascii_lowercase();
    matches!(
        name.as_str(),
        "serial" | "bigserial" | "smallserial" | "serial4" | "serial8" | "serial2"
    )
}

/// Why a default makes PostgreSQL write every existing row, if it does: before 11 any
/// default; from 11 one that may differ from row to row (a volatile function). A function
/// this list does not know is taken as possibly volatile: the live server settles it.
fn rewrites_every_row(expr: &Expr, server: Server) -> Option<String> {
    if !server.instant_constant_default() {
        return Some(format!("a default (`{expr}`) before PostgreSQL 11"));
    }
    let mut calls = Vec::new();
    functions(expr, &mut calls);
    let volatile = calls.iter().find(|call| !STABLE.contains(&call.as_str()))?;
    let known = VOLATILE.contains(&volatile.as_str());
    Some(match known {
        true => format!("the volatile default `{expr}`"),
        false => format!("the default `{expr}` (volatile if `{volatile}()` is)"),
    })
}

/// Functions PostgreSQL evaluates once for the whole `ADD COLUMN` (stable or immutable).
const STABLE: &[&str] = &[
    "now",
    "current_timestamp",
    "current_date",
    "current_time",
    "localtimestamp",
    "localtime",
    "transaction_timestamp",
    "statement_timestamp",
    "current_user",
    "session_user",
    "current_schema",
    "lower",
    "upper",
    "length",
    "coalesce",
    "nullif",
    "to_jsonb",
    "jsonb_build_object",
    "json_build_object",
    "array",
    "make_interval",
];

/// Volatile functions that appear as defaults.
const VOLATILE: &[&str] = &[
    "random",
    "gen_random_uuid",
    "uuid_generate_v1",
    "uuid_generate_v1mc",
    "uuid_generate_v4",
    "uuidv4",
    "uuidv7",
    "clock_timestamp",
    "timeofday",
    "nextval",
];

/// The names (lower case, without schema) of the functions `expr` calls.
fn functions(expr: &Expr, found: &mut Vec<String>) {
    match expr {
        Expr::Function(function) => {
            let name = function.name.to_string().to_ascii_lowercase();
            let bare = name.rsplit('.').next().unwrap_or(&name).trim_matches('"');
            found.push(bare.to_string());
            if let sqlparser::ast::FunctionArguments::List(list) = &function.args {
                for arg in &list.args {
                    if let sqlparser::ast::FunctionArg::Unnamed(
                        sqlparser::ast::FunctionArgExpr::Expr(arg),
                    ) = arg
                    {
                        functions(arg, found);
                    }
                }
            }
        }
        Expr::Cast { expr, .. } | Expr::Nested(expr) | Expr::UnaryOp { expr, .. } => {
            functions(expr, found)
        }
        Expr::BinaryOp { left, right, .. } => {
            functions(left, found);
            functions(right, found);
        }
        _ => {}
    }
}
