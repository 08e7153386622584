//! A user the server refuses an action on dirthara's own collections (the history, the
//! lease) is told so (`PERMISSION_DENIED`, with the role grant that fixes it), never a
//! history error or a lock failure to puzzle over.

use crate::error::{Error, ErrorKind};

use super::commands::mongo_code;

/// Who the connection authenticates as, for the grant that fixes a refusal.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grantee {
    /// The URL's user; `None` without credentials.
    pub user: Option<String>,
    /// Where the user is defined (`authSource`, by default the URL's database or `admin`).
    pub source: Option<String>,
    /// The database the history lives in.
    pub database: String,
}

impl Grantee {
    /// `PERMISSION_DENIED` on `connection` when `error` is the server refusing this user an
    /// action (`Unauthorized`, code 13; Atlas's `AtlasError` 8000 "not allowed to do
    /// action"); `None` for any other error.
    pub(crate) fn refusal(&self, connection: &str, error: &mongodb::error::Error) -> Option<Error> {
        let message = super::commands::mongo_message(error);
        let refused = match mongo_code(error) {
            Some(13) => true,
            Some(8000) => message.contains("not allowed to do action"),
            _ => false,
        };
        if !refused {
            return None;
        }
        let user = self.user.as_deref().unwrap_or("<user>");
        let source = (self.source.as_deref()).unwrap_or(&self.database);
        let grant = format!(
            "db.getSiblingDB(\"{source}\").grantRolesToUser(\"{user}\", [{{ role: \"readWrite\", \
             db: \"{}\" }}]) (role \"read\" alone for status and wait)",
            self.database
        );
        Some(Error::new(ErrorKind::PermissionDenied {
            connection: connection.to_string(),
            message,
            grant,
        }))
    }
}
