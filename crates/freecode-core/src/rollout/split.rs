//! Folding a log in two halves on two threads, with the answer of one sequential fold.
//!
//! A fold of the second half cannot start from the first half's state, which nobody has yet.
//! So it starts empty (a *tail* fold, [`SplitFold::tail`]) and records *marks*: line starts
//! where a fold started empty there behaves, for every later line, exactly as a fold carrying
//! any earlier state would ([`SplitFold::boundary`]). The first half's fold then reads on past
//! the split, line by line, until it stands at a mark it can take the tail from
//! ([`SplitFold::can_splice`]) and takes the tail's results from the mark on
//! ([`SplitFold::splice`]); what the tail did before the mark is dropped. With no such mark the
//! first fold reads to the end: the answer is always the sequential one, only the time differs.
//!
//! - Trace: a mark is a line start where the tail has no open request and no pending tool
//!   call; the first fold may splice there when it has none either (and has seen an event), so
//!   every later terminating event finds the same spans in both.
//! - Replay: a mark is the start of a `turn.started` line after which no event refers to a
//!   turn begun before it (or to none); then every later call, output and denial resolves to a
//!   turn both folds begin after the mark, whatever came before.

use super::view::EventView;

/// The most marks a tail fold keeps (the first ones: the first fold splices at the first mark
/// it can take).
pub const MAX_MARKS: usize = 4096;

/// A fold that can be run as two halves and spliced (see the module docs).
pub trait SplitFold: Sized {
    /// An empty fold of the same log that records marks.
    fn tail(&self) -> Self;
    /// Folds one event.
    fn apply_view(&mut self, ev: &EventView<'_>);
    /// The line starting at byte `offset` comes next (a tail fold records a mark here when it
    /// may; others do nothing).
    fn boundary(&mut self, offset: u64);
    /// Whether this fold, standing before the line at `offset`, can take `tail`'s results from
    /// there.
    fn can_splice(&self, tail: &Self, offset: u64) -> bool;
    /// Takes `tail`'s results from its mark at `offset` (where [`SplitFold::can_splice`] said
    /// yes); the fold is then as if it had read the whole tail itself.
    fn splice(&mut self, tail: Self, offset: u64);
}

/// Finds the mark at `offset` in marks sorted by offset.
pub(crate) fn find_mark<M>(marks: &[(u64, M)], offset: u64) -> Option<&M> {
    marks
        .binary_search_by_key(&offset, |(o, _)| *o)
        .ok()
        .and_then(|i| marks.get(i))
        .map(|(_, m)| m)
}
