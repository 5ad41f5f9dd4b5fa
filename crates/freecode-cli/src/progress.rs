//! Feedback on slow work, on stderr and only when stderr is a terminal: a progress bar for
//! indexing (a first `search` or `stats` on a big home, `index rebuild`), a bar of steps for a
//! big export or import ([`Steps`]) and a spinner while `run` waits for the model. Piped or
//! redirected, nothing extra is printed.
//!
//! Bars appear only once the work has taken [`SHOW_AFTER`] (a quick refresh stays silent);
//! `index rebuild`, which the user asked for, shows its bar at once. [`Feedback`] is how an
//! operation of `freecode_ops` reports to them ([`freecode_ops::Progress`]).

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

/// A progress bar over `total` sessions (or another unit), drawn once the work passes its
/// delay.
pub struct Progress {
    label: String,
    unit: &'static str,
    started: Instant,
    delay: Duration,
    enabled: bool,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar labelled `label` that appears after `delay` (zero: at the first update).
    pub fn with_delay(label: &'static str, delay: Duration) -> Self {
        Self::counting(label, "sessions", delay)
    }

    /// A bar labelled `label` over `total` of `unit` (`chunks`), that appears after `delay`.
    pub fn counting(label: &'static str, unit: &'static str, delay: Duration) -> Self {
        Self {
            label: label.to_owned(),
            unit,
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
            if let Ok(style) = ProgressStyle::with_template(&format!(
                "{{msg}} [{{bar:30}}] {{human_pos}}/{{human_len}} {}, {{eta}} left",
                self.unit
            )) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(self.label.clone());
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    /// Relabels the bar: the work's current phase (`downloading`, `applying`).
    pub fn relabel(&mut self, label: &str) {
        self.label = label.to_owned();
        if let Some(bar) = &self.bar {
            bar.set_message(self.label.clone());
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

/// The stages of one long piece of work (a big export or import): a bar of steps naming the
/// current one, with the time so far. Drawn on a terminal's stderr only, once the work has
/// taken [`SHOW_AFTER`] — by a timer thread, so that a single long step (reading a
/// 200,000-message session) still gets its bar; a quick export shows nothing.
pub struct Steps {
    state: Option<Arc<Mutex<StepsState>>>,
}

struct StepsState {
    label: &'static str,
    total: u64,
    done: u64,
    message: String,
    bar: Option<ProgressBar>,
    finished: bool,
}

impl StepsState {
    fn draw(&mut self) {
        if self.bar.is_none() {
            let bar = ProgressBar::with_draw_target(Some(self.total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} {prefix} [{bar:20}] step {pos}/{len}: {msg} {elapsed}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(self.label);
            bar.enable_steady_tick(Duration::from_millis(100));
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(self.done);
            bar.set_message(self.message.clone());
        }
    }
}

impl Steps {
    /// `total` steps of work labelled `label` (`exporting`, `importing`).
    pub fn new(label: &'static str, total: u64) -> Self {
        if !enabled() {
            return Self { state: None };
        }
        let state = Arc::new(Mutex::new(StepsState {
            label,
            total,
            done: 0,
            message: String::new(),
            bar: None,
            finished: false,
        }));
        let timer = Arc::clone(&state);
        let spawned = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                std::thread::sleep(SHOW_AFTER);
                if let Ok(mut s) = timer.lock()
                    && !s.finished
                {
                    s.draw();
                }
            });
        // Without its timer the work simply goes without a bar.
        Self {
            state: spawned.is_ok().then_some(state),
        }
    }

    /// The next step begins: `message` says what it does (the steps before it are done).
    pub fn step(&self, message: impl Into<String>) {
        let Some(state) = &self.state else { return };
        if let Ok(mut s) = state.lock() {
            if !s.message.is_empty() {
                s.done = (s.done + 1).min(s.total);
            }
            s.message = message.into();
            if s.bar.is_some() {
                s.draw();
            }
        }
    }

    /// The work is over: the bar (if drawn) is erased before the result is printed.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        if let Some(state) = &self.state
            && let Ok(mut s) = state.lock()
        {
            s.finished = true;
            if let Some(bar) = s.bar.take() {
                bar.finish_and_clear();
            }
        }
    }
}

/// What an operation reports ([`freecode_ops::Progress`]), drawn here: its sessions as a
/// [`Progress`] bar, its steps as [`Steps`], both labelled `label`.
pub struct Feedback {
    label: &'static str,
    delay: Duration,
    /// Sessions indexed, then (once embedding for search by meaning begins) chunks embedded.
    bar: Progress,
    embedding: bool,
    steps: Option<Steps>,
}

impl Feedback {
    /// Feedback labelled `label` whose bar appears after [`SHOW_AFTER`].
    pub fn new(label: &'static str) -> Self {
        Self::with_delay(label, SHOW_AFTER)
    }

    /// Feedback labelled `label` whose bar of sessions appears after `delay`.
    pub fn with_delay(label: &'static str, delay: Duration) -> Self {
        Self {
            label,
            delay,
            bar: Progress::with_delay(label, delay),
            embedding: false,
            steps: None,
        }
    }

    /// The work is over: whatever was drawn is erased before the result is printed.
    pub fn finish(self) {
        self.bar.finish();
        if let Some(steps) = self.steps {
            steps.finish();
        }
    }
}

impl freecode_ops::Progress for Feedback {
    fn sessions(&mut self, done: usize, total: usize) {
        self.bar.update(done, total);
    }

    fn chunks(&mut self, done: usize, total: usize) {
        if !self.embedding {
            // Indexing is over when embedding begins: its bar makes way for one of chunks.
            self.embedding = true;
            let chunks = Progress::counting("embedding", "chunks", self.delay);
            std::mem::replace(&mut self.bar, chunks).finish();
        }
        self.bar.update(done, total);
    }

    fn steps(&mut self, total: u64) {
        // A new plan of steps replaces the last one (its bar erased).
        self.steps = None;
        self.steps = Some(Steps::new(self.label, total));
    }

    fn step(&mut self, what: &str) {
        match &self.steps {
            Some(steps) => steps.step(what),
            // No plan of steps: the phase of a bar of sessions.
            None => self.bar.relabel(what),
        }
    }
}
