//! An application that migrates its own database before it starts serving — the case the
//! migration lock exists for: a rolling deploy starts several instances at once, one applies
//! the migrations, the others wait for it and find nothing left to do.
//!
//! Run: `DATABASE_URL=postgres://postgres@127.0.0.1/app cargo run -p app-startup`

use std::process::ExitCode;

use dirthara::{Config, Event, EventKind, EventSink, Migrator};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("set DATABASE_URL to a PostgreSQL database");
        return ExitCode::from(2);
    };
    let mut config = Config::with_url(url);
    config.directories.clear(); // the migrations are compiled into this binary
    let migrator = Migrator::new(config)
        .with_migrations(dirthara::embed_migrations!("migrations"))
        .with_events(EventSink::new(log_event));
    match migrator.migrate().await {
        Ok(report) => {
            // Results on stdout: the test reads them.
            println!("ready: applied {}", report.applied.len());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("cannot start: Error [{}]: {error}", error.code());
            ExitCode::FAILURE
        }
    }
}

fn log_event(event: &Event) {
    match &event.kind {
        EventKind::LockWaiting { holder, .. } => eprintln!(
            "waiting for another instance to finish migrating ({})",
            holder.as_ref().map(|h| h.to_string()).unwrap_or_default()
        ),
        EventKind::MigrationFinished {
            version,
            name,
            duration,
            ..
        } => {
            eprintln!("migrated {version} {name} in {} ms", duration.as_millis())
        }
        EventKind::Warning(warning) => eprintln!("{warning}"),
        _ => {}
    }
}
