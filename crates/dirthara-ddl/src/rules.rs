//! The rules: one row each, with the stable name a finding carries, what the statement does
//! to the table, the lock it takes, what the application can no longer do meanwhile, and the
//! safe recipe. `docs/ddl-safety.md` has one entry per rule (a test holds the two together).

use serde::Serialize;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Severity {
    /// Breaks the application's version that is still running during a rolling deploy, or
    /// fails on some data; stalls nothing. Reported, never refused.
    Warning,
    /// Blocks the application's reads or writes while it rewrites, scans or indexes the
    /// table: refused before anything runs on a table larger than `blocking_table_size`.
    Blocking,
    /// Fails at run time wherever it runs (a statement that cannot run in a transaction,
    /// in one).
    Error,
}

impl Severity {
    /// As printed: `warning`, `blocking`, `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Blocking => "blocking",
            Severity::Error => "error",
        }
    }
}

/// What the application can still do while the statement holds its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Blocks {
    /// Reads and writes go on (only other DDL waits).
    Nothing,
    /// Reads go on; writes wait.
    Writes,
    /// Reads and writes wait.
    ReadsAndWrites,
}

/// What the statement does to the rows of the table while it holds its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Work {
    /// Changes only the catalog: done at once, whatever the table's size.
    Catalog,
    /// Reads every row to check it.
    Scan,
    /// Builds an index, reading every row.
    IndexBuild,
    /// Writes a new copy of the table.
    Rewrite,
}

/// One rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Rule {
    /// The stable name: `changing-column-type`, ... (squawk's where squawk has the rule).
    pub name: &'static str,
    pub severity: Severity,
    /// The lock it takes, in the server's words (`ACCESS EXCLUSIVE`, `SHARE`, MySQL's
    /// `exclusive metadata lock`).
    pub lock: &'static str,
    /// What the application cannot do meanwhile.
    pub blocks: Blocks,
    /// What it does to the rows while it holds the lock.
    pub work: Work,
    /// Why it is flagged, in a sentence.
    pub why: &'static str,
    /// The safe way, as migration files.
    pub fix: &'static str,
}

macro_rules! rule {
    ($name:literal, $severity:ident, $lock:literal, $blocks:ident, $work:ident, $why:literal, $fix:literal) => {
        Rule {
            name: $name,
            severity: Severity::$severity,
            lock: $lock,
            blocks: Blocks::$blocks,
            work: Work::$work,
            why: $why,
            fix: $fix,
        }
    };
}

pub const CHANGING_COLUMN_TYPE: Rule = rule!(
    "changing-column-type",
    Blocking,
    "ACCESS EXCLUSIVE",
    ReadsAndWrites,
    Rewrite,
    "changing a column's type rewrites the whole table (and its indexes) under a lock that \
     blocks every read and write, unless the new type is binary-compatible",
    "add a column of the new type; backfill it in batches in later migrations (or in the \
     application); switch reads and writes to it; drop the old column in a last migration"
);

pub const ADDING_FIELD_WITH_DEFAULT: Rule = rule!(
    "adding-field-with-default",
    Blocking,
    "ACCESS EXCLUSIVE",
    ReadsAndWrites,
    Rewrite,
    "a column added with a volatile default (`random()`, `gen_random_uuid()`, \
     `clock_timestamp()`, ...) is computed for every row: the table is rewritten under a lock \
     that blocks every read and write (a constant default is instant from PostgreSQL 11)",
    "add the column without a default (or with a constant one); set the default in the same \
     migration; backfill existing rows in batches in later migrations"
);

pub const ADDING_NOT_NULLABLE_FIELD: Rule = rule!(
    "adding-not-nullable-field",
    Warning,
    "ACCESS EXCLUSIVE",
    ReadsAndWrites,
    Catalog,
    "a NOT NULL column without a default fails on a table that has rows, and the running \
     version of the application does not set it",
    "add the column nullable or with a default; backfill; then add `CHECK (col IS NOT NULL) \
     NOT VALID`, `VALIDATE` it in a later migration, and `SET NOT NULL` after that"
);

pub const SETTING_NOT_NULLABLE_FIELD: Rule = rule!(
    "setting-not-nullable-field",
    Blocking,
    "ACCESS EXCLUSIVE",
    ReadsAndWrites,
    Scan,
    "`SET NOT NULL` reads every row to check it, under a lock that blocks every read and write",
    "add `CHECK (col IS NOT NULL) NOT VALID`; `VALIDATE CONSTRAINT` it in a later migration \
     (a scan that blocks nobody); then `SET NOT NULL`, which PostgreSQL 12+ proves from the \
     valid check without a scan, and drop the check"
);

