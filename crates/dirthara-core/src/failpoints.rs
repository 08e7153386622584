//! Planted faults, for the test suite only. Each breaks one guarantee in the one place that
//! guarantee lives, so that a test can show the suite notices its loss
//! (`crates/dirthara-cli/tests/planted_faults.rs`; the README's "Planted faults" has the table
//! of which test catches which).
//!
//! They are the `fail` crate's failpoints, compiled in only under this crate's `failpoints`
//! feature and switched on at run time by the `FAILPOINTS` environment variable of a
//! `dirthara` built with it (`FAILPOINTS="lock_key_per_process=return"`). Without the feature
//! every hook expands to nothing (or to the constant `false`) and `fail` is not a dependency,
//! so no release build can carry one.
//!
//! | failpoint | the fault |
//! | --- | --- |
//! | `session_lock_not_taken` | acquiring the session lock reports it held without taking it |
//! | `lease_taken_while_held` | acquiring the lease reports it taken while another runner holds it |
//! | `record_after_step` | a step that commits with its `applied` record commits alone; the record follows in a transaction of its own |
//! | `lock_confirmed_blindly` | the lock check before (or, on PostgreSQL, inside) each migration always answers "still held" |
//! | `lock_key_per_process` | the session lock is taken on a key of the connection's own (random), which excludes nobody, not even a runner in the same process |
//! | `no_running_marker` | a step that cannot share a transaction with its record runs without its `running` marker; the `applied` record follows it |
//! | `lease_released_whoever_holds_it` | releasing the lease deletes it whoever holds it |
//!
//! `record_after_step` and `no_running_marker` take a pause in milliseconds between the step
//! and its record (`return(1000)`): it widens the window their fault opens, so that a short
//! chaos run lands a kill in it.

/// `fail::fail_point!` under the `failpoints` feature; nothing at all without it. Exported for
/// `dirthara`'s own planted faults; the feature is read where the macro is used.
#[macro_export]
#[doc(hidden)]
macro_rules! fail_point {
    ($($arg:tt)*) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($($arg)*);
    };
}

/// Whether the planted fault `name` is switched on; the constant `false` without the
/// `failpoints` feature.
#[macro_export]
#[doc(hidden)]
macro_rules! planted {
    ($name:literal) => {{
        #[cfg(feature = "failpoints")]
        let on = fail::eval($name, |_| ()).is_some();
        #[cfg(not(feature = "failpoints"))]
        let on = false;
        on
    }};
}

/// The pause a planted fault carries (`return(<ms>)`; none for a plain `return`), or `None`
/// when it is off.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub fn planted_pause(name: &str) -> Option<std::time::Duration> {
    fail::eval(name, |arg| {
        let ms = arg.and_then(|ms| ms.parse().ok()).unwrap_or(0);
        std::time::Duration::from_millis(ms)
    })
}

/// Switches on the faults `FAILPOINTS` names, until the value returned is dropped. For the
/// `dirthara` binary's `main`; panics on a malformed `FAILPOINTS`.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub fn planted_faults_from_env() -> fail::FailScenario<'static> {
    fail::FailScenario::setup()
}
