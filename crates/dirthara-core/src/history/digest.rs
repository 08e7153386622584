//! A history in a few numbers: how many records, the newest version, how many are not
//! `applied`, and a hash over every record's `version:checksum` in version order. The server
//! computes it where it can hash (PostgreSQL `sha256`, MySQL/MariaDB `SHA2`), so a `migrate`
//! with nothing to do compares one row with the same digest of the files instead of shipping
//! and checking every record. Any difference — a changed checksum, a missing file, a pending
//! file older than the newest applied one, a `running` record — changes the digest, and the
//! records are then read and planned as always, so every error says what it always said.

use sha2::{Digest, Sha256};

use crate::migration::Migration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryDigest {
    /// Every record, whatever its state.
    pub records: u64,
    /// The highest recorded version; `None` for an empty history.
    pub newest: Option<i64>,
    /// Records that are not `applied` (a `running` one is a dirty migration).
    pub not_applied: u64,
    /// [`HistoryDigest::hash_pairs`] of every record, in version order.
    pub hash: String,
}

impl HistoryDigest {
    /// The digest of a history that holds exactly `migrations`, every one applied with the
    /// checksum of its file: what a history with nothing left to apply looks like.
    pub fn of_files<'a>(migrations: impl IntoIterator<Item = &'a Migration>) -> Self {
        let mut pairs: Vec<(i64, &str)> = (migrations.into_iter())
            .map(|m| (m.version, m.checksum()))
            .collect();
        pairs.sort_unstable_by_key(|&(version, _)| version);
        HistoryDigest {
            records: pairs.len() as u64,
            newest: pairs.last().map(|&(version, _)| version),
            not_applied: 0,
            hash: Self::hash_pairs(pairs.iter().copied()),
        }
    }

    /// `version:checksum` of each pair, joined by `,`, hashed with SHA-256 (lowercase hex): the
    /// text the servers' digest queries hash, and a store without a hash function sends.
    /// An empty history hashes to the empty string, as SQL's aggregate of no rows is NULL.
    pub fn hash_pairs<'a>(pairs: impl IntoIterator<Item = (i64, &'a str)>) -> String {
        let mut hasher = Sha256::new();
        let mut any = false;
        for (version, checksum) in pairs {
            if any {
                hasher.update(b",");
            }
            any = true;
            hasher.update(version.to_string().as_bytes());
            hasher.update(b":");
            hasher.update(checksum.as_bytes());
        }
        if !any {
            return String::new();
        }
        hex(&hasher.finalize())
    }

    /// Whether a history with this digest has nothing for `migrate` to do and nothing to
    /// complain about, given `files`, the digest of the migrations loaded.
    pub fn proves_up_to_date(&self, files: &HistoryDigest) -> bool {
        self.not_applied == 0 && self == files
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(versions: &[(i64, &str)]) -> Vec<Migration> {
        (versions.iter())
            .map(|&(v, up)| Migration::new(v, format!("m{v}"), up))
            .collect()
    }

    #[test]
    fn the_hash_is_sha256_of_the_joined_pairs() {
        // `printf '1:ab,20:cd' | sha256sum`
        assert_eq!(
            HistoryDigest::hash_pairs([(1, "ab"), (20, "cd")]),
            "9e45fb0451839281a5c5130408768aa14d8691f862046a332318b0a0d0cc7b2a"
        );
        assert_eq!(HistoryDigest::hash_pairs([]), "");
    }

    #[test]
    fn the_files_digest_is_in_version_order_whatever_the_load_order() {
        let a = files(&[(2, "SELECT 2"), (1, "SELECT 1")]);
        let b = files(&[(1, "SELECT 1"), (2, "SELECT 2")]);
        assert_eq!(HistoryDigest::of_files(&a), HistoryDigest::of_files(&b));
        assert_eq!(HistoryDigest::of_files(&a).newest, Some(2));
    }

    #[test]
    fn any_difference_from_the_files_means_reading_the_records() {
        let loaded = files(&[(1, "SELECT 1"), (2, "SELECT 2"), (3, "SELECT 3")]);
        let expected = HistoryDigest::of_files(&loaded);
        let history = |pairs: &[(i64, &str)], not_applied: u64| HistoryDigest {
            records: pairs.len() as u64,
            newest: pairs.iter().map(|p| p.0).max(),
            not_applied,
            hash: HistoryDigest::hash_pairs(pairs.iter().copied()),
        };
        let sums: Vec<String> = loaded.iter().map(|m| m.checksum().to_string()).collect();
        let all = [(1, sums[0].as_str()), (2, &sums[1]), (3, &sums[2])];
        assert!(history(&all, 0).proves_up_to_date(&expected));
        // A `running` record (dirty), even with every checksum right.
        assert!(!history(&all, 1).proves_up_to_date(&expected));
        // A changed file.
        let changed = [all[0], all[1], (3, "0000")];
        assert!(!history(&changed, 0).proves_up_to_date(&expected));
        // A pending file (2 older than the newest applied: out of order), or any pending.
        assert!(!history(&[all[0], all[2]], 0).proves_up_to_date(&expected));
        assert!(!history(&[all[0], all[1]], 0).proves_up_to_date(&expected));
        // A record whose file is missing.
        let extra = [all[0], all[1], all[2], (4, "ffff")];
        assert!(!history(&extra, 0).proves_up_to_date(&expected));
    }
}
