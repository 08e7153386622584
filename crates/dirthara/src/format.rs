//! How dirthara writes a duration for people — a step's run time, a wait, a timeout — in
//! every message, event line and report: one formatter, so `2 s` means the same everywhere.

use std::time::Duration;

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
/// assert_eq!(dirthara::format_duration(Duration::from_millis(8010)), "8.01 s");
/// assert_eq!(dirthara::format_duration(Duration::from_secs(90)), "1 min 30 s");
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

#[cfg(test)]
mod tests {
    use super::*;

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
