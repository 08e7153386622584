//! `dump` on MongoDB: each collection and view with its options (validator, collation,
//! capped size, time series, a view's source and pipeline) and each index with its
//! specification, as relaxed Extended JSON in the server's key order (an index's key order is
//! the index, a pipeline's order its meaning). What the server makes up per database is left
//! out: a collection's `info` (its UUID) and `idIndex`, an index's `v`, `ns` and
//! `background`, and the `_id_` index every collection is made with. dirthara's own
//! collections are left out.

use mongodb::bson::{doc, Bson, Document};

use super::MongoBackend;
use crate::error::Result;
use crate::history::repeatables_table;
use crate::lock::lease_table;
use crate::schema::{snapshot_table, SchemaObject};

impl MongoBackend {
    pub(super) async fn dump_objects(&self) -> Result<Vec<SchemaObject>> {
        let own = [
            self.table.clone(),
            format!("{}_meta", self.table),
            repeatables_table(&self.table),
            snapshot_table(&self.table),
            lease_table(&self.table),
        ];
        let listed = self
            .first_batch(doc! { "listCollections": 1, "cursor": { "batchSize": 100_000 } })
            .await?;
        let mut objects = Vec::new();
        for collection in listed {
            let Ok(name) = collection.get_str("name") else {
                continue;
            };
            if name.starts_with("system.") || own.iter().any(|o| o == name) {
                continue;
            }
            let kind = collection.get_str("type").unwrap_or("collection");
            let mut shown = Document::new();
            shown.insert("type", kind);
            if let Ok(options) = collection.get_document("options") {
                shown.insert("options", options.clone());
            }
            let object_kind = if kind == "view" { "view" } else { "collection" };
            objects.push(SchemaObject::new(object_kind, name, json(shown)));
            if kind == "view" {
                continue;
            }
            let indexes = self
                .first_batch(doc! { "listIndexes": name, "cursor": { "batchSize": 100_000 } })
                .await?;
            for mut index in indexes {
                let index_name = index.get_str("name").unwrap_or("").to_string();
                // Every collection has it, made with the collection.
                if index_name == "_id_" {
                    continue;
                }
                for volatile in ["v", "ns", "background"] {
                    index.remove(volatile);
                }
                objects.push(SchemaObject::new(
                    "index",
                    format!("{name}.{index_name}"),
                    json(index),
                ));
            }
        }
        Ok(objects)
    }

    /// The documents of a cursor command's first batch (asked large enough to hold all).
    async fn first_batch(&self, command: Document) -> Result<Vec<Document>> {
        let reply = (self.db.run_command(command).await).map_err(|e| self.error(e))?;
        let batch = reply
            .get_document("cursor")
            .and_then(|cursor| cursor.get_array("firstBatch"))
            .map(|batch| batch.to_vec())
            .unwrap_or_default();
        Ok(batch
            .into_iter()
            .filter_map(|d| match d {
                Bson::Document(d) => Some(d),
                _ => None,
            })
            .collect())
    }
}

/// Relaxed Extended JSON, indented, keys in the document's order.
fn json(document: Document) -> String {
    let value = Bson::Document(document).into_relaxed_extjson();
    serde_json::to_string_pretty(&value).unwrap_or_else(|e| format!("(unprintable: {e})"))
}
