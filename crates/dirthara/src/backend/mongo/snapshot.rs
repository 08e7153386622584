//! The schema snapshot in MongoDB: one document (`_id: "schema"`) of the collection
//! `<history>_schema`, created by the first write.

use mongodb::bson::{doc, Bson, Document};

use super::MongoBackend;
use crate::error::Result;
use crate::schema::{snapshot_table, StoredSnapshot};

const ID: &str = "schema";

impl MongoBackend {
    fn snapshots(&self) -> mongodb::Collection<Document> {
        self.db.collection(&snapshot_table(&self.table))
    }

    pub(super) async fn read_stored_snapshot(&mut self) -> Result<Option<StoredSnapshot>> {
        let found = self.snapshots().find_one(doc! { "_id": ID }).await;
        let Some(document) = found.map_err(|e| self.error(e))? else {
            return Ok(None);
        };
        let text = |key: &str| document.get_str(key).unwrap_or_default().to_string();
        Ok(Some(StoredSnapshot {
            version: (document.get("version"))
                .and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from))),
            server: text("server"),
            taken_at: text("takenAt"),
            sha256: text("sha256"),
            body: text("body"),
        }))
    }

    pub(super) async fn write_stored_snapshot(&mut self, snapshot: &StoredSnapshot) -> Result<()> {
        let document = doc! {
            "_id": ID,
            "version": snapshot.version.map_or(Bson::Null, Bson::Int64),
            "server": &snapshot.server,
            "takenAt": &snapshot.taken_at,
            "sha256": &snapshot.sha256,
            "body": &snapshot.body,
        };
        let written = (self.snapshots())
            .replace_one(doc! { "_id": ID }, document)
            .upsert(true)
            .await;
        written.map(drop).map_err(|e| self.error(e))
    }

    pub(super) async fn forget_stored_snapshot(&mut self) -> Result<()> {
        let deleted = self.snapshots().delete_one(doc! { "_id": ID }).await;
        deleted.map(drop).map_err(|e| self.error(e))
    }
}
