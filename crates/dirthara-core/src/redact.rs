//! Connection strings made safe to print: no error path, notice or report shows a password,
//! however the URL spells it (`user:password@`, `?password=`, percent-encoded keys), and
//! whether or not it is well-formed.
//!
//! Redaction happens before anything parses the URL, and it never trusts the URL to be
//! well-formed: `postgres://u:PASSWORD` (the host forgotten) has no `@`, and a bare secret
//! pasted where the URL belongs has no scheme at all. What does not read as a URL is never
//! echoed whole.

use crate::kind::is_server_scheme;

/// What is shown in place of a password, or of a string that is not a URL.
const MASK: &str = "***";

/// A URL with its password replaced, safe to print: the `user:password@` part, any
/// `password=` query parameter, and whatever in a malformed URL might be a password.
///
/// ```
/// use dirthara_core::redact_url;
/// assert_eq!(redact_url("postgres://app:pw@db/prod"), "postgres://app:***@db/prod");
/// assert_eq!(redact_url("postgres://db:5432/prod"), "postgres://db:5432/prod");
/// // Malformed: no host, so `:PASSWORD` cannot be a port.
/// assert_eq!(redact_url("postgres://u:PASSWORD"), "postgres://u:***");
/// // Not a URL at all (a password pasted as one): nothing of it is shown.
/// assert_eq!(redact_url("hunter2"), "***");
/// ```
pub fn redact_url(url: &str) -> String {
    let url = redact_query_password(url);
    let url = url.as_str();
    let Some(scheme_end) = scheme_end(url) else {
        return MASK.to_string();
    };
    let Some(rest) = url[scheme_end..].strip_prefix("//") else {
        return redact_opaque(url, scheme_end);
    };
    // A scheme no database of ours has may be no scheme at all: `SECRET://` is a secret
    // pasted where the URL belongs as surely as `SECRET` is (the long fuzz run found it).
    if !is_database_scheme(&url[..scheme_end - 1]) {
        return MASK.to_string();
    }
    let prefix = &url[..scheme_end + 2];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => match authority[..at].split_once(':') {
            Some((user, _password)) => format!("{prefix}{user}:{MASK}{}", &rest[at..]),
            None => url.to_string(),
        },
        // No `user:password@`: a `:` can only introduce ports. Anything else after it may be
        // a password whose host was forgotten, and so may everything after it.
        None => match first_non_port(authority) {
            Some(colon) => format!("{prefix}{}:{MASK}", &authority[..colon]),
            None => url.to_string(),
        },
    }
}

/// Where a URL's `scheme:` ends (just after the `:`), if it starts with one (RFC 3986:
/// a letter, then letters, digits, `+`, `-` or `.`).
fn scheme_end(url: &str) -> Option<usize> {
    let colon = url.find(':')?;
    let scheme = &url[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(colon + 1)
}

/// `scheme:rest` without `//`: SQLite's `sqlite:path` (and `sqlite::memory:`) carry no
/// password, so they are shown. Another database's scheme written so is no URL its driver
/// reads: only the scheme is shown. Anything else is most likely no URL at all (a secret
/// with a `:` in it), so nothing of it is.
fn redact_opaque(url: &str, scheme_end: usize) -> String {
    let scheme = url[..scheme_end - 1].to_ascii_lowercase();
    if scheme == "sqlite" {
        url.to_string()
    } else if is_server_scheme(&scheme) {
        format!("{}{MASK}", &url[..scheme_end])
    } else {
        MASK.to_string()
    }
}

/// A scheme a database URL of ours starts with, in any case.
fn is_database_scheme(scheme: &str) -> bool {
    let scheme = scheme.to_ascii_lowercase();
    scheme == "sqlite" || is_server_scheme(&scheme)
}

/// In an authority without `@` (`host:port`, `h1:1,h2:2`, `[::1]:5432`), the first `:` that
/// is not followed by a port number (at most 5 digits, up to the next `,`), if any.
fn first_non_port(authority: &str) -> Option<usize> {
    let mut offset = 0;
    for host in authority.split(',') {
        // An IPv6 literal's colons are inside its brackets.
        let after_literal = match host.strip_prefix('[') {
            Some(inner) => inner.find(']').map_or(host.len(), |i| i + 2),
            None => 0,
        };
        if let Some(colon) = host[after_literal..].find(':') {
            let colon = after_literal + colon;
            let port = &host[colon + 1..];
            if port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
                return Some(offset + colon);
            }
        }
        offset += host.len() + 1;
    }
    None
}

