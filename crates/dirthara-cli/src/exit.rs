//! Exit codes, decided here and nowhere else: 0 success (nothing to do included), 1 any
//! error, 2 a command-line usage error (clap's own), 130 after SIGINT and 143 after SIGTERM.

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
pub(crate) fn exit_code(outcome: &Result<(), Failure>) -> ExitCode {
    let Err(failure) = outcome else {
        return ExitCode::SUCCESS;
    };
    match (failure.error.is_interrupted(), failure.signal) {
        (true, Some(signal)) => ExitCode::from(signal.exit_code()),
        // Interrupted through the library without a signal of ours (a shutdown sent by code).
        (true, None) => ExitCode::from(Signal::Interrupt.exit_code()),
        (false, _) => ExitCode::FAILURE,
    }
}

/// A second signal aborts at once: the running step is cut off mid-way.
pub(crate) fn abort(signal: Signal) -> ! {
    std::process::exit(i32::from(signal.exit_code()))
}

/// The runtime could not even start.
pub(crate) fn failed_to_start() -> ExitCode {
    ExitCode::FAILURE
}
