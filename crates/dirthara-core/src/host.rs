//! This machine, as runners identify themselves to each other: in the history, the lease and
//! the session's name on the server.

/// The machine's host name (lossily decoded: it is only ever shown).
pub fn hostname() -> String {
    gethostname::gethostname().to_string_lossy().into_owned()
}
