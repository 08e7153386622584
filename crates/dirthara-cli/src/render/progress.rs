//! The progress display on a terminal: an indicatif bar on stderr, hidden while any other line
//! is printed so that the two never mix. A single run gets a bar of its steps when it has more
//! than a few; a fleet gets one bar of its targets, with how many are done, running, failed
//! and waiting for a lock, the migrations applied per second, and the time left.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use dirthara::fleet::Outcome;
use dirthara::{Event, EventKind};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// More steps than this get a progress bar on a terminal; fewer read fine as plain lines.
const PROGRESS_THRESHOLD: usize = 5;

/// The bar of the run in progress, if it has one.
#[derive(Default)]
pub(super) struct Progress(Mutex<Shown>);

#[derive(Default)]
struct Shown {
    bar: Option<ProgressBar>,
    /// A fleet's counts; `None` for a single run.
    fleet: Option<FleetCounts>,
}

struct FleetCounts {
    started: Instant,
    running: usize,
    done: usize,
    failed: usize,
    waiting: usize,
    migrations: usize,
}

impl FleetCounts {
    fn message(&self) -> String {
        let seconds = self.started.elapsed().as_secs_f64().max(0.001);
        format!(
            "{} done, {} running, {} failed, {} waiting for a lock · {:.1} migrations/s",
            self.done,
            self.running,
            self.failed,
            self.waiting,
            self.migrations as f64 / seconds
        )
    }
}

impl Progress {
    /// Runs `print` (which prints the plain output of `event`) with the bar out of the way,
    /// then moves the bar on as `event` says.
    pub(super) fn around(&self, event: &Event, print: impl FnOnce()) {
        let mut shown = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match shown.bar.as_ref() {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
        match shown.fleet.is_some() {
            true => shown.fleet_event(event),
            false => shown.run_event(event),
        }
    }
}

impl Shown {
    fn run_event(&mut self, event: &Event) {
        match &event.kind {
            EventKind::FleetPlanned { targets, .. } => {
                self.bar = Some(new_bar(
                    *targets as u64,
                    "[{bar:24}] {pos}/{len} targets {msg} (ETA {eta})",
                ));
                self.fleet = Some(FleetCounts {
                    started: Instant::now(),
                    running: 0,
                    done: 0,
                    failed: 0,
                    waiting: 0,
                    migrations: 0,
                });
            }
            EventKind::Planned { steps, .. } if *steps > PROGRESS_THRESHOLD => {
                self.bar = Some(new_bar(
                    *steps as u64,
                    "[{bar:24}] {pos}/{len} {msg} ({elapsed})",
                ));
            }
            EventKind::MigrationStarted {
                version,
                name,
                direction,
                ..
            } => {
                if let Some(bar) = self.bar.as_ref() {
                    bar.set_message(format!("{direction} {version} {name}"));
                }
            }
            EventKind::MigrationFinished { .. } => {
                if let Some(bar) = self.bar.as_ref() {
                    bar.inc(1);
                    if bar.position() >= bar.length().unwrap_or(0) {
                        bar.finish_and_clear();
                        self.bar = None;
                    }
                }
            }
            _ => {}
        }
    }

    fn fleet_event(&mut self, event: &Event) {
        let (Some(counts), Some(bar)) = (self.fleet.as_mut(), self.bar.as_ref()) else {
            return;
        };
        match &event.kind {
            EventKind::TargetStarted { deferred } => {
                counts.running += 1;
                if *deferred {
                    counts.waiting = counts.waiting.saturating_sub(1);
                }
            }
            EventKind::TargetDeferred { .. } => {
                counts.running = counts.running.saturating_sub(1);
                counts.waiting += 1;
            }
            EventKind::TargetFinished { outcome, .. } => {
                counts.running = counts.running.saturating_sub(1);
                counts.done += 1;
                counts.failed += usize::from(*outcome == Outcome::Failed);
                bar.inc(1);
            }
            EventKind::MigrationFinished { .. } => counts.migrations += 1,
            _ => return,
        }
        bar.set_message(counts.message());
    }
}

impl Drop for Progress {
    /// A run that ended early (an error) leaves no half-drawn bar behind.
    fn drop(&mut self) {
        if let Some(bar) = self.0.get_mut().ok().and_then(|shown| shown.bar.take()) {
            bar.finish_and_clear();
        }
    }
}

fn new_bar(length: u64, template: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("a valid template")
            .progress_chars("=> "),
    );
    // Keeps the elapsed time moving during a long migration.
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}
