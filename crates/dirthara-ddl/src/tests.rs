use super::*;

fn pg() -> Server {
    Server::oldest(SqlDialect::Postgres)
}

fn mysql() -> Server {
    Server::from_version(SqlDialect::MySql, "8.0.36")
}

fn rules_of(sql: &str, server: Server, transactional: bool) -> Vec<&'static str> {
    let found = analyze_step(sql, server, transactional, &mut Context::default());
    assert!(
        found.not_analysed.is_empty(),
        "not analysed: {:?}",
        found.not_analysed
    );
    found.findings.iter().map(|f| f.rule.name).collect()
}

/// Each rule: statements it flags, and the safe forms it leaves alone.
#[test]
fn every_postgres_rule_flags_its_statement_and_leaves_its_safe_form_alone() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "changing-column-type",
            &[
                "ALTER TABLE big ALTER COLUMN n TYPE bigint",
                "ALTER TABLE big ALTER n SET DATA TYPE text USING n::text",
            ],
            &["ALTER TABLE big ADD COLUMN n2 bigint"],
        ),
        (
            "adding-field-with-default",
            &[
                "ALTER TABLE big ADD COLUMN token uuid DEFAULT gen_random_uuid()",
                "ALTER TABLE big ADD COLUMN r float8 DEFAULT random()",
                "ALTER TABLE big ADD COLUMN at timestamptz DEFAULT clock_timestamp()",
                "ALTER TABLE big ADD COLUMN id2 bigserial",
            ],
            &[
                "ALTER TABLE big ADD COLUMN status text NOT NULL DEFAULT 'new'",
                "ALTER TABLE big ADD COLUMN created timestamptz DEFAULT now()",
                "ALTER TABLE big ADD COLUMN n int DEFAULT 0",
                "ALTER TABLE big ADD COLUMN note text",
            ],
        ),
        (
            "adding-not-nullable-field",
            &["ALTER TABLE big ADD COLUMN x int NOT NULL"],
            &[
                "ALTER TABLE big ADD COLUMN x int NOT NULL DEFAULT 0",
                "ALTER TABLE big ADD COLUMN x int",
            ],
        ),
        (
            "setting-not-nullable-field",
            &["ALTER TABLE big ALTER COLUMN n SET NOT NULL"],
            &[
                "ALTER TABLE big ALTER COLUMN n DROP NOT NULL",
                "ALTER TABLE big ADD CONSTRAINT n_nn CHECK (n IS NOT NULL) NOT VALID",
            ],
        ),
        (
            "adding-foreign-key-constraint",
            &["ALTER TABLE big ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES other (id)"],
            &[
                "ALTER TABLE big ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES other (id) NOT VALID",
                "ALTER TABLE big VALIDATE CONSTRAINT fk",
            ],
        ),
        (
            "constraint-missing-not-valid",
            &["ALTER TABLE big ADD CONSTRAINT positive CHECK (n > 0)"],
            &["ALTER TABLE big ADD CONSTRAINT positive CHECK (n > 0) NOT VALID"],
        ),
        (
            "require-concurrent-index-creation",
            &[
                "CREATE INDEX big_n ON big (n)",
                "CREATE UNIQUE INDEX big_u ON big (u) WHERE u IS NOT NULL",
            ],
            &[],
        ),
        (
            "disallowed-unique-constraint",
            &[
                "ALTER TABLE big ADD CONSTRAINT big_u UNIQUE (u)",
                "ALTER TABLE big ADD PRIMARY KEY (id)",
            ],
            &[
                "ALTER TABLE big ADD CONSTRAINT big_u UNIQUE USING INDEX big_u_idx",
                "ALTER TABLE big ADD CONSTRAINT big_pk PRIMARY KEY USING INDEX big_pk_idx",
            ],
        ),
        (
            "adding-serial-primary-key-field",
            &[
                "ALTER TABLE big ADD COLUMN id bigserial PRIMARY KEY",
                "ALTER TABLE big ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
            ],
            &[],
        ),
        (
            "adding-generated-stored-column",
            &["ALTER TABLE big ADD COLUMN total numeric GENERATED ALWAYS AS (a + b) STORED"],
            &[],
        ),
        ("vacuum-full", &["VACUUM FULL big"], &["VACUUM big"]),
        (
            "clustering-table",
            &["CLUSTER big USING big_pkey", "CLUSTER VERBOSE big"],
            &[],
        ),
        (
            "setting-tablespace",
            &["ALTER TABLE big SET TABLESPACE slow_disks"],
            &[],
        ),
        (
            "dropping-column",
            &["ALTER TABLE big DROP COLUMN legacy"],
            &[],
        ),
        (
            "renaming-column",
            &["ALTER TABLE big RENAME COLUMN a TO b"],
            &[],
        ),
        ("dropping-table", &["DROP TABLE big"], &[]),
        ("renaming-table", &["ALTER TABLE big RENAME TO huge"], &[]),
    ];
    for (rule, flagged, safe) in cases {
        for sql in *flagged {
            let found = rules_of(sql, pg(), true);
            assert!(
                found.contains(rule),
                "{sql}: expected {rule}, got {found:?}"
            );
        }
        for sql in *safe {
            let found = rules_of(sql, pg(), true);
            assert!(!found.contains(rule), "{sql}: {rule} flagged its safe form");
            let blocking: Vec<_> = (found.iter())
                .filter(|name| rule_named(name).unwrap().severity == Severity::Blocking)
                .collect();
            assert!(blocking.is_empty(), "{sql}: blocking findings {blocking:?}");
        }
    }
}

