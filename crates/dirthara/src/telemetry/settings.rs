//! Where and how to export, from the standard OpenTelemetry variables (the OTLP exporter's
//! and the SDK's), read through a function so that tests need no process environment.
//!
//! Followed as the OpenTelemetry specification writes them: `OTEL_SDK_DISABLED`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` and `/v1/metrics` appended) or the per-signal
//! `OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT` (used as they are), `..._HEADERS`,
//! `..._PROTOCOL`, `..._TIMEOUT`, `OTEL_{TRACES,METRICS}_EXPORTER=none`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, and the W3C `TRACEPARENT`/`TRACESTATE` a CI system sets.

use std::time::Duration;

/// The two kinds of data exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    fn upper(self) -> &'static str {
        match self {
            Signal::Traces => "TRACES",
            Signal::Metrics => "METRICS",
        }
    }

    /// The path the OTLP/HTTP receiver takes this signal at, under a base endpoint.
    fn path(self) -> &'static str {
        match self {
            Signal::Traces => "v1/traces",
            Signal::Metrics => "v1/metrics",
        }
    }

    /// As people say it, in messages.
    pub(crate) fn noun(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
        }
    }
}

/// Where one signal goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Destination {
    /// `http://host:port/path` or `https://…`.
    pub(crate) url: String,
    /// Sent with every request (an API key, a tenant).
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) timeout: Duration,
    /// `https`: a PEM file of the certificates to trust besides the web's roots
    /// (`OTEL_EXPORTER_OTLP_CERTIFICATE`, a private CA's).
    pub(crate) certificate: Option<std::path::PathBuf>,
}

/// The caller's trace, to join (W3C trace context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParentContext {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) trace_state: Option<String>,
}

/// Everything the exporter needs, read once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExportSettings {
    pub(crate) traces: Option<Destination>,
    pub(crate) metrics: Option<Destination>,
    /// `service.name` first, then the rest of `OTEL_RESOURCE_ATTRIBUTES`.
    pub(crate) resource: Vec<(String, String)>,
    pub(crate) parent: Option<ParentContext>,
}

/// The OTLP exporter's default timeout, per request.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings, or `None` when nothing is to be exported (no endpoint, or switched off);
/// with a warning for each variable that could not be followed (that signal, or that
/// header, is then left out: telemetry never stops a migration).
pub(crate) fn read(var: impl Fn(&str) -> Option<String>) -> (Option<ExportSettings>, Vec<String>) {
    let mut warnings = Vec::new();
    let var = |name: &str| var(name).filter(|value| !value.trim().is_empty());
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return (None, warnings);
    }
    let traces = destination(Signal::Traces, &var, &mut warnings);
    let metrics = destination(Signal::Metrics, &var, &mut warnings);
    if traces.is_none() && metrics.is_none() {
        return (None, warnings);
    }
    let parent = match var("TRACEPARENT") {
        None => None,
        Some(text) => match parse_traceparent(&text) {
            Some((trace_id, span_id)) => Some(ParentContext {
                trace_id,
                span_id,
                trace_state: var("TRACESTATE"),
            }),
            None => {
                warnings.push(format!(
                    "TRACEPARENT `{text}` is not a W3C traceparent \
                     (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`); this run starts a \
                     trace of its own"
                ));
                None
            }
        },
    };
    let settings = ExportSettings {
        traces,
        metrics,
        resource: resource(&var, &mut warnings),
        parent,
    };
    (Some(settings), warnings)
}

