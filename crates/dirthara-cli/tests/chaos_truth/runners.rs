//! One chaos runner: a `dirthara migrate --output ndjson` process whose events are read as
//! it prints them, so that even a runner killed half-way leaves a record of what it began.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How a runner's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Exited by itself with this code.
    Exited(i32),
    /// Killed by the round (SIGKILL).
    Killed,
    /// Ended by a signal the round did not send, or would not exit (then killed).
    Abnormal,
}

/// A runner still running.
pub(crate) struct Runner {
    pub id: usize,
    child: Child,
    stdout: JoinHandle<Vec<String>>,
    stderr: JoinHandle<String>,
    pub lease_without_wait: bool,
    /// The server restarted while this runner was alive.
    pub hit_by_restart: bool,
}

/// What a runner did, once it ended.
#[derive(Debug, Clone)]
pub(crate) struct RunnerRecord {
    pub id: usize,
    /// Its process id, which its server sessions carry in their application name.
    pub pid: u32,
    pub end: End,
    /// Its ndjson events, in the order printed (the last may be an `error` event).
    pub events: Vec<Value>,
    pub stderr: String,
    /// It took a lease without waiting (`--lock-wait 0`): `MIGRATION_LOCK_HELD` is its due.
    pub lease_without_wait: bool,
    pub hit_by_restart: bool,
}

impl Runner {
    pub(crate) fn spawn(id: usize, mut cmd: Command, lease_without_wait: bool) -> Runner {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let stdout =
            std::thread::spawn(move || BufReader::new(out).lines().map_while(Result::ok).collect());
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        Runner {
            id,
            child,
            stdout,
            stderr,
            lease_without_wait,
            hit_by_restart: false,
        }
    }

    /// The record, if the process has exited by itself.
    pub(crate) fn try_finish(&mut self) -> Option<End> {
        let status = self.child.try_wait().unwrap()?;
        Some(match status.code() {
            Some(code) => End::Exited(code),
            None => End::Abnormal,
        })
    }

    /// Kills the runner (SIGKILL) unless it has already exited, and records it.
    pub(crate) fn kill(mut self) -> RunnerRecord {
        let end = match self.try_finish() {
            Some(end) => end,
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                End::Killed
            }
        };
        self.record(end)
    }

    /// Waits for the runner to exit by itself; one still running after `limit` is killed
    /// and recorded as [`End::Abnormal`] (a hang).
    pub(crate) fn finish(mut self, limit: Duration) -> RunnerRecord {
        let started = Instant::now();
        loop {
            if let Some(end) = self.try_finish() {
                return self.record(end);
            }
            if started.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return self.record(End::Abnormal);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn record(self, end: End) -> RunnerRecord {
        let lines = self.stdout.join().unwrap_or_default();
        let events = lines
            .iter()
            .map(|line| {
                // A killed runner may leave half a line; keep it visible in reports.
                serde_json::from_str(line).unwrap_or_else(|_| Value::String(line.clone()))
            })
            .collect();
        RunnerRecord {
            id: self.id,
            pid: self.child.id(),
            end,
            events,
            stderr: self.stderr.join().unwrap_or_default(),
            lease_without_wait: self.lease_without_wait,
            hit_by_restart: self.hit_by_restart,
        }
    }
}

impl RunnerRecord {
    fn versions_of(&self, event: &str) -> Vec<u64> {
        self.events
            .iter()
            .filter(|e| e["event"] == event)
            .filter_map(|e| e["version"].as_u64())
            .collect()
    }

    /// The versions it announced (`migration_started`), in order.
    pub(crate) fn started(&self) -> Vec<u64> {
        self.versions_of("migration_started")
    }

    /// The versions it finished and recorded (`migration_finished`), in order.
    pub(crate) fn finished(&self) -> Vec<u64> {
        self.versions_of("migration_finished")
    }

    /// The migration it began and did not finish: at most one, the last it began.
    pub(crate) fn unfinished(&self) -> Option<u64> {
        let started = self.started();
        let finished = self.finished();
        (started.len() > finished.len())
            .then(|| started.last().copied())
            .flatten()
    }

    /// Its error, from the `error` event (or, failing that, from the `Error [CODE]` line).
    pub(crate) fn error_code(&self) -> Option<String> {
        if let Some(code) = self.error()["code"].as_str() {
            return Some(code.to_string());
        }
        let line = self.stderr.lines().find(|l| l.starts_with("Error ["))?;
        Some(line["Error [".len()..].split(']').next()?.to_string())
    }

    /// The `error` object of its error event (`Value::Null` without one).
    pub(crate) fn error(&self) -> &Value {
        self.events
            .iter()
            .rev()
            .find(|e| e["event"] == "error")
            .map(|e| &e["error"])
            .unwrap_or(&Value::Null)
    }

    /// The `applied` versions of its result line, if it printed one.
    pub(crate) fn reported_applied(&self) -> Option<Vec<u64>> {
        let result = self.events.iter().rev().find(|e| e["event"] == "result")?;
        Some(
            result["applied"]
                .as_array()?
                .iter()
                .filter_map(|s| s["version"].as_u64())
                .collect(),
        )
    }

    /// The versions its error reports as completed before the error.
    pub(crate) fn reported_completed(&self) -> Vec<u64> {
        self.error()["completed"]
            .as_array()
            .map(|steps| steps.iter().filter_map(|s| s["version"].as_u64()).collect())
            .unwrap_or_default()
    }

    /// The migration a `DIRTY_MIGRATION` error names ("migration <v> (<name>) was started
    /// by an earlier run ...").
    pub(crate) fn dirty_version(&self) -> Option<u64> {
        let message = self.error()["message"]
            .as_str()
            .map(str::to_string)
            .or_else(|| {
                let line = self
                    .stderr
                    .lines()
                    .find(|l| l.starts_with("Error [DIRTY_MIGRATION]"))?;
                Some(line.to_string())
            })?;
        let rest = &message[message.find("migration ")? + "migration ".len()..];
        rest.split(' ').next()?.parse().ok()
    }

    /// A short account for violation reports.
    pub(crate) fn describe(&self) -> String {
        let last_error = self
            .stderr
            .lines()
            .find(|l| l.starts_with("Error ["))
            .unwrap_or("");
        format!(
            "runner {} ({:?}{}{}): started {:?}, finished {:?}; {last_error}",
            self.id,
            self.end,
            if self.hit_by_restart {
                ", hit by a restart"
            } else {
                ""
            },
            if self.lease_without_wait {
                ", lease without wait"
            } else {
                ""
            },
            self.started(),
            self.finished(),
        )
    }
}
