//! Hostile configuration, fuzzed: `dirthara.toml` and environment parsing never panic, a
//! history table name that is not a plain identifier is refused (never spliced into SQL),
//! and no password in a URL survives redaction or a config error message.
//!
//! Cases per target: `DIRTHARA_FUZZ_CASES` (default 1000); `fuzz/run.sh` runs them long.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use dirthara::config::{MAX_LOCK_TTL, MAX_WAIT};
use dirthara::redact_url;
use dirthara::Config;
use dirthara_test_kit::fuzz::{cases, fuzz, Bounds, CountingAllocator};
use proptest::prelude::*;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const MIB: usize = 1024 * 1024;

/// Parsing a setting is small work: a second or a few MiB on one input is a bug.
fn bounds() -> Bounds {
    Bounds::new(Duration::from_secs(1), 16 * MIB)
}

/// What a history table name may be once validated: nothing a SQL string could hide in.
fn plain_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 48
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn table_name() -> impl Strategy<Value = String> {
    const PIECES: &[&str] = &[
        "t",
        "_",
        "1",
        "\"",
        "'",
        "`",
        ";",
        " ",
        "--",
        "/*",
        "DROP TABLE x",
        "\0",
        "\n",
        "é",
        "\\",
        "$$",
        ".",
        "[",
        "]",
    ];
    prop::collection::vec(prop::sample::select(PIECES), 0..12).prop_map(|p| p.concat())
}

#[test]
fn a_history_table_that_is_not_a_plain_identifier_is_refused_from_file_and_env() {
    fuzz(
        "history table",
        cases(2000),
        bounds(),
        table_name(),
        |name| {
            // Refused as it is read, naming where it was written; accepted, it stays valid.
            let mut from_env = Config::with_url("sqlite::memory:");
            match from_env.merge_env([("DIRTHARA_HISTORY_TABLE".to_string(), name.clone())]) {
                Ok(()) => {
                    assert!(plain_identifier(&name), "{name:?}");
                    assert_eq!(from_env.history_table, name);
                    from_env.validate().unwrap();
                }
                Err(error) => {
                    assert!(!plain_identifier(&name), "{name:?}: {error}");
                    let message = error.to_string();
                    assert!(
                        message.starts_with("environment variable DIRTHARA_HISTORY_TABLE: "),
                        "{message}"
                    );
                }
            }

            let mut from_file = Config::with_url("sqlite::memory:");
            let toml = format!("history_table = {}", toml_string(&name));
            match from_file.merge_toml(&toml, "t.toml", Path::new("")) {
                Ok(()) => {
                    assert!(plain_identifier(&name), "{name:?}");
                    assert_eq!(from_file.history_table, name);
                    from_file.validate().unwrap();
                }
                Err(error) => {
                    assert!(!plain_identifier(&name), "{name:?}: {error}");
                    let message = error.to_string();
                    assert!(
                        message.starts_with("t.toml: `history_table`: "),
                        "{message}"
                    );
                }
            }

            // Set in code, past every parser, it is refused before any database is touched.
            let mut in_code = Config::with_url("sqlite::memory:");
            in_code.history_table = name.clone();
            assert_eq!(
                in_code.validate().is_ok(),
                plain_identifier(&name),
                "{name:?}"
            );
        },
    );
}

/// A TOML basic string holding `s` exactly.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn tomlish() -> impl Strategy<Value = String> {
    const PIECES: &[&str] = &[
        "directories = ",
        "[",
        "]",
        "{",
        "}",
        "\"db\"",
        "path = \"x\"",
        "format = \"goose\"",
        "format = \"nope\"",
        "locking = ",
        "\"lease\"",
        "\"bogus\"",
        "true",
        "lock_wait = ",
        "lock_ttl = ",
        "\"30s\"",
        "\"1e400s\"",
        "\"-1s\"",
        "\"0\"",
        "18446744073709551616",
        "connect_timeout = ",
        "history_table = ",
        "\"x; DROP\"",
        "[connections]",
        "default = \"sqlite:x.db\"",
        "[init_sql]",
        "strict = ",
        "unknown = 1",
        "\n",
        " ",
        "=",
        ",",
        "#",
        "'''",
        "\"\"\"",
        "\0",
        "é",
        "1979-05-27T07:32:00Z",
        "inf",
        "nan",
    ];
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(PIECES).prop_map(str::to_string),
            1 => any::<String>(),
        ],
        0..30,
    )
    .prop_map(|p| p.concat())
}