#[test]
fn concurrently_is_safe_outside_a_transaction_and_an_error_inside_one() {
    let create = "CREATE INDEX CONCURRENTLY big_n ON big (n)";
    assert_eq!(rules_of(create, pg(), false), Vec::<&str>::new());
    assert_eq!(
        rules_of(create, pg(), true),
        ["ban-concurrent-index-creation-in-transaction"]
    );
    for other in [
        "DROP INDEX CONCURRENTLY big_n",
        "REINDEX INDEX CONCURRENTLY big_n",
    ] {
        assert_eq!(rules_of(other, pg(), false), Vec::<&str>::new(), "{other}");
        assert_eq!(
            rules_of(other, pg(), true),
            ["ban-concurrent-index-creation-in-transaction"],
            "{other}"
        );
    }
}

#[test]
fn a_table_created_in_the_same_migration_is_never_flagged_even_in_a_later_step() {
    let mut context = Context::default();
    let first = analyze_step(
        "CREATE TABLE public.events (id int, kind text)",
        pg(),
        true,
        &mut context,
    );
    assert!(first.findings.is_empty());
    let later = analyze_step(
        "CREATE INDEX events_kind ON events (kind);\nALTER TABLE \"events\" ALTER COLUMN id TYPE bigint;\nALTER TABLE events ALTER COLUMN kind SET NOT NULL",
        pg(),
        true,
        &mut context,
    );
    assert!(later.findings.is_empty(), "{:?}", later.findings);
    // Another table is still flagged.
    let other = analyze_step("CREATE INDEX o ON orders (a)", pg(), true, &mut context);
    assert_eq!(other.findings.len(), 1);
}

#[test]
fn a_table_created_by_a_statement_the_parser_does_not_read_is_still_new() {
    let step = "CREATE TABLE m_2024 (LIKE m INCLUDING DEFAULTS);\nALTER TABLE m_2024 ADD CONSTRAINT c CHECK (x > 0);\n\
                CREATE MATERIALIZED VIEW counts AS SELECT 1 AS n WITH NO DATA;\nCREATE INDEX counts_n ON counts (n)";
    let found = analyze_step(step, pg(), true, &mut Context::default());
    assert!(found.findings.is_empty(), "{:?}", found.findings);
}

#[test]
fn a_constant_default_rewrites_before_postgresql_11_only() {
    let old = Server::from_version(SqlDialect::Postgres, "10.23");
    let sql = "ALTER TABLE big ADD COLUMN n int DEFAULT 0";
    assert_eq!(rules_of(sql, old, true), ["adding-field-with-default"]);
    assert!(rules_of(sql, pg(), true).is_empty());
}

#[test]
fn a_finding_points_at_the_line_and_column_of_what_it_flags() {
    let step = "-- widen the counter\nCREATE TABLE t (id int);\n\nALTER TABLE big\n  ALTER COLUMN n TYPE bigint;\nVACUUM FULL big;";
    let found = analyze_step(step, pg(), false, &mut Context::default()).findings;
    let at: Vec<_> = found
        .iter()
        .map(|f| (f.rule.name, f.line, f.column))
        .collect();
    assert_eq!(
        at,
        [("changing-column-type", 5, 16), ("vacuum-full", 6, 1)],
        "{found:?}"
    );
    assert_eq!(found[0].table.as_deref(), Some("big"));
}

