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

/// The budget of [`extractive_summary`], in estimated tokens: a tenth of the agent's default
/// compaction threshold.
pub const DEFAULT_SUMMARY_TOKENS: u64 = 10_000;

/// [`extractive_summary_within`] with [`DEFAULT_SUMMARY_TOKENS`].
pub fn extractive_summary(previous: Option<&str>, dropped: &[StoredMessage]) -> String {
    extractive_summary_within(previous, dropped, DEFAULT_SUMMARY_TOKENS)
}

/// A summary written without a model, of at most `max_tokens` estimated tokens
/// ([`crate::memory::estimate_tokens`]) beyond its one-line header: the lines of the previous
/// summary (so a second compaction loses nothing the first kept, room permitting), then the
/// user prompts of the `dropped` messages, each cut to 200 characters. When they do not all
/// fit, the most recent lines are kept and the header says how many earlier ones were left
/// out, so the summary never grows with the history (a 200,000-message session once gave a
/// 1.2M-token summary, sent with every later call).
pub fn extractive_summary_within(
    previous: Option<&str>,
    dropped: &[StoredMessage],
    max_tokens: u64,
) -> String {
    // Candidate lines, oldest first: the previous summary's (less its own header), then ours.
    let mut lines: Vec<String> = Vec::new();
    if let Some(p) = previous.map(str::trim).filter(|p| !p.is_empty()) {
        lines.extend(
            p.lines()
                .map(str::trim_end)
                .filter(|l| !l.trim().is_empty() && !is_summary_header(l))
                .map(str::to_owned),
        );
    }
    for m in dropped.iter().filter(|m| is_user_turn(m)) {
        let text: String = m.text().chars().take(SUMMARY_PROMPT_CHARS).collect();
        // One line per prompt: a prompt's own newlines would make it several.
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if !text.is_empty() {
            lines.push(format!("- {text}"));
        }
    }
    // The newest lines that fit the budget (each costs its characters plus the newline).
    let budget_chars = max_tokens.saturating_mul(4);
    let mut used: u64 = 0;
    let mut first_kept = lines.len();
    for (i, line) in lines.iter().enumerate().rev() {
        let cost = line.chars().count() as u64 + 1;
        if used.saturating_add(cost) > budget_chars {
            break;
        }
        used += cost;
        first_kept = i;
    }
    let mut s = format!(
        "Earlier in this session ({} messages, summarised without a model",
        dropped.len()
    );
    if first_kept > 0 {
        s.push_str(&format!(
            "; the {first_kept} earliest of {} lines left out to fit {max_tokens} tokens",
            lines.len()
        ));
    }
    s.push_str("). The user asked:\n");
    for line in &lines[first_kept..] {
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// The header line [`extractive_summary_within`] writes (dropped when a summary is folded into
/// the next one).
fn is_summary_header(line: &str) -> bool {
    line.starts_with("Earlier in this session (") && line.ends_with("The user asked:")
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
    fn the_summary_keeps_the_newest_prompts_within_its_budget() {
        use crate::memory::estimate_tokens;
        let log: Vec<_> = (0..20_000)
            .map(|i| {
                if i % 2 == 0 {
                    msg(Role::User, &format!("prompt {i}: {}", "x".repeat(300)))
                } else {
                    msg(Role::Assistant, "answer")
                }
            })
            .collect();
        let s = extractive_summary_within(None, &log, 1_000);
        let header = s.lines().next().unwrap();
        let body: String = s.lines().skip(1).map(|l| format!("{l}\n")).collect();
        assert!(
            estimate_tokens(&body) <= 1_000,
            "{}",
            estimate_tokens(&body)
        );
        assert!(header.contains("20000 messages"), "{header}");
        assert!(
            header.contains("earliest of 10000 lines left out"),
            "{header}"
        );
        // The newest prompt is there, cut to 200 characters; the oldest is not.
        assert!(s.contains("- prompt 19998: x"));
        assert!(!s.contains("- prompt 0: "));
        assert!(s.lines().all(|l| l.chars().count() <= 202 || l == header));

        // Folded into the next compaction: still within the budget, one header, newest last.
        let more: Vec<_> = vec![msg(Role::User, "the latest"), msg(Role::Assistant, "a")];
        let s2 = extractive_summary_within(Some(&s), &more, 1_000);
        assert_eq!(
            s2.lines().filter(|l| l.starts_with("Earlier in")).count(),
            1,
            "{s2}"
        );
        assert!(s2.ends_with("- the latest\n"), "{s2}");
        let body: String = s2.lines().skip(1).map(|l| format!("{l}\n")).collect();
        assert!(estimate_tokens(&body) <= 1_000);

        // A small history is kept whole, with no note.
        let s3 = extractive_summary_within(None, &log[..4], 1_000);
        assert!(!s3.contains("left out"), "{s3}");
        assert_eq!(s3.lines().count(), 3);
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
