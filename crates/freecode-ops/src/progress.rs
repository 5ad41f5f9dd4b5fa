//! Feedback on slow work, as a callback: an operation says how far it is, and each front end
//! draws it its own way (the CLI with a progress bar on a terminal's stderr, the web viewer as
//! events). Every method has an empty default, and [`Silent`] draws nothing.

/// What a long operation reports as it goes.
pub trait Progress {
    /// `done` of `total` sessions are finished (indexing a home, rebuilding its index).
    fn sessions(&mut self, done: usize, total: usize) {
        let _ = (done, total);
    }

    /// `done` of `total` chunks of conversation have a vector (embedding for search by
    /// meaning).
    fn chunks(&mut self, done: usize, total: usize) {
        let _ = (done, total);
    }

    /// The work ahead is `total` steps (said once, before the first [`Progress::step`]).
    fn steps(&mut self, total: u64) {
        let _ = total;
    }

    /// The next step begins; `what` says what it does (the steps before it are done). Without
    /// a plan of [`Progress::steps`], it names the phase the [`Progress::sessions`] count.
    fn step(&mut self, what: &str) {
        let _ = what;
    }
}

/// No feedback at all.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}
