//! An error as JSON (`--output json`'s `error`): the code, the message as printed, and the
//! facts a program acts on.

use super::*;

/// `{"code", "message", ...}`: the code, the message as printed, the facts a program can act
/// on (the failed migration and everything the database said about it), any secondary
/// failure, and the steps completed before the error.
impl serde::Serialize for Error {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("code", self.code().as_str())?;
        map.serialize_entry("message", &self.to_string())?;
        if let ErrorKind::MigrationFailed {
            version,
            name,
            direction,
            connection,
            error,
            left_dirty,
            transactional,
            repeatable,
        } = &*self.kind
        {
            let mut migration = serde_json::json!({
                "version": version,
                "name": name,
                "direction": direction,
                "connection": connection,
                "left_dirty": left_dirty,
                "transactional": transactional,
            });
            if *repeatable {
                migration["repeatable"] = serde_json::Value::Bool(true);
            }
            map.serialize_entry("migration", &migration)?;
            map.serialize_entry("database", error)?;
        }
        if let ErrorKind::BlockingDdl { findings } = &*self.kind {
            map.serialize_entry("findings", findings)?;
        }
        if let Some(secondary) = &self.rest.secondary {
            map.serialize_entry("secondary", secondary)?;
        }
        if !self.rest.completed.is_empty() {
            map.serialize_entry("completed", &self.rest.completed)?;
        }
        map.end()
    }
}
