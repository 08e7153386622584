//! Migration file names: versions, names, and the role a file plays.

use crate::vocabulary::StepFormat;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Up,
    Down,
    /// `<version>_<name>.sql`: up only, irreversible.
    UpOnly,
}

/// A file name that parsed as a migration step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedName {
    pub version: i64,
    pub name: String,
    pub role: Role,
    pub format: StepFormat,
}

pub(crate) const EXPECTED: &str =
    "expected `<version>_<name>.up.sql`, `<version>_<name>.down.sql` or \
                                   `<version>_<name>.sql` (`.json` for MongoDB), e.g. \
                                   `20240101120000_create_users.up.sql`";

pub(crate) fn format_of(file_name: &str) -> Option<StepFormat> {
    if file_name.ends_with(".sql") {
        Some(StepFormat::Sql)
    } else if file_name.ends_with(".json") {
        Some(StepFormat::MongoCommands)
    } else {
        None
    }
}

/// `<version>_<name>.up.sql`, `.down.sql`, `.sql` (and `.json`): dirthara, sqlx and
/// golang-migrate. `Err` is the reason the name does not parse.
pub(crate) fn parse_plain(file_name: &str) -> Result<ParsedName, String> {
    let format = format_of(file_name).unwrap_or(StepFormat::Sql);
    let stem = file_name
        .strip_suffix(".sql")
        .or_else(|| file_name.strip_suffix(".json"))
        .unwrap_or(file_name);
    let (stem, role) = if let Some(stem) = stem.strip_suffix(".up") {
        (stem, Role::Up)
    } else if let Some(stem) = stem.strip_suffix(".down") {
        (stem, Role::Down)
    } else {
        (stem, Role::UpOnly)
    };
    let Some((version, name)) = stem.split_once('_') else {
        return Err(format!(
            "the name does not parse as a migration: {EXPECTED}"
        ));
    };
    let version = parse_version(version).map_err(|reason| format!("{reason}: {EXPECTED}"))?;
    check_name(name).map_err(|reason| format!("{reason}: {EXPECTED}"))?;
    Ok(ParsedName {
        version,
        name: name.to_string(),
        role,
        format,
    })
}

/// A version: decimal digits, 0 ..= 2^63-1 (leading zeros allowed: `0002`).
pub(crate) fn parse_version(digits: &str) -> Result<i64, String> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("the version `{digits}` is not a number"));
    }
    digits.parse().map_err(|_| {
        format!(
            "the version `{digits}` is larger than 9223372036854775807 (2^63-1); use a smaller one"
        )
    })
}

/// Whether a name that was not loaded still looks like a migration (`<digits>_...`), so that
/// skipping it deserves a warning rather than silence.
pub(crate) fn looks_like_migration(file_name: &str) -> bool {
    file_name
        .split_once('_')
        .is_some_and(|(v, _)| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
}

/// Migration names become part of file names and history records: keep them to a safe
/// alphabet. Dots are allowed (`0002_1.7.0_schema.up.sql` is named `1.7.0_schema`).
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("the migration name is empty".into());
    }
    if name.len() > 200 {
        return Err("the migration name is longer than 200 characters".into());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(format!(
            "the migration name `{name}` contains `{bad}`; use letters, digits, `_`, `-` and `.`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_parse_into_version_name_and_role() {
        let f = parse_plain("20240101_create_users.up.sql").unwrap();
        assert_eq!(
            (f.version, f.name.as_str(), f.role),
            (20240101, "create_users", Role::Up)
        );
        assert_eq!(parse_plain("2_x.down.sql").unwrap().role, Role::Down);
        assert_eq!(parse_plain("3_seed-data.sql").unwrap().role, Role::UpOnly);
        let dotted = parse_plain("0002_1.7.0_schema.up.sql").unwrap();
        assert_eq!((dotted.version, dotted.name.as_str()), (2, "1.7.0_schema"));
        assert_eq!(parse_plain("0_initial.up.sql").unwrap().version, 0);
        assert_eq!(
            parse_plain("9223372036854775807_max.sql").unwrap().version,
            i64::MAX
        );
        assert_eq!(
            parse_plain("5_users.up.json").unwrap().format,
            StepFormat::MongoCommands
        );
    }

    #[test]
    fn bad_plain_names_are_refused_with_the_reason() {
        for (name, needle) in [
            ("create_users.sql", "not a number"),
            ("1create.sql", "does not parse"),
            ("9223372036854775808_big.sql", "larger than"),
            ("1_.up.sql", "empty"),
            ("1_has space.sql", "contains ` `"),
            ("-1_neg.sql", "not a number"),
        ] {
            let err = parse_plain(name).unwrap_err();
            assert!(err.contains(needle), "{name}: {err}");
            assert!(
                err.contains("expected `<version>_<name>.up.sql`"),
                "{name}: {err}"
            );
        }
    }
}
