//! The message an error prints: what went wrong, what is known about the database's state,
//! and what to do next. The facts come from the kind; the advice from `hints`.

use std::fmt;

use super::*;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.kind {
            ErrorKind::LockHeld { .. }
            | ErrorKind::LockFailed { .. }
            | ErrorKind::LockLost { .. }
            | ErrorKind::Interrupted { .. }
            | ErrorKind::OutOfOrder { .. } => self.fmt_run(f),
            ErrorKind::MigrationFailed { .. }
            | ErrorKind::TableLockTimeout { .. }
            | ErrorKind::Dirty { .. } => self.fmt_step(f),
            _ => self.fmt_plan_or_input(f),
        }
    }
}

impl Error {
    /// The lock, a signal, the order of migrations: what stopped or held up a run.
    fn fmt_run(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.kind {
            ErrorKind::LockHeld {
                lock,
                connection,
                holder,
            } => {
                write!(f, "lock `{lock}` on connection `{connection}` is held")?;
                if let Some(holder) = holder {
                    write!(f, " by {holder}")?;
                }
                match self.rest.context.waited {
                    // Advice to wait would be advice to do what was just done.
                    Some(waited) => write!(
                        f,
                        "; another runner is migrating this database, and it still held the lock \
                         after waiting {} (--lock-wait). See who holds it with `dirthara unlock`; \
                         if that runner is gone, `dirthara unlock --force` clears it (a lease also \
                         lapses by itself); or wait without a limit with --lock-wait forever",
                        crate::format_duration(waited)
                    ),
                    None => write!(
                        f,
                        "; another runner is migrating this database. Retry when it finishes, wait \
                         for it with --lock-wait (e.g. 10m, or forever), or inspect it with \
                         `dirthara unlock`"
                    ),
                }
            }
            ErrorKind::LockFailed {
                lock,
                connection,
                reason,
            } => write!(f, "lock `{lock}` on connection `{connection}`: {reason}"),
            ErrorKind::LockLost {
                lock,
                connection,
                next,
            } => {
                write!(
                    f,
                    "lock `{lock}` on connection `{connection}` was lost during the run"
                )?;
                if let Some((version, name)) = next {
                    write!(
                        f,
                        "; stopped before migration {version} ({name}) was applied, leaving it and \
                         everything after it undone"
                    )?;
                }
                write!(
                    f,
                    ". Run the command again: it plans against what was recorded"
                )
            }
            ErrorKind::Interrupted { .. } if self.rest.context.before_lock => write!(
                f,
                "interrupted before the lock was taken; no migration was started and nothing was \
                 read or changed"
            ),
            ErrorKind::Interrupted { .. } if self.rest.context.waited.is_some() => write!(
                f,
                "interrupted while waiting for the lock (after {}); no migration was started and \
                 nothing was changed",
                crate::format_duration(self.rest.context.waited.unwrap_or_default())
            ),
            ErrorKind::Interrupted { remaining } => {
                write!(
                    f,
                    "interrupted; every migration that started was finished and recorded"
                )?;
                if remaining.is_empty() {
                    write!(f, ", none was left undone")
                } else {
                    let list: Vec<String> =
                        remaining.iter().map(|(v, n)| format!("{v} {n}")).collect();
                    write!(f, "; left undone: {}", list.join(", "))
                }
            }
            ErrorKind::OutOfOrder {
                versions,
                newest_applied,
            } => {
                let list: Vec<String> = versions.iter().map(i64::to_string).collect();
                write!(
                    f,
                    "pending migration(s) {} are older than the newest applied migration {newest_applied}; \
                     --strict refuses to apply them (run without --strict to apply them anyway)",
                    list.join(", ")
                )
            }
            _ => unreachable!("fmt_run is given its own kinds only"),
        }
    }