pub const ADDING_FOREIGN_KEY_CONSTRAINT: Rule = rule!(
    "adding-foreign-key-constraint",
    Blocking,
    "SHARE ROW EXCLUSIVE",
    Writes,
    Scan,
    "adding a foreign key checks every row, while writes to both tables wait",
    "add the constraint `NOT VALID` (checked for new rows only, at once); `VALIDATE \
     CONSTRAINT` it in a later migration, which blocks no writes"
);

pub const CONSTRAINT_MISSING_NOT_VALID: Rule = rule!(
    "constraint-missing-not-valid",
    Blocking,
    "ACCESS EXCLUSIVE",
    ReadsAndWrites,
    Scan,
    "adding a CHECK constraint checks every row under a lock that blocks every read and write",
    "add the constraint `NOT VALID`; `VALIDATE CONSTRAINT` it in a later migration, which \
     blocks neither reads nor writes"
);

pub const REQUIRE_CONCURRENT_INDEX_CREATION: Rule = rule!(
    "require-concurrent-index-creation",
    Blocking,
    "SHARE",
    Writes,
    IndexBuild,
    "the build blocks every write to the table until it ends",
    "`CREATE INDEX CONCURRENTLY` in a migration of its own marked `-- dirthara:no-transaction`"
);

pub const DISALLOWED_UNIQUE_CONSTRAINT: Rule =
    rule!(
    "disallowed-unique-constraint", Blocking, "ACCESS EXCLUSIVE", ReadsAndWrites, IndexBuild,
    "adding a UNIQUE or PRIMARY KEY constraint builds its index under a lock that blocks every \
     read and write",
    "`CREATE UNIQUE INDEX CONCURRENTLY` in a `-- dirthara:no-transaction` migration; then \
     `ADD CONSTRAINT ... UNIQUE USING INDEX` (or `PRIMARY KEY USING INDEX`), which is instant"
);

pub const ADDING_SERIAL_PRIMARY_KEY_FIELD: Rule = rule!(
    "adding-serial-primary-key-field",
    Blocking,
    "ACCESS EXCLUSIVE",
    ReadsAndWrites,
    Rewrite,
    "a `serial` (or identity) primary-key column fills every row and builds its index under a \
     lock that blocks every read and write",
    "add a nullable column and its sequence; backfill in batches; `CREATE UNIQUE INDEX \
     CONCURRENTLY`; then `ADD CONSTRAINT ... PRIMARY KEY USING INDEX`"
);

pub const BAN_CONCURRENT_INDEX_CREATION_IN_TRANSACTION: Rule = rule!(
    "ban-concurrent-index-creation-in-transaction",
    Error,
    "SHARE UPDATE EXCLUSIVE",
    Nothing,
    IndexBuild,
    "`CONCURRENTLY` cannot run inside a transaction block: the migration fails when it runs",
    "put the statement in a migration of its own marked `-- dirthara:no-transaction`"
);

pub const ADDING_GENERATED_STORED_COLUMN: Rule =
    rule!(
    "adding-generated-stored-column", Blocking, "ACCESS EXCLUSIVE", ReadsAndWrites, Rewrite,
    "a `GENERATED ... STORED` column is computed for every row: the table is rewritten under a \
     lock that blocks every read and write",
    "add a plain column, fill it with a trigger for new rows and in batches for old ones, or \
     compute the value in a view or the application"
);

pub const SETTING_TABLESPACE: Rule =
    rule!(
    "setting-tablespace", Blocking, "ACCESS EXCLUSIVE", ReadsAndWrites, Rewrite,
    "`SET TABLESPACE` copies the whole table under a lock that blocks every read and write",
    "move the table in a maintenance window (`-- dirthara:allow-blocking <reason>`), or copy it \
     with logical replication (pg_repack can too)"
);

pub const CLUSTERING_TABLE: Rule =
    rule!(
    "clustering-table", Blocking, "ACCESS EXCLUSIVE", ReadsAndWrites, Rewrite,
    "`CLUSTER` rewrites the whole table in index order under a lock that blocks every read and \
     write",
    "run it in a maintenance window (`-- dirthara:allow-blocking <reason>`), or use pg_repack, \
     which reorders online"
);

