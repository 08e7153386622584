//! sqlx's errors, read into the facts dirthara keeps of what a database said: the SQL
//! backends' [`DriverError`]. A driver that is not sqlx implements the same trait for its
//! own error type.

use super::DriverError;
use crate::error::DatabaseError;

impl DriverError for sqlx::Error {
    fn facts(&self) -> (DatabaseError, Option<usize>) {
        database_facts(self)
    }

    fn is_unique_violation(&self) -> bool {
        matches!(self, sqlx::Error::Database(db) if db.is_unique_violation())
    }

    fn is_permission_denied(&self) -> bool {
        let (facts, _) = database_facts(self);
        facts.code.as_deref() == Some("42501")
            || matches!(facts.number, Some(1044 | 1142 | 1143 | 1227 | 1370))
    }

    /// SQLite answers a write while another process writes with SQLITE_BUSY (5, or an
    /// extended code whose low byte is 5).
    fn is_busy(&self) -> bool {
        match self {
            sqlx::Error::Database(db) => db
                .code()
                .and_then(|c| c.parse::<i64>().ok())
                .is_some_and(|c| c & 0xff == 5),
            _ => false,
        }
    }
}

/// What the driver's error says, and the character position (1-based, in the text sent) at
/// which the database located it, where it does.
fn database_facts(error: &sqlx::Error) -> (DatabaseError, Option<usize>) {
    let sqlx::Error::Database(db) = error else {
        let mut facts = DatabaseError::from_message(error.to_string());
        facts.connection_lost = matches!(error, sqlx::Error::Io(_) | sqlx::Error::Protocol(_));
        return (facts, None);
    };
    let mut facts = DatabaseError::from_message(db.message());
    facts.code = db.code().map(|c| c.into_owned());
    facts.constraint = db.constraint().map(str::to_string);
    facts.table = db.table().map(str::to_string);
    #[cfg(feature = "postgres")]
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        return postgres_facts(facts, pg);
    }
    #[cfg(feature = "mysql")]
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return (mysql_facts(facts, my), None);
    }
    (facts, None)
}

#[cfg(feature = "postgres")]
fn postgres_facts(
    mut facts: DatabaseError,
    pg: &sqlx::postgres::PgDatabaseError,
) -> (DatabaseError, Option<usize>) {
    facts.detail = pg.detail().map(str::to_string);
    facts.hint = pg.hint().map(str::to_string);
    facts.context = pg.r#where().map(str::to_string);
    // 57P01 admin_shutdown (server restart, pg_terminate_backend), 57P02 crash_shutdown,
    // and class 08 (connection exception) end the session.
    facts.connection_lost = matches!(pg.code(), "57P01" | "57P02") || pg.code().starts_with("08");
    if answers_read_only(None, pg.code(), pg.message()) {
        read_only(&mut facts);
    }
    facts.lock_not_available = pg.code() == "55P03";
    facts.deadlock_victim = pg.code() == "40P01";
    let position = match pg.position() {
        Some(sqlx::postgres::PgErrorPosition::Original(position)) => Some(position),
        _ => None,
    };
    (facts, position)
}

#[cfg(feature = "mysql")]
fn mysql_facts(mut facts: DatabaseError, my: &sqlx::mysql::MySqlDatabaseError) -> DatabaseError {
    facts.number = Some(i64::from(my.number()));
    // 1053 server shutdown, 1927 connection killed (MariaDB), 2006/2013 gone away / lost.
    facts.connection_lost = matches!(my.number(), 1053 | 1927 | 2006 | 2013);
    facts.lock_not_available = matches!(my.number(), 1205 | 3572);
    facts.deadlock_victim = my.number() == 1213;
    if answers_read_only(
        Some(my.number()),
        my.code().unwrap_or_default(),
        my.message(),
    ) {
        read_only(&mut facts);
    }
    facts
}

/// The server refused a write because it is read-only, as a primary is once a failover
/// (Aurora, Patroni, orchestrator) has made it a replica while dirthara held its session:
/// PostgreSQL's SQLSTATE 25006, MySQL's 1290 naming `--read-only` or `--super-read-only`
/// (1290 is also `--secure-file-priv` and the like), and 1836 `read_only` mode.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn answers_read_only(number: Option<u16>, sqlstate: &str, message: &str) -> bool {
    match number {
        Some(1836) => true,
        Some(1290) => message.contains("read-only") || message.contains("read_only"),
        Some(_) => false,
        None => sqlstate == "25006",
    }
}

/// A read-only answer is a lost writer: the lock and the history are no longer on the
/// primary, so the run ends as if its connection had dropped, and says why.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn read_only(facts: &mut DatabaseError) {
    facts.connection_lost = true;
    facts.hint.get_or_insert_with(|| {
        "the server answered read-only, as a former primary does after a failover: dirthara's \
         session (and its migration lock) is no longer on the writer; run again once the URL \
         reaches the new primary"
            .to_string()
    });
}

#[cfg(all(test, any(feature = "postgres", feature = "mysql")))]
mod tests {
    use super::answers_read_only;

    #[test]
    fn a_read_only_answer_is_recognised_by_number_sqlstate_and_message() {
        let super_read_only = "The MySQL server is running with the --super-read-only option \
                               so it cannot execute this statement";
        assert!(answers_read_only(Some(1290), "HY000", super_read_only));
        assert!(answers_read_only(
            Some(1290),
            "HY000",
            "The MariaDB server is running with the --read-only option so it cannot execute \
             this statement"
        ));
        assert!(answers_read_only(
            Some(1836),
            "HY000",
            "Running in read-only mode"
        ));
        assert!(answers_read_only(
            None,
            "25006",
            "cannot execute CREATE TABLE in a read-only transaction"
        ));
        // The same 1290 for another option is an ordinary refusal.
        assert!(!answers_read_only(
            Some(1290),
            "HY000",
            "The MySQL server is running with the --secure-file-priv option so it cannot \
             execute this statement"
        ));
        assert!(!answers_read_only(Some(1062), "23000", "Duplicate entry"));
        assert!(!answers_read_only(None, "42P07", "relation exists"));
    }
}
