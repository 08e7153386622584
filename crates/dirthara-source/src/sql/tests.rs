use super::*;
use proptest::prelude::*;

use SqlDialect::{MySql, Postgres, Sqlite};

fn texts(sql: &str, dialect: SqlDialect) -> Vec<&str> {
    split_statements(sql, dialect)
        .into_iter()
        .map(|s| s.text)
        .collect()
}

fn control(sql: &str, dialect: SqlDialect) -> Option<(String, usize)> {
    transaction_control(sql, dialect).map(|t| (t.keyword, t.line))
}

#[test]
fn statements_split_at_top_level_semicolons_only() {
    let sql = "INSERT INTO t VALUES ('a;b', 'it''s;');\n\"odd;name\";\n/* x; */ SELECT 1 -- ;\n;";
    assert_eq!(
        texts(sql, Postgres),
        [
            "INSERT INTO t VALUES ('a;b', 'it''s;')",
            "\"odd;name\"",
            "/* x; */ SELECT 1 -- ;"
        ]
    );
    assert_eq!(
        texts(";;  ;\n-- only a comment\n", Sqlite),
        Vec::<&str>::new()
    );
    assert_eq!(texts("SELECT 1", Sqlite), ["SELECT 1"]);
}

#[test]
fn postgres_strings_dollar_quotes_and_nested_comments() {
    let sql = "SELECT E'it\\'s;', U&'d\\0061t;a';\n\
               CREATE FUNCTION f() RETURNS int AS $body$ BEGIN RETURN 1; END; $body$ LANGUAGE plpgsql;\n\
               DO $$ BEGIN PERFORM 1; COMMIT; END $$;\n\
               /* outer /* inner; */ still; */ SELECT $1, a$b FROM t;";
    assert_eq!(
        texts(sql, Postgres),
        [
            "SELECT E'it\\'s;', U&'d\\0061t;a'",
            "CREATE FUNCTION f() RETURNS int AS $body$ BEGIN RETURN 1; END; $body$ LANGUAGE plpgsql",
            "DO $$ BEGIN PERFORM 1; COMMIT; END $$",
            "/* outer /* inner; */ still; */ SELECT $1, a$b FROM t",
        ]
    );
    assert_eq!(control(sql, Postgres), None);
    // A `$` parameter or identifier does not open a dollar quote.
    assert_eq!(texts("SELECT $1;SELECT a$b$;SELECT 2", Postgres).len(), 3);
    // Without E, a backslash is an ordinary character (standard_conforming_strings).
    assert_eq!(texts("SELECT 'a\\';SELECT 2", Postgres).len(), 2);
}

#[test]
fn mysql_escapes_double_quoted_strings_and_comments() {
    let sql = "INSERT INTO t VALUES ('a\\';b', \"c\\\";d\", `e;f`); # hash; comment\n\
               SELECT 1--1;\n-- real comment;\nSELECT 2;";
    assert_eq!(
        texts(sql, MySql),
        [
            "INSERT INTO t VALUES ('a\\';b', \"c\\\";d\", `e;f`)",
            "# hash; comment\nSELECT 1--1",
            "-- real comment;\nSELECT 2"
        ]
    );
    // `#` is a comment only in MySQL.
    assert!(is_blank("# nothing", MySql));
    assert!(!is_blank("# nothing", Postgres));
}

#[test]
fn blank_means_only_whitespace_comments_and_delimiters() {
    for (sql, dialect) in [
        ("", Postgres),
        ("  \n\t", Sqlite),
        ("-- nothing to undo\n;\n/* really */", Postgres),
        ("/* a /* nested */ comment */ ;", Postgres),
        ("DELIMITER $$\n-- x\n$$\nDELIMITER ;\n", MySql),
    ] {
        assert!(is_blank(sql, dialect), "{sql:?}");
    }
    for (sql, dialect) in [
        ("/*!40101 SET NAMES utf8 */;", MySql),
        ("SELECT 1", Sqlite),
        ("-- x\nDROP TABLE t;", Postgres),
        ("DELIMITER\n", MySql),
    ] {
        assert!(!is_blank(sql, dialect), "{sql:?}");
    }
}