/// `text` (a driver's or server's message about `url`) with every part of `url` that may be
/// a password replaced: drivers quote what they could not parse (MongoDB's "invalid server
/// address u:PASSWORD: ... got PASSWORD"), and servers quote names (a database name that was
/// a secret in a malformed URL).
pub fn redact_secrets_of(url: &str, text: &str) -> String {
    let mut secrets = secrets_of(url);
    let decoded: Vec<String> = secrets.iter().map(|s| percent_decoded(s)).collect();
    secrets.extend(decoded);
    // The longest first, so that a secret containing another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    let mut out = text.to_string();
    for secret in secrets.iter().filter(|s| !s.is_empty() && *s != MASK) {
        out = out.replace(secret.as_str(), MASK);
    }
    out
}

/// The parts of `url` that [`redact_url`] hides.
fn secrets_of(url: &str) -> Vec<String> {
    let mut secrets: Vec<String> = url
        .split_once('?')
        .into_iter()
        .flat_map(|(_, query)| query.split('&'))
        .filter_map(|param| param.split_once('='))
        .filter(|(key, _)| {
            let key = percent_decoded(key);
            key.eq_ignore_ascii_case("password") || key.eq_ignore_ascii_case("sslpassword")
        })
        .map(|(_, value)| value.to_string())
        .collect();
    let Some(scheme_end) = scheme_end(url) else {
        secrets.push(url.to_string());
        return secrets;
    };
    let Some(rest) = url[scheme_end..].strip_prefix("//") else {
        if redact_opaque(url, scheme_end) != url {
            secrets.push(url[scheme_end..].to_string());
        }
        return secrets;
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => {
            if let Some((_, password)) = authority[..at].split_once(':') {
                secrets.push(password.to_string());
            }
        }
        None => {
            if let Some(colon) = first_non_port(authority) {
                // What follows the `:`, as far as each reading of the URL may take it.
                let after = &rest[colon + 1..];
                secrets.push(after.to_string());
                secrets.push(authority[colon + 1..].to_string());
                if let Some(at) = after.rfind('@') {
                    secrets.push(after[..at].to_string());
                }
            }
        }
    }
    secrets
}

