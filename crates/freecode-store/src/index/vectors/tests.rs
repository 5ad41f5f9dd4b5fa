//! Unit tests of `vectors`.

use super::*;

fn chunk(messages: &[(&str, &str)], window: usize) -> Vec<(i64, i64, String)> {
    let mut c = Chunker::new(window);
    for (i, (role, text)) in messages.iter().enumerate() {
        let line = i as i64 + 1;
        c.message(line, &format!("m{line}"), role, line * 10, text);
    }
    c.finish()
        .into_iter()
        .map(|b| (b.line, b.end_line, b.text))
        .collect()
}

#[test]
fn a_chunk_is_a_user_turn_with_what_followed() {
    let got = chunk(
        &[
            ("user", "fix the login loop"),
            ("assistant", "looking at auth.ts"),
            ("assistant", ""),
            ("user", "now the tests"),
            ("assistant", "all green"),
        ],
        1000,
    );
    assert_eq!(
        got,
        vec![
            (1, 3, "fix the login loop\nlooking at auth.ts".to_owned()),
            (4, 5, "now the tests\nall green".to_owned()),
        ]
    );
}

#[test]
fn steps_are_cut_and_a_long_turn_goes_on_in_a_next_chunk() {
    let long = "x".repeat(5000);
    let got = chunk(
        &[
            ("user", "go"),
            ("assistant", &long),
            ("assistant", &long),
            ("assistant", &long),
        ],
        700,
    );
    // Each step gives STEP_CHARS; the window holds two of them after the prompt.
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].0, got[0].1), (1, 3));
    assert_eq!(
        got[0].2.chars().count(),
        2 + 1 + STEP_CHARS + 1 + STEP_CHARS
    );
    assert_eq!((got[1].0, got[1].1), (4, 4));
    assert!(got.iter().all(|(_, _, t)| t.chars().count() <= 700));
    // A user message longer than the window is cut to it.
    let got = chunk(&[("user", &"é".repeat(2000))], 700);
    assert_eq!(got[0].2.chars().count(), 700);
}

#[test]
fn a_log_that_starts_with_the_assistant_still_chunks() {
    let got = chunk(&[("assistant", "hello"), ("user", "hi")], 1000);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].2, "hello");
}

#[test]
fn quantized_scores_keep_the_order() {
    let a = [0.6f32, 0.8, 0.0];
    let b = [0.8f32, 0.6, 0.0];
    let c = [0.0f32, 0.0, 1.0];
    let q: Vec<i8> = quantize(&a).into_iter().map(|x| x as i8).collect();
    let (sa, sb, sc) = (
        score(&quantize(&a), &q),
        score(&quantize(&b), &q),
        score(&quantize(&c), &q),
    );
    assert!((sa - 1.0).abs() < 0.02 && (sb - 0.96).abs() < 0.02 && sc.abs() < 0.02);
    assert!(sa > sb && sb > sc);
    assert_eq!(quantize(&[1.5, -1.5]), vec![127u8, (-127i8) as u8]);
}

#[test]
fn the_text_hash_is_stable() {
    // FNV-1a's published value for "a": stored hashes must not change between builds.
    assert_eq!(text_hash("a") as u64, 0xaf63_dc4c_8601_ec8c);
    assert_ne!(text_hash("ab"), text_hash("ba"));
}

#[test]
fn turns_that_say_little_are_told_from_those_that_say_something() {
    for little in [
        "System: Please continue.",
        "[REDACTED_PROMPT]",
        "[REDACTED:env_assignment] ok",
        "",
        "yes, do it",
        "là, c'est ça",
    ] {
        assert!(says_little([little]), "{little}");
    }
    for something in [
        "fix the flaky arm runner cache",
        "ダークモード の 設定 画面 を 作って",
        "[REDACTED_PROMPT] then rotate the staging deploy keys",
    ] {
        assert!(!says_little([something]), "{something}");
    }
    // Counted over the whole chunk.
    assert!(!says_little(["continue", "rotated the staging keys"]));
}

fn word_hit(missing: &[&str]) -> SearchHit {
    SearchHit {
        session_id: "s".into(),
        title: String::new(),
        project_path: String::new(),
        agent: String::new(),
        message_id: "m".into(),
        role: "user".into(),
        timestamp: 0,
        snippet: String::new(),
        matches: Vec::new(),
        missing: missing.iter().map(|w| (*w).to_owned()).collect(),
        rank: 0.0,
        found_by: FoundBy::Words,
        similarity: None,
        strength: crate::index::Strength::Strong,
        other_matches: 0,
        other_message_ids: Vec::new(),
    }
}

/// A chunk as the fusion ranks it: found by the words (`word`) or by meaning alone, strong or
/// weak by meaning (`near`: at least the floor).
fn fused(score: f64, word: Option<SearchHit>, near: bool, order: usize) -> Fused {
    Fused {
        score,
        by_words: word.is_some(),
        strong: word.is_some() || near,
        word,
        by_meaning: true,
        similarity: None,
        order,
    }
}

/// Exact first: a hit holding every word ranks above one lacking a word, or found by meaning
/// alone, whatever their fused scores; then the strong above the weak (found by meaning alone,
/// less near than the floor); then the score, then the order found.
#[test]
fn a_hit_with_every_word_ranks_first_whatever_the_meaning_score() {
    let mut ranked = [
        fused(0.030, Some(word_hit(&["assets"])), false, 0),
        fused(0.032, None, true, 1),
        fused(0.012, Some(word_hit(&[])), false, 2),
        fused(0.016, Some(word_hit(&[])), true, 3),
        fused(0.030, None, true, 4),
        // Weak: the nearest by meaning, ahead in score of the hit lacking a word.
        fused(0.016, None, false, 5),
        fused(0.011, Some(word_hit(&["phoenix"])), false, 6),
    ];
    ranked.sort_by(fused_order);
    let order: Vec<usize> = ranked.iter().map(|f| f.order).collect();
    assert_eq!(order, [3, 2, 1, 0, 4, 6, 5]);
}
