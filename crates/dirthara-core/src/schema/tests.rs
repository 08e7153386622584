use super::*;

fn object(kind: &str, key: &str, text: &str) -> SchemaObject {
    SchemaObject::new(kind, key, text)
}

fn applied(version: i64, description: &str) -> AppliedVersion {
    AppliedVersion {
        version,
        description: description.to_string(),
    }
}

fn users() -> Vec<SchemaObject> {
    vec![
        object(
            "index",
            "users.users_email_idx",
            "CREATE INDEX users_email_idx ON users (email);",
        ),
        object(
            "table",
            "users",
            "CREATE TABLE users (\n    id bigint NOT NULL,\n    email text\n);",
        ),
        object(
            "view",
            "active_users",
            "CREATE VIEW active_users AS\n SELECT id FROM users;",
        ),
        object("schema", "app", "CREATE SCHEMA app;"),
    ]
}

#[test]
fn the_same_objects_in_any_order_render_the_same_file() {
    let one = SchemaDump::new(users(), vec![applied(2, "email"), applied(1, "users")]).unwrap();
    let mut reversed = users();
    reversed.reverse();
    let two = SchemaDump::new(reversed, vec![applied(1, "users"), applied(2, "email")]).unwrap();
    assert_eq!(one.render(), two.render());
    let kinds: Vec<&str> = one.objects().iter().map(|o| o.kind.as_str()).collect();
    assert_eq!(kinds, ["schema", "table", "view", "index"]);
}

#[test]
fn a_rendered_dump_reads_back_as_itself() {
    let dump = SchemaDump::new(users(), vec![applied(1, "create users"), applied(7, "")]).unwrap();
    let text = dump.render();
    assert!(
        text.starts_with("-- dirthara schema dump\n-- object schema app\nCREATE SCHEMA app;\n\n")
    );
    assert!(
        text.ends_with("-- applied versions\n-- 1 create users\n-- 7 \n"),
        "{text}"
    );
    assert_eq!(SchemaDump::parse(&text).unwrap(), dump);
    assert_eq!(
        SchemaDump::parse(&text.replace('\n', "\r\n")).unwrap(),
        dump
    );
}

#[test]
fn text_lines_that_look_like_the_files_own_lines_survive_the_round_trip() {
    let body = "CREATE FUNCTION f() RETURNS int AS $$\n-- object table users\n  -- applied versions\n\n-- dirthara schema dump\nSELECT 1\n$$ LANGUAGE sql;";
    let dump = SchemaDump::new(vec![object("function", "f()", body)], vec![]).unwrap();
    let text = dump.render();
    assert!(
        text.contains("\n -- object table users\n   -- applied versions\n"),
        "{text}"
    );
    let back = SchemaDump::parse(&text).unwrap();
    assert_eq!(back.objects()[0].text, body);
    assert_eq!(back, dump);
}

#[test]
fn what_means_nothing_is_left_out_of_an_objects_text() {
    let a = object(
        "table",
        "t",
        "\r\n\nCREATE TABLE t (\r\n  id int   \r\n);\n\n",
    );
    let dump = SchemaDump::new(vec![a], vec![]).unwrap();
    assert_eq!(dump.objects()[0].text, "CREATE TABLE t (\n  id int\n);");
}

#[test]
fn an_ambiguous_object_or_version_is_refused() {
    let twice = vec![object("table", "t", "a"), object("table", "t", "b")];
    assert_eq!(
        SchemaDump::new(twice, vec![]).unwrap_err().0,
        "table t is listed twice"
    );
    let kind = SchemaDump::new(vec![object("Materialized view", "v", "")], vec![]);
    assert!(kind.unwrap_err().0.contains("not a lower-case word"));
    let key = SchemaDump::new(vec![object("table", "a\nb", "")], vec![]);
    assert!(key.unwrap_err().0.contains("spans lines"));
    let versions = SchemaDump::new(vec![], vec![applied(1, "a"), applied(1, "b")]);
    assert_eq!(versions.unwrap_err().0, "version 1 is listed twice");
}