#[test]
fn config_files_and_environment_never_panic() {
    fuzz("config toml", cases(2000), bounds(), tomlish(), |text| {
        let mut config = Config::default();
        if let Err(error) = config.merge_toml(&text, "dirthara.toml", Path::new("/base")) {
            assert!(error.to_string().starts_with("dirthara.toml"), "{error}");
        } else {
            let _ = config.validate();
        }
    });
    const KEYS: &[&str] = &[
        "DATABASE_URL",
        "DIRTHARA_DIRECTORIES",
        "DIRTHARA_LOCKING",
        "DIRTHARA_LOCK_WAIT",
        "DIRTHARA_LOCK_TTL",
        "DIRTHARA_CONNECT_TIMEOUT",
        "DIRTHARA_HISTORY_TABLE",
        "DIRTHARA_HISTORY_CONNECTION",
        "DIRTHARA_STRICT",
        "DIRTHARA_CONNECTION_",
        "DIRTHARA_INIT_SQL_",
        "DIRTHARA_CONNECTION_x\u{1}",
        "OTHER",
    ];
    let values = prop_oneof![
        prop::sample::select(
            &[
                "30s",
                "1e400s",
                "NaNs",
                "-5m",
                "forever",
                "0",
                "lease",
                "",
                " ",
                "true",
                "maybe",
                "1.5h",
                "99999999999999999999h",
                ",,,",
                "\0",
            ][..]
        )
        .prop_map(str::to_string),
        any::<String>(),
    ];
    let vars = prop::collection::vec((prop::sample::select(KEYS), values), 0..6);
    fuzz("config env", cases(2000), bounds(), vars, |vars| {
        let mut config = Config::default();
        let vars = vars.into_iter().map(|(k, v)| (k.to_string(), v));
        if config.merge_env(vars).is_ok() {
            let _ = config.validate();
        }
    });
}

/// A URL with `SECRET...` as its password, in every place a password can be written.
fn url_with_password() -> impl Strategy<Value = (String, String)> {
    const SCHEMES: &[&str] = &[
        "postgres",
        "postgresql",
        "mysql",
        "mariadb",
        "mongodb",
        "mongodb+srv",
        "POSTGRES",
    ];
    // What RFC 3986 allows in userinfo unencoded, plus `@` (drivers split at the last one),
    // and percent-encoded bytes.
    let password_tail = prop::collection::vec(
        prop_oneof![prop::sample::select(
            &[
                "a", "Z", "9", "-", ".", "_", "~", "!", "$", "&", "'", "(", ")", "*", "+", ",",
                ";", "=", ":", "@", "%40", "%2F", "%3A", "%25", "%3F", "%23",
            ][..]
        ),],
        0..8,
    )
    .prop_map(|p| p.concat());
    const USERS: &[&str] = &["u", "", "app", "a%40b", "user.name"];
    const HOSTS: &[&str] = &[
        "127.0.0.1:1",
        "db",
        "[::1]:5432",
        "h1:1,h2:2",
        "db.example",
        "",
    ];
    const QUERY_KEYS: &[&str] = &[
        "password",
        "PASSWORD",
        "Password",
        "sslpassword",
        "passwor%64",
        "pass%77ord",
        "%70assword",
    ];
    (
        prop::sample::select(SCHEMES),
        prop::sample::select(USERS),
        password_tail.clone(),
        prop::sample::select(HOSTS),
        prop::option::of(prop::sample::select(QUERY_KEYS)),
        password_tail,
        any::<bool>(),
    )
        .prop_map(|(scheme, user, tail, host, key, tail2, in_userinfo)| {
            let secret = format!("SECRET{tail}");
            let mut url = if in_userinfo || key.is_none() {
                format!("{scheme}://{user}:{secret}@{host}/db")
            } else {
                format!("{scheme}://{user}@{host}/db")
            };
            if let Some(key) = key {
                // Query values: `&` and `#` would end the value, so they are encoded there.
                let value = format!("SECRET{}", tail2.replace('&', "%26").replace('#', "%23"));
                url.push_str(&format!("?sslmode=require&{key}={value}&x=1"));
            }
            (url, secret)
        })
}

