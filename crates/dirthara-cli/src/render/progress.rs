//! The one-line progress display on a terminal: drawn on stderr for runs of more than a few
//! steps, redrawn in place, and cleared before any other line is printed.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dirthara::Event;

use super::Renderer;

/// More steps than this get a progress line on a terminal; fewer read fine as plain lines.
const PROGRESS_THRESHOLD: usize = 5;

/// A one-line progress display on stderr, redrawn in place; plain logs never see it.
pub(super) struct Progress {
    total: usize,
    done: usize,
    current: Option<String>,
    started: Instant,
    step_started: Instant,
    visible: bool,
}

impl Progress {
    fn draw(&mut self) {
        const WIDTH: usize = 24;
        let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(0);
        let bar: String = "=".repeat(filled) + &" ".repeat(WIDTH - filled);
        let current = self.current.as_deref().unwrap_or("");
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2K[{bar}] {}/{} {current} ({:.1}s, total {:.1}s)",
            self.done,
            self.total,
            self.step_started.elapsed().as_secs_f64(),
            self.started.elapsed().as_secs_f64()
        );
        let _ = err.flush();
        self.visible = true;
    }

    fn clear(&mut self) {
        if self.visible {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
            self.visible = false;
        }
    }
}

/// Keeps the elapsed time moving during a long migration; ends when the display is dropped.
pub(super) fn spawn_ticker(progress: &Arc<Mutex<Option<Progress>>>) {
    let ticker = Arc::downgrade(progress);
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(250));
        let Some(progress) = ticker.upgrade() else {
            return;
        };
        let mut guard = progress.lock().unwrap();
        if let Some(p) = guard.as_mut().filter(|p| p.visible) {
            p.draw();
        }
    });
}

impl Renderer {
    /// Redraws the progress line around the plain output of `event`.
    pub(super) fn track(&self, progress: &Mutex<Option<Progress>>, event: &Event) {
        let mut guard = progress.lock().unwrap();
        match event {
            Event::Planned { steps, .. } if *steps > PROGRESS_THRESHOLD => {
                *guard = Some(Progress {
                    total: *steps,
                    done: 0,
                    current: None,
                    started: Instant::now(),
                    step_started: Instant::now(),
                    visible: false,
                });
            }
            Event::MigrationStarted {
                version,
                name,
                direction,
                ..
            } => {
                if let Some(p) = guard.as_mut() {
                    p.current = Some(format!("{direction} {version} {name}"));
                    p.step_started = Instant::now();
                    p.draw();
                }
            }
            Event::MigrationFinished { .. } => {
                if let Some(p) = guard.as_mut() {
                    p.done += 1;
                    // The finished line goes to stdout; clear ours first so they do not mix.
                    p.clear();
                    if p.done == p.total {
                        *guard = None;
                    }
                }
            }
            _ => {
                if let Some(p) = guard.as_mut() {
                    p.clear();
                }
            }
        }
    }
}
