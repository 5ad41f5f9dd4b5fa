//! Which stored messages a compaction keeps (SPEC §12, `keepLastNUserTurns`), with §19.17 fixed.
//!
//! The kept suffix always starts at a user message, so the trimmed log is a valid conversation.
//! Unlike the original, `n = 0` is refused rather than wiping the log, and the synthetic
//! image-caption messages the loop writes after tool calls do not count as user turns.
//!
//! [`extractive_summary`] is the summary recorded when no model writes one (the agent's
//! automatic compaction, `session.compact` without a summary).

use crate::message::{PartType, Role, StoredMessage};

/// Why a compaction selection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionError {
    /// `n` was zero: keeping no turns would erase the conversation.
    #[error(
        "refusing to keep 0 user turns: that would erase the whole conversation (keep at least 1)"
    )]
    KeepZero,
}

/// Whether `msg` is a user turn: a user message that is not the loop's synthetic caption for
/// images produced by tools.
pub fn is_user_turn(msg: &StoredMessage) -> bool {
    msg.role == Role::User && !is_image_caption(msg)
}

fn is_image_caption(msg: &StoredMessage) -> bool {
    let has_image = msg.parts.iter().any(|p| p.kind == PartType::Image);
    let caption = msg
        .parts
        .first()
        .and_then(|p| p.text_content())
        .unwrap_or("");
    has_image
        && (caption == "Image from the tool call above:"
            || caption.ends_with(" images from the tool calls above:"))
}

/// Most characters of one user prompt an extractive summary keeps.
const SUMMARY_PROMPT_CHARS: usize = 200;

/// A summary written without a model: the previous summary (so a second compaction loses
/// nothing the first kept), then the user prompts of the `dropped` messages, each cut to 200
/// characters.
pub fn extractive_summary(previous: Option<&str>, dropped: &[StoredMessage]) -> String {
    let mut s = String::new();
    if let Some(p) = previous.map(str::trim).filter(|p| !p.is_empty()) {
        s.push_str(p);
        s.push_str("\n\n");
    }
    s.push_str(&format!(
        "Earlier in this session ({} messages, summarised without a model). The user asked:\n",
        dropped.len()
    ));
    for m in dropped.iter().filter(|m| is_user_turn(m)) {
        let text: String = m.text().chars().take(SUMMARY_PROMPT_CHARS).collect();
        if !text.trim().is_empty() {
            s.push_str("- ");
            s.push_str(text.trim());
            s.push('\n');
        }
    }
    s
}

/// The index of the first message kept when keeping the last `n` user turns; `0` keeps all.
pub fn keep_last_n_user_turns(
    messages: &[StoredMessage],
    n: usize,
) -> Result<usize, CompactionError> {
    if n == 0 {
        return Err(CompactionError::KeepZero);
    }
    let mut seen = 0;
    for (i, m) in messages.iter().enumerate().rev() {
        if is_user_turn(m) {
            seen += 1;
            if seen == n {
                return Ok(i);
            }
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Part;

    fn msg(role: Role, text: &str) -> StoredMessage {
        StoredMessage::new(text, role, vec![Part::text(text)], 0)
    }

    #[test]
    fn slices_at_a_user_message() {
        let log: Vec<_> = ["u1", "a1", "u2", "a2", "u3", "a3"]
            .iter()
            .map(|t| {
                msg(
                    if t.starts_with('u') {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    t,
                )
            })
            .collect();
        assert_eq!(keep_last_n_user_turns(&log, 2), Ok(2));
        assert_eq!(keep_last_n_user_turns(&log, 9), Ok(0));
        assert_eq!(
            keep_last_n_user_turns(&log, 0),
            Err(CompactionError::KeepZero)
        );
    }

    #[test]
    fn image_captions_are_not_turns() {
        let mut caption = msg(Role::User, "Image from the tool call above:");
        caption.parts.push(Part::image("AA==", "image/png", None));
        let log = vec![
            msg(Role::User, "u1"),
            msg(Role::Assistant, "a1"),
            caption,
            msg(Role::Assistant, "a2"),
        ];
        assert_eq!(keep_last_n_user_turns(&log, 1), Ok(0));
    }
}
