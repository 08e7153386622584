//! What a migration is: version, name, steps, checksum, and where it runs.

use std::fmt;

use sha2::{Digest, Sha256};

/// The connection a migration runs on when it does not name one.
pub const DEFAULT_CONNECTION: &str = "default";

/// Which way a step moves the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Up => "up",
            Direction::Down => "down",
        })
    }
}

/// What a migration's steps are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepFormat {
    /// SQL text, sent to the database as it is.
    Sql,
    /// A JSON array of MongoDB database commands (Extended JSON v2), run in order.
    MongoCommands,
    /// Rust code (a `dirthara::RustMigration`); the step text only describes it.
    Rust,
}

/// One migration, loaded and validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// 0 ..= i64::MAX. `to 0` means "before the first migration" unless a migration 0
    /// exists (sqlx, golang-migrate and Diesel allow one); then it targets that migration.
    pub version: i64,
    pub name: String,
    /// The forward step (SQL text). Private with the checksum: the checksum is always the
    /// one of this text.
    pub(crate) up: String,
    /// The reverse step; `None` makes the migration irreversible.
    pub down: Option<String>,
    /// Hex SHA-256 of the normalised up text; see [`checksum`].
    pub(crate) checksum: String,
    /// Whether the step and its history record may share one transaction.
    pub transactional: bool,
    /// The named connection the steps run on.
    pub connection: String,
    /// Where it came from (a file path), for messages.
    pub origin: String,
    pub format: StepFormat,
    /// The file controls its own transaction (a top-level `BEGIN`, `COMMIT`, ... found by
    /// the SQL tokenizer), described as e.g. `COMMIT at line 3`: it runs exactly as written,
    /// never wrapped, and is bracketed by a `running` record. Set by the runner, which knows
    /// each connection's SQL dialect.
    pub own_transaction: Option<String>,
    /// The down step is empty or only comments: a deliberate "reverses nothing". Set by the
    /// runner; such a step is recorded without sending anything.
    pub down_is_blank: bool,
}

impl Migration {
    /// A migration from its parts; the checksum is computed from `up`.
    pub fn new(version: i64, name: impl Into<String>, up: impl Into<String>) -> Self {
        let up = up.into();
        let name = name.into();
        Migration {
            version,
            origin: format!("{version}_{name}"),
            name,
            checksum: checksum(&up),
            up,
            down: None,
            transactional: true,
            connection: DEFAULT_CONNECTION.to_string(),
            format: StepFormat::Sql,
            own_transaction: None,
            down_is_blank: false,
        }
    }

    /// What `embed_migrations!` expands to: the parts it validated at compile time.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn embedded(
        version: i64,
        name: &str,
        up: &str,
        down: Option<&str>,
        transactional: bool,
        connection: &str,
        format: StepFormat,
        origin: &str,
    ) -> Self {
        Migration {
            version,
            name: name.to_string(),
            checksum: checksum(up),
            up: up.to_string(),
            down: down.map(str::to_string),
            transactional,
            connection: connection.to_string(),
            origin: origin.to_string(),
            format,
            own_transaction: None,
            down_is_blank: false,
        }
    }

    /// The forward step (SQL text, or JSON commands).
    pub fn up(&self) -> &str {
        &self.up
    }

    /// Hex SHA-256 of the normalised up text (see [`checksum`]): what the history records,
    /// and what an applied migration's file is checked against.
    pub fn checksum(&self) -> &str {
        &self.checksum
    }

    pub fn with_down(mut self, down: impl Into<String>) -> Self {
        self.down = Some(down.into());
        self
    }

    pub fn step(&self, direction: Direction) -> Option<&str> {
        match direction {
            Direction::Up => Some(&self.up),
            Direction::Down => self.down.as_deref(),
        }
    }
}

/// Hex SHA-256 of a migration's up text, after normalising what a checkout may change.
///
/// A leading UTF-8 BOM is dropped and CRLF / lone CR line endings become LF, so the same
/// file checked out on Windows (with `core.autocrlf`) and on Linux has one checksum.
/// SHA-256 is specified (unlike `DefaultHasher`, whose output may change between Rust
/// releases), so checksums recorded by one build stay valid for every later one.
pub fn checksum(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut hasher = Sha256::new();
    let mut rest = text;
    while let Some(pos) = rest.find('\r') {
        hasher.update(&rest.as_bytes()[..pos]);
        hasher.update(b"\n");
        rest = &rest[pos + 1..];
        if let Some(after) = rest.strip_prefix('\n') {
            rest = after;
        }
    }
    hasher.update(rest.as_bytes());
    hex(&hasher.finalize())
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xf) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_ignores_line_endings_and_bom() {
        let lf = checksum("CREATE TABLE a (id INT);\nSELECT 1;\n");
        assert_eq!(lf, checksum("CREATE TABLE a (id INT);\r\nSELECT 1;\r\n"));
        assert_eq!(
            lf,
            checksum("\u{feff}CREATE TABLE a (id INT);\r\nSELECT 1;\r\n")
        );
        assert_eq!(lf, checksum("CREATE TABLE a (id INT);\rSELECT 1;\r"));
        assert_ne!(lf, checksum("CREATE TABLE a (id INT);\nSELECT 2;\n"));
    }

    #[test]
    fn checksum_is_plain_sha256_of_normalised_text() {
        // Pinned: changing the checksum scheme would invalidate every recorded history.
        assert_eq!(
            checksum("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(checksum("a\r\nb"), checksum("a\nb"));
    }
}
