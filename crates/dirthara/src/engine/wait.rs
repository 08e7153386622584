//! `wait`: read-only, no lock. Looks at the history until it holds every migration waited
//! for — how an application's pods (or an init container) wait while one Job migrates.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::Migrator;
use crate::error::{Error, ErrorKind, Result};
use crate::events::EventKind;
use crate::history::{AppliedMigration, RecordState};
use crate::migration::{DownSteps, Migration};
use crate::report::LockState;

/// How long `wait` sleeps between two looks at the history.
const POLL: Duration = Duration::from_millis(500);
/// How often a waiting `wait` says how far the history is.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// What `wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WaitFor {
    /// Every migration of the directories.
    #[default]
    Latest,
    /// Every migration up to this version (which must be one of them).
    Version(i64),
}

/// What `wait` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WaitReport {
    /// The newest migration waited for; `None` when there is none (no files).
    pub until: Option<i64>,
    /// How many migrations were waited for, every one now applied.
    pub applied: usize,
    /// How long it waited, in milliseconds.
    pub waited_ms: u64,
}

/// One look at the history.
enum Look {
    Ready,
    NotYet { applied: usize, seen: String },
}

impl Migrator {
    /// Waits, read-only and without the lock, until the history holds every migration
    /// `until` names (applied, not dirty), for at most `timeout` (`None`: for ever). A
    /// database not reachable yet is waited for too. Fails at once on a dirty migration that
    /// no runner is working on, and on an applied migration these files do not have (the
    /// database is newer than this build); `WAIT_TIMEOUT` when time runs out.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), dirthara::Error> {
    /// use std::time::Duration;
    /// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("postgres://app@db/app"));
    /// // An application's start-up, while a Job migrates: wait up to 5 minutes.
    /// migrator.wait(dirthara::WaitFor::Latest, Some(Duration::from_secs(300))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait(&self, until: WaitFor, timeout: Option<Duration>) -> Result<WaitReport> {
        let connections = self.connections();
        let available = self.migrations(DownSteps::Skip, &connections)?;
        self.checked(&connections)?;
        let wanted: Vec<&Migration> = match until {
            WaitFor::Latest => available.iter().collect(),
            WaitFor::Version(version) => {
                if !available.iter().any(|m| m.version == version) {
                    return Err(Error::new(ErrorKind::UnknownVersion { version }));
                }
                (available.iter())
                    .filter(|m| m.version <= version)
                    .collect()
            }
        };
        let started = Instant::now();
        let deadline = timeout.and_then(|t| started.checked_add(t));
        let mut next_report = started + REPORT_EVERY;
        loop {
            let look = self.look(&available, &wanted).await?;
            let (applied, seen) = match look {
                Look::Ready => {
                    return Ok(WaitReport {
                        until: wanted.iter().map(|m| m.version).max(),
                        applied: wanted.len(),
                        waited_ms: started.elapsed().as_millis().try_into().unwrap_or(u64::MAX),
                    })
                }
                Look::NotYet { applied, seen } => (applied, seen),
            };
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(Error::new(ErrorKind::WaitTimedOut {
                    waited: started.elapsed(),
                    applied,
                    wanted: wanted.len(),
                    last_seen: seen,
                }));
            }
            if now >= next_report {
                self.events.emit(EventKind::HistoryWaiting {
                    applied,
                    wanted: wanted.len(),
                    seen,
                    waited: now - started,
                });
                next_report = now + REPORT_EVERY;
            }
            let pause = deadline.map_or(POLL, |d| POLL.min(d.saturating_duration_since(now)));
            self.unless_stopped(async {
                tokio::time::sleep(crate::backoff::jittered(pause)).await;
                Ok(())
            })
            .await?;
        }
    }

    /// Reads the history once. A database not reachable is not an error here: it may be
    /// starting, and `wait` is for exactly that.
    async fn look(&self, available: &[Migration], wanted: &[&Migration]) -> Result<Look> {
        let connections = self.connections();
        let mut history = match self.connect_history(&connections, "wait").await {
            Ok(history) => history,
            Err(error) if error.code() == crate::Code::ConnectionError => {
                return Ok(Look::NotYet {
                    applied: 0,
                    seen: format!("the database is not reachable: {error}"),
                });
            }
            Err(error) => return Err(error),
        };
        let read = history.read_history().await;
        let records = match read {
            Ok(records) => records.unwrap_or_default(),
            Err(error) => {
                history.close().await;
                return Err(error);
            }
        };
        let dirty = records.iter().find(|r| r.state != RecordState::Applied);
        // A `running` record may be a migration a runner is applying right now: dirty only
        // when nobody holds the lock.
        let held = match dirty {
            Some(_) => {
                let lock = self.lock_report(history.lock_host()).await;
                matches!(lock.state, LockState::Held { .. })
                    || lock
                        .others
                        .iter()
                        .any(|o| matches!(o.state, LockState::Held { .. }))
            }
            None => false,
        };
        self.release_history(history, true).await;
        judge(available, wanted, &records, held)
    }
}

