//! The lease lock in a MongoDB collection, exactly as the lease algorithm requires:
//! acquire is ONE `findOneAndUpdate` upsert whose filter matches only an expired lease; an
//! active lease makes the upsert's insert collide on `_id`, and that duplicate-key error
//! (code 11000, never recognised by its text: DocumentDB's message need not say "E11000")
//! means "held".

use std::time::Duration;

use async_trait::async_trait;
use mongodb::bson::{doc, Bson, DateTime, Document};
use mongodb::options::{CollectionOptions, IndexOptions, ReturnDocument, WriteConcern};
use mongodb::{Collection, Database, IndexModel};

use super::{mongo_code, mongo_message};
use crate::error::{Error, ErrorKind, Result};
use crate::lock::LOCK_NAME;
use crate::lock::{LeaseObservation, LeaseRecord, LeaseRequest, LeaseStore};

const DUPLICATE_KEY: i32 = 11000;

pub(crate) struct MongoLeaseStore {
    db: Database,
    locks: Collection<Document>,
    connection: String,
    /// Who the connection authenticates as: the grant a refusal names.
    grantee: super::grants::Grantee,
    /// Why `hello` gave no usable time, once it did not: from then on the clock is stamped.
    hello_clock: Option<String>,
}

impl MongoLeaseStore {
    /// The store in `table`; with `create`, its TTL index is made sure of (a run takes the
    /// lease), without, nothing is created (`status` and `unlock` only look).
    pub(crate) async fn open(
        db: Database,
        table: &str,
        connection: &str,
        grantee: super::grants::Grantee,
        create: bool,
    ) -> Result<Self> {
        // Majority write concern: an election cannot hand the lock to two runners.
        let locks = db.collection_with_options::<Document>(
            table,
            CollectionOptions::builder()
                .write_concern(WriteConcern::majority())
                .build(),
        );
        let store = MongoLeaseStore {
            db,
            locks,
            connection: connection.to_string(),
            grantee,
            hello_clock: None,
        };
        if !create {
            return Ok(store);
        }
        // Garbage collection only, for a lease nobody comes back for: whether a lease is
        // free is decided by the acquire filter, never by this index.
        let ttl_index = IndexModel::builder()
            .keys(doc! { "expiresAt": 1 })
            .options(IndexOptions::builder().expire_after(Duration::ZERO).build())
            .build();
        store
            .locks
            .create_index(ttl_index)
            .await
            .map_err(|e| store.error(e))?;
        Ok(store)
    }

    /// What the server said about the lease collection, kept as the error's `source()`.
    fn error(&self, error: mongodb::error::Error) -> Error {
        if let Some(refused) = self.grantee.refusal(&self.connection, &error) {
            return refused.caused_by(error);
        }
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: self.connection.clone(),
            reason: format!("lease collection: {}", mongo_message(&error)),
        })
        .caused_by(error)
    }

    /// "Now" by the server's clock, so client clock skew cannot make a live lease look
    /// expired: `hello.localTime` where the server sends a usable one, else the time a
    /// `$currentDate` write stamps. There is no third source: without the server's time no
    /// lease is taken, renewed or judged, so a live lease is never treated as expired.
    async fn server_now(&mut self) -> Result<DateTime> {
        if self.hello_clock.is_none() {
            let hello = self
                .db
                .run_command(doc! { "hello": 1 })
                .await
                .map_err(|e| self.error(e))?;
            match local_time(&hello) {
                Ok(now) => return Ok(now),
                // Remembered: the reply's shape does not change while we are connected.
                Err(why) => self.hello_clock = Some(why),
            }
        }
        self.stamped_now().await
    }

    /// The server's time as `$currentDate` writes it into a clock document beside the lease
    /// (`$currentDate` is in every MongoDB since 2.6 and in Amazon DocumentDB and Azure
    /// Cosmos DB for MongoDB vCore alike).
    async fn stamped_now(&self) -> Result<DateTime> {
        let mut attempts = 0;
        let stamped = loop {
            attempts += 1;
            let written = self
                .locks
                .find_one_and_update(
                    doc! { "_id": CLOCK_ID },
                    doc! { "$currentDate": { "now": true } },
                )
                .upsert(true)
                .return_document(ReturnDocument::After)
                .await;
            match written {
                // Two runners creating the clock document at once: one insert loses on
                // `_id`; the document exists now, so the retry updates it.
                Err(error) if mongo_code(&error) == Some(DUPLICATE_KEY) && attempts < 3 => {}
                other => break other.map_err(|e| self.error(e))?,
            }
        };
        match stamped.as_ref().and_then(|d| d.get("now")) {
            Some(Bson::DateTime(now)) => Ok(*now),
            other => Err(self.clock_error(format!(
                "a `$currentDate` write returned {} instead of a date",
                other.map_or("nothing".to_string(), |v| format!("{:?}", v.element_type()))
            ))),
        }
    }

    fn clock_error(&self, detail: String) -> Error {
        let hello = self
            .hello_clock
            .as_deref()
            .unwrap_or("the `hello` reply's localTime was not read");
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: self.connection.clone(),
            reason: format!(
                "cannot read the server's clock ({hello}; {detail}); without it no lease can be \
                 judged, so none was taken, renewed or reported as expired"
            ),
        })
    }
}

