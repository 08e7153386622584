//! OpenTelemetry: a command's traces and metrics, exported over OTLP/HTTP when the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or a per-signal endpoint) is set. Feature `otel`; the CLI
//! has it on.
//!
//! The spans and counters are folded from the command's [events](crate::Event)
//! (`telemetry/record.rs`), so they say what the run reported and cost nothing when no
//! endpoint is set: [`Telemetry::from_env`] is then `None` and no sink is wrapped. They are
//! sent once, when the command ends (`telemetry/otlp.rs`, `telemetry/http.rs`); a receiver
//! that is down or refuses them is a warning, never a failed migration.
//!
//! # Examples
//!
//! ```no_run
//! # async fn run() -> Result<(), dirthara::Error> {
//! use dirthara::{Config, EventSink, Migrator, Telemetry};
//!
//! let (telemetry, warnings) = Telemetry::from_env("migrate");
//! warnings.iter().for_each(|w| eprintln!("warning: {w}"));
//! let events = match &telemetry {
//!     Some(telemetry) => telemetry.events(EventSink::discard()),
//!     None => EventSink::discard(),
//! };
//! let result = Migrator::new(Config::with_url("postgres://app@db/app"))
//!     .with_events(events)
//!     .migrate()
//!     .await;
//! if let Some(telemetry) = telemetry {
//!     let failure = result.as_ref().err().map(|e| (e.code().to_string(), e.to_string()));
//!     for warning in telemetry.finish(failure.as_ref().map(|(c, m)| (c.as_str(), m.as_str()))) {
//!         eprintln!("warning: {warning}");
//!     }
//! }
//! # result.map(|_| ()) }
//! ```

use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use crate::events::EventSink;

mod http;
mod otlp;
mod record;
mod settings;

use record::Recorder;
use settings::{ExportSettings, Signal};

/// A command's telemetry, recorded from its events and exported when it ends.
#[derive(Debug)]
pub struct Telemetry {
    command: String,
    settings: ExportSettings,
    trace_id: [u8; 16],
    recorder: Arc<Mutex<Recorder>>,
}

fn random_span_id() -> [u8; 8] {
    loop {
        let id = fastrand::u64(..).to_be_bytes();
        if id != [0; 8] {
            return id;
        }
    }
}

impl Telemetry {
    /// Telemetry for `command` (`migrate`, `status`, ...), configured by the process's
    /// `OTEL_*` variables and joining the caller's trace from `TRACEPARENT`; `None` when no
    /// OTLP endpoint is set or `OTEL_SDK_DISABLED=true`. The warnings name each variable that
    /// could not be followed (that part is left out; the command goes on).
    pub fn from_env(command: &str) -> (Option<Telemetry>, Vec<String>) {
        Self::from_vars(command, |name| std::env::var(name).ok())
    }

    /// As [`Telemetry::from_env`], reading the variables through `var`.
    pub fn from_vars(
        command: &str,
        var: impl Fn(&str) -> Option<String>,
    ) -> (Option<Telemetry>, Vec<String>) {
        let (settings, warnings) = settings::read(var);
        let warnings = (warnings.into_iter())
            .map(|warning| format!("OpenTelemetry: {warning}"))
            .collect();
        let telemetry = settings.map(|settings| Telemetry {
            command: command.to_string(),
            trace_id: match &settings.parent {
                Some(parent) => parent.trace_id,
                None => fastrand::u128(1..).to_be_bytes(),
            },
            settings,
            recorder: Arc::new(Mutex::new(Recorder::new(SystemTime::now(), random_span_id))),
        });
        (telemetry, warnings)
    }

    /// A sink that records each event for the export, then passes it to `forward`.
    pub fn events(&self, forward: EventSink) -> EventSink {
        let recorder = Arc::clone(&self.recorder);
        EventSink::new(move |event| {
            (recorder.lock().unwrap_or_else(PoisonError::into_inner)).record(event);
            forward.pass_on(event);
        })
    }

    /// The id of the trace this run's spans are in (the caller's, from `TRACEPARENT`), in hex.
    pub fn trace_id(&self) -> String {
        otlp::hex(&self.trace_id)
    }

    /// Ends the command's span (with `failure`'s code and message, when it failed) and sends
    /// the traces and metrics, each bounded by `OTEL_EXPORTER_OTLP_TIMEOUT` (10 s by default).
    /// Blocks while it sends. Returns a warning for each signal that could not be delivered.
    pub fn finish(self, failure: Option<(&str, &str)>) -> Vec<String> {
        let end = SystemTime::now();
        let mut recorder = (self.recorder.lock()).unwrap_or_else(PoisonError::into_inner);
        let root = recorder.finish(&self.command, end, failure);
        let mut spans = std::mem::take(&mut recorder.spans);
        spans.push(root);
        let resource = &self.settings.resource;
        let mut warnings = Vec::new();
        let mut send = |signal: Signal, body: serde_json::Value| {
            let destination = match signal {
                Signal::Traces => &self.settings.traces,
                Signal::Metrics => &self.settings.metrics,
            };
            if let Some(to) = destination {
                if let Err(why) = http::post(to, body.to_string().as_bytes()) {
                    warnings.push(format!(
                        "OpenTelemetry: the {} of this run were not exported to {}: {why}",
                        signal.noun(),
                        to.url
                    ));
                }
            }
        };
        let parent = self.settings.parent.as_ref();
        send(
            Signal::Traces,
            otlp::traces(resource, &self.trace_id, parent, &spans),
        );
        let counters = &recorder.counters;
        let metrics = otlp::metrics(resource, &self.command, counters, recorder.start, end);
        send(Signal::Metrics, metrics);
        warnings
    }
}
