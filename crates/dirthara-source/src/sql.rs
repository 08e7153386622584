//! A SQL tokenizer for migration scripts: where statements end, whether a file controls its
//! own transaction, whether a step does nothing, and MySQL's `DELIMITER` client syntax.
//!
//! It knows what hides a `;` or a `BEGIN` from the database's point of view: strings (`'...'`
//! with `''`, PostgreSQL `E'...'` and `U&'...'`, MySQL backslash escapes and `"..."` strings),
//! quoted identifiers, PostgreSQL dollar quoting, comments (nested in PostgreSQL, `#` and
//! `-- ` in MySQL; MySQL `/*! */` is code), and routine bodies (`BEGIN ... END` inside
//! `CREATE PROCEDURE|FUNCTION|TRIGGER|EVENT`, PostgreSQL `BEGIN ATOMIC`, MariaDB
//! `BEGIN NOT ATOMIC`). It is pure (no I/O), linear in the input and never panics.

mod lexer;
mod outside;
#[cfg(test)]
mod tests;
mod words;

pub use outside::{outside_transaction, OutsideTransaction};
pub use words::{code_spans, line_column, words, Word};

use lexer::{Kind, Lexer, Token};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlDialect {
    Postgres,
    MySql,
    Sqlite,
}

/// One statement of a script; `text` excludes its terminating delimiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement<'a> {
    pub text: &'a str,
    /// Byte offset of `text` in the input.
    pub offset: usize,
    /// 1-based line where `text` starts (its first non-blank character).
    pub line: usize,
    /// 1-based line of the statement's first token, after any comments that lead it: the
    /// line an error in the statement is reported at.
    pub code_line: usize,
}

/// A top-level transaction-control statement found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionControl {
    /// `BEGIN`, `START TRANSACTION`, `COMMIT`, `COMMIT PREPARED`, `END`, `ROLLBACK`,
    /// `SAVEPOINT`, `RELEASE`, `PREPARE TRANSACTION` or `ABORT`.
    pub keyword: String,
    pub line: usize,
}

/// The first top-level statement that controls the transaction, if any. Words inside
/// strings, comments, identifiers and routine bodies never count.
///
/// ```
/// use dirthara_source::sql::{transaction_control, SqlDialect};
/// let tc = transaction_control("-- BEGIN\nSELECT 'COMMIT';\nBEGIN;\nSELECT 1;\nCOMMIT;", SqlDialect::Postgres).unwrap();
/// assert_eq!((tc.keyword.as_str(), tc.line), ("BEGIN", 3));
/// assert_eq!(transaction_control("CREATE TABLE t (begin_date DATE)", SqlDialect::Postgres), None);
/// ```
pub fn transaction_control(sql: &str, dialect: SqlDialect) -> Option<TransactionControl> {
    let scan = scan(sql, dialect, dialect == SqlDialect::MySql);
    let mut lines = LineCounter::default();
    scan.pieces.iter().find_map(|piece| {
        let keyword = control_keyword(sql, dialect, piece)?;
        // The keyword's own line, not the statement's (which may open with comments).
        let at = piece.first.map_or(piece.start, |t| t.start);
        Some(TransactionControl {
            keyword: keyword.to_string(),
            line: lines.line_at(sql, at),
        })
    })
}

/// The statements of a script, blank ones (only comments) dropped. In MySQL, `DELIMITER`
/// lines are honoured as by [`mysql_client_statements`] (a malformed one is skipped).
///
/// ```
/// use dirthara_source::sql::{split_statements, SqlDialect};
/// let sql = "CREATE TABLE a (s TEXT DEFAULT ';');\n\n-- done\nINSERT INTO a VALUES ($$;$$);";
/// let parts: Vec<_> = split_statements(sql, SqlDialect::Postgres).into_iter().map(|s| (s.text, s.line)).collect();
/// assert_eq!(parts, [("CREATE TABLE a (s TEXT DEFAULT ';')", 1), ("-- done\nINSERT INTO a VALUES ($$;$$)", 3)]);
/// ```
pub fn split_statements(sql: &str, dialect: SqlDialect) -> Vec<Statement<'_>> {
    statements(sql, &scan(sql, dialect, dialect == SqlDialect::MySql))
}

/// Whether the script holds a MySQL `DELIMITER x` client line at a statement start.
pub fn has_client_delimiter(sql: &str) -> bool {
    scan(sql, SqlDialect::MySql, true).delimiter_lines
}