#[test]
fn transaction_control_is_found_at_top_level_in_every_form() {
    for (sql, dialect, keyword) in [
        ("BEGIN;", Postgres, "BEGIN"),
        ("begin work;", MySql, "BEGIN"),
        ("BEGIN ISOLATION LEVEL SERIALIZABLE;", Postgres, "BEGIN"),
        ("BEGIN IMMEDIATE TRANSACTION;", Sqlite, "BEGIN"),
        ("START TRANSACTION READ ONLY;", MySql, "START TRANSACTION"),
        ("COMMIT;", Sqlite, "COMMIT"),
        ("END;", Postgres, "END"),
        ("END TRANSACTION;", Sqlite, "END"),
        ("ROLLBACK TO SAVEPOINT a;", Postgres, "ROLLBACK"),
        ("SAVEPOINT a;", MySql, "SAVEPOINT"),
        ("RELEASE SAVEPOINT a;", MySql, "RELEASE"),
        ("COMMIT PREPARED 'x';", Postgres, "COMMIT PREPARED"),
        ("PREPARE TRANSACTION 'x';", Postgres, "PREPARE TRANSACTION"),
        ("ABORT;", Postgres, "ABORT"),
    ] {
        let sql = format!("CREATE TABLE t (id INT);\n\n{sql}");
        assert_eq!(
            control(&sql, dialect),
            Some((keyword.to_string(), 3)),
            "{sql}"
        );
    }
}

#[test]
fn transaction_words_elsewhere_never_count() {
    for (sql, dialect) in [
        (
            "CREATE TABLE t (begin_date DATE, \"begin\" INT, commit_sha TEXT);",
            Postgres,
        ),
        (
            "SELECT 'BEGIN'; -- COMMIT\n/* ROLLBACK; */ SELECT `end`;",
            MySql,
        ),
        ("END;", MySql),    // not a MySQL statement
        ("ABORT;", Sqlite), // not an SQLite statement
        ("PREPARE s FROM 'SELECT 1';", MySql),
        ("PREPARE s AS SELECT 1;", Postgres),
        ("SELECT 1; START x;", Postgres),
        (
            "CREATE PROCEDURE p() LANGUAGE SQL BEGIN ATOMIC INSERT INTO t VALUES (1); END;",
            Postgres,
        ),
        (
            "CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE c SET n = n + 1; END;",
            Sqlite,
        ),
        (
            "BEGIN NOT ATOMIC DECLARE x INT DEFAULT 1; SELECT x; END;",
            MySql,
        ),
    ] {
        assert_eq!(control(sql, dialect), None, "{sql}");
    }
}

#[test]
fn routine_bodies_are_one_statement_however_they_nest() {
    let sql = "CREATE TABLE t (id INT);\n\
               CREATE DEFINER=`root`@`localhost` PROCEDURE p(x INT)\n\
               BEGIN\n\
                 IF x > 0 THEN SELECT CASE WHEN x = 1 THEN 'one' ELSE 'many' END; END IF;\n\
                 WHILE x > 0 DO SET x = x - 1; END WHILE;\n\
                 lbl: BEGIN ROLLBACK; END lbl;\n\
                 CASE x WHEN 0 THEN SELECT 0; ELSE BEGIN END; END CASE;\n\
               END;\n\
               INSERT INTO t VALUES (1);";
    let parts = split_statements(sql, MySql);
    assert_eq!(parts.len(), 3, "{parts:#?}");
    assert!(parts[1].text.starts_with("CREATE DEFINER"));
    assert!(parts[1].text.ends_with("END CASE;\nEND"));
    assert_eq!((parts[1].line, parts[2].line), (2, 9));
    assert_eq!(parts[2].text, "INSERT INTO t VALUES (1)");
    assert_eq!(control(sql, MySql), None);

    let trigger = "CREATE TRIGGER IF NOT EXISTS tr AFTER INSERT ON t FOR EACH ROW\n\
                   BEGIN UPDATE c SET n = n + 1; INSERT INTO log VALUES (NEW.id); END;\nSELECT 1;";
    assert_eq!(texts(trigger, Sqlite).len(), 2);
    let event =
        "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO BEGIN DELETE FROM a; DELETE FROM b; END;";
    assert_eq!(texts(event, MySql).len(), 1);
    // A trigger without a BEGIN block ends at its `;`.
    let short = "CREATE TRIGGER t BEFORE INSERT ON a FOR EACH ROW SET NEW.x = 1; SELECT 2;";
    assert_eq!(texts(short, MySql).len(), 2);
    let atomic = "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END; SELECT 3;";
    assert_eq!(texts(atomic, Postgres).len(), 2);
}

