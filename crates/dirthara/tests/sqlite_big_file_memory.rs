//! SQLite runs a big file with memory for the file and a window of it, not a copy per
//! statement (issue 22: 2 MB of INSERT lines took 138 MB and 8 MB took 501 MB, because sqlx
//! copied the rest of the file at every statement and cached every prepared statement).
//!
//! A test binary of its own with one test: the whole process's allocations are counted
//! (sqlx runs SQLite on a worker thread), so no other test may run beside it.

use dirthara::{Config, Locking, Migrator};
use dirthara_test_kit::fuzz::{
    process_peak_since_start, start_counting_process, CountingAllocator,
};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const MIB: usize = 1024 * 1024;

/// `size` bytes of INSERT lines, the shape of a data-seeding migration.
fn insert_lines(size: usize) -> String {
    let mut sql = String::from("CREATE TABLE seeded (id INTEGER PRIMARY KEY, payload TEXT);\n");
    let mut id = 0;
    while sql.len() < size {
        id += 1;
        sql.push_str(&format!(
            "INSERT INTO seeded (id, payload) VALUES ({id}, 'row {id}: some text; ü');\n"
        ));
    }
    sql
}

/// The most the process held while migrating a file of `size` bytes.
async fn peak_for(size: usize) -> Peak {
    let dir = tempfile::tempdir().unwrap();
    let migrations = dir.path().join("migrations");
    std::fs::create_dir(&migrations).unwrap();
    std::fs::write(migrations.join("1_seed.sql"), insert_lines(size)).unwrap();
    let mut config = Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    config.directories = vec![migrations];
    config.locking = Locking::Off;
    let rss_before = reset_peak_rss();
    start_counting_process();
    let report = Migrator::new(config).migrate().await.unwrap();
    let heap = process_peak_since_start().expect("the counting allocator is this binary's");
    let rss = peak_rss().saturating_sub(rss_before);
    assert_eq!(report.applied.len(), 1);
    Peak { heap, rss }
}

/// What a run held at most: Rust's heap (counted by the allocator), and the process's
/// resident memory beyond what it had before (which also sees SQLite's own allocations,
/// its page cache and prepared statements, that Rust's allocator never serves).
struct Peak {
    heap: usize,
    rss: usize,
}

/// A field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: usize = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

/// Resets the process's peak resident size to what it holds now (Linux: `5` to
/// `/proc/self/clear_refs`), and returns that.
fn reset_peak_rss() -> usize {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    status_bytes("VmRSS:")
}

fn peak_rss() -> usize {
    status_bytes("VmHWM:")
}

#[tokio::test]
async fn a_big_sqlite_file_runs_in_memory_for_the_file_not_per_statement() {
    let small = peak_for(MIB).await;
    let big = peak_for(8 * MIB).await;
    let mib = |bytes: usize| bytes as f64 / MIB as f64;
    eprintln!(
        "peak heap {:.1} MiB and resident {:.1} MiB for a 1 MiB file; {:.1} and {:.1} MiB for 8 MiB",
        mib(small.heap),
        mib(small.rss),
        mib(big.heap),
        mib(big.rss)
    );
    // The file is read whole (its checksum is over its bytes) and kept while it runs: a few
    // copies of it at most, plus a constant. A copy of the rest of the file per statement,
    // or a prepared statement cached per line, is hundreds of MiB here.
    let bound = 4 * 8 * MIB + 16 * MIB;
    for (what, held) in [("heap", big.heap), ("resident memory", big.rss)] {
        assert!(
            held <= bound,
            "an 8 MiB file took {:.1} MiB of {what} at once (bound {:.0} MiB)",
            mib(held),
            mib(bound)
        );
    }
}
