//! The captured result of one `dirthara` run, with the assertions the tests make on it.

use assert_cmd::Command;

/// The captured result of one run.
#[derive(Debug)]
pub(crate) struct Run {
    /// The exit code; `None` when the process was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The command line, for failure messages.
    pub command: String,
}

impl Run {
    fn context(&self) -> String {
        format!(
            "command: {}\nexit code: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command, self.code, self.stdout, self.stderr
        )
    }

    /// Asserts the exit code.
    #[track_caller]
    pub(crate) fn code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(expected),
            "unexpected exit code\n{}",
            self.context()
        );
        self
    }

    /// Asserts exit code 0.
    #[track_caller]
    pub(crate) fn success(&self) -> &Self {
        self.code(0)
    }

    /// Asserts exit code 1 and an `Error [CODE]: ` line on stderr (and none on stdout).
    #[track_caller]
    pub(crate) fn error(&self, code: &str) -> &Self {
        self.code(1);
        let marker = format!("Error [{code}]: ");
        assert!(
            self.stderr.lines().any(|l| l.starts_with(&marker)),
            "expected a line starting with `{marker}` on stderr\n{}",
            self.context()
        );
        assert!(
            !self.stdout.contains("Error ["),
            "errors belong on stderr, not stdout\n{}",
            self.context()
        );
        self
    }

    /// Asserts a `warning [CODE]: ` line on stderr.
    #[track_caller]
    pub(crate) fn warning(&self, code: &str) -> &Self {
        let marker = format!("warning [{code}]: ");
        assert!(
            self.stderr.lines().any(|l| l.starts_with(&marker)),
            "expected a line starting with `{marker}` on stderr\n{}",
            self.context()
        );
        self
    }

    /// Asserts that stdout contains `text`.
    #[track_caller]
    pub(crate) fn stdout_has(&self, text: &str) -> &Self {
        assert!(
            self.stdout.contains(text),
            "expected stdout to contain {text:?}\n{}",
            self.context()
        );
        self
    }

    /// Asserts that stderr contains `text`.
    #[track_caller]
    pub(crate) fn stderr_has(&self, text: &str) -> &Self {
        assert!(
            self.stderr.contains(text),
            "expected stderr to contain {text:?}\n{}",
            self.context()
        );
        self
    }

    /// Asserts that neither stdout nor stderr contains `text`.
    #[track_caller]
    pub(crate) fn nowhere(&self, text: &str) -> &Self {
        assert!(
            !self.stdout.contains(text) && !self.stderr.contains(text),
            "{text:?} must not be printed\n{}",
            self.context()
        );
        self
    }

    /// Stdout parsed as exactly one JSON document.
    #[track_caller]
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not exactly one JSON document: {e}\n{}",
                self.context()
            )
        })
    }

    /// Stdout parsed as one JSON object per non-empty line.
    #[track_caller]
    pub(crate) fn ndjson(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| {
                    panic!("ndjson line {l:?} is not JSON: {e}\n{}", self.context())
                })
            })
            .collect()
    }
}

/// Runs `cmd` to completion and captures its output.
#[track_caller]
pub(crate) fn run_command(cmd: &mut Command) -> Run {
    let command = format!("{:?}", cmd);
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command}: {e}"));
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        command,
    }
}
