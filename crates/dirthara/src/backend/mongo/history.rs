//! The history and meta collections: how to look at and create them (the rules are in
//! `backend/history_tables.rs`), reading their documents, and writing history changes.

use async_trait::async_trait;
use mongodb::bson::{doc, Bson, DateTime, Document};
use mongodb::ClientSession;

use super::MongoBackend;
use crate::backend::history_tables::{HistoryTables, Known};
use crate::error::{Error, Result};
use crate::history::{
    AppliedMigration, HistoryChange, HistoryDigest, RecordState, RecordedFailure,
    HISTORY_LAYOUT_VERSION,
};

#[async_trait]
impl HistoryTables for MongoBackend {
    fn names(&self) -> (&str, &str) {
        (&self.connection, &self.table)
    }

    async fn existing(&mut self) -> Result<(bool, bool)> {
        let meta = format!("{}_meta", self.table);
        let names = self
            .db
            .list_collection_names()
            .filter(doc! { "name": { "$in": [&self.table, &meta] } })
            .await
            .map_err(|e| self.error(e))?;
        Ok((names.contains(&self.table), names.contains(&meta)))
    }

    async fn layout_version(&mut self) -> Result<i64> {
        self.written_layout().await?.ok_or_else(|| {
            Error::history(
                &self.connection,
                format!("`{}_meta` has no readable layout_version", self.table),
            )
        })
    }

    async fn written_layout(&mut self) -> Result<Option<i64>> {
        let meta = self
            .db
            .collection::<Document>(&format!("{}_meta", self.table));
        let found = meta
            .find_one(doc! { "_id": "layout_version" })
            .await
            .map_err(|e| self.error(e))?;
        Ok(found.and_then(|d| {
            d.get("value")
                .and_then(Bson::as_i64)
                .or_else(|| d.get_i32("value").ok().map(i64::from))
        }))
    }

    /// The layout, then the digest by one aggregation. MongoDB has no hash function in its
    /// pipelines: the server counts and joins each record's `version:checksum`, and the
    /// pairs are hashed here, in version order, as the SQL servers hash them.
    async fn layout_and_digest(&mut self) -> Result<(i64, Option<HistoryDigest>)> {
        let layout = self.layout_version().await?;
        let pipeline = [doc! { "$group": {
            "_id": Bson::Null,
            "records": { "$sum": 1 },
            "newest": { "$max": "$_id" },
            "notApplied": { "$sum": { "$cond": [{ "$eq": ["$state", "applied"] }, 0, 1] } },
            "pairs": { "$push": { "$concat": [{ "$toString": "$_id" }, ":", "$checksum"] } },
        } }];
        let history = self.db.collection::<Document>(&self.table);
        let mut cursor = (history.aggregate(pipeline).await).map_err(|e| self.error(e))?;
        let group = match cursor.advance().await.map_err(|e| self.error(e))? {
            true => Some(cursor.deserialize_current().map_err(|e| self.error(e))?),
            false => None,
        };
        Ok((layout, Some(digest_of(group.as_ref()))))
    }

