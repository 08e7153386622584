//! The fuzz targets' runner: proptest inputs, each held to a time and a memory bound of its
//! own, with a watchdog that ends the process (naming the target, the case and the seed) when
//! one input never returns. A bound checked only over a whole run would let one input that
//! takes a minute or a gigabyte hide among a million fast ones; an input that loops for ever
//! would hang the suite instead of failing it.
//!
//! A test binary that fuzzes declares the counting allocator, so that memory can be measured:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: dirthara_test_kit::fuzz::CountingAllocator = dirthara_test_kit::fuzz::CountingAllocator;
//! ```
//!
//! Memory is counted per thread (the tests of a binary run on threads of their own): the
//! largest number of bytes the input's thread held at once beyond what it held when the input
//! started. Without the allocator declared, memory bounds are not checked (and say so).
//!
//! `DIRTHARA_FUZZ_CASES` sets the cases of every target (the long run, `fuzz/run.sh`);
//! `DIRTHARA_FUZZ_SEED` replays a run (each target prints the seed it used).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

thread_local! {
    /// Bytes this thread holds now (allocated minus freed by it), and the most it held since
    /// the last [`start_counting`].
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    /// What the thread held at [`start_counting`].
    static BASE: Cell<isize> = const { Cell::new(0) };
}

/// Set once the counting allocator has served an allocation: memory bounds mean something.
static COUNTING: AtomicBool = AtomicBool::new(false);

/// What the whole process holds now, and the most since [`start_counting_process`]: for a
/// test binary of one test whose work runs on threads it does not own (sqlx's SQLite worker).
static PROCESS_HELD: AtomicIsize = AtomicIsize::new(0);
static PROCESS_PEAK: AtomicIsize = AtomicIsize::new(0);
static PROCESS_BASE: AtomicIsize = AtomicIsize::new(0);
/// Set by [`start_counting_process`]: until then no allocation pays for the process-wide
/// counters (shared atomics every thread of a fuzz binary would contend on).
static PROCESS_COUNTING: AtomicBool = AtomicBool::new(false);

/// The system allocator, counting what each thread and the whole process hold (see the
/// module's documentation).
pub struct CountingAllocator;

fn count(delta: isize) {
    if PROCESS_COUNTING.load(Ordering::Relaxed) {
        let now = PROCESS_HELD.fetch_add(delta, Ordering::Relaxed) + delta;
        PROCESS_PEAK.fetch_max(now, Ordering::Relaxed);
    }
    // `try_with`: a thread being torn down has no thread-locals left; it is not measured.
    let _ = HELD.try_with(|held| {
        let now = held.get() + delta;
        held.set(now);
        let _ = PEAK.try_with(|peak| {
            if now > peak.get() {
                peak.set(now);
            }
        });
    });
}

// SAFETY: every call is passed to `System` unchanged; the counting touches only
// thread-locals that need no allocation (const-initialised `Cell`s without destructors).
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Read first: a store on every allocation would bounce the flag between cores.
        if !COUNTING.load(Ordering::Relaxed) {
            COUNTING.store(true, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract, passed on.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            count(layout.size() as isize);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(pointer, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        moved
    }
}

/// Starts measuring this thread's peak from what it holds now.
pub fn start_counting() {
    let held = HELD.with(Cell::get);
    BASE.with(|base| base.set(held));
    PEAK.with(|peak| peak.set(held));
}

/// The most this thread held since [`start_counting`] beyond what it held then, in bytes;
/// `None` when the counting allocator is not this binary's allocator.
pub fn peak_since_start() -> Option<usize> {
    if !COUNTING.load(Ordering::Relaxed) {
        return None;
    }
    let peak = PEAK.with(Cell::get) - BASE.with(Cell::get);
    Some(peak.max(0) as usize)
}

/// Starts measuring the whole process's peak from now. Meaningful in a test binary that
/// runs one test at a time (any other test's allocations count too). Only what is allocated
/// from now on is counted, so memory freed later that was allocated before makes the count
/// smaller than what is held, never larger: the peak is never overstated.
pub fn start_counting_process() {
    PROCESS_COUNTING.store(true, Ordering::Relaxed);
    let held = PROCESS_HELD.load(Ordering::Relaxed);
    PROCESS_BASE.store(held, Ordering::Relaxed);
    PROCESS_PEAK.store(held, Ordering::Relaxed);
}

/// The most the process held at once since [`start_counting_process`] beyond what it held
/// then, in bytes; `None` when the counting allocator is not this binary's allocator.
pub fn process_peak_since_start() -> Option<usize> {
    if !COUNTING.load(Ordering::Relaxed) {
        return None;
    }
    let peak = PROCESS_PEAK.load(Ordering::Relaxed) - PROCESS_BASE.load(Ordering::Relaxed);
    Some(peak.max(0) as usize)
}

/// The bounds one input of a target is held to.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The longest one input may take; past it the input fails (and is shrunk).
    pub time: Duration,
    /// The most memory one input may hold at once beyond what its thread held before it.
    pub memory: usize,
    /// An input still running after this long ends the process: it would never return.
    pub hang: Duration,
}