fn destination(
    signal: Signal,
    var: &impl Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Option<Destination> {
    let upper = signal.upper();
    let exporter_var = format!("OTEL_{upper}_EXPORTER");
    match var(&exporter_var).map(|v| v.trim().to_ascii_lowercase()) {
        None => {}
        Some(v) if v == "otlp" => {}
        Some(v) if v == "none" => return None,
        Some(other) => {
            warnings.push(format!(
                "{exporter_var}=`{other}`: dirthara exports over OTLP only (`otlp`, or `none`); \
                 no {} are exported",
                signal.noun()
            ));
            return None;
        }
    }
    let own = format!("OTEL_EXPORTER_OTLP_{upper}_ENDPOINT");
    let (url, url_var) = match (var(&own), var("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        (Some(url), _) => (url.trim().to_string(), own),
        (None, Some(base)) => (
            format!("{}/{}", base.trim().trim_end_matches('/'), signal.path()),
            "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
        ),
        (None, None) => return None,
    };
    let protocol_var = format!("OTEL_EXPORTER_OTLP_{upper}_PROTOCOL");
    let protocol = var(&protocol_var).or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if let Some(protocol) = protocol.map(|p| p.trim().to_ascii_lowercase()) {
        if protocol != "http/json" && protocol != "http/protobuf" {
            warnings.push(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL=`{protocol}`: dirthara exports over OTLP/HTTP \
                 (`http/json`, which every OTLP/HTTP receiver accepts, also when \
                 `http/protobuf` is asked for); no {} are exported. Point \
                 OTEL_EXPORTER_OTLP_ENDPOINT at the receiver's HTTP port (4318 by default)",
                signal.noun()
            ));
            return None;
        }
    }
    match url::Url::parse(&url) {
        Ok(parsed)
            if matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some() => {}
        _ => {
            warnings.push(format!(
                "{url_var}: `{url}` is not an http:// or https:// URL (e.g. \
                 `http://localhost:4318`); no {} are exported",
                signal.noun()
            ));
            return None;
        }
    }
    let mut headers = Vec::new();
    for name in [
        "OTEL_EXPORTER_OTLP_HEADERS".to_string(),
        format!("OTEL_EXPORTER_OTLP_{upper}_HEADERS"),
    ] {
        let Some(text) = var(&name) else { continue };
        for (key, value) in key_values(&name, &text, warnings) {
            // The signal's own value of a header wins over the shared one.
            headers.retain(|(k, _): &(String, String)| !k.eq_ignore_ascii_case(&key));
            headers.push((key, value));
        }
    }
    let timeout_var = format!("OTEL_EXPORTER_OTLP_{upper}_TIMEOUT");
    let timeout = match var(&timeout_var).map(|t| (timeout_var, t)).or_else(|| {
        var("OTEL_EXPORTER_OTLP_TIMEOUT").map(|t| ("OTEL_EXPORTER_OTLP_TIMEOUT".into(), t))
    }) {
        None => DEFAULT_TIMEOUT,
        Some((name, text)) => match text.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Duration::from_millis(ms),
            _ => {
                warnings.push(format!(
                    "{name}=`{text}` is not a number of milliseconds above 0; using 10000"
                ));
                DEFAULT_TIMEOUT
            }
        },
    };
    let certificate = var(&format!("OTEL_EXPORTER_OTLP_{upper}_CERTIFICATE"))
        .or_else(|| var("OTEL_EXPORTER_OTLP_CERTIFICATE"))
        .map(std::path::PathBuf::from);
    Some(Destination {
        url,
        headers,
        timeout,
        certificate,
    })
}

