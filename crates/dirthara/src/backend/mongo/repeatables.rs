//! The repeatable migrations' records in MongoDB: the collection `<history>_repeatables`,
//! one document per name (`_id`), created by the first write.

use mongodb::bson::{doc, DateTime, Document};

use super::MongoBackend;
use crate::error::Result;
use crate::history::{
    repeatables_table, AppliedRepeatable, RecordState, RecordedFailure, RepeatableChange,
};

impl MongoBackend {
    fn repeatables(&self) -> mongodb::Collection<Document> {
        self.db.collection(&repeatables_table(&self.table))
    }

    pub(super) async fn read_repeatable_records(&mut self) -> Result<Vec<AppliedRepeatable>> {
        let found = self
            .repeatables()
            .find(doc! {})
            .sort(doc! { "_id": 1 })
            .await;
        let mut cursor = found.map_err(|e| self.error(e))?;
        let mut records = Vec::new();
        while cursor.advance().await.map_err(|e| self.error(e))? {
            let document = cursor.deserialize_current().map_err(|e| self.error(e))?;
            records.extend(record_of(&document));
        }
        Ok(records)
    }

    pub(super) async fn write_repeatable_record(
        &mut self,
        change: &RepeatableChange,
    ) -> Result<()> {
        let collection = self.repeatables();
        let now = DateTime::now();
        let replace = |name: &str, checksum: &str, state: RecordState, applied_by: &str| {
            let document = doc! {
                "_id": name,
                "checksum": checksum,
                "state": state.as_str(),
                "appliedAt": now,
                "durationMs": 0_i64,
                "appliedBy": applied_by,
            };
            collection
                .replace_one(doc! { "_id": name }, document)
                .upsert(true)
        };
        let written = match change {
            RepeatableChange::Running {
                name,
                checksum,
                applied_by,
            } => replace(name, checksum, RecordState::Running, applied_by).await.map(drop),
            RepeatableChange::Adopted {
                name,
                checksum,
                applied_by,
            } => replace(name, checksum, RecordState::Applied, applied_by).await.map(drop),
            RepeatableChange::Applied { name, duration_ms } => collection
                .update_one(
                    doc! { "_id": name },
                    doc! {
                        "$set": { "state": "applied", "durationMs": *duration_ms, "appliedAt": now },
                        "$unset": { "failure": "" },
                    },
                )
                .await
                .map(drop),
            RepeatableChange::Failed { name, failure } => collection
                .update_one(
                    doc! { "_id": name },
                    doc! { "$set": { "failure": failure.to_json() } },
                )
                .await
                .map(drop),
        };
        written.map_err(|e| self.error(e))
    }
}

fn record_of(document: &Document) -> Option<AppliedRepeatable> {
    let text = |key: &str| document.get_str(key).ok().map(str::to_string);
    let mut record = AppliedRepeatable::new(
        text("_id")?,
        text("checksum")?,
        RecordState::parse(document.get_str("state").ok()?)?,
    );
    record.applied_at = (document.get_datetime("appliedAt").ok())
        .and_then(|d| d.try_to_rfc3339_string().ok())
        .map(|text| match text.split_once('.') {
            Some((seconds, _)) => format!("{seconds}Z"),
            None => text,
        })
        .unwrap_or_default();
    record.duration_ms = (document.get("durationMs"))
        .and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from)))
        .unwrap_or_default();
    record.applied_by = text("appliedBy").unwrap_or_default();
    record.failure = text("failure").map(|f| RecordedFailure::from_stored(&f));
    Some(record)
}