fn redact_query_password(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            // Drivers percent-decode the key (`passwor%64=` is a password to sqlx), so the
            // check must too.
            Some((key, _))
                if percent_decoded(key).eq_ignore_ascii_case("password")
                    || percent_decoded(key).eq_ignore_ascii_case("sslpassword") =>
            {
                format!("{key}=***")
            }
            _ => param.to_string(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with every URL in it redacted (see [`redact_url`]): for messages that may quote
/// a URL, such as a parser's error showing the offending line.
pub(crate) fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = rest[..at]
            .char_indices()
            .rev()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .map_or(rest.len(), |i| at + i);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_printed() {
        assert_eq!(
            redact_url("postgres://app:s3cr%40t@db.example:5432/prod?sslmode=require"),
            "postgres://app:***@db.example:5432/prod?sslmode=require"
        );
        assert_eq!(
            redact_url("mysql://root@localhost/x"),
            "mysql://root@localhost/x"
        );
        assert_eq!(redact_url("sqlite:demo.db"), "sqlite:demo.db");
        assert_eq!(
            redact_url("postgres://u:p@h/db?x=a@b"),
            "postgres://u:***@h/db?x=a@b"
        );
        assert_eq!(redact_url("sqlite::memory:"), "sqlite::memory:");
        assert_eq!(
            redact_url("postgres://h1:5432,h2:5433/db"),
            "postgres://h1:5432,h2:5433/db"
        );
        assert_eq!(
            redact_url("postgres://[::1]:5432/db"),
            "postgres://[::1]:5432/db"
        );
    }

    #[test]
    fn a_drivers_message_never_quotes_a_password_back() {
        let said = "invalid server address u:PASSWORD: the port must be an integer, got PASSWORD";
        let shown = redact_secrets_of("mongodb://u:PASSWORD", said);
        assert_eq!(
            shown,
            "invalid server address u:***: the port must be an integer, got ***"
        );
        for (url, said) in [
            (
                "postgres://u:PASS/WORD@h/db",
                "bad password PASS/WORD and PASS",
            ),
            ("postgres://app:s3cr%40t@h/db", "rejected s3cr@t"),
            ("hunter2", "database \"hunter2\" does not exist"),
            ("postgres:hunter2", "database \"hunter2\" does not exist"),
            (
                "mysql://h/db?password=hunter2&x=1",
                "password hunter2 refused",
            ),
        ] {
            let shown = redact_secrets_of(url, said);
            for secret in ["PASS", "s3cr", "hunter2"] {
                assert!(!shown.contains(secret), "{url}: {shown}");
            }
        }
        // A well-formed URL's message keeps its host and database.
        assert_eq!(
            redact_secrets_of("postgres://app:pw@db/prod", "database \"prod\" on db"),
            "database \"prod\" on db"
        );
    }

    #[test]
    fn a_secret_before_a_double_slash_is_not_shown_as_a_scheme() {
        // Found by the long fuzz run: `SECRET://` read as a URL of scheme `SECRET`.
        assert_eq!(redact_url("SECRET://"), MASK);
        assert_eq!(redact_url("hunter2://x"), MASK);
        assert_eq!(redact_url("x-db://u:SECRET@h/db"), MASK);
        assert_eq!(
            redact_url("POSTGRES://u:SECRET@h/db"),
            "POSTGRES://u:***@h/db"
        );
        assert_eq!(
            redact_url("mongodb+srv://c.example/db"),
            "mongodb+srv://c.example/db"
        );
    }

    #[test]
    fn a_malformed_url_never_shows_what_may_be_a_password() {
        for (url, shown) in [
            // The host forgotten: `PASSWORD` would be read as a port.
            ("postgres://u:PASSWORD", "postgres://u:***"),
            ("mysql://root:PASSWORD/db", "mysql://root:***"),
            ("mongodb://u:PASSWORD", "mongodb://u:***"),
            ("postgres://u:PASSWORD?sslmode=require", "postgres://u:***"),
            // An unencoded `/`, `?` or `#` in the password ends the authority early.
            ("postgres://u:PASS/WORD@h/db", "postgres://u:***"),
            ("postgres://u:PASS?WORD@h/db", "postgres://u:***"),
            ("postgres://u:PASS#WORD@h/db", "postgres://u:***"),
            ("postgres://h1:5432,u:PASSWORD", "postgres://h1:5432,u:***"),
            ("postgres://u:1234567/db", "postgres://u:***"),
            // A secret given as the URL: no scheme, or none a driver reads.
            ("PASSWORD", "***"),
            ("PASSWORD with spaces", "***"),
            ("9PASSWORD:x", "***"),
            ("pass:PASSWORD", "***"),
            ("MySQL:PASSWORD", "MySQL:***"),
            ("postgres:u:PASSWORD@h", "postgres:***"),
            ("", "***"),
        ] {
            let redacted = redact_url(url);
            assert_eq!(redacted, shown, "{url}");
            assert!(!redacted.contains("PASSWORD"), "{url} -> {redacted}");
            assert_eq!(redact_url(&redacted), redacted, "stable: {url}");
        }
    }
}
