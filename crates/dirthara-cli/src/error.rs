//! Why a `dirthara` command failed: the library's error, or one of the CLI's own failures
//! (writing output or files, a refused `fresh`, a `new` that cannot be honoured), each printed
//! under the code that tells the user where the fault lies.

use std::fmt;
use std::path::PathBuf;

use dirthara::Layout;
use serde::ser::SerializeMap;

/// The code of a failed read or write by the CLI itself. The library has no such code: it
/// writes to databases only, and reports their failures under codes of its own.
pub(crate) const IO_ERROR: &str = "IO_ERROR";

#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// From the library, printed exactly as the library describes it.
    #[error(transparent)]
    Library(#[from] dirthara::Error),
    /// The operating system refused something the CLI itself needed. The message repeats
    /// the OS error because the renderer prints only the message; `source()` keeps it for
    /// code that walks the chain.
    #[error("cannot {action}: {source}")]
    Io {
        action: IoAction,
        source: std::io::Error,
    },
    #[error(transparent)]
    NotConfirmed(#[from] NotConfirmed),
    #[error(transparent)]
    NewRefused(#[from] NewRefused),
    /// A command that does not run over a fleet was given one.
    #[error(
        "`{command}` does not run over a fleet (--targets, --schemas, --databases, \
         --targets-sql or [fleet] in dirthara.toml): run it on one database at a time, without \
         the fleet flags, or with --no-fleet -d URL when dirthara.toml has a [fleet]"
    )]
    NotOverAFleet { command: &'static str },
    /// A fleet run in which some target failed or was never started.
    #[error(transparent)]
    FleetIncomplete(FleetIncomplete),
    /// `lint` found statements the files should not carry as they are (printed before).
    #[error(
        "{not_allowed} statement(s) would block the application on a big table or fail when \
         they run; see the findings above. A file that must do it anyway (a maintenance window) \
         says so with `-- dirthara:allow-blocking <reason>`"
    )]
    LintFindings { not_allowed: usize },
}

/// A fleet run that did not succeed on every target (the report printed before says which).
#[derive(Debug, thiserror::Error)]
pub(crate) struct FleetIncomplete {
    pub targets: usize,
    pub failed: usize,
    /// Of the failed ones, those `drift` found drifted.
    pub drifted: usize,
    pub skipped: usize,
    /// The first target that failed, why, and the error's message with the commands it
    /// suggests run on that target alone.
    pub first: Option<(String, dirthara::Error, String)>,
    /// A signal stopped the fleet.
    pub interrupted: bool,
}

impl fmt::Display for FleetIncomplete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.drifted {
            0 => write!(f, "{} of {} target(s) failed", self.failed, self.targets)?,
            n if n == self.failed => write!(
                f,
                "{n} of {} target(s) drifted from their schema snapshot",
                self.targets
            )?,
            n => write!(
                f,
                "{} of {} target(s) failed ({n} of them drifted from their schema snapshot)",
                self.failed, self.targets
            )?,
        }
        if self.skipped > 0 {
            write!(f, " and {} were not started", self.skipped)?;
            if self.interrupted {
                f.write_str(" (stopped by a signal)")?;
            }
        }
        match &self.first {
            Some((target, _, message)) => write!(f, "; the first, `{target}`: {message}"),
            None => Ok(()),
        }
    }
}

impl CliError {
    pub(crate) fn io(action: IoAction) -> impl FnOnce(std::io::Error) -> CliError {
        move |source| CliError::Io { action, source }
    }

    /// The code printed in `Error [CODE]`: the user's input or configuration is at fault
    /// (`CONFIG_ERROR`), or the system is (`IO_ERROR`).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            CliError::Library(error) => error.code().as_str(),
            CliError::Io { .. } => IO_ERROR,
            CliError::NotConfirmed(_)
            | CliError::NewRefused(_)
            | CliError::NotOverAFleet { .. } => dirthara::Code::ConfigError.as_str(),
            CliError::LintFindings { .. } => dirthara::Code::BlockingDdl.as_str(),
            CliError::FleetIncomplete(incomplete) => match &incomplete.first {
                Some((_, error, _)) => error.code().as_str(),
                None => dirthara::Code::Interrupted.as_str(),
            },
        }
    }

    /// Whether a signal stopped the run (and so decides the exit code).
    pub(crate) fn is_interrupted(&self) -> bool {
        match self {
            CliError::Library(error) => error.code() == dirthara::Code::Interrupted,
            CliError::FleetIncomplete(incomplete) => incomplete.interrupted,
            _ => false,
        }
    }
}

/// What the CLI was doing when the operating system said no.
#[derive(Debug)]
pub(crate) enum IoAction {
    StartRuntime,
    /// A whole document written to stdout, named as the user knows it.
    WriteStdout(&'static str),
    CreateMigrationDirectory(PathBuf),
    CreateDirectory(PathBuf),
    CreateFile(PathBuf),
    WriteFile(PathBuf),
    /// `--summary-file`.
    WriteSummary(PathBuf),
}

impl fmt::Display for IoAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoAction::StartRuntime => f.write_str("start the async runtime"),
            IoAction::WriteStdout(what) => write!(f, "write {what}"),
            IoAction::CreateMigrationDirectory(dir) => {
                write!(f, "create migration directory {}", dir.display())
            }
            IoAction::CreateDirectory(path) | IoAction::CreateFile(path) => {
                write!(f, "create {}", path.display())
            }
            IoAction::WriteFile(path) => write!(f, "write {}", path.display()),
            IoAction::WriteSummary(path) => {
                write!(
                    f,
                    "write the summary file {} (--summary-file)",
                    path.display()
                )
            }
        }
    }
}

