//! The table locks a statement takes that the application's queries can queue behind: what
//! the runner divides a step's `table_lock_timeout` by, so that the waits of a step's
//! statements (and of a partitioned table's partitions) add up to at most that timeout.
//! Counting a lock too many only shortens each wait; counting one too few would let the
//! application wait longer than it was promised, so whatever is not known counts as one.

use sqlparser::ast::{
    AlterTableOperation, ColumnOption, ObjectName, ObjectType, Statement, TableConstraint,
};

use crate::Context;

/// One table lock a statement takes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum LockTarget {
    /// On this table (as written) and, unless `only`, on each of its partitions and
    /// inheritance children, which PostgreSQL locks one after the other.
    Table { name: String, only: bool },
    /// On a table the analysis cannot name (a statement the parser did not read).
    Unnamed,
}

/// The locks `statement` takes on tables that exist before the migration (a table it created
/// has no queries queued on it). A query, or a definition that touches no existing table,
/// takes none the application queues behind.
pub(crate) fn statement_locks(statement: &Statement, context: &Context) -> Vec<LockTarget> {
    let mut locks = Vec::new();
    let mut table = |name: &ObjectName, only: bool| {
        let name = name.to_string();
        if !context.is_new(&name) {
            locks.push(LockTarget::Table { name, only });
        }
    };
    match statement {
        Statement::AlterTable(alter) => {
            table(&alter.name, alter.only);
            for operation in &alter.operations {
                for referenced in referenced_by_operation(operation) {
                    table(referenced, false);
                }
            }
        }
        Statement::CreateIndex(index) => table(&index.table_name, false),
        Statement::CreateTable(create) => {
            for referenced in (create.constraints.iter())
                .filter_map(referenced_by_constraint)
                .chain(create.columns.iter().flat_map(|column| {
                    (column.options.iter()).filter_map(|option| match &option.option {
                        ColumnOption::ForeignKey(fk) => Some(&fk.foreign_table),
                        _ => None,
                    })
                }))
            {
                table(referenced, false);
            }
        }
        Statement::Drop {
            object_type: ObjectType::Table,
            names,
            ..
        } => {
            for name in names {
                table(name, false);
            }
        }
        Statement::Truncate(truncate) => {
            for target in &truncate.table_names {
                table(&target.name, target.only);
            }
        }
        Statement::Lock(lock) => {
            for target in &lock.tables {
                table(&target.name, target.only);
            }
        }
        // Queries, and definitions of objects no query of the application waits on.
        Statement::Query(_)
        | Statement::Set(_)
        | Statement::CreateFunction(_)
        | Statement::CreateSchema { .. }
        | Statement::CreateSequence { .. }
        | Statement::CreateType { .. }
        | Statement::CreateExtension(_)
        | Statement::CreateView(_)
        | Statement::Comment { .. } => {}
        // Rows written (INSERT, UPDATE, DELETE...) and everything else: one lock, whose
        // table is not counted by its partitions.
        _ => locks.push(LockTarget::Unnamed),
    }
    locks
}

fn referenced_by_operation(operation: &AlterTableOperation) -> Vec<&ObjectName> {
    match operation {
        AlterTableOperation::AddConstraint { constraint, .. } => {
            referenced_by_constraint(constraint).into_iter().collect()
        }
        AlterTableOperation::AddColumn { column_def, .. } => (column_def.options.iter())
            .filter_map(|option| match &option.option {
                ColumnOption::ForeignKey(fk) => Some(&fk.foreign_table),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn referenced_by_constraint(constraint: &TableConstraint) -> Option<&ObjectName> {
    match constraint {
        TableConstraint::ForeignKey(fk) => Some(&fk.foreign_table),
        _ => None,
    }
}
