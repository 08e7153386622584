//! How dirthara writes a duration for people — a step's run time, a wait, a timeout — in
//! every message, event line and report: one formatter, so `2 s` means the same everywhere;
//! how it writes an instant in events: RFC 3339, UTC, to the microsecond; and how it lists
//! versions.

use std::time::{Duration, SystemTime};

/// `850 ms`, `2 s`, `8.01 s`, `42.5 s`, `5 min`, `1 min 30 s`, `2 h`, `1 h 30 min`.
///
/// Below a second, milliseconds; below a minute, seconds (whole when whole, else with two
/// significant decimals below 10 s and one above); then minutes and seconds, or hours and
/// minutes, dropping a zero second part.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// assert_eq!(dirthara_core::format_duration(Duration::from_millis(8010)), "8.01 s");
/// assert_eq!(dirthara_core::format_duration(Duration::from_secs(90)), "1 min 30 s");
/// ```
pub fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    let secs = duration.as_secs();
    match secs {
        0 => format!("{millis} ms"),
        1..=59 if millis % 1000 == 0 => format!("{secs} s"),
        1..=9 => format!("{:.2} s", duration.as_secs_f64()),
        10..=59 => format!("{:.1} s", duration.as_secs_f64()),
        60..=3599 if secs % 60 == 0 => format!("{} min", secs / 60),
        60..=3599 => format!("{} min {} s", secs / 60, secs % 60),
        _ if secs % 3600 / 60 == 0 => format!("{} h", secs / 3600),
        _ => format!("{} h {} min", secs / 3600, (secs % 3600) / 60),
    }
}

/// `2026-12-01T20:28:27.123456Z`: RFC 3339 in UTC with microseconds, as structured logs
/// write instants (and as every event's `at` is written). An instant before 1970 (a clock
/// set far back) is written as the epoch.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// let at = SystemTime::UNIX_EPOCH + Duration::from_micros(951_782_400_000_007);
/// assert_eq!(dirthara_core::format_timestamp(at), "2000-02-29T00:00:00.000007Z");
/// ```
pub fn format_timestamp(at: SystemTime) -> String {
    // humantime writes years 1970 to 9999; a clock set outside them is written at the edge.
    const LAST: Duration = Duration::from_micros(253_402_300_799_999_999);
    let since_epoch = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .min(LAST);
    humantime::format_rfc3339_micros(SystemTime::UNIX_EPOCH + since_epoch).to_string()
}

/// Versions as a message lists them: all of a short list, the first ten of a long one.
///
/// ```
/// assert_eq!(dirthara_core::format::list_versions(&[4, 5]), "4, 5");
/// let many: Vec<i64> = (1..=12).collect();
/// assert_eq!(dirthara_core::format::list_versions(&many), "1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more");
/// ```
pub fn list_versions(versions: &[i64]) -> String {
    const SHOWN: usize = 10;
    let shown: Vec<String> = versions.iter().take(SHOWN).map(i64::to_string).collect();
    match versions.len().saturating_sub(SHOWN) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// The versions a baseline stands for, as `status` shows them: `1–5, 5 migrations`.
///
/// ```
/// assert_eq!(dirthara_core::format::squashed_range(&[1, 2, 5]), "1–5, 3 migrations");
/// assert_eq!(dirthara_core::format::squashed_range(&[7]), "7, 1 migration");
/// ```
pub fn squashed_range(versions: &[i64]) -> String {
    let count = match versions.len() {
        1 => "1 migration".to_string(),
        n => format!("{n} migrations"),
    };
    match (versions.first(), versions.last()) {
        (Some(first), Some(last)) if first != last => format!("{first}–{last}, {count}"),
        (Some(only), _) => format!("{only}, {count}"),
        _ => "no migrations".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_rfc3339_utc_with_microseconds() {
        let at = |secs: u64, micros: u64| {
            format_timestamp(
                SystemTime::UNIX_EPOCH + Duration::from_micros(secs * 1_000_000 + micros),
            )
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.000007Z"); // a leap day
        assert_eq!(at(1_796_243_307, 123_456), "2026-12-02T20:28:27.123456Z");
        assert_eq!(at(4_107_542_399, 999_999), "2100-02-28T23:59:59.999999Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000000Z"); // 2100 is no leap year
        let before_epoch = SystemTime::UNIX_EPOCH - Duration::from_secs(5);
        assert_eq!(
            format_timestamp(before_epoch),
            "1970-01-01T00:00:00.000000Z"
        );
        assert_eq!(at(253_402_400_000, 0), "9999-12-31T23:59:59.999999Z");
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        let said = |ms: u64| format_duration(Duration::from_millis(ms));
        assert_eq!(said(0), "0 ms");
        assert_eq!(said(250), "250 ms");
        assert_eq!(said(2000), "2 s");
        assert_eq!(said(8010), "8.01 s");
        assert_eq!(said(42_500), "42.5 s");
        assert_eq!(said(30_000), "30 s");
        assert_eq!(said(300_000), "5 min");
        assert_eq!(said(90_000), "1 min 30 s");
        assert_eq!(said(7_200_000), "2 h");
        assert_eq!(said(5_400_000), "1 h 30 min");
        assert!(
            format_duration(Duration::MAX).contains(" h"),
            "never panics"
        );
    }
}
