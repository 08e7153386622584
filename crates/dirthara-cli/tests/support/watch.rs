//! A `dirthara ... --output ndjson` run watched while it runs: a test waits until the runner
//! has reached a given event (inside migration 1, say), or has said something on stderr,
//! before it acts on the database or the process.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `--output ndjson` command and the events it has printed so far.
pub(crate) struct Watched {
    child: Child,
    lines: Receiver<String>,
    /// What it printed on stderr so far, read as it is printed.
    stderr_so_far: Arc<Mutex<Vec<u8>>>,
    stderr: JoinHandle<()>,
    /// Every event read so far, in order.
    pub events: Vec<Value>,
}

/// A watched run that ended.
#[derive(Debug)]
pub(crate) struct Ended {
    pub code: Option<i32>,
    pub events: Vec<Value>,
    pub stderr: String,
}

impl Ended {
    /// The `error` event's object (`Value::Null` without one).
    pub(crate) fn error(&self) -> &Value {
        self.events
            .iter()
            .rev()
            .find(|e| e["event"] == "error")
            .map(|e| &e["error"])
            .unwrap_or(&Value::Null)
    }

    /// The versions of its `migration_finished` events.
    pub(crate) fn finished(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter(|e| e["event"] == "migration_finished")
            .filter_map(|e| e["version"].as_u64())
            .collect()
    }
}

impl Watched {
    /// Starts `cmd`, which must print `--output ndjson`.
    pub(crate) fn spawn(mut cmd: Command) -> Watched {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr_so_far = Arc::new(Mutex::new(Vec::new()));
        let written = Arc::clone(&stderr_so_far);
        let stderr = std::thread::spawn(move || {
            let mut buffer = [0; 4096];
            while let Ok(n @ 1..) = err.read(&mut buffer) {
                written.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        });
        Watched {
            child,
            lines,
            stderr_so_far,
            stderr,
            events: Vec::new(),
        }
    }

    /// The process id of the run.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Kills the run outright (SIGKILL on Unix).
    pub(crate) fn kill(&mut self) {
        self.child.kill().unwrap();
    }

    /// What it printed on stderr so far.
    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr_so_far.lock().unwrap()).into_owned()
    }

    /// Reads the events printed since the last look, without waiting; whether the run's
    /// output is still open.
    pub(crate) fn poll(&mut self) -> bool {
        loop {
            match self.lines.try_recv() {
                Ok(line) => self
                    .events
                    .push(serde_json::from_str(&line).unwrap_or(Value::String(line))),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return false,
            }
        }
    }

    /// Waits until an event with `event` (and, if given, `version`) is printed; panics
    /// after 30 s or when the run ends first.
    pub(crate) fn wait_for(&mut self, event: &str, version: Option<u64>) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let matches = |e: &Value| e["event"] == event && version.is_none_or(|v| e["version"] == v);
        if self.events.iter().any(matches) {
            return;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let e: Value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                    let found = matches(&e);
                    self.events.push(e);
                    if found {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "no {event} {version:?} within 30 s; events: {:?}",
                        self.events
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the run ended before {event} {version:?}; events: {:?}",
                        self.events
                    )
                }
            }
        }
    }

    /// Waits for the run to end (killing it, and failing, after `limit`: a hang).
    pub(crate) fn finish(mut self, limit: Duration) -> Ended {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit {
                let _ = self.child.kill();
                panic!(
                    "still running after {limit:?} (deadlock?): {:?}",
                    self.events
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.events
                .push(serde_json::from_str(&line).unwrap_or(Value::String(line)));
        }
        let _ = self.stderr.join();
        let stderr = String::from_utf8_lossy(&self.stderr_so_far.lock().unwrap()).into_owned();
        Ended {
            code: status.code(),
            events: self.events,
            stderr,
        }
    }
}
