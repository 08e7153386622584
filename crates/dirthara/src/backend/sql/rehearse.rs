//! A flagged statement rehearsed on an empty copy of its table, on the connection it will
//! run on (`dirthara_ddl::rehearsal` writes the statements): PostgreSQL in a transaction
//! rolled back afterwards, MySQL/MariaDB on a copy dropped afterwards. Any failure other than
//! the server refusing an online algorithm means "cannot tell", and the rule's verdict stands.

use super::SqlDriver;
use dirthara_ddl::Rehearsal;

/// How long making the copy may wait for its table's lock (it reads the table's definition
/// only): a rehearsal never queues the application behind it.
const COPY_LOCK_WAIT: &str = "1s";

pub(super) async fn rehearse<D: SqlDriver>(driver: &mut D, rehearsal: &Rehearsal) -> Option<bool> {
    match rehearsal {
        Rehearsal::Rewrites {
            table,
            copy,
            on_copy,
        } => {
            driver.execute("BEGIN").await.ok()?;
            let asked = rewrites(driver, table, copy, on_copy).await;
            // Nothing of it stays: the copy and whatever the statement did to it.
            driver.execute("ROLLBACK").await.ok()?;
            asked
        }
        Rehearsal::Online {
            table,
            copy,
            instant,
            inplace,
        } => {
            // Making the copy reads the table's definition under a metadata lock: wait for
            // it 1 s at most (MySQL counts whole seconds), then put the session's wait back.
            (driver.execute("SET @dirthara_lock_wait = @@SESSION.lock_wait_timeout"))
                .await
                .ok()?;
            driver
                .execute("SET SESSION lock_wait_timeout = 1")
                .await
                .ok()?;
            let asked = match driver
                .execute(&format!("CREATE TABLE {copy} LIKE {table}"))
                .await
            {
                Ok(()) => Some(
                    driver.execute(instant).await.is_err()
                        && driver.execute(inplace).await.is_err(),
                ),
                Err(_) => None,
            };
            let _ = driver
                .execute(&format!("DROP TABLE IF EXISTS {copy}"))
                .await;
            let _ = driver
                .execute("SET SESSION lock_wait_timeout = @dirthara_lock_wait")
                .await;
            asked
        }
        _ => None,
    }
}

/// The copy's `relfilenode` before and after `on_copy`: a new one is a rewrite.
async fn rewrites<D: SqlDriver>(
    driver: &mut D,
    table: &str,
    copy: &str,
    on_copy: &str,
) -> Option<bool> {
    driver
        .execute(&format!("SET LOCAL lock_timeout = '{COPY_LOCK_WAIT}'"))
        .await
        .ok()?;
    driver
        .execute(&format!(
            "CREATE TEMP TABLE {copy} (LIKE {table} INCLUDING ALL)"
        ))
        .await
        .ok()?;
    let file = format!("SELECT relfilenode::text FROM pg_class WHERE oid = '{copy}'::regclass");
    let before = driver.fetch_text(&file).await.ok()?;
    driver.execute(on_copy).await.ok()?;
    let after = driver.fetch_text(&file).await.ok()?;
    Some(before != after)
}
