//! Spans and counters as OTLP/HTTP request bodies, in OTLP's JSON encoding
//! (`ExportTraceServiceRequest`, `ExportMetricsServiceRequest`): ids in lowercase hex,
//! 64-bit integers and nanosecond times as strings, enums as numbers.

use std::time::SystemTime;

use serde_json::{json, Value as Json};

use super::record::{Attributes, Counters, SpanRecord, Value};
use super::settings::ParentContext;

/// The instrumentation scope: dirthara, at this version.
fn scope() -> Json {
    json!({"name": "dirthara", "version": env!("CARGO_PKG_VERSION")})
}

fn resource(attributes: &[(String, String)]) -> Json {
    let mut all: Vec<Json> = (attributes.iter())
        .map(|(key, value)| json!({"key": key, "value": {"stringValue": value}}))
        .collect();
    all.extend([
        json!({"key": "service.version", "value": {"stringValue": env!("CARGO_PKG_VERSION")}}),
        json!({"key": "telemetry.sdk.name", "value": {"stringValue": "dirthara"}}),
        json!({"key": "telemetry.sdk.language", "value": {"stringValue": "rust"}}),
        json!({"key": "process.pid", "value": {"intValue": std::process::id().to_string()}}),
    ]);
    json!({ "attributes": all })
}

fn nanos(at: SystemTime) -> String {
    (at.duration_since(SystemTime::UNIX_EPOCH))
        .map_or(0, |since| since.as_nanos())
        .to_string()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(attributes: &Attributes) -> Json {
    (attributes.iter())
        .map(|(key, value)| {
            let value = match value {
                Value::Text(text) => json!({ "stringValue": text }),
                Value::Int(n) => json!({ "intValue": n.to_string() }),
                Value::Bool(b) => json!({ "boolValue": b }),
            };
            json!({"key": key, "value": value})
        })
        .collect()
}

/// `SPAN_KIND_INTERNAL`: dirthara's spans are its own work, not a server's or a client's.
const SPAN_KIND_INTERNAL: u8 = 1;
const STATUS_CODE_ERROR: u8 = 2;

/// The spans of one run, every one in the trace `trace_id`; the command's span (its `parent`
/// `None`) joins `parent`'s trace when there is one.
pub(crate) fn traces(
    resource_attributes: &[(String, String)],
    trace_id: &[u8; 16],
    parent: Option<&ParentContext>,
    spans: &[SpanRecord],
) -> Json {
    let spans: Vec<Json> = (spans.iter())
        .map(|span| {
            let mut encoded = json!({
                "traceId": hex(trace_id),
                "spanId": hex(&span.span_id),
                "name": span.name,
                "kind": SPAN_KIND_INTERNAL,
                "startTimeUnixNano": nanos(span.start),
                "endTimeUnixNano": nanos(span.end),
                "attributes": attributes(&span.attributes),
            });
            let parent_id = match span.parent {
                Some(id) => Some(hex(&id)),
                None => parent.map(|p| hex(&p.span_id)),
            };
            if let Some(id) = parent_id {
                encoded["parentSpanId"] = json!(id);
            }
            if let (None, Some(state)) = (span.parent, parent.and_then(|p| p.trace_state.as_ref()))
            {
                encoded["traceState"] = json!(state);
            }
            if let Some(message) = &span.error {
                encoded["status"] = json!({"code": STATUS_CODE_ERROR, "message": message});
            }
            encoded
        })
        .collect();
    json!({"resourceSpans": [{
        "resource": resource(resource_attributes),
        "scopeSpans": [{"scope": scope(), "spans": spans}],
    }]})
}

/// `AGGREGATION_TEMPORALITY_CUMULATIVE`: each run is its own process, counting from its start.
const CUMULATIVE: u8 = 2;

/// The counters of one run of `command`, counted from `start` to `end`.
pub(crate) fn metrics(
    resource_attributes: &[(String, String)],
    command: &str,
    counters: &Counters,
    start: SystemTime,
    end: SystemTime,
) -> Json {
    let point = |extra: Option<(&str, &str)>, value: Json| {
        let mut attributes =
            vec![json!({"key": "dirthara.command", "value": {"stringValue": command}})];
        if let Some((key, text)) = extra {
            attributes.push(json!({"key": key, "value": {"stringValue": text}}));
        }
        let mut point = json!({
            "attributes": attributes,
            "startTimeUnixNano": nanos(start),
            "timeUnixNano": nanos(end),
        });
        match value {
            Json::String(_) => point["asInt"] = value,
            other => point["asDouble"] = other,
        }
        point
    };
    let sum = |name: &str, unit: &str, description: &str, points: Vec<Json>| {
        json!({
            "name": name,
            "unit": unit,
            "description": description,
            "sum": {"dataPoints": points, "aggregationTemporality": CUMULATIVE, "isMonotonic": true},
        })
    };
    let count = |n: u64| json!(n.to_string());
    let seconds = |d: std::time::Duration| json!(d.as_secs_f64());
    let rows = [
        (
            "dirthara.migrations.applied",
            "{migration}",
            "Migration steps applied (up)",
            count(counters.applied),
        ),
        (
            "dirthara.migrations.reverted",
            "{migration}",
            "Migration steps reverted (down)",
            count(counters.reverted),
        ),
        (
            "dirthara.migrations.failed",
            "{migration}",
            "Migration steps that failed",
            count(counters.failed),
        ),
        (
            "dirthara.migrations.retried",
            "{attempt}",
            "Attempts of a step that gave way to the application's table lock and were tried again",
            count(counters.retried),
        ),
        (
            "dirthara.lock.wait",
            "s",
            "Time spent waiting for the migration lock",
            seconds(counters.lock_wait),
        ),
        (
            "dirthara.table_lock.wait",
            "s",
            "Time migration statements waited for table locks before giving way",
            seconds(counters.table_lock_wait),
        ),
    ];
    let mut all: Vec<Json> = (rows.into_iter())
        .map(|(name, unit, description, value)| {
            sum(name, unit, description, vec![point(None, value)])
        })
        .collect();
    if !counters.targets.is_empty() {
        let points = (counters.targets.iter())
            .map(|(outcome, n)| point(Some(("dirthara.outcome", outcome)), json!(n.to_string())))
            .collect();
        all.push(sum(
            "dirthara.fleet.targets",
            "{target}",
            "Fleet targets by how they ended",
            points,
        ));
    }
    json!({"resourceMetrics": [{
        "resource": resource(resource_attributes),
        "scopeMetrics": [{"scope": scope(), "metrics": all}],
    }]})
}