/// The statements as the mysql client sends them: a `DELIMITER <token>` line (at a statement
/// start, any case) switches the delimiter for what follows and is not sent itself. With the
/// default `;`, routine bodies are also kept whole (the client would split them; the server
/// would then refuse the pieces). `Err` names the line of a malformed `DELIMITER` line.
///
/// ```
/// use dirthara_source::sql::mysql_client_statements;
/// let sql = "DELIMITER $$\nCREATE PROCEDURE p() BEGIN SELECT 1; END$$\nDELIMITER ;\nCALL p();";
/// let texts: Vec<_> = mysql_client_statements(sql).unwrap().into_iter().map(|s| s.text).collect();
/// assert_eq!(texts, ["CREATE PROCEDURE p() BEGIN SELECT 1; END", "CALL p()"]);
/// ```
pub fn mysql_client_statements(sql: &str) -> Result<Vec<Statement<'_>>, String> {
    let scan = scan(sql, SqlDialect::MySql, true);
    match scan.error {
        Some(error) => Err(error),
        None => Ok(statements(sql, &scan)),
    }
}

/// A script written for the mysql client (`DELIMITER $$ ... $$`), split as that client
/// splits it ([`mysql_client_statements`]), each statement owned: what the runner parses
/// such a step into once, as it loads it, and sends statement by statement.
///
/// ```
/// use dirthara_source::sql::ClientScript;
/// let sql = "DELIMITER $$\nCREATE PROCEDURE p() BEGIN SELECT 1; END$$\nDELIMITER ;\nCALL p();";
/// let script = ClientScript::parse(sql).unwrap().expect("a client script");
/// let texts: Vec<_> = script.statements().into_iter().map(|s| (s.text, s.line)).collect();
/// assert_eq!(texts, [("CREATE PROCEDURE p() BEGIN SELECT 1; END", 2), ("CALL p()", 4)]);
/// assert_eq!(ClientScript::parse("SELECT 1; SELECT 2;"), Ok(None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientScript {
    statements: Vec<OwnedStatement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct OwnedStatement {
    text: String,
    offset: usize,
    line: usize,
    code_line: usize,
}

impl ClientScript {
    /// The script's statements, in one scan of it; `Ok(None)` when it has no `DELIMITER` line
    /// (the server takes it as the tokenizer splits it), `Err` naming the line of a malformed
    /// one.
    pub fn parse(sql: &str) -> Result<Option<ClientScript>, String> {
        let scan = scan(sql, SqlDialect::MySql, true);
        if let Some(error) = scan.error {
            return Err(error);
        }
        if !scan.delimiter_lines {
            return Ok(None);
        }
        let statements = (statements(sql, &scan).into_iter())
            .map(|s| OwnedStatement {
                text: s.text.to_string(),
                offset: s.offset,
                line: s.line,
                code_line: s.code_line,
            })
            .collect();
        Ok(Some(ClientScript { statements }))
    }

    /// The statements, as [`mysql_client_statements`] gives them.
    pub fn statements(&self) -> Vec<Statement<'_>> {
        (self.statements.iter())
            .map(|s| Statement {
                text: &s.text,
                offset: s.offset,
                line: s.line,
                code_line: s.code_line,
            })
            .collect()
    }
}

/// Whether the script sends nothing: only whitespace, comments and delimiters. An empty or
/// comment-only down step is a deliberate "reverses nothing". MySQL `/*! ... */` is code.
///
/// It stops at the first token that is not a delimiter: every up step is asked at load, and
/// nearly every one starts with a statement.
pub fn is_blank(sql: &str, dialect: SqlDialect) -> bool {
    let mut lx = Lexer::new(sql, dialect);
    while let Some(tok) = lx.next_token() {
        if tok.kind == Kind::Delimiter {
            continue;
        }
        if dialect == SqlDialect::MySql && lx.is_word(tok, "DELIMITER") {
            // A client `DELIMITER` line sends nothing itself: the whole scan knows the rest.
            return scanned_blank(sql, dialect);
        }
        return false;
    }
    true
}

/// Whether `keyword` appears in `sql` as a word the database reads: not inside a comment,
/// a string or a quoted identifier (ASCII case-insensitive).
///
/// ```
/// use dirthara_source::sql::{has_keyword, SqlDialect::Postgres};
/// assert!(has_keyword("CREATE INDEX CONCURRENTLY i ON t (c)", Postgres, "concurrently"));
/// assert!(!has_keyword("-- not CONCURRENTLY\nCREATE INDEX i ON t (c)", Postgres, "CONCURRENTLY"));
/// assert!(!has_keyword("SELECT 'CONCURRENTLY'", Postgres, "CONCURRENTLY"));
/// ```
pub fn has_keyword(sql: &str, dialect: SqlDialect, keyword: &str) -> bool {
    let mut lx = Lexer::new(sql, dialect);
    while let Some(tok) = lx.next_token() {
        if lx.is_word(tok, keyword) {
            return true;
        }
    }
    false
}

