//! JSON command migrations: parsing them into BSON commands, running them with
//! `runCommand`, and reading what the server said.

use mongodb::bson::{Bson, Document};
use mongodb::error::{ErrorKind as MongoErrorKind, WriteFailure};
use mongodb::{ClientSession, Database};

use crate::backend::StepFailure;
use crate::error::DatabaseError;
use crate::migration::ParsedStep;
use dirthara_source::files::parse_commands;

/// The server's message (and code) for an error, without the driver's wrapping.
pub(crate) fn mongo_message(error: &mongodb::error::Error) -> String {
    match &*error.kind {
        MongoErrorKind::Command(c) => format!("{} (code {})", c.message, c.code),
        MongoErrorKind::Write(WriteFailure::WriteError(w)) => {
            format!("{} (code {})", w.message, w.code)
        }
        MongoErrorKind::Write(WriteFailure::WriteConcernError(w)) => {
            format!("write concern: {} (code {})", w.message, w.code)
        }
        _ => error.to_string(),
    }
}

/// The server error code, whichever way the driver reports it.
pub(crate) fn mongo_code(error: &mongodb::error::Error) -> Option<i32> {
    match &*error.kind {
        MongoErrorKind::Command(c) => Some(c.code),
        MongoErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        MongoErrorKind::Write(WriteFailure::WriteConcernError(w)) => Some(w.code),
        _ => None,
    }
}

/// A JSON command step as the BSON command documents MongoDB runs (Extended JSON v2
/// converted): parsed once, when the migrations are loaded (so a bad file is refused before
/// anything connects), and kept with the step for the backend to send.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommandDocuments(pub Vec<Document>);

impl CommandDocuments {
    /// The one parser of command files.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let parsed = parse_commands(text)?;
        let mut documents = Vec::with_capacity(parsed.commands.len());
        for (index, command) in parsed.commands.into_iter().enumerate() {
            match Bson::try_from(serde_json::Value::Object(command)) {
                Ok(Bson::Document(document)) => documents.push(document),
                Ok(_) => return Err(format!("command #{} is not a document", index + 1)),
                Err(e) => {
                    return Err(format!(
                        "command #{} is not valid Extended JSON: {e}",
                        index + 1
                    ))
                }
            }
        }
        Ok(CommandDocuments(documents))
    }
}

/// A JSON command step parsed for the backend, as loading keeps it
/// ([`StepBody::Text`](crate::backend::StepBody::Text)).
pub(crate) fn parse_step(text: &str) -> Result<ParsedStep, String> {
    CommandDocuments::parse(text).map(ParsedStep::new)
}

/// A command's reply can say `ok: 1` and still report failed writes.
fn check_reply(index: usize, reply: &Document) -> Result<(), String> {
    if let Ok(errors) = reply.get_array("writeErrors") {
        if let Some(Bson::Document(first)) = errors.first() {
            return Err(format!(
                "command #{}: write error: {} (code {})",
                index + 1,
                first.get_str("errmsg").unwrap_or("unknown"),
                first.get_i32("code").unwrap_or_default()
            ));
        }
    }
    if let Ok(concern) = reply.get_document("writeConcernError") {
        return Err(format!(
            "command #{}: write concern error: {}",
            index + 1,
            concern.get_str("errmsg").unwrap_or("unknown")
        ));
    }
    Ok(())
}

pub(super) async fn run(
    db: &Database,
    documents: &[Document],
    mut session: Option<&mut ClientSession>,
) -> Result<(), StepFailure> {
    for (index, command) in documents.iter().cloned().enumerate() {
        let reply = match session.as_deref_mut() {
            Some(session) => db.run_command(command).session(session).await,
            None => db.run_command(command).await,
        };
        let reply = reply.map_err(|e| {
            // The code goes in `number` (printed once, after the message).
            let text = match &*e.kind {
                MongoErrorKind::Command(c) => c.message.clone(),
                _ => mongo_message(&e),
            };
            let mut error = DatabaseError::from_message(format!("command #{}: {text}", index + 1));
            error.number = mongo_code(&e).map(i64::from);
            error.connection_lost = matches!(*e.kind, MongoErrorKind::Io(_));
            // A command the server refused (`ok: 0`) changed nothing; if it was the
            // first, the migration changed nothing at all.
            let refused = matches!(*e.kind, MongoErrorKind::Command(_));
            StepFailure {
                nothing_changed: refused && index == 0,
                ..StepFailure::new(error.caused_by(e))
            }
        })?;
        check_reply(index, &reply)
            .map_err(|message| StepFailure::new(DatabaseError::from_message(message)))?;
    }
    Ok(())
}
