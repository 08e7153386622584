//! Connection strings made safe to print: no error path, notice or report shows a password,
//! however the URL spells it (`user:password@`, `?password=`, percent-encoded keys).

/// A URL with its password replaced, safe to print: the `user:password@` part and any
/// `password=` query parameter.
pub fn redact_url(url: &str) -> String {
    let url = redact_query_password(url);
    let url = url.as_str();
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let redacted = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None => return url.to_string(),
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..scheme_end + 3]);
    out.push_str(&redacted);
    out.push_str(&rest[at..]);
    out
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
    }
}