    /// A migration's step that failed, gave way too long, or was left half-done.
    fn fmt_step(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.kind {
            ErrorKind::MigrationFailed {
                version,
                name,
                direction,
                connection,
                error,
                left_dirty,
                transactional,
                repeatable,
            } => {
                if *repeatable {
                    return write!(
                        f,
                        "repeatable migration `R__{name}` failed on connection `{connection}`: \
                         {error}\nThe versioned migrations before it stay applied; its record \
                         says `failed`, and the next `migrate` applies it again"
                    );
                }
                write!(
                    f,
                    "migration {version} ({name}) failed while running {direction} on connection \
                     `{connection}`: {error}"
                )?;
                // What became of the step, as it is: a transactional step that was rolled back
                // never "could not run in a transaction".
                if error.connection_lost {
                    let fate = match (*transactional, *left_dirty) {
                        (true, false) => "it ran in a transaction, which the server rolled back",
                        (true, true) => {
                            "it ran in a transaction, but the schema changes the database \
                             committed at once may have stayed, so it may be half-applied"
                        }
                        (false, true) => {
                            "it could not run in a transaction, so it may be half-applied"
                        }
                        (false, false) => "it had changed nothing",
                    };
                    write!(
                        f,
                        "\nThe connection to the database was lost while the step ran: {fate}"
                    )?;
                }
                if *left_dirty {
                    let why = match transactional {
                        true => {
                            "It ran in a transaction, but this database commits schema changes \
                             (DDL) at once, so the rollback could not undo what ran before the \
                             failure"
                        }
                        false => "It could not run in a transaction",
                    };
                    write!(
                        f,
                        "\n{why}, so the history marks it as running. Repair the database by hand, \
                         then run `dirthara resolve {version} --applied` or \
                         `dirthara resolve {version} --rolled-back`"
                    )?;
                }
                Ok(())
            }
            ErrorKind::TableLockTimeout {
                version,
                name,
                direction,
                connection,
                error,
                attempts,
                spent,
                left_dirty,
            } => {
                let table =
                    (error.table.as_deref()).map_or("its table".into(), |t| format!("`{t}`"));
                write!(
                    f,
                    "migration {version} ({name}) could not run {direction} on connection \
                     `{connection}`: a statement waited for the lock on {table} and gave way to \
                     the application's queries {attempts} time(s), until the retry budget ran out \
                     after {}: {error}",
                    crate::format_duration(*spent)
                )?;
                if error.blocker.is_none() {
                    write!(f, "\nThe database did not say who held the lock.")?;
                }
                if *left_dirty {
                    write!(
                        f,
                        "\nStatements before it had committed, so the history marks it as \
                         running: finish or undo them by hand, then run `dirthara resolve \
                         {version} --applied` or `--rolled-back`."
                    )?;
                } else {
                    write!(f, "\nNothing was applied and nothing recorded.")?;
                }
                let end = match error.blocker.as_ref().is_some_and(|b| b.likely) {
                    // Never advise ending a session dirthara only guessed at.
                    true => {
                        "find the session holding the lock (the one named above is a \
                             guess: do not end it on that alone) and wait for it to finish"
                    }
                    false => "end the session holding the lock (or wait for it to finish)",
                };
                write!(
                    f,
                    " To get past it: {end}, raise --table-lock-retry-for \
                     (`table_lock_retry_for`), or run at a quieter time"
                )
            }
            ErrorKind::Dirty {
                version,
                name,
                failure,
            } => {
                match failure {
                    Some(failure) => write!(
                        f,
                        "migration {version} ({name}) was started by an earlier run that failed \
                         inside it, after something may have committed: {failure}. It may be \
                         half-applied."
                    )?,
                    None => write!(
                        f,
                        "migration {version} ({name}) was started by an earlier run that did not \
                         finish it (it died inside a step that a rollback could not undo), \
                         so it may be half-applied."
                    )?,
                }
                write!(
                    f,
                    " Check the database by hand, then run `dirthara resolve {version} --applied` \
                     if its changes are in place or `dirthara resolve {version} --rolled-back` if \
                     they are not"
                )
            }
            _ => unreachable!("fmt_step is given its own kinds only"),
        }
    }