/// A malformed URL or a bare secret, with `SECRET...` where a password would be: the host
/// forgotten (`postgres://u:SECRET`), a password with an unencoded `/`, `?` or `#` that ends
/// the authority early, or a secret pasted where the URL belongs.
fn malformed_url_with_password() -> impl Strategy<Value = String> {
    const SCHEMES: &[&str] = &[
        "postgres", "mysql", "mariadb", "mongodb", "POSTGRES", "x-db",
    ];
    let tail = prop::collection::vec(
        prop::sample::select(
            &[
                "a", "9", "-", ".", "_", "~", "!", "$", "&", "'", "(", "*", "+", ",", ";", "=",
                ":", "%40", "%2F", "/", "?", "#", "[", "]", " ", "é",
            ][..],
        ),
        0..8,
    )
    .prop_map(|p| p.concat());
    const AFTER: &[&str] = &[
        "",
        "/db",
        "?sslmode=require",
        "@",
        "@h/db",
        "/x@h/db",
        ":5432",
    ];
    const USERS: &[&str] = &["u", "", "h1:1,u"];
    prop_oneof![
        (
            prop::sample::select(SCHEMES),
            prop::sample::select(USERS),
            tail.clone(),
            prop::sample::select(AFTER),
        )
            .prop_map(|(scheme, user, tail, after)| format!(
                "{scheme}://{user}:SECRET{tail}{after}"
            )),
        tail.clone().prop_map(|tail| format!("SECRET{tail}")),
        (prop::sample::select(SCHEMES), tail)
            .prop_map(|(scheme, tail)| format!("{scheme}:SECRET{tail}")),
    ]
}

#[test]
fn no_password_survives_redaction_of_a_malformed_url() {
    fuzz(
        "redact_url malformed",
        cases(5000),
        bounds(),
        malformed_url_with_password(),
        |url| {
            let redacted = redact_url(&url);
            assert!(!redacted.contains("SECRET"), "{url} -> {redacted}");
            assert_eq!(redact_url(&redacted), redacted);
        },
    );
}

#[test]
fn no_password_survives_url_redaction() {
    fuzz(
        "redact_url",
        cases(5000),
        bounds(),
        url_with_password(),
        |(url, _)| {
            let redacted = redact_url(&url);
            assert!(!redacted.contains("SECRET"), "{url} -> {redacted}");
            // Redaction is stable: redacting again changes nothing.
            assert_eq!(redact_url(&redacted), redacted);
        },
    );
}

#[test]
fn redaction_never_panics_on_arbitrary_text() {
    let strategy = prop_oneof![
        any::<String>(),
        prop::collection::vec(
            prop::sample::select(
                &["://", ":", "@", "/", "?", "#", "&", "=", "password", "é", "%"][..]
            ),
            0..16
        )
        .prop_map(|p| p.concat()),
    ];
    fuzz("redact_url text", cases(3000), bounds(), strategy, |text| {
        let _ = redact_url(&text);
    });
}

#[test]
fn a_config_error_never_echoes_a_password_from_the_file() {
    // A TOML syntax error shows the offending line; a URL on that line is a password leak.
    for text in [
        "[connections]\ndefault = \"postgres://u:SECRET@h/db\" x\n",
        "[connections]\ndefault = \"postgres://u:SECRET@h/db\n",
        "[connections]\ndefault = 'mysql://root:SECRET@h/db' = 1\n",
        "[connections]\ndefault = \"mongodb://u:SECRET@h/db\"\ndefault = \"x\"\n",
        "[connections]\ndefault = \"postgres://u:SECRET@h/db\"\n[connections]\n",
    ] {
        let error = Config::default()
            .merge_toml(text, "dirthara.toml", Path::new(""))
            .unwrap_err()
            .to_string();
        assert!(!error.contains("SECRET"), "{text:?} -> {error}");
        assert!(error.starts_with("dirthara.toml"), "{error}");
    }
    // Found by the long run: a multi-byte character right before `://` in the quoted line.
    let error = Config::default()
        .merge_toml("\u{1b164}://", "dirthara.toml", Path::new(""))
        .unwrap_err();
    assert!(error.to_string().starts_with("dirthara.toml"), "{error}");
}

