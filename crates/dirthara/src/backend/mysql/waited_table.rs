//! The table a MySQL statement needs a metadata lock on, read from its text. Where the server
//! does not say which metadata lock a session waits for (MariaDB without the
//! `metadata_lock_info` plugin), the statement it runs — as the process list shows it —
//! names the table: `ALTER TABLE users ...`, `CREATE INDEX i ON users ...`.
//!
//! Pure: no I/O.

/// `(schema, table)` as the statement names them, quotes removed; `None` for a statement
/// that names no one table this way.
pub(super) fn waited_table(statement: &str) -> Option<(Option<String>, String)> {
    let tokens = tokens(statement);
    let mut at = 0;
    let word = |at: usize| match tokens.get(at) {
        Some(Token::Word(w)) => w.to_ascii_uppercase(),
        _ => String::new(),
    };
    // Skips the words in `optional`, in any order, from `at`.
    let skip = |at: &mut usize, optional: &[&str]| {
        while optional.contains(&word(*at).as_str()) {
            *at += 1;
        }
    };
    // After `IF [NOT] EXISTS`.
    let skip_if = |at: &mut usize| {
        if word(*at) == "IF" {
            *at += 1;
            skip(at, &["NOT", "EXISTS"]);
        }
    };
    // The name after the first unquoted `ON` (an index's or a trigger's table).
    let after_on = |at: usize| {
        let on = (at..tokens.len()).find(|&i| word(i) == "ON")?;
        name_at(&tokens, on + 1)
    };
    let first = word(at);
    at += 1;
    match first.as_str() {
        "ALTER" => {
            skip(&mut at, &["ONLINE", "IGNORE"]);
            (word(at) == "TABLE").then_some(())?;
            at += 1;
            skip_if(&mut at);
            name_at(&tokens, at)
        }
        "DROP" => {
            skip(&mut at, &["TEMPORARY"]);
            match word(at).as_str() {
                "TABLE" => {
                    at += 1;
                    skip_if(&mut at);
                    name_at(&tokens, at)
                }
                "INDEX" => after_on(at),
                _ => None,
            }
        }
        "TRUNCATE" => {
            skip(&mut at, &["TABLE"]);
            name_at(&tokens, at)
        }
        "RENAME" | "LOCK" => {
            (matches!(word(at).as_str(), "TABLE" | "TABLES")).then_some(())?;
            name_at(&tokens, at + 1)
        }
        "CREATE" => {
            skip(
                &mut at,
                &[
                    "OR", "REPLACE", "UNIQUE", "FULLTEXT", "SPATIAL", "ONLINE", "OFFLINE",
                ],
            );
            match word(at).as_str() {
                "INDEX" | "TRIGGER" => after_on(at),
                _ => None,
            }
        }
        "OPTIMIZE" | "ANALYZE" | "REPAIR" | "CHECK" => {
            skip(&mut at, &["NO_WRITE_TO_BINLOG", "LOCAL"]);
            (word(at) == "TABLE").then_some(())?;
            name_at(&tokens, at + 1)
        }
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// An unquoted word.
    Word(String),
    /// A `` `quoted` `` identifier, quotes removed.
    Quoted(String),
    Dot,
    /// Anything else: punctuation, a string literal.
    Other,
}

/// `schema.table` or `table` at `at`.
fn name_at(tokens: &[Token], at: usize) -> Option<(Option<String>, String)> {
    let ident = |t: Option<&Token>| match t {
        Some(Token::Word(w) | Token::Quoted(w)) => Some(w.clone()),
        _ => None,
    };
    let first = ident(tokens.get(at))?;
    match (tokens.get(at + 1), ident(tokens.get(at + 2))) {
        (Some(Token::Dot), Some(table)) => Some((Some(first), table)),
        _ => Some((None, first)),
    }
}

/// The statement's tokens, comments and spaces left out.
fn tokens(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if rest.starts_with("--") || c == '#' {
            rest = rest.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else if c == '`' {
            // A doubled backquote is one inside the name.
            let mut name = String::new();
            let mut chars = rest[1..].char_indices();
            let mut end = rest.len();
            while let Some((i, ch)) = chars.next() {
                if ch == '`' {
                    if rest[1 + i + 1..].starts_with('`') {
                        name.push('`');
                        chars.next();
                        continue;
                    }
                    end = 1 + i + 1;
                    break;
                }
                name.push(ch);
            }
            tokens.push(Token::Quoted(name));
            rest = &rest[end..];
        } else if c == '\'' || c == '"' {
            let end = rest[1..].find(c).map_or(rest.len(), |i| i + 2);
            tokens.push(Token::Other);
            rest = &rest[end..];
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let end = rest
                .find(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == '$'))
                .unwrap_or(rest.len());
            tokens.push(Token::Word(rest[..end].to_string()));
            rest = &rest[end..];
        } else {
            tokens.push(if c == '.' { Token::Dot } else { Token::Other });
            rest = &rest[c.len_utf8()..];
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(statement: &str) -> Option<String> {
        waited_table(statement).map(|(schema, name)| match schema {
            Some(schema) => format!("{schema}.{name}"),
            None => name,
        })
    }

    #[test]
    fn the_table_a_statement_locks_is_read_from_its_text() {
        let cases = [
            ("ALTER TABLE users ADD COLUMN c INT", "users"),
            (
                "alter online ignore table `app`.`us``ers` add c int",
                "app.us`ers",
            ),
            (
                "-- why\n/* how */ ALTER TABLE IF EXISTS app.users DROP c",
                "app.users",
            ),
            ("DROP TABLE IF EXISTS users, orders", "users"),
            ("DROP TEMPORARY TABLE t", "t"),
            ("DROP INDEX i ON users", "users"),
            ("TRUNCATE users", "users"),
            ("TRUNCATE TABLE `users`", "users"),
            ("RENAME TABLE users TO people", "users"),
            (
                "CREATE UNIQUE INDEX i USING BTREE ON users (email)",
                "users",
            ),
            (
                "CREATE OR REPLACE INDEX IF NOT EXISTS i ON app.users (a)",
                "app.users",
            ),
            (
                "CREATE TRIGGER t BEFORE INSERT ON users FOR EACH ROW SET @x = 1",
                "users",
            ),
            ("OPTIMIZE NO_WRITE_TO_BINLOG TABLE users", "users"),
            ("LOCK TABLES users WRITE", "users"),
        ];
        for (statement, expected) in cases {
            assert_eq!(table(statement).as_deref(), Some(expected), "{statement}");
        }
    }

    #[test]
    fn statements_that_name_no_one_table_name_none() {
        for statement in [
            "CREATE TABLE users (id INT)",
            "INSERT INTO users VALUES (1)",
            "ALTER DATABASE app CHARACTER SET utf8mb4",
            "SELECT 'ALTER TABLE users'",
            "",
            "`unterminated",
        ] {
            assert_eq!(table(statement), None, "{statement}");
        }
    }
}
