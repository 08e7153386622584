//! The baseline `dirthara squash --to V` writes: the dump's objects as statements a new
//! database runs in one step, in an order that runs. A dump lists objects by kind and name,
//! which is stable but not always runnable (a view on a view named after it, a table whose
//! default calls a function); the order here keeps the dump's where it can and puts each
//! object after what it depends on: the dependencies the catalog records (PostgreSQL's
//! `pg_depend`), the names a view's text mentions (MySQL, SQLite), a MongoDB view's source.
//! As pg_dump does, PostgreSQL's function bodies are not checked while the file runs, and a
//! sequence is tied to its column (`OWNED BY`) once every table exists; MySQL's foreign keys
//! are not checked while its tables are created in any order.

use std::collections::{BTreeMap, BTreeSet};

use super::SchemaObject;

/// The language a baseline is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BaselineDialect {
    Postgres,
    MySql,
    Sqlite,
    /// A JSON command file.
    Mongo,
}

/// An object as a dependency names it: kind and key, as in the dump.
pub type ObjectName = (String, String);

/// What the backend knows beyond the dump to write its objects so they run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BaselineFacts {
    /// `(dependent, dependency)` pairs the catalog records.
    pub depends: Vec<(ObjectName, ObjectName)>,
    /// The schema whose name the server puts before the objects' names (PostgreSQL's
    /// `pg_get_indexdef` and `pg_get_functiondef` always do), taken off so that the baseline
    /// builds its objects in the schema it runs in, as the migrations did.
    pub schema: Option<String>,
}

/// The baseline file at `version` standing for `squashes`, from `objects` (in a dump's order).
pub fn write_baseline(
    dialect: BaselineDialect,
    objects: &[SchemaObject],
    facts: &BaselineFacts,
    squashes: &[i64],
    version: i64,
) -> String {
    let mut edges = named_edges(objects, &facts.depends);
    edges.extend(match dialect {
        BaselineDialect::MySql | BaselineDialect::Sqlite => mentioned_edges(objects),
        BaselineDialect::Mongo => view_source_edges(objects),
        BaselineDialect::Postgres => Vec::new(),
    });
    let order = executable_order(objects.len(), &edges);
    match dialect {
        BaselineDialect::Mongo => mongo_baseline(objects, &order, squashes),
        _ => sql_baseline(dialect, objects, &order, facts, squashes, version),
    }
}

/// Every index of `objects` once, each after the objects it depends on (`edges`: dependent,
/// dependency), otherwise in the given order. A cycle is broken at its first object in that
/// order.
fn executable_order(count: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut waits_on: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); count];
    let mut unblocks: Vec<Vec<usize>> = vec![Vec::new(); count];
    for &(dependent, dependency) in edges {
        if dependent != dependency && waits_on[dependent].insert(dependency) {
            unblocks[dependency].push(dependent);
        }
    }
    let mut ready: BTreeSet<usize> = (0..count).filter(|i| waits_on[*i].is_empty()).collect();
    let mut placed = vec![false; count];
    let mut order = Vec::with_capacity(count);
    while order.len() < count {
        let next = match ready.pop_first() {
            Some(next) => next,
            // A cycle: the first object not placed goes next.
            None => (0..count).find(|i| !placed[*i]).unwrap_or_default(),
        };
        if placed[next] {
            continue;
        }
        placed[next] = true;
        order.push(next);
        for &dependent in &unblocks[next] {
            waits_on[dependent].remove(&next);
            if waits_on[dependent].is_empty() && !placed[dependent] {
                ready.insert(dependent);
            }
        }
    }
    order
}

/// The catalog's dependencies, as indexes into `objects`; one on an object the dump leaves
/// out is dropped.
fn named_edges(
    objects: &[SchemaObject],
    depends: &[(ObjectName, ObjectName)],
) -> Vec<(usize, usize)> {
    let index: BTreeMap<(&str, &str), usize> = (objects.iter().enumerate())
        .map(|(i, o)| ((o.kind.as_str(), o.key.as_str()), i))
        .collect();
    let find = |(kind, key): &ObjectName| index.get(&(kind.as_str(), key.as_str())).copied();
    (depends.iter())
        .filter_map(|(dependent, dependency)| Some((find(dependent)?, find(dependency)?)))
        .collect()
}

