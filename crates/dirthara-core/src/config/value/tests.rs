use super::*;

#[test]
fn durations_parse() {
    assert_eq!(parse_duration("0"), Some(Duration::ZERO));
    assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
    assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
    assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
    assert_eq!(parse_duration("1h 30m"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_duration("30"), Some(Duration::from_secs(30)));
    assert_eq!(parse_duration("soon"), None);
    assert_eq!(parse_duration("-1s"), None);
    assert_eq!(LockWait::parse("forever"), Some(LockWait::Forever));
    // Too long for any clock: still a duration, for the bound to refuse by name.
    assert_eq!(parse_duration("99999999999999999999h"), Some(Duration::MAX));
    assert_eq!(parse_duration("99999999999999999999"), Some(Duration::MAX));
}

/// Regression (issue 22): `--lock-wait 9223372036854775807` panicked adding it to an
/// instant; `--lock-ttl 99999999999999h` failed at lock time on PostgreSQL and took an
/// already expired lease on MongoDB. Each bound is inclusive and named in the refusal.
#[test]
fn every_duration_setting_is_bounded_naming_the_setting_the_bound_and_the_fix() {
    let origin = Origin::Named("--lock-ttl");
    assert_eq!(LOCK_TTL.read("7d", origin).unwrap(), MAX_LOCK_TTL);
    for text in ["7d 1s", "99999999999999h", "18446743073709551", "1e400s"] {
        let Some(_) = LOCK_TTL.parse(text) else {
            assert_eq!(text, "1e400s", "only that one is no duration");
            continue;
        };
        let error = LOCK_TTL.read(text, origin).unwrap_err().to_string();
        assert!(
            error.starts_with("--lock-ttl: a lease of ")
                && error.contains("longer than the maximum of 7 days")
                && error.contains("Use at most 7d"),
            "{text}: {error}"
        );
    }

    let origin = Origin::Env("DIRTHARA_LOCK_WAIT");
    assert_eq!(
        LOCK_WAIT.read("30d", origin).unwrap(),
        LockWait::For(MAX_WAIT)
    );
    assert_eq!(
        LOCK_WAIT.read("forever", origin).unwrap(),
        LockWait::Forever
    );
    for text in ["30d 1ms", "9223372036854775807", "99999999999999999999h"] {
        let error = LOCK_WAIT.read(text, origin).unwrap_err().to_string();
        assert!(
            error.starts_with("environment variable DIRTHARA_LOCK_WAIT: a wait of ")
                && error.contains("longer than the maximum of 30 days")
                && error.contains("use `forever`"),
            "{text}: {error}"
        );
    }
    let error = LOCK_WAIT.read("9223372036854775807", origin).unwrap_err();
    assert!(error.to_string().contains("more than 100 years"), "{error}");

    let origin = Origin::File {
        file: "dirthara.toml",
        key: "connect_timeout",
    };
    assert_eq!(CONNECT_TIMEOUT.read("30d", origin).unwrap(), MAX_WAIT);
    let error = CONNECT_TIMEOUT.read("31d", origin).unwrap_err().to_string();
    assert!(
        error.starts_with("dirthara.toml: `connect_timeout`: a connect timeout of 1month")
            && error.contains("maximum of 30 days; use at most 30d"),
        "{error}"
    );
}

#[test]
fn the_locking_message_lists_exactly_the_accepted_values() {
    let listed = format!("one of {}", Locking::VALUES.join(", "));
    assert_eq!(LOCKING.expected, listed);
    for text in Locking::VALUES {
        assert!(Locking::parse(text).is_some(), "{text}");
    }
    // The undocumented spellings are gone.
    for text in ["on", "none", "yes"] {
        assert_eq!(Locking::parse(text), None, "{text}");
    }
}

#[test]
fn a_refusal_quotes_strings_as_the_origin_writes_them() {
    let file = Origin::File {
        file: "dirthara.toml",
        key: "lock_wait",
    };
    assert_eq!(
        LOCK_WAIT.read("soon", file).unwrap_err().to_string(),
        "dirthara.toml: `lock_wait`: expected a duration such as \"30s\", 0, or \"forever\""
    );
    assert_eq!(
        LOCK_WAIT
            .read("soon", Origin::Env("DIRTHARA_LOCK_WAIT"))
            .unwrap_err()
            .to_string(),
        "environment variable DIRTHARA_LOCK_WAIT: expected a duration such as 30s, 0, or forever"
    );
}

#[test]
fn a_well_formed_value_can_still_be_refused_naming_its_origin() {
    let error = LOCK_TTL
        .read("4s", Origin::Named("--lock-ttl"))
        .unwrap_err();
    assert_eq!(error.code(), crate::Code::ConfigError);
    assert!(
        error
            .to_string()
            .starts_with("--lock-ttl: a lease of 4s is shorter than the minimum of 5s"),
        "{error}"
    );
    assert_eq!(
        LOCK_TTL.read("5", Origin::Named("--lock-ttl")).unwrap(),
        MIN_LOCK_TTL
    );
    let error = HISTORY_TABLE
        .read("x; DROP TABLE y", Origin::Env("DIRTHARA_HISTORY_TABLE"))
        .unwrap_err();
    assert!(
        error.to_string().starts_with(
            "environment variable DIRTHARA_HISTORY_TABLE: history table name `x; DROP TABLE y`"
        ),
        "{error}"
    );
}

#[test]
fn strict_as_text_takes_the_usual_switch_spellings_in_any_case() {
    for (text, expected) in [("1", true), ("TRUE", true), ("On", true), ("no", false)] {
        assert_eq!(STRICT.parse(text), Some(expected), "{text}");
    }
    assert_eq!(STRICT.parse(""), Some(false));
    assert_eq!(STRICT.parse("maybe"), None);
}

#[test]
fn table_names_must_be_identifiers() {
    assert!(validate_table_name("dirthara_migrations").is_ok());
    assert!(validate_table_name("x; DROP TABLE y").is_err());
    assert!(validate_table_name("1abc").is_err());
}
