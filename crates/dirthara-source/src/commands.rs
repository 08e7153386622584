//! MongoDB command migrations: a JSON array of database command documents.

/// A JSON command migration, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Commands {
    /// Each a database command document (Extended JSON v2).
    pub commands: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Run the commands and the history record in one transaction (replica sets).
    pub transaction: bool,
    pub connection: Option<String>,
}

/// Parses `[{...}, ...]` or `{"transaction": true, "commands": [{...}], "connection": "name"}`.
pub fn parse_commands(text: &str) -> std::result::Result<Commands, String> {
    let value: serde_json::Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| format!("is not valid JSON ({e})"))?;
    const SHAPE: &str = "a MongoDB migration is a JSON array of command documents, e.g. \
                         `[{\"create\": \"users\"}]`, or `{\"transaction\": true, \"commands\": [...]}`";
    let (list, transaction, connection) = match value {
        serde_json::Value::Array(list) => (list, false, None),
        serde_json::Value::Object(mut object) => {
            let list = match object.remove("commands") {
                Some(serde_json::Value::Array(list)) => list,
                _ => return Err(format!("has no `commands` array: {SHAPE}")),
            };
            let transaction = match object.remove("transaction") {
                None => false,
                Some(serde_json::Value::Bool(b)) => b,
                Some(_) => return Err("`transaction` must be true or false".into()),
            };
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
            if let Some(key) = object.keys().next() {
                return Err(format!(
                    "unknown key `{key}`; the known ones are `commands`, `transaction` and `connection`"
                ));
            }
            (list, transaction, connection)
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
    })
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
    match serde_json::from_str::<serde_json::Value>(text) {
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
        assert!(tx.transaction);
        for (text, needle) in [
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
