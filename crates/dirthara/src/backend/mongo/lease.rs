//! The lease lock in a MongoDB collection, exactly as the lease algorithm requires:
//! acquire is ONE `findOneAndUpdate` upsert whose filter matches only an expired lease; an
//! active lease makes the upsert's insert collide on `_id`, and that duplicate-key error
//! (code 11000, never recognised by its text) means "held".

use std::time::Duration;

use async_trait::async_trait;
use mongodb::bson::{doc, Bson, DateTime, Document};
use mongodb::options::{CollectionOptions, IndexOptions, WriteConcern};
use mongodb::{Collection, Database, IndexModel};

use super::{mongo_code, mongo_message};
use crate::error::{Error, ErrorKind, Result};
use crate::lock::lease::{LeaseObservation, LeaseRecord, LeaseRequest, LeaseStore};
use crate::lock::LOCK_NAME;

const DUPLICATE_KEY: i32 = 11000;

pub(crate) struct MongoLeaseStore {
    db: Database,
    locks: Collection<Document>,
    connection: String,
}

impl MongoLeaseStore {
    pub(crate) async fn open(db: Database, table: &str, connection: &str) -> Result<Self> {
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
        };
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

    fn error(&self, error: mongodb::error::Error) -> Error {
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: self.connection.clone(),
            reason: format!("lease collection: {}", mongo_message(&error)),
        })
    }

    /// "Now" by the server's clock (`hello.localTime`), so client clock skew cannot make a
    /// live lease look expired.
    async fn server_now(&self) -> Result<DateTime> {
        let hello = self
            .db
            .run_command(doc! { "hello": 1 })
            .await
            .map_err(|e| self.error(e))?;
        hello.get_datetime("localTime").copied().map_err(|_| {
            Error::new(ErrorKind::LockFailed {
                lock: LOCK_NAME.to_string(),
                connection: self.connection.clone(),
                reason: "the server's `hello` reply has no localTime".into(),
            })
        })
    }
}

fn plus(now: DateTime, ttl: Duration) -> DateTime {
    DateTime::from_millis(now.timestamp_millis() + ttl.as_millis() as i64)
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
        // matches, so a malformed lease stays held. (`$expr` is not allowed in an upsert.)
        let filter = doc! { "_id": LOCK_NAME, "expiresAt": { "$type": "date", "$lt": now } };
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
