//! Reading a migration file whole, with as few system calls as a regular file allows.

use std::fs;
use std::path::Path;

pub(crate) fn read_text(path: &Path) -> std::result::Result<String, String> {
    let bytes = read_regular_file(path).map_err(|e| format!("cannot read: {e}"))?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "is not valid UTF-8 (invalid byte at offset {}); save it as UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
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
