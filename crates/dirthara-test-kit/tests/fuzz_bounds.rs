//! The fuzz runner's bounds are real: an input over its memory bound, over its time bound,
//! or one that never returns fails the target (the last by ending the process, named).

use std::panic::catch_unwind;
use std::process::Command;
use std::time::Duration;

use dirthara_test_kit::fuzz::{fuzz, Bounds, CountingAllocator};
use proptest::prelude::*;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const MIB: usize = 1024 * 1024;

fn failure_of(run: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let error = catch_unwind(run).expect_err("the target must fail");
    error.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[test]
fn an_input_holding_more_than_its_memory_bound_fails_the_target() {
    let message = failure_of(|| {
        let bounds = Bounds::new(Duration::from_secs(10), 16 * MIB);
        fuzz("memory", 50, bounds, 0..64usize, |mib| {
            let held = vec![1u8; mib * MIB];
            std::hint::black_box(&held);
        });
    });
    assert!(message.contains("over the bound of 16777216"), "{message}");
    // Shrunk to the smallest input over the bound: 17 MiB (16 MiB exactly is within it).
    assert!(message.contains("minimal failing input: 17"), "{message}");
}

#[test]
fn memory_freed_before_the_input_ends_still_counts_at_its_peak() {
    let message = failure_of(|| {
        let bounds = Bounds::new(Duration::from_secs(10), 8 * MIB);
        fuzz("peak", 20, bounds, Just(()), |()| {
            for _ in 0..3 {
                std::hint::black_box(vec![1u8; 9 * MIB]);
            }
        });
    });
    assert!(message.contains("over the bound of 8388608"), "{message}");
}

#[test]
fn an_input_within_its_bounds_passes() {
    let bounds = Bounds::new(Duration::from_secs(10), 16 * MIB);
    fuzz("within", 50, bounds, 0..8usize, |mib| {
        std::hint::black_box(vec![1u8; mib * MIB]);
    });
}

#[test]
fn an_input_slower_than_its_time_bound_fails_the_target() {
    let message = failure_of(|| {
        let mut bounds = Bounds::new(Duration::from_millis(50), 16 * MIB);
        bounds.time = Duration::from_millis(50);
        fuzz("time", 20, bounds, 0..200u64, |ms| {
            std::thread::sleep(Duration::from_millis(ms))
        });
    });
    assert!(message.contains("over the bound of 50ms"), "{message}");
}

/// Run only as a child of the test below: an input that never returns.
#[test]
#[ignore = "a child process of an_input_that_never_returns_ends_the_process_naming_it"]
fn hanging_target() {
    let mut bounds = Bounds::new(Duration::from_millis(10), 16 * MIB);
    bounds.time = Duration::from_millis(10);
    bounds.hang = Duration::from_millis(300);
    fuzz("hang", 5, bounds, Just(()), |()| loop {
        std::thread::sleep(Duration::from_millis(50));
    });
}

#[test]
fn an_input_that_never_returns_ends_the_process_naming_it() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hanging_target", "--ignored", "--nocapture"])
        .env("DIRTHARA_FUZZ_SEED", "7")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("fuzz hang: case 1 still running after 300ms")
            && stderr.contains("DIRTHARA_FUZZ_SEED=7"),
        "{stderr}"
    );
}