#[test]
fn delimiter_lines_switch_the_delimiter_as_the_mysql_client_does() {
    let sql = "CREATE TABLE t (id INT);\n\
               delimiter $$\n\
               CREATE PROCEDURE p()\nBEGIN\n  INSERT INTO t VALUES (1);\n  COMMIT;\nEND$$\n\
               CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.id = NEW.id + 1; END $$\n\
               DELIMITER ;\n\
               INSERT INTO t VALUES (2);\n\
               DELIMITER //\nCREATE FUNCTION f() RETURNS INT DETERMINISTIC BEGIN RETURN 1; END//\nDELIMITER ;\n\
               CALL p();";
    assert!(has_client_delimiter(sql));
    let parts = mysql_client_statements(sql).unwrap();
    let texts: Vec<_> = parts.iter().map(|s| (s.text, s.line)).collect();
    assert_eq!(
        texts,
        [
            ("CREATE TABLE t (id INT)", 1),
            (
                "CREATE PROCEDURE p()\nBEGIN\n  INSERT INTO t VALUES (1);\n  COMMIT;\nEND",
                3
            ),
            (
                "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.id = NEW.id + 1; END",
                8
            ),
            ("INSERT INTO t VALUES (2)", 10),
            (
                "CREATE FUNCTION f() RETURNS INT DETERMINISTIC BEGIN RETURN 1; END",
                12
            ),
            ("CALL p()", 14),
        ]
    );
    assert_eq!(split_statements(sql, MySql), parts);
    // The COMMIT inside the procedure body is not the file's transaction control.
    assert_eq!(control(sql, MySql), None);
    assert_eq!(
        control("DELIMITER $$\nSELECT 1$$\nCOMMIT$$", MySql),
        Some(("COMMIT".into(), 3))
    );
}

#[test]
fn delimiter_is_a_client_line_only_at_a_statement_start_outside_quotes() {
    assert!(!has_client_delimiter(
        "SELECT 'DELIMITER $$';\n-- DELIMITER $$\n"
    ));
    assert!(!has_client_delimiter("SELECT 1, delimiter FROM t;"));
    assert!(has_client_delimiter("-- setup\nDELIMITER ;;\nSELECT 1;;"));
    assert_eq!(
        mysql_client_statements("DELIMITER ;;\nSELECT 1;; SELECT 2")
            .unwrap()
            .len(),
        2
    );
    let err = mysql_client_statements("SELECT 1;\n\nDELIMITER\nSELECT 2;").unwrap_err();
    assert!(err.starts_with("line 3:"), "{err}");
    let err = mysql_client_statements("DELIMITER \\x\nSELECT 2;").unwrap_err();
    assert!(err.contains("backslash"), "{err}");
    // Outside MySQL a `DELIMITER` line is just text the database will refuse.
    assert_eq!(
        texts("DELIMITER $$\nSELECT 1", Postgres),
        ["DELIMITER $$\nSELECT 1"]
    );
}

#[test]
fn line_column_counts_characters_from_one() {
    assert_eq!(line_column("abc", 0), (1, 1));
    assert_eq!(line_column("abc", 2), (1, 3));
    assert_eq!(line_column("a\nbc", 3), (2, 2));
    assert_eq!(line_column("éé\nx", 3), (2, 1));
    assert_eq!(line_column("ab", 99), (1, 3));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    /// The early-stopping blank check says what the whole scan says.
    #[test]
    fn blank_stops_early_and_agrees_with_the_whole_scan(
        parts in prop::collection::vec(prop::sample::select(&[
            " ", "\n", ";", "--", "-- c\n", "#", "# c\n", "/*", "*/", "/*!", "'", "$$", "DELIMITER",
            " $$\n", "DELIMITER ;\n", "x", "SELECT 1", "\\",
        ][..]), 0..10),
    ) {
        let sql = parts.concat();
        for dialect in [Postgres, MySql, Sqlite] {
            prop_assert_eq!(is_blank(&sql, dialect), scanned_blank(&sql, dialect), "{:?}", sql);
        }
    }
}

