//! Configuration: `dirthara.toml`, flags, the environment and `.env`, and secrets in URLs.

use crate::support::project::Project;
use crate::support::run::run_command;
use crate::{three, DB};

#[test]
fn dirthara_toml_in_the_working_dir_is_honoured() {
    let p = Project::new();
    p.write("db/1_create_a.up.sql", "CREATE TABLE a (id INT);\n");
    p.write("db/1_create_a.down.sql", "DROP TABLE a;\n");
    p.write(
        "dirthara.toml",
        "directories = [\"db\"]\nlocking = false\n\n[connections]\ndefault = \"sqlite:x.db\"\n",
    );
    let run = p.run(&["migrate"]);
    run.success()
        .stdout_has("Applied 1 in batch 1.")
        .stderr_has("WITHOUT the migration lock");
    assert!(p.tables("x.db").contains(&"a".to_string()));
    let doc = p.run(&["status", "--output", "json"]).json();
    assert_eq!(doc["lock"]["state"], "off");
}

#[test]
fn flags_override_dirthara_toml() {
    let p = Project::new();
    p.write("db/1_create_a.sql", "CREATE TABLE a (id INT);\n");
    p.write("other/7_create_o.sql", "CREATE TABLE o (id INT);\n");
    p.write(
        "dirthara.toml",
        "directories = [\"db\"]\nlocking = false\n[connections]\ndefault = \"sqlite:x.db\"\n",
    );
    p.run(&["-d", "sqlite:y.db", "--dir", "other", "migrate"])
        .success();
    assert!(!p.exists("x.db"), "-d overrides [connections] default");
    assert!(p.tables("y.db").contains(&"o".to_string()));
    assert!(!p.tables("y.db").contains(&"a".to_string()));
    // --locking auto overrides `locking = false`.
    p.run(&["--locking", "auto", "migrate"])
        .error("MIGRATION_LOCK_FAILED");
    assert!(!p.exists("x.db"));
}

#[test]
fn config_flag_reads_another_file_with_dirs_relative_to_it() {
    let p = Project::new();
    p.write("conf/db/1_create_a.sql", "CREATE TABLE a (id INT);\n");
    p.write(
        "conf/settings.toml",
        "directories = [\"db\"]\nlocking = false\n[connections]\ndefault = \"sqlite:c.db\"\n",
    );
    p.run(&["--config", "conf/settings.toml", "migrate"])
        .success()
        .stdout_has("Applied 1 in batch 1.");
    p.run(&["--config", "conf/missing.toml", "status"])
        .error("CONFIG_ERROR")
        .stderr_has("missing.toml");
}

#[test]
fn database_url_environment_variable_is_used_and_the_flag_overrides_it() {
    let p = Project::new();
    three(&p);
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:env.db")
            .args(["--no-lock", "migrate"]),
    )
    .success();
    assert!(p.tables("env.db").contains(&"a".to_string()));
    run_command(p.cmd().env("DATABASE_URL", "sqlite:env.db").args([
        "-d",
        "sqlite:flag.db",
        "--no-lock",
        "migrate",
    ]))
    .success()
    .stdout_has("Applied 3 in batch 1.");
    assert!(p.exists("flag.db"));
}

#[test]
fn dirthara_environment_variables_are_read() {
    let p = Project::new();
    p.write("envdir/1_create_a.sql", "CREATE TABLE a (id INT);\n");
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:env.db")
            .env("DIRTHARA_LOCKING", "false")
            .env("DIRTHARA_DIRECTORIES", "envdir")
            .arg("migrate"),
    )
    .success()
    .stdout_has("Applied 1 in batch 1.");
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:env.db")
            .env("DIRTHARA_LOCKING", "sideways")
            .arg("status"),
    )
    .error("CONFIG_ERROR")
    .stderr_has("DIRTHARA_LOCKING");
}

#[test]
fn an_unknown_dirthara_variable_is_named_on_stderr_with_the_setting_it_meant() {
    let p = Project::new();
    three(&p);
    // The typo would leave the table-lock timeout at its default without a word.
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:env.db")
            .env("DIRTHARA_TABLE_LOCK_TIMOUT", "5s")
            .args(["--no-lock", "-q", "migrate"]),
    )
    .success()
    .stderr_has(
        "warning: environment variable DIRTHARA_TABLE_LOCK_TIMOUT is not a dirthara setting; \
         it is ignored (did you mean `DIRTHARA_TABLE_LOCK_TIMEOUT`?)",
    );
    // Nothing close: named, without a guess.
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:env.db")
            .env("DIRTHARA_COLOUR", "1")
            .args(["--no-lock", "status"]),
    )
    .success()
    .stderr_has("DIRTHARA_COLOUR is not a dirthara setting; it is ignored\n");
}

#[test]
fn an_unknown_key_in_dirthara_toml_is_refused_with_the_key_it_meant() {
    let p = Project::new();
    p.write(
        "dirthara.toml",
        "table_lock_timout = \"5s\"\n[connections]\ndefault = \"sqlite:x.db\"\n",
    );
    p.run(&["--no-lock", "migrate"])
        .error("CONFIG_ERROR")
        .stderr_has("dirthara.toml: line 1: unknown key `table_lock_timout`; did you mean `table_lock_timeout`?");
    assert!(!p.exists("x.db"));
}