/// `_id` of the document whose `$currentDate` stamp gives the server's time. It has no
/// `expiresAt`, so the TTL index never removes it, and no lease operation matches it.
const CLOCK_ID: &str = "dirthara:clock";

/// Earliest and latest plausible "now", in epoch milliseconds (2000-01-01, 3000-01-01): a
/// value outside is in other units (seconds, microseconds) or garbage, and trusting it would
/// write leases that other runners see as long expired.
const PLAUSIBLE_MS: std::ops::Range<i64> = 946_684_800_000..32_503_680_000_000;

/// `hello.localTime` as a time: a BSON date (MongoDB), or an integer or double of epoch
/// milliseconds (DocumentDB, the engine of Azure Cosmos DB for MongoDB vCore, sends an
/// Int64). `Err` says why the reply has no usable time.
pub(crate) fn local_time(hello: &Document) -> std::result::Result<DateTime, String> {
    let millis = match hello.get("localTime") {
        None => return Err("the server's `hello` reply has no localTime".into()),
        Some(Bson::DateTime(date)) => date.timestamp_millis(),
        Some(Bson::Int64(ms)) => *ms,
        Some(Bson::Int32(ms)) => i64::from(*ms),
        Some(Bson::Double(ms)) if ms.is_finite() => ms.trunc() as i64,
        Some(other) => {
            return Err(format!(
                "the server's `hello.localTime` is a {:?}, neither a date nor epoch milliseconds",
                other.element_type()
            ))
        }
    };
    if PLAUSIBLE_MS.contains(&millis) {
        Ok(DateTime::from_millis(millis))
    } else {
        Err(format!(
            "the server's `hello.localTime` ({millis}) is not a plausible time in epoch milliseconds"
        ))
    }
}

/// Saturating: `as i64` wrapped a ttl of 2^64 ms into the past, an already expired lease.
fn plus(now: DateTime, ttl: Duration) -> DateTime {
    let ttl = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    DateTime::from_millis(now.timestamp_millis().saturating_add(ttl))
}

fn record_of(document: &Document) -> LeaseRecord {
    let text = |key: &str| document.get_str(key).ok().map(str::to_string);
    let time = |key: &str| match document.get(key) {
        Some(Bson::DateTime(d)) => d.try_to_rfc3339_string().ok(),
        Some(other) => Some(other.to_string()),
        None => None,
    };
    LeaseRecord {
        owner_id: text("ownerId"),
        hostname: text("hostname"),
        pid: document
            .get("pid")
            .and_then(|p| p.as_i64().or_else(|| p.as_i32().map(i64::from))),
        operation: text("operation"),
        acquired_at: time("acquiredAt"),
        expires_at: time("expiresAt"),
    }
}

#[async_trait]
impl LeaseStore for MongoLeaseStore {
    async fn try_acquire(&mut self, request: &LeaseRequest) -> Result<bool> {
        let now = self.server_now().await?;
        // `$type: "date"` with `$lt`: a missing, null, string or number expiry never
        // matches, so a malformed lease stays held. Both test an array's elements, so an
        // array holding a past date would match: arrays are excluded by name. (`$expr` is
        // not allowed in an upsert.)
        let filter = doc! { "_id": LOCK_NAME, "expiresAt": {
            "$type": "date", "$lt": now, "$not": { "$type": "array" }
        } };
        let update = doc! { "$set": {
            "ownerId": &request.owner_id,
            "hostname": &request.hostname,
            "pid": i64::from(request.pid),
            "operation": &request.operation,
            "acquiredAt": now,
            "expiresAt": plus(now, request.ttl),
        } };
        match self
            .locks
            .find_one_and_update(filter, update)
            .upsert(true)
            .await
        {
            Ok(_) => Ok(true),
            Err(error) if mongo_code(&error) == Some(DUPLICATE_KEY) => Ok(false),
            Err(error) => Err(self.error(error)),
        }
    }

