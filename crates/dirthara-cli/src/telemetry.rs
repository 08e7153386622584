//! OpenTelemetry for the command line (feature `otel`, on by default): when an OTLP endpoint
//! is set, the run's events are recorded and its traces and metrics sent as it exits. What
//! is recorded and how it is sent is the library's ([`dirthara::Telemetry`]); this only
//! starts it, hands it the events and reports what could not be sent.

use dirthara::EventSink;

use crate::error::CliError;
use crate::render::Renderer;

/// The run's telemetry; empty when nothing is exported (no endpoint, or built without it).
pub(crate) struct Export {
    #[cfg(feature = "otel")]
    telemetry: Option<dirthara::Telemetry>,
}

impl Export {
    /// Reads the `OTEL_*` variables for `command`; a variable it cannot follow is a warning.
    pub(crate) fn start(command: &str, renderer: &Renderer) -> Self {
        #[cfg(feature = "otel")]
        {
            let (telemetry, warnings) = dirthara::Telemetry::from_env(command);
            warnings.iter().for_each(|w| renderer.telemetry_warning(w));
            Export { telemetry }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = (command, renderer);
            Export {}
        }
    }

    /// `sink`, with every event recorded first when something is exported.
    pub(crate) fn events(&self, sink: EventSink) -> EventSink {
        #[cfg(feature = "otel")]
        if let Some(telemetry) = &self.telemetry {
            return telemetry.events(sink);
        }
        sink
    }

    /// Sends the run's traces and metrics (the command's span failed with `failure`'s code
    /// and message); what could not be sent is a warning, never another exit code.
    pub(crate) fn finish(self, failure: Option<&CliError>, renderer: &Renderer) {
        #[cfg(feature = "otel")]
        if let Some(telemetry) = self.telemetry {
            let failure = failure.map(|error| (error.code(), error.to_string()));
            let failure = failure.as_ref().map(|(code, text)| (*code, text.as_str()));
            for warning in telemetry.finish(failure) {
                renderer.telemetry_warning(&warning);
            }
        }
        #[cfg(not(feature = "otel"))]
        let _ = (failure, renderer);
    }
}