impl Bounds {
    /// `time` per input (for an optimised build; ten times that in a debug build, whose
    /// code runs several times slower, on a machine the rest of the suite is loading),
    /// `memory` bytes per input, and a hang declared at ten times the time (at least a
    /// minute: a loaded machine is slow, a hang is for ever).
    pub fn new(time: Duration, memory: usize) -> Self {
        let time = if cfg!(debug_assertions) {
            time * 10
        } else {
            time
        };
        Bounds {
            time,
            memory,
            hang: (time * 10).max(Duration::from_secs(60)),
        }
    }
}

/// How many cases a target runs: `DIRTHARA_FUZZ_CASES`, else `default` (the CI-short run).
pub fn cases(default: u32) -> u32 {
    std::env::var("DIRTHARA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed() -> u64 {
    if let Some(seed) = std::env::var("DIRTHARA_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return seed;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

/// Runs `test` on `cases` inputs from `strategy`, each within `bounds`. Fails with the
/// smallest failing input proptest finds: a broken promise (a panic in `test`), an input
/// over its time bound, or over its memory bound. Prints the cases run, the time taken, the
/// slowest input's time and the largest input's memory.
pub fn fuzz<S: Strategy>(
    target: &str,
    cases: u32,
    bounds: Bounds,
    strategy: S,
    test: impl Fn(S::Value),
) where
    S::Value: std::fmt::Debug,
{
    let seed = seed();
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            // Shrinking re-runs inputs; a hung one must not be re-run for ever.
            max_shrink_time: 60_000,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );

    // The watchdog: each input sends when it starts and ends; an input that neither ends
    // within the hang bound ends the process, as a hang in CI would, but with a name.
    let (started_tx, started_rx) = mpsc::channel::<Option<u64>>();
    let watched = target.to_string();
    let hang = bounds.hang;
    let watchdog = std::thread::spawn(move || {
        let mut running: Option<u64> = None;
        loop {
            let message = match running {
                None => started_rx.recv().map_err(|_| ()),
                Some(case) => match started_rx.recv_timeout(hang) {
                    Ok(message) => Ok(message),
                    Err(mpsc::RecvTimeoutError::Disconnected) => Err(()),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        eprintln!(
                            "fuzz {watched}: case {case} still running after {hang:?}: \
                             a hang (replay with DIRTHARA_FUZZ_SEED={seed})"
                        );
                        std::process::abort();
                    }
                },
            };
            match message {
                Ok(message) => running = message,
                Err(()) => return,
            }
        }
    });

    let started = Instant::now();
    // Cells: proptest takes the test as `Fn`.
    let case = Cell::new(0u64);
    let slowest = Cell::new(Duration::ZERO);
    let largest: Cell<Option<usize>> = Cell::new(None);
    let result = runner.run(&strategy, |value| {
        case.set(case.get() + 1);
        let _ = started_tx.send(Some(case.get()));
        start_counting();
        let began = Instant::now();
        test(value);
        let took = began.elapsed();
        let held = peak_since_start();
        let _ = started_tx.send(None);
        slowest.set(slowest.get().max(took));
        if let Some(held) = held {
            largest.set(Some(largest.get().unwrap_or(0).max(held)));
            if held > bounds.memory {
                return Err(TestCaseError::fail(format!(
                    "held {held} bytes at once, over the bound of {}",
                    bounds.memory
                )));
            }
        }
        if took > bounds.time {
            return Err(TestCaseError::fail(format!(
                "took {took:?}, over the bound of {:?}",
                bounds.time
            )));
        }
        Ok(())
    });
    drop(started_tx);
    let _ = watchdog.join();
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, value)) => {
            panic!("fuzz {target} (seed {seed}): {reason}\nminimal failing input: {value:?}")
        }
        Err(error) => panic!("fuzz {target} (seed {seed}): {error}"),
    }
    let memory = largest.get().map_or(
        "memory not counted (no counting allocator)".to_string(),
        |b| format!("largest input held {:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    );
    eprintln!(
        "fuzz {target}: {cases} cases in {:.1}s (seed {seed}); slowest input {:.1} ms, {memory}",
        started.elapsed().as_secs_f64(),
        slowest.get().as_secs_f64() * 1000.0,
    );
}