/// A duration as someone might write one, or mistype one: huge digit runs, fractions,
/// exponents, every unit humantime knows and some it does not, several parts, signs.
fn duration_text() -> impl Strategy<Value = String> {
    const UNITS: &[&str] = &[
        "", "ns", "us", "ms", "s", "sec", "m", "min", "h", "hr", "d", "day", "days", "w", "week",
        "M", "month", "y", "year", "years", "e400s", "x", " s", "S",
    ];
    const WORDS: &[&str] = &[
        "forever", "inf", "infinite", "off", "none", "0", "-1s", "NaNs", "",
    ];
    let number = prop_oneof![
        (0u64..100_000).prop_map(|n| n.to_string()),
        Just(u64::MAX.to_string()),
        Just((u64::MAX / 1000 - 1).to_string()),
        Just("9223372036854775807".to_string()),
        Just("18446743073709551".to_string()),
        "[0-9]{15,40}",
        "[0-9]{1,5}\\.[0-9]{1,12}",
    ];
    let part = (number, prop::sample::select(UNITS)).prop_map(|(n, u)| format!("{n}{u}"));
    prop_oneof![
        4 => prop::collection::vec(part, 1..4).prop_map(|parts| parts.join(" ")),
        1 => prop::sample::select(WORDS).prop_map(str::to_string),
        1 => any::<String>(),
    ]
}

/// Every duration setting parsed from any text, by file and by environment, either is refused
/// as a configuration error naming the setting, or holds a value within its documented bound,
/// which every clock can add to now without overflowing (issue 22: `--lock-wait
/// 9223372036854775807` panicked, a 99999999999999h lease failed only at lock time, and a
/// MongoDB lease of 18446743073709551 s was taken already expired).
#[test]
fn every_duration_setting_is_bounded_or_refused_by_name() {
    const SETTINGS: &[(&str, &str)] = &[
        ("lock_wait", "DIRTHARA_LOCK_WAIT"),
        ("lock_ttl", "DIRTHARA_LOCK_TTL"),
        ("connect_timeout", "DIRTHARA_CONNECT_TIMEOUT"),
        ("table_lock_timeout", "DIRTHARA_TABLE_LOCK_TIMEOUT"),
        ("table_lock_retry_for", "DIRTHARA_TABLE_LOCK_RETRY_FOR"),
    ];
    let strategy = (
        prop::sample::select(SETTINGS),
        duration_text(),
        any::<bool>(),
    );
    fuzz(
        "durations",
        cases(5000),
        bounds(),
        strategy,
        |((key, variable), text, by_file)| {
            let mut config = Config::default();
            config
                .connections
                .insert("default".into(), "sqlite:fuzz.db".into());
            let merged = if by_file {
                let toml = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
                    format!("{key} = {text}\n")
                } else {
                    format!("{key} = {}\n", toml_string(&text))
                };
                config.merge_toml(&toml, "dirthara.toml", Path::new("/base"))
            } else {
                config.merge_env([(variable.to_string(), text.clone())])
            };
            let merged = merged.and_then(|()| config.validate());
            match merged {
                Err(error) => {
                    let message = error.to_string();
                    let named = if by_file { key } else { variable };
                    assert!(message.contains(named), "{text:?} -> {message}");
                }
                Ok(()) => {
                    let values = [
                        match config.lock_wait {
                            Some(dirthara::LockWait::For(wait)) => Some((wait, MAX_WAIT)),
                            _ => None,
                        },
                        Some((config.lock_ttl, MAX_LOCK_TTL)),
                        Some((config.connect_timeout, MAX_WAIT)),
                        config.table_lock_timeout.map(|t| (t, MAX_WAIT)),
                        Some((config.table_lock_retry_for, MAX_WAIT)),
                    ];
                    for (value, bound) in values.into_iter().flatten() {
                        assert!(value <= bound, "{key} {text:?} -> {value:?}");
                        assert!(Instant::now().checked_add(value).is_some());
                        assert!(SystemTime::now().checked_add(value).is_some());
                    }
                    assert!(config.lock_ttl >= dirthara::MIN_LOCK_TTL);
                }
            }
        },
    );
}
