//! A statement's words as the dialect's lexer reads them, and positions in step text.

use super::lexer::{self, Lexer};
use super::SqlDialect;

/// A token of a statement as [`words`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word<'a> {
    /// The text as written: a keyword or identifier, a quoted identifier with its quotes, a
    /// string with its quotes, one punctuation character.
    pub text: &'a str,
    /// Its byte offset in the statement.
    pub offset: usize,
    /// An unquoted word (a keyword or a plain identifier).
    pub bare: bool,
}

/// The tokens of `sql` with comments and whitespace dropped, as the dialect's lexer reads
/// them (strings, quoted identifiers and dollar-quoted bodies are one token each).
///
/// ```
/// use dirthara_source::sql::{words, SqlDialect};
/// let found: Vec<_> = words("CLUSTER /* why */ \"Big\" USING big_pkey", SqlDialect::Postgres)
///     .into_iter().map(|w| w.text).collect();
/// assert_eq!(found, ["CLUSTER", "\"Big\"", "USING", "big_pkey"]);
/// ```
pub fn words(sql: &str, dialect: SqlDialect) -> Vec<Word<'_>> {
    let mut lx = Lexer::new(sql, dialect);
    let mut found = Vec::new();
    while let Some(token) = lx.next_token() {
        if token.kind == lexer::Kind::Delimiter {
            continue;
        }
        found.push(Word {
            text: lx.text(token),
            offset: token.start,
            bare: token.kind == lexer::Kind::Word,
        });
    }
    found
}

/// A 0-based character index in `text` as a 1-based (line, column), counting characters;
/// an index past the end gives the position just after the last character.
///
/// ```
/// assert_eq!(dirthara_source::sql::line_column("ab\ncé\nx", 5), (2, 3));
/// ```
pub fn line_column(text: &str, char_index: usize) -> (usize, usize) {
    let (mut line, mut column) = (1, 1);
    for c in text.chars().take(char_index) {
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// The byte ranges of `sql` that are code to `dialect`: its tokens, quoted identifiers and
/// MySQL `/*! */` code included, but no string literal, dollar-quoted body or comment, nor
/// the whitespace between tokens. Placeholders are looked for there (see
/// [`crate::placeholders`]).
///
/// ```
/// use dirthara_source::sql::{code_spans, SqlDialect};
/// let sql = "SELECT 'a' -- b\n, \"c\"";
/// let code: Vec<_> = code_spans(sql, SqlDialect::Postgres).into_iter().map(|r| &sql[r]).collect();
/// assert_eq!(code, ["SELECT", ",", "\"c\""]);
/// ```
pub fn code_spans(sql: &str, dialect: SqlDialect) -> Vec<std::ops::Range<usize>> {
    let mut lx = Lexer::new(sql, dialect);
    let mut spans = Vec::new();
    while let Some(token) = lx.next_token() {
        let text = lx.text(token);
        let literal = token.kind == lexer::Kind::Opaque
            && (text.starts_with('\'')
                || text.starts_with('$')
                || (text.len() > 1 && text.starts_with(['E', 'e']) && text[1..].starts_with('\''))
                || (dialect == SqlDialect::MySql && text.starts_with('"')));
        if !literal {
            spans.push(token.start..token.end);
        }
    }
    spans
}