pub const VACUUM_FULL: Rule =
    rule!(
    "vacuum-full", Blocking, "ACCESS EXCLUSIVE", ReadsAndWrites, Rewrite,
    "`VACUUM FULL` rewrites the whole table under a lock that blocks every read and write (and \
     cannot run in a transaction)",
    "plain `VACUUM` (no lock against the application) in a `-- dirthara:no-transaction` \
     migration; reclaim space with pg_repack, or in a maintenance window"
);

pub const MYSQL_COPYING_ALTER: Rule =
    rule!(
    "mysql-copying-alter", Blocking, "shared metadata lock (LOCK=SHARED)", Writes, Rewrite,
    "this ALTER needs `ALGORITHM=COPY` (a column's type changed, `ALGORITHM=COPY` asked for, a \
     primary key dropped, a character set converted): the table is copied while every write \
     waits",
    "add a new column and backfill it in batches, then swap (and drop the old one later); or \
     use an online schema-change tool (gh-ost, pt-online-schema-change)"
);

pub const MYSQL_LOCKING_ALTER: Rule =
    rule!(
    "mysql-locking-alter", Blocking, "exclusive or shared metadata lock", Writes, Rewrite,
    "this ALTER asks for `LOCK=EXCLUSIVE` or `LOCK=SHARED`, or adds a FULLTEXT or SPATIAL index \
     (built with `LOCK=SHARED`): writes (and with EXCLUSIVE, reads) wait for the whole \
     rebuild",
    "ask for `ALGORITHM=INPLACE, LOCK=NONE` where the server allows it (it refuses at once \
     otherwise); build FULLTEXT indexes in a maintenance window"
);

pub const DROPPING_COLUMN: Rule = rule!(
    "dropping-column",
    Warning,
    "ACCESS EXCLUSIVE",
    Nothing,
    Catalog,
    "the application version still running during the deploy may read the column",
    "stop reading and writing the column in one release; drop it in a migration of the next"
);

pub const RENAMING_COLUMN: Rule = rule!(
    "renaming-column",
    Warning,
    "ACCESS EXCLUSIVE",
    Nothing,
    Catalog,
    "the application version still running during the deploy reads the old name",
    "add the new column, write both, backfill, switch reads, then drop the old one; or expose \
     the new name through a view"
);

pub const DROPPING_TABLE: Rule = rule!(
    "dropping-table",
    Warning,
    "ACCESS EXCLUSIVE",
    Nothing,
    Catalog,
    "the application version still running during the deploy may use the table",
    "stop using the table in one release; drop it in a migration of the next"
);

pub const RENAMING_TABLE: Rule = rule!(
    "renaming-table",
    Warning,
    "ACCESS EXCLUSIVE",
    Nothing,
    Catalog,
    "the application version still running during the deploy uses the old name",
    "create the new name as a view of the old table (or the reverse) for the length of the \
     deploy, then rename"
);

/// Every rule, in the order the docs list them.
pub const RULES: &[Rule] = &[
    CHANGING_COLUMN_TYPE,
    ADDING_FIELD_WITH_DEFAULT,
    ADDING_NOT_NULLABLE_FIELD,
    SETTING_NOT_NULLABLE_FIELD,
    ADDING_FOREIGN_KEY_CONSTRAINT,
    CONSTRAINT_MISSING_NOT_VALID,
    REQUIRE_CONCURRENT_INDEX_CREATION,
    DISALLOWED_UNIQUE_CONSTRAINT,
    ADDING_SERIAL_PRIMARY_KEY_FIELD,
    BAN_CONCURRENT_INDEX_CREATION_IN_TRANSACTION,
    ADDING_GENERATED_STORED_COLUMN,
    SETTING_TABLESPACE,
    CLUSTERING_TABLE,
    VACUUM_FULL,
    MYSQL_COPYING_ALTER,
    MYSQL_LOCKING_ALTER,
    DROPPING_COLUMN,
    RENAMING_COLUMN,
    DROPPING_TABLE,
    RENAMING_TABLE,
];

/// The rule named `name`, if there is one.
pub fn rule_named(name: &str) -> Option<&'static Rule> {
    RULES.iter().find(|rule| rule.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_blocking_rule_blocks_something_while_it_works() {
        let mut names = std::collections::BTreeSet::new();
        for rule in RULES {
            assert!(names.insert(rule.name), "{} twice", rule.name);
            if rule.severity == Severity::Blocking {
                assert_ne!(rule.blocks, Blocks::Nothing, "{}", rule.name);
                assert_ne!(rule.work, Work::Catalog, "{}", rule.name);
            }
        }
        assert_eq!(rule_named("vacuum-full"), Some(&VACUUM_FULL));
    }
}