    /// A plan refused, or input, configuration, connection or history that is unusable.
    fn fmt_plan_or_input(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.kind {
            ErrorKind::ChecksumMismatch {
                version,
                name,
                file,
                recorded,
                actual,
            } => write!(
                f,
                "migration {version} ({name}) was changed after it was applied: {file} has checksum \
                 {actual}, the history recorded {recorded}. Restore the file, or write a new migration \
                 for the change; if the edit was deliberate, run `dirthara resolve {version} --accept-checksum`"
            ),
            ErrorKind::NewerDatabase { version, name } => write!(
                f,
                "the database has migration {version} ({name}) applied, which these migration \
                 files do not have: the database is newer than this build, which --strict \
                 refuses (without it, `wait` accepts a newer database, as a rolling deploy \
                 needs). Deploy the build that has it (or check --dir and `directories`)"
            ),
            ErrorKind::WaitTimedOut {
                waited,
                applied,
                wanted,
                last_seen,
            } => write!(
                f,
                "gave up waiting after {}: {applied} of the {wanted} migration(s) waited for \
                 are applied ({last_seen}). Is the migration job running? `dirthara status` \
                 shows where the database stands",
                crate::format::format_duration(*waited)
            ),
            ErrorKind::MissingMigration { version, name } => write!(
                f,
                "migration {version} ({name}) is recorded as applied but its file is missing from the \
                 migration directories. Restore the file (check --dir and `directories`)"
            ),
            ErrorKind::SquashedAway { versions, baseline } => write!(
                f,
                "migration(s) {} are neither applied to this database nor on disk: the baseline \
                 `{baseline}` stands for them, and a baseline builds only a new database, from \
                 nothing up to its version; nothing was changed. If their files were archived \
                 after `squash`, put them back (from version control) to bring this database up \
                 to the baseline. If this database was itself built from an earlier baseline, \
                 put that baseline's file back instead: the migrations it stands for must not \
                 run again",
                crate::format::list_versions(versions)
            ),
            ErrorKind::Irreversible { version, name } => {
                write!(
                    f,
                    "migration {version} ({name}) has no down step, so it cannot be reversed; \
                     nothing was changed. "
                )?;
                match &self.rest.context.reversal {
                    Some(advice) => write!(f, "{advice}, or choose a target after it"),
                    None => write!(
                        f,
                        "Add a `{version}_{name}.down.sql` (`.down.json` for MongoDB), or choose \
                         a target after it"
                    ),
                }
            }
            ErrorKind::UnknownVersion { version } => write!(
                f,
                "no migration has version {version}; nothing was changed. `dirthara status` lists the \
                 versions (0 means before the first migration, unless a migration 0 exists)"
            ),
            ErrorKind::InvalidMigration { problems } => {
                dirthara_source::write_problems(f, problems)
            }
            ErrorKind::PlaceholderUnset { problems } => {
                write!(
                    f,
                    "{} placeholder(s) have no value; nothing was run:",
                    problems.len()
                )?;
                dirthara_source::write_problem_lines(f, problems)
            }
            ErrorKind::Config { message } => f.write_str(message),
            ErrorKind::NotDirty { version, name } => write!(
                f,
                "migration {version} ({name}) is not dirty (it is recorded as applied); \
                 `resolve --applied/--rolled-back` only clears a migration a failed run left running"
            ),
            ErrorKind::Connection {
                connection,
                message,
            } => write!(f, "cannot connect to `{connection}`: {message}"),
            ErrorKind::History {
                connection,
                message,
            } => write!(f, "migration history on `{connection}`: {message}"),
            ErrorKind::BlockingDdl { findings } => {
                write!(
                    f,
                    "{} pending statement(s) would block the application; nothing was run:",
                    findings.len()
                )?;
                for finding in findings {
                    write!(
                        f,
                        "\n  migration {} ({}) {}: {finding}.\n    Safe way: {}.",
                        finding.version, finding.name, finding.direction, finding.fix
                    )?;
                }
                write!(
                    f,
                    "\nTo run it anyway (a maintenance window, a table known to stay small), \
                     write `-- dirthara:allow-blocking <reason>` at the top of its file, or \
                     pass --allow-blocking; `blocking_table_size` sets the size that refuses"
                )
            }
            ErrorKind::FleetEmpty { source, found } => write!(
                f,
                "{source} names no target ({found}); nothing ran. Check the pattern, file or \
                 query and the connection it is read on; a fleet that may be empty passes \
                 with --allow-empty-fleet (`allow_empty = true` in [fleet])"
            ),
            ErrorKind::NoMigrations { directories } => {
                let directories: Vec<String> = (directories.iter())
                    .map(|d| format!("`{}`", d.display()))
                    .collect();
                write!(
                    f,
                    "no migrations in {}; nothing was read or created. Point --dir (or \
                     `directories` in dirthara.toml) at the folder that holds them",
                    match directories.is_empty() {
                        true => "any directory (none is configured)".to_string(),
                        false => directories.join(", "),
                    }
                )
            }
            ErrorKind::PermissionDenied {
                connection,
                message,
                grant,
            } => write!(
                f,
                "`{connection}`: the database refused dirthara: {message}. Nothing was read as \
                 applied or pending. As an owner of the objects, grant what the runner's role \
                 needs: {grant}"
            ),
            ErrorKind::SchemaMismatch {
                connection,
                file,
                objects,
                versions,
            } => {
                let what = differences(*objects, *versions);
                write!(
                    f,
                    "the schema of `{connection}` is not the one in {}: {what} (shown on \
                     standard output, `-` as in the file, `+` as in the database). If the \
                     database is right, write the file again: `dirthara dump > {}`; if the file \
                     is, find what changed the database outside the migrations",
                    file.display(),
                    file.display()
                )
            }
            ErrorKind::SchemaDrift {
                connection,
                reference,
                file,
                objects,
                versions,
            } => {
                let accept = match file {
                    true => format!("write the file again: `dirthara dump > {reference}`"),
                    false => "take it as the reference: `dirthara drift --accept`".to_string(),
                };
                write!(
                    f,
                    "the schema of `{connection}` has drifted from {reference}: {} (shown on \
                     standard output, `-` as expected, `+` as in the database). Undo the change \
                     made outside the migrations, or write a migration that makes it; if the \
                     database is right as it is, {accept}",
                    differences(*objects, *versions)
                )
            }
            ErrorKind::SchemaSnapshotMissing { connection } => write!(
                f,
                "the history of `{connection}` has no schema snapshot to compare with: one is \
                 taken at the end of every command that changes the schema, and this history \
                 has none (it was written before snapshots, the last one could not be \
                 written, or a command run with `schema_snapshot = off` removed it). Check the \
                 schema (`dirthara dump`), then take it as the reference: \
                 `dirthara drift --accept`"
            ),
            _ => unreachable!("fmt_plan_or_input is given its own kinds only"),
        }
    }
}