/// `service.name` first (from `OTEL_SERVICE_NAME`, else `OTEL_RESOURCE_ATTRIBUTES`, else
/// `dirthara`), then the other resource attributes as given.
fn resource(
    var: &impl Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Vec<(String, String)> {
    let mut given = match var("OTEL_RESOURCE_ATTRIBUTES") {
        Some(text) => key_values("OTEL_RESOURCE_ATTRIBUTES", &text, warnings),
        None => Vec::new(),
    };
    let from_attributes = given
        .iter()
        .position(|(k, _)| k == "service.name")
        .map(|at| given.remove(at).1);
    let service = var("OTEL_SERVICE_NAME")
        .map(|s| s.trim().to_string())
        .or(from_attributes)
        .unwrap_or_else(|| "dirthara".to_string());
    let mut attributes = vec![("service.name".to_string(), service)];
    attributes.append(&mut given);
    attributes
}

/// `key=value,key2=value2`, values percent-decoded (the W3C baggage form the OTLP variables
/// use); an entry without `=` is skipped with a warning naming the variable.
fn key_values(name: &str, text: &str, warnings: &mut Vec<String>) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                pairs.push((key.trim().to_string(), percent_decode(value.trim())));
            }
            _ => {
                // The entry may hold a secret (an API key): named by position, not shown.
                warnings.push(format!(
                    "{name}: an entry is not `key=value` and is left out (entries are \
                     separated by commas)"
                ));
            }
        }
    }
    pairs
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `00-<trace id>-<parent id>-<flags>`: the ids, or `None` when the text is not one (an
/// all-zero id is invalid, as is version `ff`). A later version's extra fields are ignored,
/// as the W3C recommendation asks.
fn parse_traceparent(text: &str) -> Option<([u8; 16], [u8; 8])> {
    let mut parts = text.trim().split('-');
    let version = parts.next()?;
    let (trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version.eq_ignore_ascii_case("ff") || flags.len() != 2 {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    u8::from_str_radix(version, 16).ok()?;
    u8::from_str_radix(flags, 16).ok()?;
    let trace_id: [u8; 16] = hex_bytes(trace)?.try_into().ok()?;
    let span_id: [u8; 8] = hex_bytes(parent)?.try_into().ok()?;
    let nonzero = |bytes: &[u8]| bytes.iter().any(|&b| b != 0);
    (nonzero(&trace_id) && nonzero(&span_id)).then_some((trace_id, span_id))
}

/// Lowercase hex only, as W3C trace context writes ids.
fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| {
            (pairs.iter())
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint_or_when_disabled() {
        assert_eq!(read(env(&[])).0, None);
        let disabled = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ];
        assert_eq!(read(env(&disabled)).0, None);
    }

    #[test]
    fn the_base_endpoint_gets_each_signals_path_and_a_signal_endpoint_is_used_as_is() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://m:9/custom"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%3Db,tenant=t1"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "tenant=t2"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ];
        let (settings, warnings) = read(env(&vars));
        let settings = settings.unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let traces = settings.traces.unwrap();
        assert_eq!(traces.url, "http://collector:4318/v1/traces");
        assert_eq!(
            traces.headers,
            [
                ("api-key".into(), "a=b".into()),
                ("tenant".into(), "t2".into())
            ]
        );
        assert_eq!(traces.timeout, Duration::from_millis(2500));
        assert_eq!(settings.metrics.unwrap().url, "http://m:9/custom");
        assert_eq!(
            settings.resource,
            [("service.name".into(), "dirthara".into())]
        );
    }

    #[test]
    fn a_signal_can_be_switched_off_and_an_unusable_one_is_warned_about() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_METRICS_EXPORTER", "none"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        ];
        let (settings, warnings) = read(env(&vars));
        assert_eq!(settings, None);
        assert!(warnings[0].contains("`grpc`"), "{warnings:?}");
        let ftp = [("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://c:4318")];
        let (settings, warnings) = read(env(&ftp));
        assert_eq!(settings, None);
        assert_eq!(warnings.len(), 2);
        assert!(
            warnings[0].contains("not an http:// or https:// URL"),
            "{warnings:?}"
        );
        let https = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4318"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"),
        ];
        let (settings, warnings) = read(env(&https));
        assert!(warnings.is_empty(), "{warnings:?}");
        let traces = settings.unwrap().traces.unwrap();
        assert_eq!(
            traces.certificate.unwrap(),
            std::path::Path::new("/etc/ca.pem")
        );
    }

    #[test]
    fn the_service_name_and_resource_come_from_the_standard_variables() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod,service.name=from-attrs,oops",
            ),
        ];
        let (settings, warnings) = read(env(&vars));
        assert_eq!(
            settings.unwrap().resource,
            [
                ("service.name".into(), "from-attrs".into()),
                ("deployment.environment".into(), "prod".into())
            ]
        );
        assert_eq!(warnings.len(), 1, "the entry without `=`: {warnings:?}");
        let named = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SERVICE_NAME", "migrations"),
        ];
        assert_eq!(read(env(&named)).0.unwrap().resource[0].1, "migrations");
    }

    #[test]
    fn traceparent_is_joined_when_valid_and_ignored_with_a_warning_when_not() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("TRACEPARENT", good),
            ("TRACESTATE", "vendor=x"),
        ];
        let parent = read(env(&vars)).0.unwrap().parent.unwrap();
        assert_eq!(parent.trace_id[0], 0x4b);
        assert_eq!(parent.span_id[7], 0xb7);
        assert_eq!(parent.trace_state.as_deref(), Some("vendor=x"));
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            let vars = [
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("TRACEPARENT", bad),
            ];
            let (settings, warnings) = read(env(&vars));
            assert_eq!(settings.unwrap().parent, None, "{bad}");
            assert!(warnings[0].contains("TRACEPARENT"), "{bad}");
        }
        assert!(
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                .is_some()
        );
    }
}
