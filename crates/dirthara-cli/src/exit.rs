//! Exit codes, decided here and nowhere else: 0 success (nothing to do included), 1 any
//! error, 2 a command-line usage error (clap's own), 130 after SIGINT and 143 after SIGTERM.
//! Which of them a Kubernetes Job may retry is documented in docs/recipes.md (and checked
//! against this file's codes by tests/manifests.rs).

use std::process::ExitCode;

use crate::error::CliError;

/// A signal that asked the run to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Interrupt,
    Terminate,
}

impl Signal {
    /// 128 + the signal's number, as shells report a process a signal ended.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }
}

/// A failed command: its error, and the signal that stopped it, if one did.
pub(crate) struct Failure {
    pub error: CliError,
    pub signal: Option<Signal>,
}

/// The exit code of a command that ended with `outcome`.
pub(crate) fn exit_code(outcome: &Result<(), Failure>) -> u8 {
    let Err(failure) = outcome else {
        return SUCCESS;
    };
    match (failure.error.is_interrupted(), failure.signal) {
        (true, Some(signal)) => signal.exit_code(),
        // Interrupted through the library without a signal of ours (a shutdown sent by code).
        (true, None) => Signal::Interrupt.exit_code(),
        (false, _) => FAILURE,
    }
}

/// The exit code of a command that ended with `code` and whose `--summary-file` could not be
/// written: one that succeeded fails (`IO_ERROR`), for a Job may be waiting to read it; one
/// that failed keeps its own code.
pub(crate) fn summary_not_written(code: u8) -> u8 {
    if code == SUCCESS {
        FAILURE
    } else {
        code
    }
}

/// Success, "nothing to do" included.
pub(crate) const SUCCESS: u8 = 0;
/// Any error (`Error [CODE]`) not caused by a signal.
pub(crate) const FAILURE: u8 = 1;

/// A second signal aborts at once: the running step is cut off mid-way.
pub(crate) fn abort(signal: Signal) -> ! {
    std::process::exit(i32::from(signal.exit_code()))
}

/// The runtime could not even start.
pub(crate) fn failed_to_start() -> ExitCode {
    ExitCode::from(FAILURE)
}
