use dirthara::{format_duration, Config, Event, EventKind, EventSink, LockWait, Migrator};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")?;
    let mut config = Config::with_url(url);
    config.directories = vec!["migrations".into()];
    config.lock_wait = Some(LockWait::For(Duration::from_secs(120)));

    // Stop between migrations when the process is asked to shut down.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        let _ = stop_tx.send(true);
    });

    let events = EventSink::new(|event: &Event| match &event.kind {
        EventKind::LockWaiting { holder, .. } => {
            eprintln!("waiting for the migration lock: {holder:?}")
        }
        EventKind::MigrationFinished {
            version,
            name,
            duration,
            ..
        } => {
            eprintln!(
                "migrated {version} {name} in {}",
                format_duration(*duration)
            )
        }
        EventKind::Warning(w) => eprintln!("{w}"),
        _ => {}
    });

    let migrator = Migrator::new(config)
        .with_events(events)
        .with_shutdown(stop_rx);
    match migrator.migrate().await {
        Ok(report) => {
            println!("applied {} migration(s)", report.applied.len());
            Ok(())
        }
        Err(e) => {
            eprintln!("migration failed [{}]: {e}", e.code());
            std::process::exit(1);
        }
    }
}