/// `fresh` destroys data, so it runs only when confirmed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotConfirmed {
    #[error(
        "`fresh` drops every table of {database}; there is no terminal to confirm on, so pass \
         --force to confirm"
    )]
    NoTerminal {
        /// The history connection's URL, password masked.
        database: String,
    },
    #[error("`fresh` was not confirmed; nothing was changed")]
    Declined,
}

/// `dirthara new` cannot write what was asked for, where it was asked for.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NewRefused {
    #[error("`new {name}`: {reason}")]
    BadName { name: String, reason: String },
    #[error(
        "`new --mongo`: {} holds {layout} migrations, which are SQL; write MongoDB migrations in \
         a directory of dirthara's own layout",
        dir.display()
    )]
    MongoInSqlLayout { dir: PathBuf, layout: Layout },
    #[error(
        "cannot tell which layout to write in {}: {source}; fix the files, or name the \
         directory's layout with `format` in dirthara.toml",
        dir.display()
    )]
    UnknownLayout {
        dir: PathBuf,
        /// Why the directory's files do not load.
        source: dirthara::Error,
    },
}

/// The library's error document unchanged; the CLI's own failures in the same shape, with
/// the two fields every error has: `{"code", "message"}`.
impl serde::Serialize for CliError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let CliError::Library(error) = self {
            return error.serialize(serializer);
        }
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("code", self.code())?;
        map.serialize_entry("message", &self.to_string())?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::io;

    use super::*;

    fn config_error(message: &str) -> dirthara::Error {
        dirthara::Error::new(dirthara::ErrorKind::Config {
            message: message.into(),
        })
    }

    #[test]
    fn a_failed_write_is_an_io_error_naming_what_was_written_and_keeping_the_os_error() {
        let error = CliError::io(IoAction::WriteFile(PathBuf::from("m/1_a.up.sql")))(
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        assert_eq!(error.code(), "IO_ERROR");
        assert_eq!(
            error.to_string(),
            "cannot write m/1_a.up.sql: permission denied"
        );
        let source = error.source().expect("the OS error is the source");
        let source = source.downcast_ref::<io::Error>().expect("an io::Error");
        assert_eq!(source.kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn each_io_action_names_its_stream_or_path() {
        let message = |action| CliError::io(action)(io::Error::other("full")).to_string();
        assert_eq!(
            message(IoAction::WriteStdout("the manual page")),
            "cannot write the manual page: full"
        );
        assert_eq!(
            message(IoAction::CreateMigrationDirectory("m".into())),
            "cannot create migration directory m: full"
        );
        assert_eq!(
            message(IoAction::CreateDirectory("m/d".into())),
            "cannot create m/d: full"
        );
        assert_eq!(
            message(IoAction::CreateFile("m/f".into())),
            "cannot create m/f: full"
        );
        assert_eq!(
            message(IoAction::WriteSummary("/dev/termination-log".into())),
            "cannot write the summary file /dev/termination-log (--summary-file): full"
        );
        assert_eq!(
            message(IoAction::StartRuntime),
            "cannot start the async runtime: full"
        );
    }

    #[test]
    fn a_refused_fresh_and_a_refused_new_are_config_errors() {
        let errors: [CliError; 4] = [
            NotConfirmed::NoTerminal {
                database: "sqlite:app.db".into(),
            }
            .into(),
            NotConfirmed::Declined.into(),
            NewRefused::BadName {
                name: "a b".into(),
                reason: "no spaces".into(),
            }
            .into(),
            NewRefused::MongoInSqlLayout {
                dir: "m".into(),
                layout: Layout::Flyway,
            }
            .into(),
        ];
        for error in errors {
            assert_eq!(error.code(), "CONFIG_ERROR", "{error}");
            assert!(!error.is_interrupted());
        }
    }

    #[test]
    fn a_layout_that_cannot_be_told_keeps_the_loaders_error_as_its_source() {
        let loader = config_error("cannot read migration directory `m`");
        let error = CliError::from(NewRefused::UnknownLayout {
            dir: "m".into(),
            source: loader.clone(),
        });
        assert_eq!(error.code(), "CONFIG_ERROR");
        assert!(error.to_string().starts_with(
            "cannot tell which layout to write in m: cannot read migration directory `m`; "
        ));
        let source = error.source().expect("the loader's error is the source");
        assert_eq!(source.to_string(), loader.to_string());
    }

    #[test]
    fn a_library_error_keeps_its_code_message_and_document() {
        let library = config_error("no database URL");
        let error = CliError::from(library.clone());
        assert_eq!(error.code(), "CONFIG_ERROR");
        assert_eq!(error.to_string(), library.to_string());
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            serde_json::to_value(&library).unwrap()
        );
    }

    #[test]
    fn the_clis_own_failures_serialise_as_code_and_message() {
        let error = CliError::from(NotConfirmed::Declined);
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            serde_json::json!({
                "code": "CONFIG_ERROR",
                "message": "`fresh` was not confirmed; nothing was changed"
            })
        );
    }
}
