//! What the CLI says when the lock is in the way, and that it says it the same way from every
//! source: the lock state `unknown`, an interrupted or exhausted wait, the `locking` and
//! `lock_ttl` settings, the preview's staleness notice, the missing-down-file hint. SQLite
//! with `--locking lease` reproduces the lock cases cheaply; the MongoDB cases need the
//! test server (`DIRTHARA_TEST_MONGODB_URL`).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::project::Project;
use support::run::{run_command, Run};

/// A SQLite project whose lease is held by a runner that is not there: a live lease row
/// (one day long) planted by an unlocked run of its own, with its own history table.
fn held_lease() -> Project {
    let p = Project::new();
    p.table_migration(1, "users", "users");
    // A leased run with nothing to do (`to 0`: before the first migration) creates the
    // lease table the way dirthara does.
    p.sqlite("app.db", &["--locking", "lease", "to", "0"])
        .success();
    p.write(
        "plant/1_plant.sql",
        "INSERT INTO dirthara_migrations_lock \
         (id, owner_id, hostname, pid, operation, acquired_at, expires_at) \
         VALUES ('dirthara:migrations', 'elsewhere', 'other-host', 7, 'migrate', \
         julianday('now'), julianday('now') + 1);\n",
    );
    p.unlocked(
        "app.db",
        &[
            "--dir",
            "plant",
            "--history-table",
            "plant_history",
            "migrate",
        ],
    )
    .success();
    p
}

#[test]
fn a_bounded_wait_that_runs_out_says_what_was_waited_and_not_to_wait() {
    let p = held_lease();
    let run = p.sqlite(
        "app.db",
        &["--locking", "lease", "--lock-wait", "1s", "migrate"],
    );
    run.error("MIGRATION_LOCK_HELD")
        .stderr_has("dirthara migrate other-host:7")
        .stderr_has("after waiting 1")
        .stderr_has("(--lock-wait)")
        .stderr_has("`dirthara unlock`")
        .stderr_has("`dirthara unlock --force`")
        .stderr_has("--lock-wait forever")
        .nowhere("wait for it with --lock-wait");

    // With no wait at all, waiting is the advice.
    let run = p.sqlite("app.db", &["--locking", "lease", "migrate"]);
    run.error("MIGRATION_LOCK_HELD")
        .stderr_has("wait for it with --lock-wait")
        .nowhere("after waiting");
    assert!(!p.tables("app.db").contains(&"users".to_string()));
}

