//! A migration's checksum: what the history records, and what a file is checked against.

use sha2::{Digest, Sha256};

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
