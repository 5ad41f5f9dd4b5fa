//! The one cap on a line of any JSON Lines file freecode reads or writes: its own
//! `messages.jsonl` and `events.jsonl`, and the other agents' logs it imports.
//!
//! A line is one message or one event. The largest a real one gets is a message carrying images
//! (a provider takes images of up to 5 MB, 6.7 MB as base64; two in one message, with their
//! text, stay under 16 MiB) or a long tool output (the agent's tools return at most 1 MiB).
//! Past the cap a line cannot be a record of any of these formats, so every reader skips it as a
//! bad line, measured but never held, and the writers refuse to write one: whatever freecode
//! writes, it can read back.

/// The largest line read or written: 16 MiB (see the [module docs](self)).
pub const MAX_LINE_BYTES: usize = 16 << 20;
