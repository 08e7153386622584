//! With the `tracing` feature, events reach `tracing` as events inside command and migration
//! spans.

use std::sync::{Arc, Mutex};

use dirthara::{Config, EventSink, Locking, Migrator};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records span names and event messages, in order.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<String>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.0
            .lock()
            .unwrap()
            .push(format!("span {}", span.metadata().name()));
        let n = self.0.lock().unwrap().len() as u64;
        Id::from_u64(n)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        self.0
            .lock()
            .unwrap()
            .push(format!("{} {}", event.metadata().level(), message.0));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn events_and_spans_reach_tracing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("1_a.sql"), "CREATE TABLE a (id INT)").unwrap();
    let mut config = Config::with_url(format!("sqlite:{}", dir.path().join("t.db").display()));
    config.directories = vec![dir.path().to_path_buf()];
    config.locking = Locking::Off;
    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(recorder.clone());
    Migrator::new(config)
        .with_events(EventSink::tracing())
        .migrate()
        .await
        .unwrap();
    let seen = recorder.0.lock().unwrap().clone();
    let position = |needle: &str| {
        seen.iter()
            .position(|s| s == needle)
            .unwrap_or_else(|| panic!("no `{needle}` in {seen:?}"))
    };
    assert!(
        position("WARN running without the migration lock") < position("span dirthara.command")
    );
    assert!(position("span dirthara.command") < position("span dirthara.migration"));
    assert!(position("span dirthara.migration") < position("INFO migration started"));
    assert!(position("INFO migration started") < position("INFO migration finished"));
}
