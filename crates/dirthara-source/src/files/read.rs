//! Reading a migration file whole, with as few system calls as a regular file allows, and
//! refusing text no database can be sent.

use std::fs;
use std::path::Path;

/// A file's text, without a leading UTF-8 byte-order mark: Windows editors save one, no
/// database takes it as part of the first statement, and Flyway drops it too. The checksum
/// leaves a BOM out as well, so dropping it changes no recorded checksum.
pub(crate) fn read_text(path: &Path) -> std::result::Result<String, String> {
    let mut bytes = read_regular_file(path).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.starts_with(BOM) {
        bytes.drain(..BOM.len());
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "is not valid UTF-8 (invalid byte at offset {}); save it as UTF-8",
            e.utf8_error().valid_up_to()
        )
    })?;
    refuse_nul(&text)?;
    Ok(text)
}

/// The UTF-8 encoding of U+FEFF, the byte-order mark.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// Refuses step text holding a NUL byte, saying where the first one is.
///
/// A NUL is valid UTF-8, but no database takes one in a statement: SQLite's parser stops at
/// it (sqlx then loops for ever on the rest of the text), PostgreSQL's protocol ends strings
/// with it (the server drops the connection), MySQL fails on it half-way through a script
/// (leaving the migration dirty). So it is refused while loading, before anything runs:
/// files here, embedded migrations at compile time, and migrations given in code by the
/// runner's load step.
pub fn refuse_nul(text: &str) -> std::result::Result<(), String> {
    let Some(offset) = text.bytes().position(|b| b == 0) else {
        return Ok(());
    };
    let line = text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    Err(format!(
        "holds a NUL byte at byte offset {offset} (line {line}), which no database accepts in \
         a statement; remove it (a file saved as UTF-16 has one in every other byte: save it as \
         UTF-8)"
    ))
}

/// Bytes read at once; a migration file is nearly always smaller, so it costs one `read`.
const READ_CHUNK: usize = 64 * 1024;

/// The whole of a regular file in one `open`, usually one `read`, and a `close`.
///
/// `fs::read` asks for the size first (a `statx`) and then reads until a `read` returns 0
/// (two `read`s). Neither is needed for a regular file: POSIX lets `read` on one return fewer
/// bytes than asked only at the end of the file (or when a signal interrupts a read that had
/// already transferred data, which a local file system does not do mid-page), so a short read
/// is the end. Only a file that fills the buffer is read on.
pub(crate) fn read_regular_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    thread_local! {
        // Zeroed once per thread, not once per file.
        static CHUNK: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; READ_CHUNK]);
    }
    let mut file = fs::File::open(path)?;
    CHUNK.with_borrow_mut(|chunk| {
        let mut bytes = Vec::new();
        loop {
            let n = match file.read(chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            bytes.extend_from_slice(&chunk[..n]);
            if n < chunk.len() {
                return Ok(bytes);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_byte_is_refused_naming_its_offset_and_line() {
        assert_eq!(refuse_nul("SELECT 1;\nSELECT 2;"), Ok(()));
        let reason = refuse_nul("SELECT 1;\nSELECT 2;\0\0").unwrap_err();
        assert!(
            reason.starts_with("holds a NUL byte at byte offset 19 (line 2)"),
            "{reason}"
        );
        let reason = refuse_nul("\0").unwrap_err();
        assert!(reason.contains("offset 0 (line 1)"), "{reason}");
    }

    #[test]
    fn a_leading_byte_order_mark_is_dropped_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1_a.sql");
        fs::write(&path, "\u{feff}SELECT 1;\n").unwrap();
        assert_eq!(read_text(&path).unwrap(), "SELECT 1;\n");
        fs::write(&path, "SELECT '\u{feff}';\n").unwrap();
        assert_eq!(read_text(&path).unwrap(), "SELECT '\u{feff}';\n");
    }

    #[test]
    fn files_of_any_size_read_whole_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        for size in [
            0,
            1,
            READ_CHUNK - 1,
            READ_CHUNK,
            READ_CHUNK + 1,
            3 * READ_CHUNK + 7,
        ] {
            let path = dir.path().join(format!("{size}.sql"));
            let bytes: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
            fs::write(&path, &bytes).unwrap();
            assert_eq!(read_regular_file(&path).unwrap(), bytes, "size {size}");
        }
    }
}