    async fn renew(&mut self, owner_id: &str, ttl: Duration) -> Result<bool> {
        let now = self.server_now().await?;
        let result = self
            .locks
            .update_one(
                doc! { "_id": LOCK_NAME, "ownerId": owner_id, "expiresAt": { "$type": "date", "$gte": now } },
                doc! { "$set": { "expiresAt": plus(now, ttl) } },
            )
            .await
            .map_err(|e| self.error(e))?;
        Ok(result.matched_count == 1)
    }

    async fn release(&mut self, owner_id: &str) -> Result<bool> {
        let result = self
            .locks
            .delete_one(doc! { "_id": LOCK_NAME, "ownerId": owner_id })
            .await
            .map_err(|e| self.error(e))?;
        Ok(result.deleted_count == 1)
    }

    async fn observe(&mut self) -> Result<LeaseObservation> {
        let now = self.server_now().await?;
        let found = self
            .locks
            .find_one(doc! { "_id": LOCK_NAME })
            .await
            .map_err(|e| self.error(e))?;
        let Some(document) = found else {
            return Ok(LeaseObservation::Free);
        };
        let record = record_of(&document);
        Ok(match document.get("expiresAt") {
            Some(Bson::DateTime(expires)) => {
                let remaining = expires.timestamp_millis() - now.timestamp_millis();
                if remaining > 0 {
                    LeaseObservation::Held {
                        record,
                        remaining: Duration::from_millis(remaining as u64),
                    }
                } else {
                    LeaseObservation::Stale {
                        record,
                        expired_for: Duration::from_millis(remaining.unsigned_abs()),
                    }
                }
            }
            _ => LeaseObservation::Malformed { record },
        })
    }

    async fn force_release(&mut self) -> Result<bool> {
        let result = self
            .locks
            .delete_one(doc! { "_id": LOCK_NAME })
            .await
            .map_err(|e| self.error(e))?;
        Ok(result.deleted_count > 0)
    }