fn scanned_blank(sql: &str, dialect: SqlDialect) -> bool {
    let scan = scan(sql, dialect, dialect == SqlDialect::MySql);
    scan.pieces.is_empty() && scan.error.is_none()
}

/// A statement found by [`scan`], with what transaction detection needs.
struct Piece {
    start: usize,
    end: usize,
    first: Option<Token>,
    second: Option<Token>,
    /// It is (or holds) a routine body, so its `BEGIN`/`END` are not transaction control.
    routine: bool,
}

#[derive(Default)]
struct Scan {
    pieces: Vec<Piece>,
    delimiter_lines: bool,
    error: Option<String>,
}

/// Where a statement stands on the way to knowing whether it holds a routine body.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Start,
    /// After `CREATE`, looking (a few tokens) for PROCEDURE, FUNCTION, TRIGGER or EVENT.
    Create(usize),
    /// MariaDB `BEGIN NOT ATOMIC`: after `BEGIN`, after `BEGIN NOT`.
    Begin,
    BeginNot,
    Routine(usize),
    Plain,
}

const ROUTINES: [&str; 4] = ["PROCEDURE", "FUNCTION", "TRIGGER", "EVENT"];
/// Words after CREATE that settle it is no routine (a `(` does too).
const NOT_ROUTINES: [&str; 13] = [
    "TABLE",
    "VIEW",
    "INDEX",
    "UNIQUE",
    "SEQUENCE",
    "SCHEMA",
    "DATABASE",
    "TYPE",
    "EXTENSION",
    "DOMAIN",
    "MATERIALIZED",
    "AS",
    "SELECT",
];
/// How far after CREATE the routine keyword may come (`CREATE OR REPLACE DEFINER = a@b ...`).
const CREATE_LOOKAHEAD: usize = 16;
/// `END IF`, `END LOOP`...: these close no `BEGIN` (they opened nothing we count).
const END_SUFFIXES: [&str; 5] = ["IF", "LOOP", "WHILE", "REPEAT", "FOR"];
/// The mysql client keeps the delimiter in a 16-byte buffer.
const MAX_DELIMITER: usize = 15;

fn scan(sql: &str, dialect: SqlDialect, client: bool) -> Scan {
    let mut out = Scan::default();
    let mut lx = Lexer::new(sql, dialect);
    let mut seg_start = 0;
    let mut count = 0usize;
    let (mut first, mut second) = (None, None);
    let mut shape = Shape::Start;
    let mut lines = LineCounter::default();
    loop {
        let Some(tok) = lx.next_token() else {
            push_piece(&mut out, sql, seg_start, sql.len(), first, second, shape);
            return out;
        };
        if tok.kind == Kind::Delimiter {
            let inside_body = matches!(shape, Shape::Routine(depth) if depth > 0);
            // A custom delimiter ends the statement wherever it is, as in the mysql client.
            if !inside_body || lx.delimiter != ";" {
                push_piece(&mut out, sql, seg_start, tok.start, first, second, shape);
                seg_start = tok.end;
                (count, first, second, shape) = (0, None, None, Shape::Start);
                continue;
            }
        }
        if count == 0 && client && lx.is_word(tok, "DELIMITER") {
            out.delimiter_lines = true;
            let end = lx.line_end(tok.end);
            let argument = sql[tok.end..end].split_whitespace().next();
            let line = lines.line_at(sql, tok.start);
            match argument {
                Some(d) if d.len() <= MAX_DELIMITER && !d.contains('\\') => lx.delimiter = d,
                _ if out.error.is_some() => {}
                Some(d) => {
                    out.error = Some(format!(
                    "line {line}: `DELIMITER {d}`: a delimiter is at most {MAX_DELIMITER} bytes \
                         and has no backslash; use e.g. `DELIMITER $$`"
                ))
                }
                None => {
                    out.error = Some(format!(
                        "line {line}: `DELIMITER` needs the new delimiter, e.g. `DELIMITER $$` \
                         (and `DELIMITER ;` to switch back)"
                    ))
                }
            }
            lx.pos = end;
            seg_start = end;
            continue;
        }
        count += 1;
        match count {
            1 => first = Some(tok),
            2 => second = Some(tok),
            _ => {}
        }
        shape = advance(&mut lx, dialect, shape, tok);
    }
}