#[test]
fn a_file_that_is_no_dump_or_is_cut_short_is_refused_with_the_line() {
    let not = SchemaDump::parse("CREATE TABLE t (id int);\n").unwrap_err();
    assert!(not.0.contains("not a dirthara schema dump"), "{not}");
    let cut = SchemaDump::parse("-- dirthara schema dump\n-- object table t\nCREATE TABLE t ();\n");
    assert!(cut.unwrap_err().0.contains("cut short"));
    let stray =
        SchemaDump::parse("-- dirthara schema dump\nCREATE TABLE t ();\n-- applied versions\n");
    assert!(stray.unwrap_err().0.contains("line 2"));
    let version = SchemaDump::parse("-- dirthara schema dump\n-- applied versions\n-- x y\n");
    assert!(version.unwrap_err().0.contains("line 3"));
}

#[test]
fn compare_names_each_added_missing_and_changed_object() {
    let expected = SchemaDump::new(users(), vec![applied(1, "users")]).unwrap();
    let mut live_objects = users();
    live_objects.retain(|o| o.kind != "index");
    live_objects.push(object("table", "audit", "CREATE TABLE audit (id int);"));
    let users_table = live_objects.iter().position(|o| o.key == "users").unwrap();
    live_objects[users_table] = object(
        "table",
        "users",
        "CREATE TABLE users (\n    id bigint NOT NULL,\n    email text,\n    name text\n);",
    );
    let live = SchemaDump::new(live_objects, vec![applied(1, "users"), applied(2, "x")]).unwrap();
    let drift = compare(&expected, &live);
    let summary: Vec<(&str, Change)> = drift
        .iter()
        .map(|d| (d.object.as_str(), d.change))
        .collect();
    assert_eq!(
        summary,
        [
            ("table audit", Change::Added),
            ("table users", Change::Changed),
            ("index users.users_email_idx", Change::Missing),
        ]
    );
    assert_eq!(
        drift[1].detail,
        "@@ -1,4 +1,5 @@\n CREATE TABLE users (\n     id bigint NOT NULL,\n-    email text\n+    email text,\n+    name text\n );\n"
    );
    assert_eq!(drift[0].detail, "CREATE TABLE audit (id int);");
    assert!(compare(&expected, &expected).is_empty());
    assert_eq!(
        compare_versions(&expected, &live).as_deref(),
        Some("@@ -1,1 +1,2 @@\n -- 1 users\n+-- 2 x\n")
    );
    assert_eq!(compare_versions(&expected, &expected), None);
    assert_eq!(
        serde_json::to_value(&drift[2]).unwrap(),
        serde_json::json!({"object": "index users.users_email_idx", "change": "missing", "detail": "CREATE INDEX users_email_idx ON users (email);"})
    );
}

#[test]
fn a_diff_shows_separate_changes_as_separate_hunks_with_three_lines_of_context() {
    let old: Vec<String> = (1..=20).map(|i| format!("line {i}")).collect();
    let mut new = old.clone();
    new[1] = "changed 2".into();
    new[17] = "changed 18".into();
    let diff = line_diff(&old.join("\n"), &new.join("\n"));
    assert_eq!(
        diff,
        "@@ -1,5 +1,5 @@\n line 1\n-line 2\n+changed 2\n line 3\n line 4\n line 5\n\
         @@ -15,6 +15,6 @@\n line 15\n line 16\n line 17\n-line 18\n+changed 18\n line 19\n line 20\n"
    );
    assert_eq!(line_diff("same\ntext", "same\ntext"), "");
    assert_eq!(line_diff("", "added"), "@@ -0,0 +1,1 @@\n+added\n");
}

#[test]
fn a_huge_object_is_shown_replaced_whole() {
    let old: String = (0..3000).map(|i| format!("a{i}\n")).collect();
    let new: String = (0..3000).map(|i| format!("b{i}\n")).collect();
    let diff = line_diff(&old, &new);
    assert!(diff.starts_with("@@ -1,3000 +1,3000 @@\n-a0\n"));
    assert_eq!(diff.lines().count(), 6001);
}