/// A view after every view and function whose name its text mentions as a word (MySQL and
/// SQLite keep a view's text, and no record of what it reads).
fn mentioned_edges(objects: &[SchemaObject]) -> Vec<(usize, usize)> {
    let named: Vec<(usize, String)> = (objects.iter().enumerate())
        .filter(|(_, o)| matches!(o.kind.as_str(), "view" | "function"))
        .map(|(i, o)| (i, o.key.to_lowercase()))
        .collect();
    let mut edges = Vec::new();
    for (i, object) in objects.iter().enumerate().filter(|(_, o)| o.kind == "view") {
        let text = object.text.to_lowercase();
        for (j, name) in &named {
            if *j != i && mentions(&text, name) {
                edges.push((i, *j));
            }
        }
    }
    edges
}

/// Whether `name` stands in `text` as a word of its own.
fn mentions(text: &str, name: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// A MongoDB view after the collection or view it reads (`viewOn`).
fn view_source_edges(objects: &[SchemaObject]) -> Vec<(usize, usize)> {
    let mut edges = Vec::new();
    for (i, object) in objects.iter().enumerate().filter(|(_, o)| o.kind == "view") {
        let source = (serde_json::from_str::<serde_json::Value>(&object.text).ok())
            .and_then(|v| v["options"]["viewOn"].as_str().map(str::to_string));
        let found = source
            .and_then(|source| (objects.iter()).position(|o| o.key == source && o.kind != "index"));
        edges.extend(found.map(|j| (i, j)));
    }
    edges
}

/// The first lines of a SQL baseline: the versions it stands for, and what it is.
fn sql_header(squashes: &[i64], version: i64) -> String {
    let list: Vec<String> = squashes.iter().map(i64::to_string).collect();
    format!(
        "-- dirthara:squashes {}\n\
         --\n\
         -- The baseline at version {version}: the schema migrations {} built, written by\n\
         -- `dirthara squash --to {version}`. A new database runs it in one step instead of them,\n\
         -- then the migrations after {version}. A database that applied them goes on from its own\n\
         -- history, so their files may be archived. It holds no rows: data the migrations\n\
         -- inserted is not in it.\n",
        list.join(","),
        crate::format::squashed_range(squashes)
    )
}

fn sql_baseline(
    dialect: BaselineDialect,
    objects: &[SchemaObject],
    order: &[usize],
    facts: &BaselineFacts,
    squashes: &[i64],
    version: i64,
) -> String {
    let mut out = sql_header(squashes, version);
    let mut statements: Vec<String> = Vec::new();
    let mut last: Vec<String> = Vec::new();
    match dialect {
        // Function bodies refer to tables made after them, as pg_dump's output allows.
        BaselineDialect::Postgres => {
            statements.push("SET LOCAL check_function_bodies = false;".into())
        }
        // Tables refer to each other; their foreign keys are checked once all exist.
        BaselineDialect::MySql => {
            statements.push("SET FOREIGN_KEY_CHECKS = 0;".into());
            last.push("SET FOREIGN_KEY_CHECKS = 1;".into());
        }
        _ => {}
    }
    let mut owned_by: Vec<String> = Vec::new();
    for &i in order {
        let object = &objects[i];
        let mut text = match &facts.schema {
            Some(schema) => unqualified(&object.text, schema),
            None => object.text.clone(),
        };
        if dialect == BaselineDialect::Postgres && object.kind == "table" {
            text = partition_of(&text);
        }
        // An index on a partitioned table: made `ON ONLY` the parent, the server lists it
        // alone, its partitions' copies apart; made on the parent, it reaches every partition.
        if dialect == BaselineDialect::Postgres && object.kind == "index" {
            text = text.replacen(" ON ONLY ", " ON ", 1);
        }
        if dialect == BaselineDialect::Postgres && object.kind == "sequence" {
            if let Some((sequence, owner)) = text.split_once(";\nALTER SEQUENCE ") {
                owned_by.push(format!("ALTER SEQUENCE {owner}"));
                text = format!("{sequence};");
            }
        }
        let compound = matches!(
            object.kind.as_str(),
            "function" | "procedure" | "trigger" | "event"
        );
        if dialect == BaselineDialect::MySql && compound {
            // Its body holds `;`: sent whole, as the mysql client sends it.
            let body = text.trim_end().trim_end_matches(';');
            text = format!("DELIMITER $$\n{body}$$\nDELIMITER ;");
        }
        statements.push(text);
    }
    statements.extend(owned_by);
    statements.extend(last);
    for statement in statements {
        out.push('\n');
        out.push_str(statement.trim_end());
        out.push('\n');
    }
    out
}

/// A PostgreSQL partition as it is created: the dump lists its columns and then its parent
/// (`CREATE TABLE p (...)\nPARTITION OF t FOR VALUES ...`); it takes them from the parent
/// (`CREATE TABLE p PARTITION OF t FOR VALUES ...`).
fn partition_of(text: &str) -> String {
    match (text.find(" ("), text.split_once(")\nPARTITION OF ")) {
        (Some(head), Some((_, parent))) => format!("{} PARTITION OF {parent}", &text[..head]),
        _ => text.to_string(),
    }
}

/// `text` without `schema.` before the names in it (either as written, or quoted), where it
/// starts a name.
fn unqualified(text: &str, schema: &str) -> String {
    let quoted = format!("\"{}\".", schema.replace('"', "\"\""));
    let plain = format!("{schema}.");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for prefix in [&quoted, &plain] {
            if rest.starts_with(prefix.as_str()) {
                let before = out.chars().next_back();
                let starts_name = !before
                    .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '"' | '.'));
                if starts_name {
                    rest = &rest[prefix.len()..];
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A MongoDB baseline: `create` for each collection and view with its options, and
/// `createIndexes` for each index.
fn mongo_baseline(objects: &[SchemaObject], order: &[usize], squashes: &[i64]) -> String {
    use serde_json::{json, Map, Value};
    let mut commands: Vec<Value> = Vec::new();
    for &i in order {
        let object = &objects[i];
        let Ok(shown) = serde_json::from_str::<Value>(&object.text) else {
            continue;
        };
        match object.kind.as_str() {
            "collection" | "view" => {
                let mut command = Map::new();
                command.insert("create".into(), Value::String(object.key.clone()));
                if let Some(options) = shown["options"].as_object() {
                    command.extend(options.clone());
                }
                commands.push(Value::Object(command));
            }
            "index" => {
                let collection = object.key.rsplit_once('.').map_or("", |(c, _)| c);
                commands.push(json!({ "createIndexes": collection, "indexes": [shown] }));
            }
            _ => {}
        }
    }
    let file = json!({ "squashes": squashes, "commands": commands });
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: &str, key: &str, text: &str) -> SchemaObject {
        SchemaObject::new(kind, key, text)
    }

    #[test]
    fn each_object_comes_after_what_it_depends_on_and_otherwise_keeps_its_place() {
        // 0 table, 1 view b reads view c, 2 view c, 3 function.
        let order = executable_order(4, &[(1, 2), (0, 3)]);
        assert_eq!(order, [2, 1, 3, 0]);
        let position = |i: usize| order.iter().position(|o| *o == i).unwrap();
        assert!(position(2) < position(1));
        assert!(position(3) < position(0));
        assert_eq!(executable_order(3, &[]), [0, 1, 2]);
        // A cycle is broken, and every object is placed once.
        let mut cyclic = executable_order(3, &[(0, 1), (1, 0)]);
        cyclic.sort();
        assert_eq!(cyclic, [0, 1, 2]);
    }

    #[test]
    fn a_view_on_a_view_named_after_it_runs_after_it() {
        let objects = [
            object("table", "items", "CREATE TABLE `items` (`id` int);"),
            object(
                "view",
                "a_view",
                "CREATE VIEW `a_view` AS select `id` from `z_view`;",
            ),
            object(
                "view",
                "z_view",
                "CREATE VIEW `z_view` AS select `id` from `items`;",
            ),
        ];
        let text = write_baseline(
            BaselineDialect::MySql,
            &objects,
            &BaselineFacts::default(),
            &[1, 2],
            2,
        );
        assert!(text.starts_with("-- dirthara:squashes 1,2\n"));
        let at = |needle: &str| text.find(needle).unwrap();
        assert!(at("CREATE TABLE") < at("CREATE VIEW `z_view`"));
        assert!(at("CREATE VIEW `z_view`") < at("CREATE VIEW `a_view`"));
        assert!(at("SET FOREIGN_KEY_CHECKS = 0") < at("CREATE TABLE"));
        assert!(text.trim_end().ends_with("SET FOREIGN_KEY_CHECKS = 1;"));
        // `items_old` is not `items`.
        assert!(!mentions("select * from items_old", "items"));
        assert!(mentions("select * from `items`", "items"));
    }

    #[test]
    fn postgres_names_lose_their_schema_and_a_sequence_is_owned_at_the_end() {
        let objects = [
            object(
                "sequence",
                "items_id_seq",
                "CREATE SEQUENCE items_id_seq AS integer;\nALTER SEQUENCE items_id_seq OWNED BY items.id;",
            ),
            object("table", "items", "CREATE TABLE items (id integer DEFAULT nextval('items_id_seq'::regclass));"),
            object("index", "items.items_id", "CREATE INDEX items_id ON tenant_1.items USING btree (id);"),
            object("function", "f()", "CREATE OR REPLACE FUNCTION \"tenant_1\".f()\n RETURNS integer\n LANGUAGE sql\nAS $function$select 'my_tenant_1.x'$function$;"),
        ];
        let facts = BaselineFacts {
            depends: vec![(
                ("table".into(), "items".into()),
                ("function".into(), "f()".into()),
            )],
            schema: Some("tenant_1".into()),
        };
        let text = write_baseline(BaselineDialect::Postgres, &objects, &facts, &[1], 1);
        assert!(text.contains("CREATE INDEX items_id ON items USING btree (id);"));
        assert!(text.contains("FUNCTION f()"));
        assert!(text.contains("'my_tenant_1.x'"), "{text}");
        let at = |needle: &str| text.find(needle).unwrap();
        assert!(at("SET LOCAL check_function_bodies") < at("CREATE SEQUENCE"));
        assert!(at("FUNCTION f()") < at("CREATE TABLE items"));
        assert!(at("CREATE INDEX") < at("ALTER SEQUENCE items_id_seq OWNED BY items.id;"));
        assert_eq!(
            partition_of(
                "CREATE TABLE e_1 (\n    at date NOT NULL\n)\nPARTITION OF e FOR VALUES IN (1);"
            ),
            "CREATE TABLE e_1 PARTITION OF e FOR VALUES IN (1);"
        );
    }

    #[test]
    fn a_mongodb_baseline_creates_collections_indexes_and_views_after_their_source() {
        let objects = [
            object(
                "collection",
                "users",
                r#"{"type": "collection", "options": {"validator": {"$jsonSchema": {"required": ["email"]}}}}"#,
            ),
            object(
                "view",
                "active",
                r#"{"type": "view", "options": {"viewOn": "z_users", "pipeline": []}}"#,
            ),
            object("collection", "z_users", r#"{"type": "collection"}"#),
            object(
                "index",
                "users.email_1",
                r#"{"key": {"email": 1}, "name": "email_1", "unique": true}"#,
            ),
        ];
        let text = write_baseline(
            BaselineDialect::Mongo,
            &objects,
            &BaselineFacts::default(),
            &[1, 3],
            3,
        );
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(file["squashes"], serde_json::json!([1, 3]));
        let commands = file["commands"].as_array().unwrap();
        assert_eq!(commands[0]["create"], "users");
        assert_eq!(
            commands[0]["validator"]["$jsonSchema"]["required"][0],
            "email"
        );
        let position = |name: &str| commands.iter().position(|c| c["create"] == name).unwrap();
        assert!(position("z_users") < position("active"));
        let index = commands
            .iter()
            .find(|c| c["createIndexes"] == "users")
            .unwrap();
        assert_eq!(index["indexes"][0]["unique"], true);
    }
}
