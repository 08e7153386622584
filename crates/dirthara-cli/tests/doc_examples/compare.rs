//! What an example shows against what the command printed. Both sides go through the same
//! normalisation, which replaces only what differs from run to run -- timestamps, durations,
//! process and session ids, client ports, the host a runner names itself by, the version
//! `new` takes from the clock -- so the docs can keep real values there while every other
//! character is compared. Beyond that an example may say `[..]` (any text within a line) and
//! a line `...` (any number of lines). One line is timing itself: dirthara says `acquired lock
//! ... after ...` unasked when taking the lock took 100 ms or more, which a busy machine
//! decides, so where an example does not show it, it is not looked for.

use std::sync::LazyLock;

use regex::Regex;

/// A duration as `dirthara::format_duration` writes it (`850 ms`, `8.01 s`, `1 min 30 s`),
/// or Rust's Debug of one (`6.7s`).
const SPOKEN: &str = r"\d+(\.\d+)? ?(ns|µs|ms|s|min|h)\b( \d+ (s|min)\b)?";

/// (pattern, replacement): each is a value that changes between runs.
static VOLATILE: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // RFC 3339 times, by the database's clock (whole seconds or milliseconds).
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TIME]"),
        // A step's duration: `(12 ms)`, `(8.01 s)`, `(738 µs)`; Rust's Debug of a Duration.
        (r"\((\d+(\.\d+)?) ?(µs|ms|s|min)\)", "([DURATION])"),
        (r"\bin \d+(\.\d+)? ?(ns|µs|ms|s)\b", "in [DURATION]"),
        (
            r"(\d+ min )?\d+(\.\d+)? s of the retry budget left",
            "[DURATION] of the retry budget left",
        ),
        (r#""(duration_ms|waited_ms)": ?\d+"#, "\"$1\": [MS]"),
        // Waits and ages, as `format_duration` writes them: `after 6.70 s`, `(waited 0 ms)`,
        // `for 1 s` (`for under 1 s`: the server's whole seconds), `expires in 29 min 58 s`,
        // `1.02 s ago`.
        (&format!(r"after (waiting )?{SPOKEN}"), "after [SECS]"),
        (&format!(r"waited {SPOKEN}"), "waited [SECS]"),
        (&format!(r"\bfor (under 1 s\b|{SPOKEN})"), "for [SECS]"),
        (&format!(r"expires in {SPOKEN}"), "expires in [SECS]"),
        (&format!(r"\b{SPOKEN} ago\b"), "[SECS] ago"),
        (r"real\t\d+m\d+\.\d+s", "real\t[SECS]"),
        // A runner's name for itself, `dirthara <command> <host>:<pid>`.
        (
            r"(`|: |\x22)dirthara ([a-z-]+) [^\s`:\x22]+:\d+",
            "${1}dirthara $2 [HOST]:[PID]",
        ),
        // Server sessions, and the client port a session came from.
        (r"\b(session|process|connection) \d+", "$1 [ID]"),
        (r#""session_id": ?\d+"#, "\"session_id\": [ID]"),
        (r"127\.0\.0\.1:\d{5}\b", "127.0.0.1:[PORT]"),
        // Any other number of milliseconds (a step's duration as a script prints it).
        (r"\b\d+ ?ms\b", "[MS]"),
    ]
    .into_iter()
    .map(|(pattern, replacement)| (Regex::new(pattern).unwrap(), replacement))
    .collect()
});

/// The version `dirthara new` takes from the clock (a UTC timestamp of now), in a file name.
static NEW_VERSION: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b20\d{12}_").unwrap());

/// `text` with every volatile value replaced by its placeholder; for the output of `new`, the
/// versions it made up too.
pub(crate) fn normalise(text: &str, command_is_new: bool) -> String {
    let mut text = text.to_string();
    for (pattern, replacement) in VOLATILE.iter() {
        text = pattern.replace_all(&text, *replacement).into_owned();
    }
    if command_is_new {
        text = NEW_VERSION
            .replace_all(&text, "[NEW VERSION]_")
            .into_owned();
    }
    text
}

/// Whether one actual line is what the expected line shows (`[..]` matching any text).
fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split("[..]").collect();
    if parts.len() == 1 {
        return expected == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether the actual lines are what the expected ones show (a line `...` matching any
/// number of lines).
fn lines_match(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..])),
        Some((line, rest)) => {
            !actual.is_empty() && line_matches(line, actual[0]) && lines_match(rest, &actual[1..])
        }
    }
}

/// `None` when `actual` is what `expected` shows, after both were normalised; otherwise the
/// two normalised texts, for the failure message.
pub(crate) fn mismatch(
    expected: &str,
    actual: &str,
    command_is_new: bool,
) -> Option<(String, String)> {
    let (expected, actual) = (
        normalise(expected, command_is_new),
        normalise(actual, command_is_new),
    );
    let actual = if expected.contains("acquired lock") {
        actual
    } else {
        (actual.lines())
            .filter(|l| !(l.starts_with("acquired lock ") && l.ends_with(" after [SECS]")))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let trimmed = |t: &str| t.trim_end_matches('\n').to_string();
    let (e, a) = (trimmed(&expected), trimmed(&actual));
    let e_lines: Vec<&str> = if e.is_empty() {
        vec![]
    } else {
        e.lines().collect()
    };
    let a_lines: Vec<&str> = if a.is_empty() {
        vec![]
    } else {
        a.lines().collect()
    };
    (!lines_match(&e_lines, &a_lines)).then_some((e, a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volatile_values_compare_equal_and_the_rest_does_not() {
        let doc = "applied  20240101090000 create_users (5 ms)\nsince 2026-11-29T22:51:25Z";
        let run = "applied  20240101090000 create_users (12.5 s)\nsince 2031-01-02T03:04:05Z";
        assert!(mismatch(doc, run, false).is_none());
        let other = "applied  20240101090001 create_users (5 ms)\nsince 2026-11-29T22:51:25Z";
        assert!(mismatch(doc, other, false).is_some());
        let held = "held by `dirthara migrate vm:9188`, session 9189, from 127.0.0.1";
        let now = "held by `dirthara migrate build-7.local:41:11`, session 3, from 127.0.0.1";
        assert!(
            mismatch(held, now, false).is_some(),
            "a host with a colon is not a host"
        );
        let now = "held by `dirthara migrate build-7:41`, session 3, from 127.0.0.1";
        assert!(mismatch(held, now, false).is_none());
    }

    #[test]
    fn wildcards() {
        assert!(mismatch("a [..] c\n...\nz", "a b b c\nx\ny\nz", false).is_none());
        assert!(mismatch("a [..] c", "a b d", false).is_some());
        assert!(mismatch("...", "", false).is_none());
        assert!(mismatch("a", "a\nb", false).is_some());
    }
}
