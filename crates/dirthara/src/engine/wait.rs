//! `wait`: read-only, no lock. Looks at the history until it holds the migrations waited
//! for — how an application's pods (or an init container) wait while one Job migrates. What
//! one look means is a pure function (`wait/judge.rs`); this file is the loop around it: the
//! deadline, which bounds everything (connecting, retrying, reading), and what it says while
//! it waits.

use std::future::Future;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Migrator;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{EventKind, EventSink, Warning};
use crate::migration::{DownSteps, Migration};
use crate::report::LockState;

mod judge;

use judge::{judge, Look};

/// How long `wait` sleeps between two looks at the history (or two attempts to reach it).
const POLL: Duration = Duration::from_millis(500);
/// How often a waiting `wait` says how far the history is, after saying it once at once.
const REPORT_EVERY: Duration = Duration::from_secs(5);
/// The least time a look is given, even when the deadline is nearer (or passed: a timeout
/// of 0 asks once): the most a deadline may be overrun by a database that does not answer.
const LAST_LOOK: Duration = Duration::from_secs(1);

/// What `wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WaitFor {
    /// Every migration of the directories.
    #[default]
    Latest,
    /// This migration alone (which must be one of the directories'): applied and not dirty,
    /// whatever else is pending, dirty or newer beside it. What an application needs that
    /// can run on the schema as it is from that migration on.
    Version(i64),
}

/// What `wait` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WaitReport {
    /// The migration waited for (`WaitFor::Version`), or the newest of the directories
    /// (`WaitFor::Latest`); `None` when there is none (no files).
    pub until: Option<i64>,
    /// How many migrations were waited for, every one now applied (1 for a version).
    pub applied: usize,
    /// How long it waited, in milliseconds.
    pub waited_ms: u64,
    /// Applied migrations these files do not have, oldest first: a newer build migrated the
    /// database, as during a rolling deploy ([`Config::strict`](crate::Config::strict)
    /// refuses that instead). Empty otherwise.
    pub newer: Vec<i64>,
    /// Warnings (a newer database: `MISSING_MIGRATION`); each was also sent as an
    /// [`EventKind::Warning`].
    pub warnings: Vec<Warning>,
}

impl Migrator {
    /// Waits, read-only and without the lock, until the history holds what `until` names
    /// (every migration of the directories, or one version alone), applied and not dirty,
    /// for at most `timeout` (`None`: for ever). The timeout bounds everything: a database
    /// not reachable yet is tried again every half second (one attempt each time, whatever
    /// [`Config::connect_timeout`](crate::Config::connect_timeout) says) until it runs out,
    /// and a database that does not answer is given up within a second of it; then
    /// `WAIT_TIMEOUT`, saying what it saw last. Fails at once on a dirty migration that no
    /// runner is working on, while what it waits for is not applied.
    ///
    /// A database newer than the files (an applied migration they do not have) is fine, once
    /// every migration waited for is applied: the pods of the previous build start during a
    /// rolling deploy. The report's `newer` names them, with a `MISSING_MIGRATION` warning;
    /// with [`Config::strict`](crate::Config::strict) it is refused instead.
    ///
    /// It says at once what it waits for ([`EventKind::WaitStarted`]), then how far the
    /// history is after the first look that finds it not ready, and every 5 s after that
    /// ([`EventKind::HistoryWaiting`]).
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
        let all = self.migrations(DownSteps::Skip, &connections)?;
        let (available, _) = crate::migration::split_repeatables(&all);
        self.checked(&connections)?;
        let wanted: Vec<&Migration> = match until {
            WaitFor::Latest => available.iter().collect(),
            WaitFor::Version(version) => {
                let found: Vec<&Migration> =
                    available.iter().filter(|m| m.version == version).collect();
                if found.is_empty() {
                    return Err(Error::new(ErrorKind::UnknownVersion { version }));
                }
                found
            }
        };
        let started = Instant::now();
        let deadline = timeout.and_then(|t| started.checked_add(t));
        self.announce(&wanted, timeout)?;
        let mut progress = Progress {
            events: &self.events,
            started,
            wanted: wanted.len(),
            applied: 0,
            seen: "connecting to the database".to_string(),
            said: false,
            next_report: started + REPORT_EVERY,
        };
        loop {
            let looked = self.unless_stopped(self.look(available, &wanted));
            match progress.during(looked, deadline).await? {
                Look::Ready { newer } => return Ok(self.ready(&wanted, newer, started)),
                Look::NotYet { applied, seen } => progress.saw(Some(applied), seen),
                Look::Unreachable(reason) => {
                    progress.saw(None, format!("the database is not reachable: {reason}"))
                }
                // `look` settles a dirty migration against the lock; should one come out,
                // it is not ready, and said so.
                Look::Dirty { applied, record } => progress.saw(
                    Some(applied),
                    format!("migration {} is dirty", record.version),
                ),
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(progress.timed_out());
            }
            let pause = deadline.map_or(POLL, |d| POLL.min(d.saturating_duration_since(now)));
            self.unless_stopped(async {
                tokio::time::sleep(crate::backoff::jittered(pause)).await;
                Ok(())
            })
            .await?;
        }
    }

    /// Says at once what it waits for, and where (the URL without its password).
    fn announce(&self, wanted: &[&Migration], timeout: Option<Duration>) -> Result<()> {
        let Some(last) = wanted.iter().max_by_key(|m| m.version) else {
            return Ok(());
        };
        let url = self
            .config
            .connection_url(&self.config.history_connection)?;
        self.events.emit(EventKind::WaitStarted {
            version: last.version,
            name: last.name.clone(),
            others: wanted.len() - 1,
            url: crate::redact::redact_url(url),
            timeout,
        });
        Ok(())
    }

    /// The report of a wait that ended well, warning of a database newer than the files.
    fn ready(
        &self,
        wanted: &[&Migration],
        newer: Vec<(i64, String)>,
        started: Instant,
    ) -> WaitReport {
        let mut warnings = Vec::new();
        if !newer.is_empty() {
            let named: Vec<(i64, &str)> = newer.iter().map(|(v, n)| (*v, n.as_str())).collect();
            let warning = Warning::newer_database(&named);
            self.events.emit(EventKind::Warning(warning.clone()));
            warnings.push(warning);
        }
        WaitReport {
            until: wanted.iter().map(|m| m.version).max(),
            applied: wanted.len(),
            waited_ms: started.elapsed().as_millis().try_into().unwrap_or(u64::MAX),
            newer: newer.into_iter().map(|(version, _)| version).collect(),
            warnings,
        }
    }

    /// Reads the history once: ready, not yet (a dirty migration a runner holding the lock
    /// is applying is not yet), or not reachable. The connection is tried once, not retried
    /// up to `connect_timeout`: `wait` retries on its own, within its own timeout.
    async fn look(&self, available: &[Migration], wanted: &[&Migration]) -> Result<Look> {
        let connections = self.connections();
        let history = &self.config.history_connection;
        let mut request = self.connect_request(&connections, history, "wait", true)?;
        request.connect_timeout = Duration::ZERO;
        let mut history = match self.connector.connect(&request, &self.events).await {
            Ok(history) => history,
            Err(error) if error.code() == crate::Code::ConnectionError => {
                return Ok(Look::Unreachable(error.to_string()));
            }
            Err(error) => return Err(error),
        };
        let records = match history.read_history().await {
            Ok(records) => records.unwrap_or_default(),
            Err(error) => {
                history.close().await;
                return Err(error);
            }
        };
        let judged = judge(available, wanted, &records, self.config.strict);
        let look = match judged {
            // A `running` record may be a migration a runner is applying right now: dirty
            // only when nobody holds the lock.
            Ok(Look::Dirty { applied, record }) => {
                let lock = self.lock_report(history.lock_host()).await;
                let held = |state: &LockState| matches!(state, LockState::Held { .. });
                match held(&lock.state) || lock.others.iter().any(|o| held(&o.state)) {
                    true => Ok(Look::NotYet {
                        applied,
                        seen: format!(
                            "a runner is migrating (migration {} is running)",
                            record.version
                        ),
                    }),
                    false => Err(Error::dirty(&record)),
                }
            }
            judged => judged,
        };
        self.release_history(history, true).await;
        look
    }
}