#[test]
fn pathological_inputs_finish_quickly() {
    let mb = 1 << 20;
    let started = std::time::Instant::now();
    for sql in [
        format!("SELECT '{}", "x".repeat(mb)),
        format!("SELECT $a${}", "$".repeat(mb)),
        "/*".repeat(mb / 2),
        format!("CREATE PROCEDURE p() {}", "BEGIN ".repeat(mb / 6)),
        format!("CREATE PROCEDURE p() BEGIN {}", "END; ".repeat(mb / 5)),
        "SELECT 1;".repeat(mb / 9),
        format!("DELIMITER $$\n{}", "a$".repeat(mb / 2)),
        "-".repeat(mb),
    ] {
        for dialect in [Postgres, MySql, Sqlite] {
            let _ = split_statements(&sql, dialect);
            let _ = transaction_control(&sql, dialect);
            let _ = is_blank(&sql, dialect);
        }
        let _ = mysql_client_statements(&sql);
    }
    // Linear: a few hundred milliseconds even unoptimised; quadratic would take minutes.
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

fn check_statements(sql: &str, parts: &[Statement<'_>]) {
    let mut after = 0;
    for s in parts {
        assert!(s.offset >= after, "statements overlap: {parts:?}");
        assert_eq!(&sql[s.offset..s.offset + s.text.len()], s.text);
        assert_eq!(s.line, 1 + sql[..s.offset].matches('\n').count());
        assert!(!s.text.is_empty(), "{s:?}");
        assert!(
            !s.text
                .starts_with([' ', '\n', '\t', '\r', '\u{b}', '\u{c}']),
            "{s:?}"
        );
        assert!(
            !s.text.ends_with([' ', '\n', '\t', '\r', '\u{b}', '\u{c}']),
            "{s:?}"
        );
        after = s.offset + s.text.len();
    }
}

/// Text made mostly of the characters that matter to the tokenizer.
fn sql_text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "'",
        "''",
        "\"",
        "`",
        "$",
        "$$",
        "$a$",
        "$1",
        "E'",
        "U&'",
        "\\",
        ";",
        "--",
        "-- ",
        "#",
        "/*",
        "*/",
        "/*!",
        "\n",
        " ",
        "BEGIN",
        "END",
        "CASE",
        "IF",
        "CREATE",
        "PROCEDURE",
        "TRIGGER",
        "ATOMIC",
        "NOT",
        "COMMIT",
        "DELIMITER",
        "DELIMITER $$\n",
        "DELIMITER ;\n",
        "(",
        "x",
        "é",
        "[",
        "]",
        "ROLLBACK",
        "START",
        "TRANSACTION",
    ]);
    prop::collection::vec(
        prop_oneof![
            pieces.prop_map(String::from),
            any::<char>().prop_map(String::from)
        ],
        0..60,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_input_splits_consistently_and_never_panics(sql in sql_text()) {
        for dialect in [Postgres, MySql, Sqlite] {
            let parts = split_statements(&sql, dialect);
            check_statements(&sql, &parts);
            if let Some(tc) = transaction_control(&sql, dialect) {
                // The keyword's line lies within one of the statements.
                prop_assert!(parts
                    .iter()
                    .any(|s| s.line <= tc.line && tc.line <= s.line + s.text.matches('\n').count()));
            }
            prop_assert_eq!(is_blank(&sql, dialect), parts.is_empty() && (dialect != MySql || mysql_client_statements(&sql).is_ok()));
        }
        if let Ok(parts) = mysql_client_statements(&sql) {
            check_statements(&sql, &parts);
        }
        // A client script parsed once, at load, is what the mysql client's split gives.
        let owned = |parts: Vec<Statement<'_>>| -> Vec<(String, usize, usize, usize)> {
            (parts.into_iter()).map(|s| (s.text.into(), s.offset, s.line, s.code_line)).collect()
        };
        let script = ClientScript::parse(&sql).map(|s| s.map(|s| owned(s.statements())));
        let expected = match has_client_delimiter(&sql) {
            false => Ok(None),
            true => mysql_client_statements(&sql).map(|parts| Some(owned(parts))),
        };
        prop_assert_eq!(script, expected);
        let chars = sql.chars().count();
        prop_assert_eq!(line_column(&sql, chars).0, 1 + sql.matches('\n').count());
    }
}
