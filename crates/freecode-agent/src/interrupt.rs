//! Ctrl+C for the agent: per-turn [`InterruptFlag`]s and the process-wide [`Interrupts`]
//! registry around the pure [`InterruptState`].
//!
//! The program that links the agent owns its signals: it feeds each SIGINT to
//! [`Interrupts::on_sigint`], which asks the state machine what the press means — raise the
//! flags of the turns in flight (their loops notice within a tick, save what they had and mark
//! the session), ignore it while idle, or, a second press within a second,
//! [`Action::ForceExit`], which the program carries out once no write is in progress
//! ([`FORCE_EXIT_MAX_WAIT`], `freecode_store::fsutil::exit_when_idle`). A host without
//! signals (a server's `session.stop`) raises a turn's flag itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use freecode_core::interrupt::Action;
use freecode_core::interrupt::InterruptState;

/// How long a forced exit waits for a write in progress before exiting anyway.
pub const FORCE_EXIT_MAX_WAIT: Duration = Duration::from_secs(10);

/// "Stop this turn": raised by Ctrl+C (through [`Interrupts`]) or by a caller (e.g. an RPC
/// `session.stop`); the agent loop polls it. Cheap to clone; clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct InterruptFlag(Arc<AtomicBool>);

impl InterruptFlag {
    /// A lowered flag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the turn to stop.
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the turn was asked to stop.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Lowers the flag (a new turn starts with it lowered).
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

#[derive(Debug, Default)]
struct Registry {
    state: InterruptState,
    flags: HashMap<String, InterruptFlag>,
}

/// The process's interrupt targets: which sessions have a turn in flight, the assistant
/// message each is writing, and the flag to raise. Cheap to clone; clones share the state.
#[derive(Debug, Clone, Default)]
pub struct Interrupts(Arc<Mutex<Registry>>);

impl Interrupts {
    /// An empty registry (no handler installed).
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A turn of `session` started; Ctrl+C raises `flag` until [`Interrupts::end_turn`].
    pub fn begin_turn(&self, session: &str, flag: &InterruptFlag) {
        let mut r = self.lock();
        r.state.begin_turn(session);
        r.flags.insert(session.to_owned(), flag.clone());
    }

    /// An assistant message of `session` was appended: it is now the interrupt target.
    pub fn set_target(&self, session: &str, message_id: &str) {
        self.lock().state.set_target(session, message_id);
    }

    /// The turn of `session` ended: nothing of it can be marked any more.
    pub fn end_turn(&self, session: &str) {
        let mut r = self.lock();
        r.state.clear(session);
        r.flags.remove(session);
    }

    /// Feeds one SIGINT at `now_ms`; on [`Action::Interrupt`] the flags of those turns are
    /// raised before this returns. The caller carries out [`Action::ForceExit`].
    pub fn on_sigint(&self, now_ms: i64) -> Action {
        let mut r = self.lock();
        let action = r.state.on_sigint(now_ms);
        if let Action::Interrupt(targets) = &action {
            for t in targets {
                if let Some(flag) = r.flags.get(&t.session) {
                    flag.raise();
                }
            }
        }
        action
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use freecode_core::interrupt::Target;

    use super::*;

    #[test]
    fn sigint_raises_only_the_flags_of_turns_in_flight() {
        let ints = Interrupts::new();
        let (a, b) = (InterruptFlag::new(), InterruptFlag::new());
        ints.begin_turn("a", &a);
        ints.begin_turn("b", &b);
        ints.set_target("a", "m1");
        ints.end_turn("b");
        let action = ints.on_sigint(10_000);
        assert_eq!(
            action,
            Action::Interrupt(vec![Target {
                session: "a".into(),
                message: Some("m1".into())
            }])
        );
        assert!(a.is_raised());
        assert!(!b.is_raised(), "an ended turn is not interrupted");
    }

    #[test]
    fn idle_sigint_raises_nothing_and_a_quick_second_forces_exit() {
        let ints = Interrupts::new();
        let f = InterruptFlag::new();
        ints.begin_turn("s", &f);
        ints.end_turn("s");
        assert_eq!(ints.on_sigint(1_000), Action::Ignore);
        assert!(!f.is_raised());
        assert_eq!(ints.on_sigint(1_500), Action::ForceExit);
        assert!(!ints.lock().state.is_pending());
    }
}
