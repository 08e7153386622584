//! Reading a configuration file (`dirthara.toml`, `.env`) with a cap on its size.

use std::io::{self, Read};
use std::path::Path;

/// The most read of a configuration file: 1 MiB. Real ones are a few KiB; a path that names
/// the wrong thing (`--config /dev/zero`, a log, a database file) is refused at once instead
/// of being read into memory whole.
pub const MAX_CONFIG_FILE_BYTES: usize = 1024 * 1024;

/// Reads a configuration file as text, at most [`MAX_CONFIG_FILE_BYTES`] of it.
///
/// At most one byte more than the cap is read, whatever the path is: the size a file reports
/// is not trusted (a device such as `/dev/zero` reports 0 and never ends; a pipe reports
/// nothing). A larger file is an error of kind [`io::ErrorKind::FileTooLarge`] saying the
/// cap; text that is not UTF-8 is [`io::ErrorKind::InvalidData`]; a missing file keeps its
/// `NotFound`, for the caller to decide whether that matters.
///
/// # Examples
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let big = dir.path().join("big.toml");
/// std::fs::write(&big, vec![b'#'; dirthara_core::config::MAX_CONFIG_FILE_BYTES + 1]).unwrap();
/// let error = dirthara_core::config::read_config_file(&big).unwrap_err();
/// assert_eq!(error.kind(), std::io::ErrorKind::FileTooLarge);
/// assert!(error.to_string().contains("larger than 1 MiB"));
/// ```
pub fn read_config_file(path: &Path) -> io::Result<String> {
    let mut bytes = Vec::new();
    let cap = MAX_CONFIG_FILE_BYTES as u64;
    std::fs::File::open(path)?
        .take(cap + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_CONFIG_FILE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            "it is larger than 1 MiB, the most dirthara reads of a configuration file; \
             check that the path names the right file",
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it is not valid UTF-8 (invalid byte at offset {}); save it as UTF-8",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_up_to_the_cap_is_read_whole_and_one_byte_more_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dirthara.toml");
        std::fs::write(&path, vec![b'#'; MAX_CONFIG_FILE_BYTES]).unwrap();
        assert_eq!(
            read_config_file(&path).unwrap().len(),
            MAX_CONFIG_FILE_BYTES
        );
        std::fs::write(&path, vec![b'#'; MAX_CONFIG_FILE_BYTES + 1]).unwrap();
        let error = read_config_file(&path).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
        let missing = read_config_file(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        std::fs::write(&path, b"a = '\xff'").unwrap();
        let error = read_config_file(&path).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("offset 5"), "{error}");
    }

    #[cfg(unix)]
    #[test]
    fn a_device_that_never_ends_is_refused_after_the_cap() {
        // Reports a size of 0 and would be read for ever: only cap + 1 bytes are read.
        let error = read_config_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
    }
}