    async fn close(self: Box<Self>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2024-05-01T12:00:00Z.
    const MAY_2024: i64 = 1_714_564_800_000;

    fn hello(local_time: Option<Bson>) -> Document {
        let mut reply = doc! { "isWritablePrimary": true, "ok": 1.0 };
        if let Some(value) = local_time {
            reply.insert("localTime", value);
        }
        reply
    }

    #[test]
    fn local_time_as_a_bson_date_like_mongodb() {
        let now = local_time(&hello(Some(Bson::DateTime(DateTime::from_millis(
            MAY_2024,
        )))));
        assert_eq!(now, Ok(DateTime::from_millis(MAY_2024)));
    }

    #[test]
    fn local_time_as_int64_epoch_millis_like_documentdb() {
        let now = local_time(&hello(Some(Bson::Int64(MAY_2024))));
        assert_eq!(now, Ok(DateTime::from_millis(MAY_2024)));
    }

    #[test]
    fn local_time_as_int32_is_never_a_plausible_now() {
        // An Int32 of milliseconds ends in January 1970: read as a time it would write
        // leases every other runner sees as expired decades ago.
        let err = local_time(&hello(Some(Bson::Int32(i32::MAX)))).unwrap_err();
        assert!(err.contains("not a plausible time"), "{err}");
    }

    #[test]
    fn local_time_as_double_epoch_millis() {
        let now = local_time(&hello(Some(Bson::Double(MAY_2024 as f64 + 0.75))));
        assert_eq!(now, Ok(DateTime::from_millis(MAY_2024)));
        assert!(local_time(&hello(Some(Bson::Double(f64::NAN)))).is_err());
    }

    #[test]
    fn local_time_in_seconds_or_microseconds_is_refused() {
        for wrong_unit in [MAY_2024 / 1000, MAY_2024 * 1000] {
            let err = local_time(&hello(Some(Bson::Int64(wrong_unit)))).unwrap_err();
            assert!(err.contains(&wrong_unit.to_string()), "{err}");
        }
    }

    #[test]
    fn local_time_missing_says_so() {
        let err = local_time(&hello(None)).unwrap_err();
        assert_eq!(err, "the server's `hello` reply has no localTime");
    }

    #[test]
    fn local_time_as_a_string_names_its_type() {
        let err =
            local_time(&hello(Some(Bson::String("2024-05-01T12:00:00Z".into())))).unwrap_err();
        assert!(err.contains("String"), "{err}");
        assert!(
            err.contains("neither a date nor epoch milliseconds"),
            "{err}"
        );
    }

    /// Against a real server (`DIRTHARA_TEST_MONGODB_URL`): when `hello` has no usable time,
    /// "now" comes from a `$currentDate` stamp, and the lease still works end to end.
    #[tokio::test]
    async fn without_a_hello_time_the_server_stamps_now() {
        let Ok(url) = std::env::var("DIRTHARA_TEST_MONGODB_URL") else {
            assert_ne!(
                std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref(),
                Ok("1"),
                "DIRTHARA_REQUIRE_SERVERS=1 requires DIRTHARA_TEST_MONGODB_URL"
            );
            return;
        };
        let client = mongodb::Client::with_uri_str(&url).await.unwrap();
        let db = client.database(&format!("dirthara_clock_{:x}", fastrand::u64(..)));
        let mut store = MongoLeaseStore::open(
            db.clone(),
            "clock_lock",
            "default",
            Default::default(),
            true,
        )
        .await
        .unwrap();
        store.hello_clock = Some("the server's `hello` reply has no localTime".into());
        let stamped = store.server_now().await.unwrap();
        let skew = stamped.timestamp_millis() - DateTime::now().timestamp_millis();
        assert!(skew.abs() < 60_000, "server time is {skew} ms off ours");
        let request = LeaseRequest::new("migrate", Duration::from_secs(60));
        assert!(store.try_acquire(&request).await.unwrap());
        let other = LeaseRequest::new("migrate", Duration::from_secs(60));
        assert!(
            !store.try_acquire(&other).await.unwrap(),
            "a live lease was taken"
        );
        assert!(matches!(
            store.observe().await.unwrap(),
            LeaseObservation::Held { .. }
        ));
        assert!(store.renew(&request.owner_id, request.ttl).await.unwrap());
        assert!(store.release(&request.owner_id).await.unwrap());
        db.drop().await.unwrap();
    }

    /// Against a real server: a lease operation the server refuses is `MIGRATION_LOCK_FAILED`
    /// with the driver's error as its `source()`.
    #[tokio::test]
    async fn a_lease_error_keeps_the_drivers_error() {
        use std::error::Error as _;
        let Ok(url) = std::env::var("DIRTHARA_TEST_MONGODB_URL") else {
            assert_ne!(
                std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref(),
                Ok("1"),
                "DIRTHARA_REQUIRE_SERVERS=1 requires DIRTHARA_TEST_MONGODB_URL"
            );
            return;
        };
        let client = mongodb::Client::with_uri_str(&url).await.unwrap();
        let db = client.database(&format!("dirthara_cause_{:x}", fastrand::u64(..)));
        let store = MongoLeaseStore::open(
            db.clone(),
            "cause_lock",
            "default",
            Default::default(),
            true,
        )
        .await
        .unwrap();
        // A command the server does not know stands for any it refuses.
        let refused = db
            .run_command(doc! { "noSuchCommand": 1 })
            .await
            .unwrap_err();
        let error = store.error(refused);
        assert_eq!(error.code(), crate::Code::MigrationLockFailed);
        let source = error.source().expect("the driver's error is kept");
        assert!(source.is::<mongodb::error::Error>(), "{source:?}");
        db.drop().await.unwrap();
    }

    /// Regression (issue 22): `--lock-ttl 18446743073709551` wrapped into the past, so the
    /// runner took a lease that had already expired.
    #[test]
    fn a_lease_too_long_for_a_bson_date_saturates_instead_of_wrapping_into_the_past() {
        let now = DateTime::from_millis(MAY_2024);
        let far = plus(now, Duration::from_secs(18_446_743_073_709_551));
        assert_eq!(far, DateTime::from_millis(i64::MAX));
        assert_eq!(plus(now, Duration::MAX), DateTime::from_millis(i64::MAX));
        assert_eq!(
            plus(now, Duration::from_secs(60)),
            DateTime::from_millis(MAY_2024 + 60_000)
        );
    }
}
