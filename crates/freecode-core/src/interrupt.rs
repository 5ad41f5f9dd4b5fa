//! The Ctrl+C state machine (SPEC §11, with §19.21–23 fixed): pure, no signals, no clock.
//!
//! The host tells it when a session's turn starts and ends and when an assistant message is
//! appended; each SIGINT is fed in with the current time and it answers what to do:
//!
//! - a turn in flight → [`Action::Interrupt`] with every in-flight session and the message it
//!   was writing (its *target*, the last assistant message appended in the turn, if any);
//! - nothing in flight → [`Action::Ignore`]: a Ctrl+C while idle marks nothing;
//! - a second SIGINT strictly less than [`FORCE_EXIT_WINDOW_MS`] after the previous one →
//!   [`Action::ForceExit`] (the host exits once no write is in progress).
//!
//! Differences from the original, all deliberate: targets are tracked per session instead of
//! one global pair; a target is cleared when its turn ends, so a late Ctrl+C never marks an old,
//! completed message; a turn that has not appended anything yet can still be interrupted (its
//! partial output is then saved by the host as a new, marked message).

use std::collections::BTreeMap;

/// Two SIGINTs closer than this (ms) force an exit.
pub const FORCE_EXIT_WINDOW_MS: i64 = 1000;

/// A session whose turn is in flight, and the message it is writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The session id.
    pub session: String,
    /// The assistant message appended last in this turn; `None` before the first one.
    pub message: Option<String>,
}

/// What the host should do with a SIGINT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing is in flight: mark nothing.
    Ignore,
    /// Stop these turns (sorted by session id) and mark their targets interrupted.
    Interrupt(Vec<Target>),
    /// The second Ctrl+C within the window: exit with status 1 once no write is in progress.
    ForceExit,
}

/// The per-process interrupt state: in-flight turns with their targets, and the last SIGINT.
#[derive(Debug, Clone, Default)]
pub struct InterruptState {
    /// Session id → the message being written (`None`: turn started, nothing appended yet).
    turns: BTreeMap<String, Option<String>>,
    /// When the last SIGINT arrived, ms.
    last_sigint: Option<i64>,
}

impl InterruptState {
    /// No turn in flight, no SIGINT seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// A turn of `session` started: a Ctrl+C now interrupts it (no target message yet).
    pub fn begin_turn(&mut self, session: &str) {
        self.turns.insert(session.to_owned(), None);
    }

    /// An assistant message was appended to `session`: it becomes the target. Starts the turn
    /// if it was not started.
    pub fn set_target(&mut self, session: &str, message_id: &str) {
        self.turns
            .insert(session.to_owned(), Some(message_id.to_owned()));
    }

    /// The turn of `session` ended (completed, failed or interrupted): its target is cleared.
    pub fn clear(&mut self, session: &str) {
        self.turns.remove(session);
    }

    /// The in-flight turn of `session`, if any.
    pub fn target(&self, session: &str) -> Option<Target> {
        self.turns.get(session).map(|m| Target {
            session: session.to_owned(),
            message: m.clone(),
        })
    }

    /// Whether any turn is in flight.
    pub fn is_pending(&self) -> bool {
        !self.turns.is_empty()
    }

    /// Every in-flight turn, sorted by session id.
    pub fn targets(&self) -> Vec<Target> {
        self.turns
            .iter()
            .map(|(s, m)| Target {
                session: s.clone(),
                message: m.clone(),
            })
            .collect()
    }

    /// A SIGINT arrived at `now_ms`. A press strictly less than [`FORCE_EXIT_WINDOW_MS`] after
    /// the previous one forces the exit; otherwise it is a "first" press (even a second one a
    /// second or more later) and interrupts whatever is in flight. Every press that does not
    /// force the exit starts a new window, an ignored one included.
    pub fn on_sigint(&mut self, now_ms: i64) -> Action {
        if let Some(last) = self.last_sigint
            && now_ms - last < FORCE_EXIT_WINDOW_MS
        {
            return Action::ForceExit;
        }
        self.last_sigint = Some(now_ms);
        if self.turns.is_empty() {
            Action::Ignore
        } else {
            Action::Interrupt(self.targets())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn target(session: &str, message: Option<&str>) -> Target {
        Target {
            session: session.into(),
            message: message.map(Into::into),
        }
    }

    #[test]
    fn idle_ctrl_c_marks_nothing() {
        let mut st = InterruptState::new();
        assert!(!st.is_pending());
        assert_eq!(st.on_sigint(10_000), Action::Ignore);
        // A turn that ended leaves nothing to mark, even though it had a target.
        st.begin_turn("s");
        st.set_target("s", "m1");
        st.clear("s");
        assert_eq!(st.on_sigint(20_000), Action::Ignore);
        assert_eq!(st.target("s"), None);
    }

    #[test]
    fn a_turn_without_a_message_yet_is_still_interrupted() {
        let mut st = InterruptState::new();
        st.begin_turn("s");
        assert!(st.is_pending());
        assert_eq!(
            st.on_sigint(5_000),
            Action::Interrupt(vec![target("s", None)])
        );
    }

    #[test]
    fn the_target_is_the_last_assistant_message_of_the_turn() {
        let mut st = InterruptState::new();
        st.begin_turn("s");
        st.set_target("s", "m1");
        st.set_target("s", "m2");
        assert_eq!(st.target("s"), Some(target("s", Some("m2"))));
        assert_eq!(
            st.on_sigint(5_000),
            Action::Interrupt(vec![target("s", Some("m2"))])
        );
        // A new turn starts without a target.
        st.clear("s");
        st.begin_turn("s");
        assert_eq!(st.target("s"), Some(target("s", None)));
    }

    #[test]
    fn targets_are_per_session() {
        let mut st = InterruptState::new();
        st.begin_turn("b");
        st.set_target("b", "mb");
        st.set_target("a", "ma");
        st.clear("b");
        assert_eq!(st.targets(), vec![target("a", Some("ma"))]);
        st.begin_turn("c");
        assert_eq!(
            st.on_sigint(1_000_000),
            Action::Interrupt(vec![target("a", Some("ma")), target("c", None)])
        );
    }

    #[test]
    fn a_second_press_within_the_window_forces_the_exit() {
        let mut st = InterruptState::new();
        st.begin_turn("s");
        assert!(matches!(st.on_sigint(10_000), Action::Interrupt(_)));
        assert_eq!(st.on_sigint(10_999), Action::ForceExit);
        // While idle too: two quick presses exit.
        let mut idle = InterruptState::new();
        assert_eq!(idle.on_sigint(50_000), Action::Ignore);
        assert_eq!(idle.on_sigint(50_400), Action::ForceExit);
    }

    #[test]
    fn the_window_is_strictly_less_than_one_second() {
        let mut st = InterruptState::new();
        st.begin_turn("s");
        assert!(matches!(st.on_sigint(10_000), Action::Interrupt(_)));
        // Exactly 1000 ms later: a new first press, which restarts the window.
        assert!(matches!(st.on_sigint(11_000), Action::Interrupt(_)));
        assert_eq!(st.on_sigint(11_999), Action::ForceExit);
    }

    #[test]
    fn the_first_press_ever_never_forces_the_exit() {
        // `lastSigint` starts at "never", not at 0: a clock near the epoch is no special case.
        let mut st = InterruptState::new();
        assert_eq!(st.on_sigint(0), Action::Ignore);
        let mut st = InterruptState::new();
        assert_eq!(st.on_sigint(500), Action::Ignore);
    }
}