#[test]
fn an_interrupt_while_waiting_for_the_lock_says_nothing_was_started() {
    let p = held_lease();
    let url = format!("sqlite:{}", p.join("app.db").display());
    let mut child = support::dirthara(
        &url,
        &p.migrations_dir(),
        &["--locking", "lease", "--lock-wait", "forever", "migrate"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Every stderr line, as it comes, so the signal is sent only once the runner waits.
    let (lines, received) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut seen = Vec::new();
    loop {
        let line = received
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the runner never said it was waiting: {seen:?}"));
        let waiting = line.starts_with("waiting for lock `dirthara:migrations`");
        seen.push(line);
        if waiting {
            break;
        }
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = support::wait_with_watchdog(child, Duration::from_secs(30)).status;
    reader.join().unwrap();
    seen.extend(received.try_iter());
    let stderr = seen.join("\n");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("Error [INTERRUPTED]: interrupted while waiting for the lock"),
        "{stderr}"
    );
    assert!(
        stderr.contains("no migration was started and nothing was changed"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("every migration that started was finished"),
        "{stderr}"
    );
    assert!(!p.tables("app.db").contains(&"users".to_string()));
}

#[test]
fn an_uninspectable_lock_is_unknown_to_status_and_unlock_but_stops_a_forced_unlock() {
    let p = Project::new();
    p.table_migration(1, "users", "users");
    // A table under the lease table's name that is not one: the lock cannot be read.
    p.write(
        "plant/1_plant.sql",
        "CREATE TABLE dirthara_migrations_lock (unrelated INTEGER);\n",
    );
    p.unlocked(
        "app.db",
        &[
            "--dir",
            "plant",
            "--history-table",
            "plant_history",
            "migrate",
        ],
    )
    .success();

    let run = p.sqlite(
        "app.db",
        &["--locking", "lease", "status", "--output", "json"],
    );
    run.success();
    let doc = run.json();
    assert_eq!(doc["migrations"][0]["state"], "pending", "{doc}");
    assert_eq!(doc["lock"]["state"], "unknown", "{doc}");
    assert_eq!(doc["lock"]["strategy"], "lease", "{doc}");
    let reason = doc["lock"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("[MIGRATION_LOCK_FAILED] "), "{reason}");
    assert!(reason.contains("owner_id"), "{reason}");

    p.sqlite("app.db", &["--locking", "lease", "status"])
        .success()
        .stdout_has("1        users  pending")
        .stdout_has("(lease): state unknown: [MIGRATION_LOCK_FAILED] ");
    let run = p.sqlite(
        "app.db",
        &["--locking", "lease", "unlock", "--output", "json"],
    );
    run.success();
    assert_eq!(run.json()["state"], "unknown");

    // Releasing blind could delete a live holder's lease: refused, loudly.
    p.sqlite("app.db", &["--locking", "lease", "unlock", "--force"])
        .error("MIGRATION_LOCK_FAILED")
        .stderr_has("owner_id");
}

/// `(locking value, strategy that status reports on SQLite)`; `none` stands for JSON `null`
/// (no strategy can be used as configured).
const LOCKING_VALUES: [(&str, &str); 6] = [
    ("true", "none"),
    ("false", "off"),
    ("auto", "none"),
    ("off", "off"),
    ("session", "none"),
    ("lease", "lease"),
];

fn strategy(run: &Run) -> String {
    run.success();
    let strategy = &run.json()["lock"]["strategy"];
    match strategy {
        serde_json::Value::Null => "none".to_string(),
        other => other.as_str().unwrap().to_string(),
    }
}

#[test]
fn locking_takes_the_same_values_as_a_flag_in_the_file_and_in_the_environment() {
    let p = Project::new();
    p.table_migration(1, "users", "users");
    for (value, expected) in LOCKING_VALUES {
        let flag = p.sqlite(
            "app.db",
            &["--locking", value, "status", "--output", "json"],
        );
        assert_eq!(strategy(&flag), expected, "--locking {value}");

        p.write("dirthara.toml", format!("locking = \"{value}\"\n"));
        let file = p.sqlite("app.db", &["status", "--output", "json"]);
        assert_eq!(strategy(&file), expected, "locking = \"{value}\"");
        p.remove("dirthara.toml");

        let url = format!("sqlite:{}", p.join("app.db").display());
        let env = run_command(
            p.cmd()
                .env("DIRTHARA_LOCKING", value.to_ascii_uppercase())
                .args(["-d", url.as_str(), "status", "--output", "json"]),
        );
        assert_eq!(strategy(&env), expected, "DIRTHARA_LOCKING={value}");
    }
    // TOML booleans mean the same as the strings.
    p.write("dirthara.toml", "locking = false\n");
    let file = p.sqlite("app.db", &["status", "--output", "json"]);
    assert_eq!(strategy(&file), "off");
    p.remove("dirthara.toml");

    // A value outside the set is refused everywhere, listing the same set.
    let listed = "true, false, auto, off, session, lease";
    p.sqlite("app.db", &["--locking", "none", "status"])
        .code(2)
        .stderr_has(&format!("[possible values: {listed}]"));
    p.write("dirthara.toml", "locking = \"none\"\n");
    p.sqlite("app.db", &["status"])
        .error("CONFIG_ERROR")
        .stderr_has(&format!(
            "dirthara.toml: `locking`: expected one of {listed}"
        ));
    p.remove("dirthara.toml");
    let url = format!("sqlite:{}", p.join("app.db").display());
    run_command(
        p.cmd()
            .env("DIRTHARA_LOCKING", "none")
            .args(["-d", url.as_str(), "status"]),
    )
    .error("CONFIG_ERROR")
    .stderr_has(&format!(
        "environment variable DIRTHARA_LOCKING: expected one of {listed}"
    ));
}

#[test]
fn a_lease_shorter_than_five_seconds_is_refused_from_flag_file_and_environment() {
    let p = Project::new();
    p.table_migration(1, "users", "users");
    let minimum = "shorter than the minimum of 5s";
    p.sqlite(
        "app.db",
        &["--locking", "lease", "--lock-ttl", "1ms", "migrate"],
    )
    .error("CONFIG_ERROR")
    .stderr_has("--lock-ttl: a lease of 1ms is ")
    .stderr_has(minimum)
    .nowhere("LOCK_LEASE_LOST");
    p.write("dirthara.toml", "lock_ttl = \"2s\"\n");
    p.sqlite("app.db", &["--locking", "lease", "migrate"])
        .error("CONFIG_ERROR")
        .stderr_has("dirthara.toml: `lock_ttl`: a lease of 2s is ")
        .stderr_has(minimum);
    p.remove("dirthara.toml");
    let url = format!("sqlite:{}", p.join("app.db").display());
    run_command(p.cmd().env("DIRTHARA_LOCK_TTL", "4.9s").args([
        "-d",
        url.as_str(),
        "--locking",
        "lease",
        "migrate",
    ]))
    .error("CONFIG_ERROR")
    .stderr_has("environment variable DIRTHARA_LOCK_TTL: a lease of 4.9s is ")
    .stderr_has(minimum);
    assert!(!p.tables("app.db").contains(&"users".to_string()));

    // The minimum itself is accepted, and the run keeps its lease.
    p.sqlite(
        "app.db",
        &["--locking", "lease", "--lock-ttl", "5s", "migrate"],
    )
    .success();
    assert!(p.tables("app.db").contains(&"users".to_string()));
}

#[test]
fn preview_json_carries_the_staleness_notice() {
    let p = Project::new();
    p.table_migration(1, "users", "users");
    let run = p.unlocked("app.db", &["preview", "migrate", "--output", "json"]);
    run.success();
    let notice = run.json()["notice"].as_str().unwrap().to_string();
    assert!(notice.contains("took no lock"), "{notice}");
    assert!(notice.contains("before you act on it"), "{notice}");
    // Human mode says the same words.
    p.unlocked("app.db", &["preview", "migrate"])
        .success()
        .stderr_has(&format!("note: {notice}"));
}

#[test]
fn the_irreversible_hint_names_the_down_file_with_the_version_as_written() {
    let p = Project::new();
    p.table_migration(1, "users", "users");
    p.migration("0002_after.sql", "CREATE TABLE after_users (id INTEGER);\n");
    p.unlocked("app.db", &["migrate"]).success();
    p.unlocked("app.db", &["rollback"])
        .error("IRREVERSIBLE_MIGRATION")
        .stderr_has("migration 2 (after) has no down step")
        .stderr_has(
            "Add `migrations/0002_after.down.sql` and rename `0002_after.sql` to \
             `0002_after.up.sql`",
        )
        .nowhere("2_after.down.sql`, or");
}

/// A MongoDB migration's hint names a `.down.json` file; a transactional MongoDB migration
/// records the duration it really took.
#[tokio::test(flavor = "multi_thread")]
async fn mongodb_messages_and_records() {
    use support::servers::{Server, TestDb};
    use support::{dirthara, text, Migrations};
    let Some(db) = TestDb::create(Server::Mongo).await else {
        return;
    };
    let m = Migrations::new();
    m.add_as(
        "json",
        1,
        "things",
        r#"[{"create": "things"}]"#,
        Some(r#"[{"drop": "things"}]"#),
    );
    let documents: Vec<String> = (0..2000)
        .map(|i| format!(r#"{{"_id": {i}, "label": "thing number {i}"}}"#))
        .collect();
    std::fs::write(
        m.path().join("0002_after.json"),
        format!(
            r#"{{"transaction": true, "commands": [{{"insert": "things", "documents": [{}]}}]}}"#,
            documents.join(", ")
        ),
    )
    .unwrap();
    let out = dirthara(&db.url, m.path(), &["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reported = report["applied"][1]["duration_ms"].as_i64().unwrap();

    use mongodb::bson::doc;
    let record = db
        .mongo()
        .await
        .collection::<mongodb::bson::Document>("dirthara_migrations")
        .find_one(doc! { "_id": 2_i64 })
        .await
        .unwrap()
        .expect("migration 2 is recorded");
    let recorded = record
        .get_i64("durationMs")
        .unwrap_or_else(|_| panic!("durationMs is an Int64: {record}"));
    assert!(recorded > 0, "durationMs {recorded}: {record}");
    assert!(
        recorded <= reported,
        "recorded {recorded} ms, but the whole step took {reported} ms"
    );

    let out = dirthara(&db.url, m.path(), &["rollback"]).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Error [IRREVERSIBLE_MIGRATION]"),
        "{stderr}"
    );
    let down = m.path().join("0002_after.down.json");
    assert!(
        stderr.contains(&format!("Add `{}`", down.display())),
        "{stderr}"
    );
    assert!(!stderr.contains(".down.sql"), "{stderr}");
}
