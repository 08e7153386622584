//! The progress display on a terminal: an indicatif bar on stderr for runs of more than a
//! few steps, hidden while any other line is printed so that the two never mix.

use std::sync::Mutex;
use std::time::Duration;

use dirthara::{Event, EventKind};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// More steps than this get a progress bar on a terminal; fewer read fine as plain lines.
const PROGRESS_THRESHOLD: usize = 5;

/// The bar of the run in progress, if it has one.
#[derive(Default)]
pub(super) struct Progress(Mutex<Option<ProgressBar>>);

impl Progress {
    /// Runs `print` (which prints the plain output of `event`) with the bar out of the way,
    /// then moves the bar on as `event` says.
    pub(super) fn around(&self, event: &Event, print: impl FnOnce()) {
        let mut bar = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match bar.as_ref() {
            Some(shown) => shown.suspend(print),
            None => print(),
        }
        match &event.kind {
            EventKind::Planned { steps, .. } if *steps > PROGRESS_THRESHOLD => {
                *bar = Some(new_bar(*steps as u64));
            }
            EventKind::MigrationStarted {
                version,
                name,
                direction,
                ..
            } => {
                if let Some(shown) = bar.as_ref() {
                    shown.set_message(format!("{direction} {version} {name}"));
                }
            }
            EventKind::MigrationFinished { .. } => {
                if let Some(shown) = bar.as_ref() {
                    shown.inc(1);
                    if shown.position() >= shown.length().unwrap_or(0) {
                        shown.finish_and_clear();
                        *bar = None;
                    }
                }
            }
            _ => {}
        }
    }
}

impl Drop for Progress {
    /// A run that ended early (an error) leaves no half-drawn bar behind.
    fn drop(&mut self) {
        if let Some(bar) = self.0.get_mut().ok().and_then(Option::take) {
            bar.finish_and_clear();
        }
    }
}

fn new_bar(steps: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("[{bar:24}] {pos}/{len} {msg} ({elapsed})")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    // Keeps the elapsed time moving during a long migration.
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}
