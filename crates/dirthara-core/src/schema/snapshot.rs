//! The schema snapshot `drift` compares a live database with: the dump taken at the end of
//! the last locked command that changed the schema, kept beside the history in one row of
//! `<history>_schema` (MongoDB: one document). The dump is stored zlib-compressed and in
//! base64, so every database keeps it as plain text, with the SHA-256 of the dump's text: a
//! body that does not decompress to that text is damaged, never compared.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::{SchemaDump, SchemaError};

/// The table (MongoDB: collection) that keeps a history's schema snapshot.
pub fn snapshot_table(history_table: &str) -> String {
    format!("{history_table}_schema")
}

/// The most a snapshot may inflate to: far above any real schema, and a bound on what a
/// damaged or hostile body can make dirthara allocate.
const INFLATED_LIMIT: usize = 256 * 1024 * 1024;

/// A snapshot as a backend stores it: every field text, or a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSnapshot {
    /// The newest applied version when it was taken (`None`: none was).
    pub version: Option<i64>,
    /// The server's version then, as it reported it (empty when it reports none).
    pub server: String,
    /// When it was taken, RFC 3339 in UTC.
    pub taken_at: String,
    /// The SHA-256 of the dump's text, in hex.
    pub sha256: String,
    /// The dump's text, zlib-compressed, in base64.
    pub body: String,
}

/// A snapshot read back: what it was taken of, and the dump itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaSnapshot {
    pub version: Option<i64>,
    pub server: String,
    pub taken_at: String,
    pub dump: SchemaDump,
}

impl SchemaSnapshot {
    /// The form a backend stores.
    pub fn store(&self) -> StoredSnapshot {
        let text = self.dump.render();
        let compressed = miniz_oxide::deflate::compress_to_vec_zlib(text.as_bytes(), 6);
        StoredSnapshot {
            version: self.version,
            server: self.server.clone(),
            taken_at: self.taken_at.clone(),
            sha256: sha256_hex(&text),
            body: base64::engine::general_purpose::STANDARD.encode(compressed),
        }
    }

    /// The snapshot `stored` holds; an error says what is wrong with it.
    pub fn read(stored: &StoredSnapshot) -> Result<Self, SchemaError> {
        let damaged = |why: String| SchemaError(format!("the schema snapshot is damaged: {why}"));
        let compressed = (base64::engine::general_purpose::STANDARD.decode(stored.body.trim()))
            .map_err(|e| damaged(format!("its body is not base64 ({e})")))?;
        let inflated =
            miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(&compressed, INFLATED_LIMIT)
                .map_err(|e| damaged(format!("its body does not decompress ({:?})", e.status)))?;
        let text = String::from_utf8(inflated)
            .map_err(|_| damaged("its body is not UTF-8 text".to_string()))?;
        if !sha256_hex(&text).eq_ignore_ascii_case(stored.sha256.trim()) {
            return Err(damaged("its body does not match its SHA-256".to_string()));
        }
        Ok(SchemaSnapshot {
            version: stored.version,
            server: stored.server.clone(),
            taken_at: stored.taken_at.clone(),
            dump: SchemaDump::parse(&text).map_err(|e| damaged(e.0))?,
        })
    }
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The major version in a server's version string (`15` of `PostgreSQL 15.4 on x86_64`, of
/// `10.11.6-MariaDB`, of `9.1.0`): dumps are compared only within one, since a server renders
/// views and defaults in its own way.
pub fn server_major(server: &str) -> Option<&str> {
    server
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '.')
        .find(|word| word.starts_with(|c: char| c.is_ascii_digit()))
        .and_then(|word| word.split('.').next())
        .filter(|major| major.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{AppliedVersion, SchemaObject};

    fn snapshot() -> SchemaSnapshot {
        let objects = vec![SchemaObject::new(
            "table",
            "users",
            "CREATE TABLE users (id INT)",
        )];
        let applied = vec![AppliedVersion {
            version: 1,
            description: "users".into(),
        }];
        SchemaSnapshot {
            version: Some(1),
            server: "PostgreSQL 15.4".into(),
            taken_at: "2026-12-07T00:00:00Z".into(),
            dump: SchemaDump::new(objects, applied).unwrap(),
        }
    }

    #[test]
    fn a_stored_snapshot_reads_back_as_it_was() {
        let stored = snapshot().store();
        assert_eq!(stored.sha256.len(), 64);
        assert!(!stored.body.contains("CREATE"), "the body is compressed");
        assert_eq!(SchemaSnapshot::read(&stored).unwrap(), snapshot());
    }

    #[test]
    fn a_damaged_snapshot_is_refused_not_compared() {
        let mut stored = snapshot().store();
        stored.sha256 = "0".repeat(64);
        let error = SchemaSnapshot::read(&stored).unwrap_err().0;
        assert!(error.contains("does not match its SHA-256"), "{error}");
        let mut stored = snapshot().store();
        stored.body = "not base64!".into();
        assert!(SchemaSnapshot::read(&stored)
            .unwrap_err()
            .0
            .contains("base64"));
        let mut stored = snapshot().store();
        stored.body = base64::engine::general_purpose::STANDARD.encode(b"plain");
        assert!(SchemaSnapshot::read(&stored)
            .unwrap_err()
            .0
            .contains("decompress"));
    }

    #[test]
    fn the_major_version_is_read_from_each_servers_version_string() {
        let major = |s| server_major(s);
        assert_eq!(
            major("PostgreSQL 15.4 (Debian 15.4-1) on x86_64"),
            Some("15")
        );
        assert_eq!(major("10.11.6-MariaDB-0+deb12u1"), Some("10"));
        assert_eq!(major("9.1.0"), Some("9"));
        assert_eq!(major("3.45.1"), Some("3"));
        assert_eq!(major(""), None);
    }
}