#[test]
fn dotenv_file_with_database_url_is_read_and_the_environment_wins_over_it() {
    let p = Project::new();
    three(&p);
    p.write(
        ".env",
        "# local settings\nDATABASE_URL=\"sqlite:dotenv.db\"\n",
    );
    p.run(&["--no-lock", "migrate"]).success();
    assert!(p.tables("dotenv.db").contains(&"a".to_string()));
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:real.db")
            .args(["--no-lock", "migrate"]),
    )
    .success()
    .stdout_has("Applied 3 in batch 1.");
    assert!(p.exists("real.db"));
}

#[test]
fn a_dotenv_line_that_cannot_be_read_is_a_config_error_naming_the_file() {
    let p = Project::new();
    three(&p);
    p.write(
        ".env",
        "DATABASE_URL=sqlite:dotenv.db
BAD LINE
",
    );
    p.run(&["--no-lock", "migrate"])
        .error("CONFIG_ERROR")
        .stderr_has(".env");
    assert!(!p.exists("dotenv.db"));
}

#[test]
fn an_unknown_key_in_dirthara_toml_is_a_config_error_naming_the_key() {
    let p = Project::new();
    p.write(
        "dirthara.toml",
        "directoriez = [\"db\"]\n[connections]\ndefault = \"sqlite:x.db\"\n",
    );
    p.run(&["--no-lock", "migrate"])
        .error("CONFIG_ERROR")
        .stderr_has("directoriez");
    assert!(!p.exists("x.db"));
}

#[test]
fn a_bad_value_in_dirthara_toml_is_a_config_error_naming_the_key() {
    let p = Project::new();
    p.write(
        "dirthara.toml",
        "locking = \"sideways\"\n[connections]\ndefault = \"sqlite:x.db\"\n",
    );
    p.run(&["status"])
        .error("CONFIG_ERROR")
        .stderr_has("locking");
    p.write("dirthara.toml", "this is not toml = = \n");
    p.run(&["status"])
        .error("CONFIG_ERROR")
        .stderr_has("dirthara.toml");
}

#[test]
fn a_missing_database_url_is_a_config_error_telling_how_to_pass_one() {
    let p = Project::new();
    three(&p);
    for args in [
        &["--no-lock", "migrate"][..],
        &["status"],
        &["preview", "migrate"],
    ] {
        p.run(args)
            .error("CONFIG_ERROR")
            .stderr_has("--database-url")
            .stderr_has("DATABASE_URL");
    }
}

#[test]
fn a_password_in_a_url_is_never_printed() {
    let p = Project::new();
    three(&p);
    let urls = [
        "postgres://u:hunter2@127.0.0.1:1/x",
        "postgresql://u:hunter2@127.0.0.1:1/x?sslmode=disable",
        "mysql://u:hunter2@127.0.0.1:1/x",
        "mariadb://u:hunter2@127.0.0.1:1/x",
    ];
    let commands: &[&[&str]] = &[
        &["status"],
        &["--no-lock", "migrate"],
        &["migrate"],
        &["fresh"],
        &["preview", "migrate"],
        &["unlock"],
        &["--output", "ndjson", "status"],
        &["-v", "--output", "json", "status"],
    ];
    for url in urls {
        for args in commands {
            let run = run_command(
                p.cmd()
                    .args(["-d", url, "--connect-timeout", "0"])
                    .args(*args),
            );
            run.code(1).nowhere("hunter2");
        }
    }
    // The error says which connection failed, with the password masked.
    let run = p.run(&[
        "-d",
        "postgres://u:hunter2@127.0.0.1:1/x",
        "--connect-timeout",
        "0",
        "status",
    ]);
    run.error("CONNECTION_ERROR").stderr_has("127.0.0.1");
    // In the environment too.
    run_command(
        p.cmd()
            .env("DATABASE_URL", "postgres://u:hunter2@127.0.0.1:1/x")
            .args(["--connect-timeout", "0", "status"]),
    )
    .error("CONNECTION_ERROR")
    .nowhere("hunter2");
    // And while retrying (the waiting notice).
    p.run(&[
        "-d",
        "postgres://u:hunter2@127.0.0.1:1/x",
        "--connect-timeout",
        "300ms",
        "--output",
        "ndjson",
        "status",
    ])
    .error("CONNECTION_ERROR")
    .nowhere("hunter2");
}

#[test]
fn a_password_in_the_url_query_string_is_never_printed() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    let run = p.run(&[
        "-d",
        "postgres://u@127.0.0.1:1/x?password=hunter2",
        "--connect-timeout",
        "0",
        "status",
    ]);
    run.error("CONNECTION_ERROR").nowhere("hunter2");
}

#[test]
fn help_text_does_not_print_the_database_url_from_the_environment() {
    let p = Project::new();
    let run = run_command(
        p.cmd()
            .env("DATABASE_URL", "postgres://u:hunter2@127.0.0.1:1/x")
            .arg("--help"),
    );
    run.success().nowhere("hunter2");
}

#[test]
fn dirthara_strict_accepts_any_case_and_refuses_nonsense() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.table_migration(3, "create_c", "c");
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(2, "create_b", "b");
    let strict = |value: &str| {
        run_command(p.cmd().env("DIRTHARA_STRICT", value).args([
            "-d",
            &format!("sqlite:{DB}"),
            "--no-lock",
            "migrate",
        ]))
    };
    strict("TRUE").error("OUT_OF_ORDER");
    strict("maybe")
        .error("CONFIG_ERROR")
        .stderr_has("DIRTHARA_STRICT");
}
