//! Feedback on slow work, on stderr and only when stderr is a terminal: a progress bar for
//! indexing (a first `search` or `stats` on a big home, `index rebuild`) and a spinner while
//! `run` waits for the model. Piped or redirected, nothing extra is printed.
//!
//! Bars appear only once the work has taken [`SHOW_AFTER`] (a quick refresh stays silent);
//! `index rebuild`, which the user asked for, shows its bar at once.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work runs before its bar appears.
pub const SHOW_AFTER: Duration = Duration::from_millis(500);

/// Whether feedback may be drawn: stderr is a terminal.
fn enabled() -> bool {
    std::io::stderr().is_terminal()
}

/// A progress bar over `total` sessions, drawn once the work passes its delay.
pub struct Progress {
    label: &'static str,
    started: Instant,
    delay: Duration,
    enabled: bool,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar labelled `label` that appears after [`SHOW_AFTER`].
    pub fn new(label: &'static str) -> Self {
        Self::with_delay(label, SHOW_AFTER)
    }

    /// A bar labelled `label` that appears after `delay` (zero: at the first update).
    pub fn with_delay(label: &'static str, delay: Duration) -> Self {
        Self {
            label,
            started: Instant::now(),
            delay,
            enabled: enabled(),
            bar: None,
        }
    }

    /// `done` of `total` sessions are finished.
    pub fn update(&mut self, done: usize, total: usize) {
        if !self.enabled {
            return;
        }
        if self.bar.is_none() && self.started.elapsed() >= self.delay && done < total {
            let bar = ProgressBar::with_draw_target(
                Some(total as u64),
                ProgressDrawTarget::stderr_with_hz(10),
            );
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} [{bar:30}] {human_pos}/{human_len} sessions, {eta} left",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(self.label);
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    /// Removes the bar (the result is printed next).
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A spinner with a message, or nothing when stderr is not a terminal. Cheap to clone: every
/// clone drives the same spinner.
#[derive(Clone)]
pub struct Spinner {
    enabled: bool,
    current: Arc<Mutex<Option<ProgressBar>>>,
}

impl Spinner {
    /// A spinner, not yet shown.
    pub fn new() -> Self {
        Self {
            enabled: enabled(),
            current: Arc::default(),
        }
    }

    /// Shows the spinner with `message` (a fresh one if it was hidden).
    pub fn show(&self, message: &'static str) {
        if !self.enabled {
            return;
        }
        let Ok(mut current) = self.current.lock() else {
            return;
        };
        if current.is_some() {
            return;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(100));
        *current = Some(bar);
    }

    /// Hides the spinner, erasing its line (before anything else is printed).
    pub fn hide(&self) {
        if let Ok(mut current) = self.current.lock()
            && let Some(bar) = current.take()
        {
            bar.finish_and_clear();
        }
    }
}