#[test]
fn a_statement_the_parser_does_not_read_is_reported_not_analysed_never_silently() {
    let found = analyze_step(
        "SELECT 1;\nCOPY big FROM stdin WITH (FORMAT binary, FOO)",
        pg(),
        true,
        &mut Context::default(),
    );
    assert!(found.findings.is_empty());
    assert_eq!(found.not_analysed.len(), 1, "{found:?}");
    assert_eq!(found.not_analysed[0].line, 2);
}

#[test]
fn words_in_comments_and_strings_are_not_statements() {
    let sql = "-- CLUSTER big\nSELECT 'VACUUM FULL big'";
    assert!(rules_of(sql, pg(), true).is_empty());
}

#[test]
fn mysql_a_copying_alter_is_flagged_and_an_online_one_is_not() {
    for sql in [
        "ALTER TABLE orders MODIFY COLUMN email VARCHAR(320) NOT NULL",
        "ALTER TABLE orders CHANGE COLUMN a b BIGINT",
        "ALTER TABLE orders ADD COLUMN x INT, ALGORITHM=COPY",
        "ALTER TABLE orders ADD COLUMN t DECIMAL(10,2) AS (a * b) STORED",
        "ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (c) REFERENCES customers (id)",
        "ALTER TABLE orders DROP PRIMARY KEY",
        "ALTER TABLE orders CONVERT TO CHARACTER SET utf8mb4",
    ] {
        assert_eq!(
            rules_of(sql, mysql(), false),
            ["mysql-copying-alter"],
            "{sql}"
        );
    }
    for sql in [
        "ALTER TABLE orders ADD COLUMN notes TEXT NULL",
        "ALTER TABLE orders ADD COLUMN notes TEXT NULL AFTER state, ALGORITHM=INSTANT",
        "ALTER TABLE orders ADD INDEX idx_status (status), ALGORITHM=INPLACE, LOCK=NONE",
        "CREATE INDEX idx_status ON orders (status)",
        "ALTER TABLE orders MODIFY COLUMN email VARCHAR(320), ALGORITHM=INPLACE, LOCK=NONE",
        "ALTER TABLE orders DROP PRIMARY KEY, ADD PRIMARY KEY (id, region)",
    ] {
        assert!(rules_of(sql, mysql(), false).is_empty(), "{sql}");
    }
    assert_eq!(
        rules_of(
            "ALTER TABLE orders ADD FULLTEXT INDEX ft (body)",
            mysql(),
            false
        ),
        ["mysql-locking-alter"]
    );
    assert_eq!(
        rules_of(
            "ALTER TABLE orders ADD COLUMN x INT, LOCK=EXCLUSIVE",
            mysql(),
            false
        ),
        ["mysql-locking-alter"]
    );
    assert_eq!(
        rules_of("RENAME TABLE a TO b", mysql(), false),
        ["renaming-table"]
    );
}

#[test]
fn a_mysql_delimiter_script_is_read_as_the_client_reads_it() {
    let script = "DELIMITER $$\nCREATE TABLE t (id INT)$$\nALTER TABLE orders MODIFY a BIGINT$$\nDELIMITER ;";
    let found = analyze_step(script, mysql(), false, &mut Context::default());
    let names: Vec<_> = found
        .findings
        .iter()
        .map(|f| (f.rule.name, f.line))
        .collect();
    assert_eq!(names, [("mysql-copying-alter", 3)]);
}

#[test]
fn each_statement_says_the_table_locks_the_application_can_queue_behind() {
    let step = "CREATE TABLE fresh (id int REFERENCES users (id));\n\
                ALTER TABLE fresh ADD COLUMN n int;\n\
                ALTER TABLE ONLY orders ADD CONSTRAINT fk FOREIGN KEY (u) REFERENCES users (id) NOT VALID;\n\
                SELECT count(*) FROM orders;\n\
                UPDATE orders SET n = 1;\n\
                CREATE INDEX CONCURRENTLY o_n ON orders (n)";
    let found = analyze_step(step, pg(), false, &mut Context::default());
    let table = |name: &str, only: bool| LockTarget::Table {
        name: name.into(),
        only,
    };
    assert_eq!(
        found.statement_locks,
        [
            vec![table("users", false)],
            vec![],
            vec![table("orders", true), table("users", false)],
            vec![],
            vec![LockTarget::Unnamed],
            vec![table("orders", false)],
        ]
    );
}