/// What a history says to a waiting runner: ready, not yet, or an error that waiting will not
/// fix.
fn judge(
    available: &[Migration],
    wanted: &[&Migration],
    records: &[AppliedMigration],
    locked: bool,
) -> Result<Look> {
    if let Some(unknown) = records
        .iter()
        .find(|r| !available.iter().any(|m| m.version == r.version))
    {
        return Err(Error::new(ErrorKind::NewerDatabase {
            version: unknown.version,
            name: unknown.name.clone(),
        }));
    }
    if let Some(dirty) = records.iter().find(|r| r.state != RecordState::Applied) {
        if !locked {
            return Err(Error::dirty(dirty));
        }
    }
    let applied = (wanted.iter())
        .filter(|m| {
            records
                .iter()
                .any(|r| r.version == m.version && r.state == RecordState::Applied)
        })
        .count();
    if applied == wanted.len() {
        return Ok(Look::Ready);
    }
    let seen = match locked {
        true => "a runner is migrating".to_string(),
        false => format!("{} pending", wanted.len() - applied),
    };
    Ok(Look::NotYet { applied, seen })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(version: i64, state: RecordState) -> AppliedMigration {
        AppliedMigration {
            version,
            name: format!("m{version}"),
            checksum: String::new(),
            batch: 1,
            state,
            applied_at: String::new(),
            duration_ms: 0,
            applied_by: String::new(),
            failure: None,
        }
    }

    #[test]
    fn a_history_is_ready_not_yet_dirty_or_newer() {
        let files: Vec<Migration> = (1..=3)
            .map(|v| Migration::new(v, format!("m{v}"), "x"))
            .collect();
        let all: Vec<&Migration> = files.iter().collect();
        let up_to_2: Vec<&Migration> = files.iter().take(2).collect();
        let applied = |versions: &[i64]| -> Vec<AppliedMigration> {
            versions
                .iter()
                .map(|&v| record(v, RecordState::Applied))
                .collect()
        };
        assert!(matches!(
            judge(&files, &all, &applied(&[1, 2, 3]), false),
            Ok(Look::Ready)
        ));
        assert!(matches!(
            judge(&files, &up_to_2, &applied(&[1, 2]), false),
            Ok(Look::Ready)
        ));
        assert!(matches!(
            judge(&files, &all, &applied(&[1]), false),
            Ok(Look::NotYet { applied: 1, .. })
        ));
        // A `running` record while a runner holds the lock: it is being applied.
        let mut running = applied(&[1, 2]);
        running.push(record(3, RecordState::Running));
        assert!(matches!(
            judge(&files, &all, &running, true),
            Ok(Look::NotYet { applied: 2, .. })
        ));
        let dirty = judge(&files, &all, &running, false).err().unwrap();
        assert_eq!(dirty.code(), crate::Code::DirtyMigration);
        let newer = judge(&files, &all, &applied(&[1, 2, 3, 4]), false)
            .err()
            .unwrap();
        assert_eq!(newer.code(), crate::Code::MissingMigration);
        assert!(
            newer.to_string().contains("newer than this build"),
            "{newer}"
        );
    }
}