    async fn create_meta(&mut self) -> Result<()> {
        self.db
            .collection::<Document>(&format!("{}_meta", self.table))
            .insert_one(doc! { "_id": "layout_version", "value": HISTORY_LAYOUT_VERSION })
            .await
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    /// The meta collection's one document is its layout: writing it is creating it.
    async fn write_layout(&mut self) -> Result<()> {
        self.create_meta().await
    }

    async fn create_history(&mut self) -> Result<()> {
        self.db
            .create_collection(&self.table)
            .await
            .map_err(|e| self.error(e))
    }

    /// Documents take new fields as they come: an upgrade only says the layout is current.
    async fn upgrade(&mut self, _from: i64) -> Result<()> {
        self.db
            .collection::<Document>(&format!("{}_meta", self.table))
            .update_one(
                doc! { "_id": "layout_version" },
                doc! { "$set": { "value": HISTORY_LAYOUT_VERSION } },
            )
            .await
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    fn known(&mut self) -> &mut Known {
        &mut self.known
    }

    async fn select(&mut self, _layout: i64) -> Result<Vec<AppliedMigration>> {
        let mut cursor = self
            .db
            .collection::<Document>(&self.table)
            .find(doc! {})
            .sort(doc! { "_id": 1 })
            .await
            .map_err(|e| self.error(e))?;
        let mut records = Vec::new();
        while cursor.advance().await.map_err(|e| self.error(e))? {
            let document = cursor.deserialize_current().map_err(|e| self.error(e))?;
            records.push(parse_record(&document).ok_or_else(|| {
                Error::history(
                    &self.connection,
                    format!("`{}` has a malformed record: {document}", self.table),
                )
            })?);
        }
        Ok(records)
    }
}

impl MongoBackend {
    pub(super) async fn apply_change(
        &self,
        change: &HistoryChange,
        session: Option<&mut ClientSession>,
    ) -> std::result::Result<(), mongodb::error::Error> {
        let history = self.db.collection::<Document>(&self.table);
        let now = DateTime::now();
        macro_rules! run {
            ($action:expr) => {
                match session {
                    Some(s) => $action.session(s).await.map(|_| ()),
                    None => $action.await.map(|_| ()),
                }
            };
        }
        match change {
            HistoryChange::Insert(record) => {
                let record = doc! {
                    "_id": record.version,
                    "name": &record.name,
                    "checksum": &record.checksum,
                    "batch": record.batch,
                    "state": record.state.as_str(),
                    "appliedAt": now,
                    "durationMs": record.duration_ms.unwrap_or(0),
                    "appliedBy": &record.applied_by,
                };
                run!(history.insert_one(record))
            }
            HistoryChange::MarkApplied {
                version,
                duration_ms,
            } => run!(history.update_one(
                doc! { "_id": *version },
                doc! {
                    "$set": { "state": "applied", "durationMs": *duration_ms, "appliedAt": now },
                    "$unset": { "failure": "" },
                }
            )),
            HistoryChange::SetState { version, state } => run!(history.update_one(
                doc! { "_id": *version },
                doc! { "$set": { "state": state.as_str() }, "$unset": { "failure": "" } }
            )),
            HistoryChange::RecordFailure { version, failure } => run!(history.update_one(
                doc! { "_id": *version },
                doc! { "$set": { "failure": failure.to_json() } }
            )),
            HistoryChange::SetChecksum { version, checksum } => run!(history.update_one(
                doc! { "_id": *version },
                doc! { "$set": { "checksum": checksum } }
            )),
            HistoryChange::Delete { version } => run!(history.delete_one(doc! { "_id": *version })),
        }
    }
}

/// The digest from the aggregation's one group (`None`: an empty history, no group).
fn digest_of(group: Option<&Document>) -> HistoryDigest {
    let Some(group) = group else {
        return HistoryDigest {
            records: 0,
            newest: None,
            not_applied: 0,
            hash: String::new(),
        };
    };
    let int =
        |key: &str| (group.get(key)).and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from)));
    let mut pairs: Vec<(i64, &str)> = (group.get_array("pairs").into_iter().flatten())
        .filter_map(|pair| {
            let (version, checksum) = pair.as_str()?.split_once(':')?;
            Some((version.parse().ok()?, checksum))
        })
        .collect();
    pairs.sort_unstable_by_key(|&(version, _)| version);
    HistoryDigest {
        records: int("records").unwrap_or(0).try_into().unwrap_or(0),
        newest: int("newest"),
        // Unknown counts as not applied: the records are then read and judged one by one.
        not_applied: int("notApplied").map_or(1, |n| n.try_into().unwrap_or(1)),
        hash: HistoryDigest::hash_pairs(pairs),
    }
}

fn parse_record(document: &Document) -> Option<AppliedMigration> {
    let int = |key: &str| {
        document
            .get(key)
            .and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from)))
    };
    Some(AppliedMigration {
        version: int("_id")?,
        name: document.get_str("name").ok()?.to_string(),
        checksum: document.get_str("checksum").ok()?.to_string(),
        batch: int("batch")?,
        state: RecordState::parse(document.get_str("state").ok()?)?,
        // Whole seconds, like the SQL backends: `...:05Z`, not `...:05.123Z`.
        applied_at: document
            .get_datetime("appliedAt")
            .ok()
            .and_then(|d| d.try_to_rfc3339_string().ok())
            .map(|text| match text.split_once('.') {
                Some((seconds, _)) => format!("{seconds}Z"),
                None => text,
            })
            .unwrap_or_default(),
        duration_ms: int("durationMs").unwrap_or(0),
        applied_by: document
            .get_str("appliedBy")
            .unwrap_or_default()
            .to_string(),
        failure: document
            .get_str("failure")
            .ok()
            .map(RecordedFailure::from_stored),
    })
}