/// The next [`Shape`] after `tok`; inside a routine, counts the blocks `BEGIN`/`CASE` open
/// and `END` closes.
fn advance(lx: &mut Lexer<'_>, dialect: SqlDialect, shape: Shape, tok: Token) -> Shape {
    match shape {
        Shape::Start if lx.is_word(tok, "CREATE") => Shape::Create(0),
        Shape::Start if dialect == SqlDialect::MySql && lx.is_word(tok, "BEGIN") => Shape::Begin,
        Shape::Begin if lx.is_word(tok, "NOT") => Shape::BeginNot,
        Shape::BeginNot if lx.is_word(tok, "ATOMIC") => Shape::Routine(1),
        Shape::Create(seen) => {
            if ROUTINES.iter().any(|w| lx.is_word(tok, w)) {
                Shape::Routine(0)
            } else if seen >= CREATE_LOOKAHEAD
                || lx.text(tok) == "("
                || NOT_ROUTINES.iter().any(|w| lx.is_word(tok, w))
            {
                Shape::Plain
            } else {
                Shape::Create(seen + 1)
            }
        }
        Shape::Routine(depth) if lx.is_word(tok, "BEGIN") || lx.is_word(tok, "CASE") => {
            Shape::Routine(depth + 1)
        }
        Shape::Routine(depth) if lx.is_word(tok, "END") => {
            let saved = lx.pos;
            match lx.next_token() {
                Some(next) if END_SUFFIXES.iter().any(|w| lx.is_word(next, w)) => {
                    Shape::Routine(depth)
                }
                Some(next) if lx.is_word(next, "CASE") => Shape::Routine(depth.saturating_sub(1)),
                _ => {
                    lx.pos = saved;
                    Shape::Routine(depth.saturating_sub(1))
                }
            }
        }
        Shape::Routine(_) | Shape::Plain => shape,
        _ => Shape::Plain,
    }
}

fn push_piece(
    out: &mut Scan,
    sql: &str,
    start: usize,
    end: usize,
    first: Option<Token>,
    second: Option<Token>,
    shape: Shape,
) {
    if first.is_none() {
        return; // only whitespace and comments
    }
    let space = |c: char| c.is_ascii() && lexer::is_space(c as u8);
    let segment = &sql[start..end];
    let trimmed = segment.trim_matches(space);
    let start = start + (segment.len() - segment.trim_start_matches(space).len());
    out.pieces.push(Piece {
        start,
        end: start + trimmed.len(),
        first,
        second,
        routine: matches!(shape, Shape::Routine(_) | Shape::BeginNot),
    });
}

fn statements<'a>(sql: &'a str, scan: &Scan) -> Vec<Statement<'a>> {
    let mut lines = LineCounter::default();
    scan.pieces
        .iter()
        .map(|p| {
            let line = lines.line_at(sql, p.start);
            let code_line = lines.line_at(sql, p.first.map_or(p.start, |t| t.start));
            Statement {
                text: &sql[p.start..p.end],
                offset: p.start,
                line,
                code_line,
            }
        })
        .collect()
}

fn control_keyword(sql: &str, dialect: SqlDialect, piece: &Piece) -> Option<&'static str> {
    if piece.routine {
        return None;
    }
    let word = |t: Option<Token>| {
        t.filter(|t| t.kind == Kind::Word)
            .map(|t| sql[t.start..t.end].to_ascii_uppercase())
    };
    let (first, second) = (word(piece.first)?, word(piece.second));
    let second = second.as_deref();
    let postgres = dialect == SqlDialect::Postgres;
    Some(match first.as_str() {
        "BEGIN" => "BEGIN",
        "START" if second == Some("TRANSACTION") => "START TRANSACTION",
        "COMMIT" if second == Some("PREPARED") => "COMMIT PREPARED",
        "COMMIT" => "COMMIT",
        "END" if dialect != SqlDialect::MySql => "END",
        "ROLLBACK" => "ROLLBACK",
        "SAVEPOINT" => "SAVEPOINT",
        "RELEASE" => "RELEASE",
        "PREPARE" if postgres && second == Some("TRANSACTION") => "PREPARE TRANSACTION",
        "ABORT" if postgres => "ABORT",
        _ => return None,
    })
}

/// Line numbers of increasing byte offsets, counted once over the text.
#[derive(Default)]
struct LineCounter {
    pos: usize,
    line: usize,
}

impl LineCounter {
    fn line_at(&mut self, text: &str, pos: usize) -> usize {
        if pos < self.pos {
            *self = LineCounter::default();
        }
        let newlines = text.as_bytes()[self.pos..pos]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.line += newlines;
        self.pos = pos;
        self.line + 1
    }
}
