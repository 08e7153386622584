//! How events' facts are written in JSON: codes as their names, durations in whole
//! milliseconds (`*_ms` keys), instants as RFC 3339 timestamps.

use std::time::{Duration, SystemTime};

use crate::vocabulary::Code;

pub(super) fn serialize_code<S: serde::Serializer>(code: &Code, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(code.as_str())
}

pub(super) fn serialize_opt_ms<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_millis().try_into().unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

pub(super) fn serialize_at<S: serde::Serializer>(at: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::format::format_timestamp(*at))
}

pub(super) fn serialize_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

pub(super) fn serialize_opt_code<S: serde::Serializer>(
    code: &Option<Code>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match code {
        Some(code) => s.serialize_str(code.as_str()),
        None => s.serialize_none(),
    }
}
