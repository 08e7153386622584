//! MongoDB command migrations: a JSON array of database command documents.

/// A JSON command migration, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Commands {
    /// Each a database command document (Extended JSON v2).
    pub commands: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Run the commands and the history record in one transaction (replica sets).
    pub transaction: bool,
    pub connection: Option<String>,
    /// `"placeholders": true`: the `${name}` in its strings are filled in when it runs
    /// ([`crate::placeholders`]).
    pub placeholders: bool,
    /// `"squashes": [1, 2, 3]`: the versions a baseline migration (`B<V>__<name>.json`)
    /// stands for, which `dirthara squash` writes.
    pub squashes: Option<Vec<i64>>,
}

/// Parses `[{...}, ...]` or `{"transaction": true, "commands": [{...}], "connection": "name",
/// "placeholders": true}`.
pub fn parse_commands(text: &str) -> std::result::Result<Commands, String> {
    let value = parse_json(text.trim_start_matches('\u{feff}'))?;
    const SHAPE: &str = "a MongoDB migration is a JSON array of command documents, e.g. \
                         `[{\"create\": \"users\"}]`, or `{\"transaction\": true, \"commands\": [...]}`";
    let (list, transaction, connection, placeholders, squashes) = match value {
        serde_json::Value::Array(list) => (list, false, None, false, None),
        serde_json::Value::Object(mut object) => {
            let list = match object.remove("commands") {
                Some(serde_json::Value::Array(list)) => list,
                _ => return Err(format!("has no `commands` array: {SHAPE}")),
            };
            let mut switch = |key: &str| match object.remove(key) {
                None => Ok(false),
                Some(serde_json::Value::Bool(b)) => Ok(b),
                Some(_) => Err(format!("`{key}` must be true or false")),
            };
            let transaction = switch("transaction")?;
            let placeholders = switch("placeholders")?;
            let connection = match object.remove("connection") {
                None => None,
                Some(serde_json::Value::String(name))
                    if crate::directives::valid_connection_name(&name) =>
                {
                    Some(name)
                }
                Some(_) => {
                    return Err(
                        "`connection` must be a connection name (letters, digits, `_`, `-`)".into(),
                    )
                }
            };
            let squashes = match object.remove("squashes") {
                None => None,
                Some(serde_json::Value::Array(versions)) => {
                    let list: Vec<String> = versions.iter().map(|v| v.to_string()).collect();
                    Some(crate::directives::parse_squashed(&list.join(","))?)
                }
                Some(_) => {
                    return Err("`squashes` must be an array of versions, e.g. `[1, 2, 5]`".into())
                }
            };
            if let Some(key) = object.keys().next() {
                return Err(format!(
                    "unknown key `{key}`; the known ones are `commands`, `transaction`, \
                     `connection`, `placeholders` and, in a baseline, `squashes`"
                ));
            }
            (list, transaction, connection, placeholders, squashes)
        }
        _ => return Err(format!("is not a JSON array of documents: {SHAPE}")),
    };
    if list.is_empty() {
        return Err("has no commands; write at least one or delete the file".into());
    }
    let mut commands = Vec::with_capacity(list.len());
    for (index, item) in list.into_iter().enumerate() {
        match item {
            serde_json::Value::Object(command) if !command.is_empty() => commands.push(command),
            _ => {
                return Err(format!(
                    "command #{} is not a non-empty document: {SHAPE}",
                    index + 1
                ))
            }
        }
    }
    Ok(Commands {
        commands,
        transaction,
        connection,
        placeholders,
        squashes,
    })
}

/// JSON text as a value, refusing a document that has one key twice: JSON parsers keep the
/// last (`serde_json` too), so `{"create": "a", "create": "b"}` would quietly create `b`.
fn parse_json(text: &str) -> std::result::Result<serde_json::Value, String> {
    match serde_json::from_str::<Unique>(text) {
        Ok(Unique(value)) => Ok(value),
        // The only data error reading into `Unique` is a duplicate key: the rest is syntax.
        Err(e) if e.classify() == serde_json::error::Category::Data => Err(format!(
            "has {e}; a document takes each key once (the last one would silently win): \
             remove or rename the other one"
        )),
        Err(e) => Err(format!("is not valid JSON ({e})")),
    }
}

/// A JSON value whose documents have no key twice.
struct Unique(serde_json::Value);

impl<'de> serde::Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut list = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            list.push(item);
        }
        Ok(list.into())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "the key `{key}` twice in one document"
                )));
            }
            let Unique(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(object.into())
    }
}

/// Whether a JSON step does nothing: empty, `[]`, or `{"commands": []}`. An empty down step
/// is a deliberate "reverses nothing".
///
/// ```
/// use dirthara_source::commands::is_blank_commands;
/// assert!(is_blank_commands(" []\n") && is_blank_commands("") && is_blank_commands("{\"commands\": []}"));
/// assert!(!is_blank_commands("[{\"drop\": \"users\"}]") && !is_blank_commands("[,"));
/// ```
pub fn is_blank_commands(text: &str) -> bool {
    let text = text.trim_start_matches('\u{feff}').trim();
    if text.is_empty() {
        return true;
    }
    // A duplicate key is not blank: it is refused, as `parse_commands` reads it.
    match parse_json(text) {
        Ok(serde_json::Value::Array(list)) => list.is_empty(),
        Ok(serde_json::Value::Object(object)) => {
            matches!(object.get("commands"), Some(serde_json::Value::Array(list)) if list.is_empty())
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_command_files_parse_in_both_forms_and_bad_shapes_are_refused() {
        let plain = parse_commands(r#"[{"create": "users"}, {"drop": "old"}]"#).unwrap();
        assert_eq!((plain.commands.len(), plain.transaction), (2, false));
        let tx = parse_commands(
            r#"{"transaction": true, "commands": [{"insert": "u", "documents": [{"a": 1}]}]}"#,
        )
        .unwrap();
        assert!(tx.transaction && !tx.placeholders);
        let filled = r#"{"placeholders": true, "commands": [{"create": "${t}"}]}"#;
        assert!(parse_commands(filled).unwrap().placeholders);
        for (text, needle) in [
            (
                "{\"commands\": [{\"a\": 1}], \"placeholders\": \"yes\"}",
                "`placeholders` must be true or false",
            ),
            ("{", "not valid JSON"),
            ("[]", "no commands"),
            ("[1]", "not a non-empty document"),
            ("[{}]", "not a non-empty document"),
            ("{\"x\": 1}", "no `commands`"),
            (
                "{\"commands\": [{\"a\": 1}], \"extra\": 1}",
                "unknown key `extra`",
            ),
            ("\"create\"", "not a JSON array"),
        ] {
            let err = parse_commands(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