impl std::error::Error for Error {
    /// For `MIGRATION_FAILED`, what the database said, structured; for the others, the
    /// driver's (or the system's) own error where there was one. Its text is also part of
    /// the message, which is what the CLI prints.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.kind {
            ErrorKind::MigrationFailed { error, .. }
            | ErrorKind::TableLockTimeout { error, .. } => Some(error),
            _ => {
                let cause = self.rest.cause.as_ref()?;
                Some(&*cause.0 as &(dyn std::error::Error + 'static))
            }
        }
    }
}

impl From<dirthara_source::SourceError> for Error {
    fn from(error: SourceError) -> Self {
        match error {
            dirthara_source::SourceError::Invalid(problems) => {
                Error::new(ErrorKind::InvalidMigration { problems })
            }
            dirthara_source::SourceError::Directory { message, .. } => Error::config(message),
        }
    }
}

/// `1 object differs`, `2 objects and the applied versions differ`, ...
fn differences(objects: usize, versions: bool) -> String {
    match (objects, versions) {
        (0, _) => "its applied versions differ".to_string(),
        (1, false) => "1 object differs".to_string(),
        (n, false) => format!("{n} objects differ"),
        (1, true) => "1 object and the applied versions differ".to_string(),
        (n, true) => format!("{n} objects and the applied versions differ"),
    }
}