/// What a waiting `wait` knows and says: how far the history was at the last look, said once
/// at the first look that finds it not ready, then every [`REPORT_EVERY`].
struct Progress<'a> {
    events: &'a EventSink,
    started: Instant,
    wanted: usize,
    applied: usize,
    seen: String,
    /// Whether a look found the history not ready yet.
    said: bool,
    next_report: Instant,
}

impl Progress<'_> {
    /// Runs one look, saying how far the history was every [`REPORT_EVERY`] while it runs (a
    /// database that does not answer), and giving it up at the deadline, or [`LAST_LOOK`]
    /// after it began if that is later.
    async fn during(
        &mut self,
        look: impl Future<Output = Result<Look>>,
        deadline: Option<Instant>,
    ) -> Result<Look> {
        let cap = deadline.map(|d| d.max(Instant::now() + LAST_LOOK));
        tokio::pin!(look);
        loop {
            let give_up = async {
                match cap {
                    Some(cap) => tokio::time::sleep_until(cap.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                looked = &mut look => return looked,
                () = tokio::time::sleep_until(self.next_report.into()) => self.report(),
                () = give_up => {
                    let seen = match self.said {
                        false => "no answer from the database".to_string(),
                        true => format!("no answer from the database; before: {}", self.seen),
                    };
                    return Ok(Look::NotYet { applied: self.applied, seen });
                }
            }
        }
    }

    /// A look found the history not ready: what it saw (`applied`: `None` when it could not
    /// tell). The first time, it is said at once.
    fn saw(&mut self, applied: Option<usize>, seen: String) {
        self.applied = applied.unwrap_or(self.applied);
        self.seen = seen;
        if !self.said || Instant::now() >= self.next_report {
            self.said = true;
            self.report();
        }
    }

    fn report(&mut self) {
        self.events.emit(EventKind::HistoryWaiting {
            applied: self.applied,
            wanted: self.wanted,
            seen: self.seen.clone(),
            waited: self.started.elapsed(),
        });
        self.next_report = Instant::now() + REPORT_EVERY;
    }

    fn timed_out(&self) -> Error {
        Error::new(ErrorKind::WaitTimedOut {
            waited: self.started.elapsed(),
            applied: self.applied,
            wanted: self.wanted,
            last_seen: self.seen.clone(),
        })
    }
}
