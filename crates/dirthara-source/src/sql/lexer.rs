//! The lexer under [`super`]: turns SQL text into words, punctuation, opaque lumps (strings,
//! quoted identifiers, dollar-quoted bodies, numbers, MySQL `/*! */` code) and delimiters,
//! skipping whitespace and comments.
//!
//! It works on bytes: every character it acts on is ASCII, and bytes of multi-byte UTF-8
//! characters (all >= 0x80) are identifier characters, so every token boundary falls on a
//! character boundary. Nothing here recurses, and every byte is looked at a bounded number of
//! times, so any input (unterminated quotes, a million nested comments) is scanned in linear
//! time without panicking.

use super::SqlDialect;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// An unquoted identifier or keyword.
    Word,
    /// One ASCII character that is none of the others.
    Punct,
    /// A string, quoted identifier, dollar-quoted body, parameter, number or `/*! */` code.
    Opaque,
    /// The statement delimiter (`;`, or what a MySQL `DELIMITER` line set).
    Delimiter,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

pub(super) struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pub pos: usize,
    dialect: SqlDialect,
    pub delimiter: &'a str,
}

/// ASCII whitespace including vertical tab (which `u8::is_ascii_whitespace` leaves out);
/// statements are trimmed by the same rule, so a statement is never only whitespace.
pub(super) fn is_space(b: u8) -> bool {
    b.is_ascii_whitespace() || b == 0x0b
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn is_ident_char(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit() || b == b'$'
}

impl<'a> Lexer<'a> {
    pub(super) fn new(src: &'a str, dialect: SqlDialect) -> Self {
        Lexer {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            dialect,
            delimiter: ";",
        }
    }

    pub(super) fn text(&self, token: Token) -> &'a str {
        &self.src[token.start..token.end]
    }

    /// Whether `token` is the word `keyword` (ASCII case-insensitive).
    pub(super) fn is_word(&self, token: Token, keyword: &str) -> bool {
        token.kind == Kind::Word && self.text(token).eq_ignore_ascii_case(keyword)
    }

    /// A delimiter other than `;` (set by `DELIMITER`) may start inside what would otherwise be
    /// a word (`END$$`), as the mysql client sees it.
    fn custom_delimiter_at(&self, pos: usize) -> bool {
        self.delimiter != ";" && self.bytes[pos..].starts_with(self.delimiter.as_bytes())
    }

    fn at_delimiter(&self, pos: usize) -> bool {
        self.bytes[pos..].starts_with(self.delimiter.as_bytes())
    }

    /// The position of the next `\n` at or after `from`, or the end.
    pub(super) fn line_end(&self, from: usize) -> usize {
        self.bytes[from..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.bytes.len(), |i| from + i)
    }

    fn find(&self, from: usize, needle: &str) -> Option<usize> {
        self.src
            .get(from..)
            .and_then(|rest| rest.find(needle))
            .map(|i| from + i)
    }

    /// Whether `--` at `pos` opens a comment: always, except in MySQL, where the second dash
    /// must be followed by whitespace or a control character (`1--1` is arithmetic there).
    fn dash_comment(&self, pos: usize) -> bool {
        if self.bytes.get(pos + 1) != Some(&b'-') {
            return false;
        }
        self.dialect != SqlDialect::MySql || self.bytes.get(pos + 2).is_none_or(|&b| b <= b' ')
    }

    fn skip_block_comment(&mut self) {
        let len = self.bytes.len();
        if self.dialect != SqlDialect::Postgres {
            self.pos = self.find(self.pos + 2, "*/").map_or(len, |i| i + 2);
            return;
        }
        // PostgreSQL block comments nest: count, never recurse.
        let mut depth = 1usize;
        let mut i = self.pos + 2;
        while i < len {
            match (self.bytes[i], self.bytes.get(i + 1)) {
                (b'/', Some(b'*')) => {
                    depth += 1;
                    i += 2;
                }
                (b'*', Some(b'/')) => {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                }
                _ => i += 1,
            }
        }
        self.pos = i.min(len);
    }

    /// Skips whitespace and comments, stopping at the next token (or the end).
    pub(super) fn skip_trivia(&mut self) {
        let len = self.bytes.len();
        loop {
            while self.pos < len && is_space(self.bytes[self.pos]) {
                self.pos += 1;
            }
            if self.pos >= len || self.at_delimiter(self.pos) {
                return;
            }
            let next = self.bytes.get(self.pos + 1).copied();
            match self.bytes[self.pos] {
                b'-' if self.dash_comment(self.pos) => self.pos = self.line_end(self.pos),
                b'#' if self.dialect == SqlDialect::MySql => self.pos = self.line_end(self.pos),
                // MySQL runs the inside of `/*! ... */`: that is code, lexed as a token.
                b'/' if next == Some(b'*')
                    && !(self.dialect == SqlDialect::MySql
                        && self.bytes.get(self.pos + 2) == Some(&b'!')) =>
                {
                    self.skip_block_comment()
                }
                _ => return,
            }
        }
    }

    /// The end of a quoted run opened just before `from`: `quote` doubled is an escaped quote,
    /// and with `backslash` a backslash escapes the next byte. Unterminated: the end.
    fn quoted(&self, from: usize, quote: u8, backslash: bool) -> usize {
        let len = self.bytes.len();
        let mut i = from;
        while i < len {
            let b = self.bytes[i];
            if backslash && b == b'\\' {
                i += 2;
            } else if b == quote {
                if self.bytes.get(i + 1) == Some(&quote) {
                    i += 2;
                } else {
                    return i + 1;
                }
            } else {
                i += 1;
            }
        }
        len
    }

    /// `$$...$$`, `$tag$...$tag$` (a body), `$1` (a parameter), or a lone `$`.
    fn dollar(&self, start: usize) -> (Kind, usize) {
        let len = self.bytes.len();
        let mut j = start + 1;
        if self.bytes.get(j).is_some_and(u8::is_ascii_digit) {
            while j < len && self.bytes[j].is_ascii_digit() {
                j += 1;
            }
            return (Kind::Opaque, j);
        }
        while j < len && is_ident_char(self.bytes[j]) && self.bytes[j] != b'$' {
            j += 1;
        }
        if self.bytes.get(j) != Some(&b'$') {
            return (Kind::Punct, start + 1);
        }
        let tag = &self.src[start..=j];
        let end = self.find(j + 1, tag).map_or(len, |i| i + tag.len());
        (Kind::Opaque, end)
    }

    /// Scans a run of `accept` bytes from `from`, stopping before a custom delimiter.
    fn run(&self, from: usize, accept: impl Fn(u8) -> bool) -> usize {
        let mut i = from;
        while i < self.bytes.len() && accept(self.bytes[i]) && !self.custom_delimiter_at(i) {
            i += 1;
        }
        i
    }

    pub(super) fn next_token(&mut self) -> Option<Token> {
        self.skip_trivia();
        let start = self.pos;
        let len = self.bytes.len();
        if start >= len {
            return None;
        }
        if self.at_delimiter(start) {
            self.pos = start + self.delimiter.len();
            return Some(Token {
                kind: Kind::Delimiter,
                start,
                end: self.pos,
            });
        }
        let mysql = self.dialect == SqlDialect::MySql;
        let (kind, end) = match self.bytes[start] {
            b'\'' => (Kind::Opaque, self.quoted(start + 1, b'\'', mysql)),
            // MySQL: a string (backslash escapes); elsewhere a quoted identifier.
            b'"' => (Kind::Opaque, self.quoted(start + 1, b'"', mysql)),
            b'`' if self.dialect != SqlDialect::Postgres => {
                (Kind::Opaque, self.quoted(start + 1, b'`', false))
            }
            b'[' if self.dialect == SqlDialect::Sqlite => (
                Kind::Opaque,
                self.find(start + 1, "]").map_or(len, |i| i + 1),
            ),
            b'$' if self.dialect == SqlDialect::Postgres => self.dollar(start),
            b'/' if mysql && self.bytes[start..].starts_with(b"/*!") => (
                Kind::Opaque,
                self.find(start + 3, "*/").map_or(len, |i| i + 2),
            ),
            b if is_ident_start(b) => {
                let end = self.run(start + 1, is_ident_char);
                // PostgreSQL `E'...'`: a string where backslash escapes.
                if self.dialect == SqlDialect::Postgres
                    && end == start + 1
                    && matches!(b, b'E' | b'e')
                    && self.bytes.get(end) == Some(&b'\'')
                {
                    (Kind::Opaque, self.quoted(end + 1, b'\'', true))
                } else {
                    (Kind::Word, end)
                }
            }
            b if b.is_ascii_digit() => (
                Kind::Opaque,
                self.run(start + 1, |b| {
                    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
                }),
            ),
            _ => (Kind::Punct, start + 1),
        };
        self.pos = end.min(len);
        Some(Token {
            kind,
            start,
            end: self.pos,
        })
    }
}
