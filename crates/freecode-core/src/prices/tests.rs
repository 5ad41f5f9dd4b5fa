//! The price table's name matching and costs, against the figures ccusage printed.

#![allow(clippy::unwrap_used, clippy::float_cmp)]

use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn names_as_agents_write_them_find_the_table_s() {
    let t = PriceTable::embedded();
    assert!(t.models.len() > 1000, "{}", t.models.len());
    for (written, table) in [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"),
        ("Claude-Sonnet-4-5", "claude-sonnet-4-5"),
        ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("gpt-5-codex", "gpt-5-codex"),
        ("openai/gpt-5", "gpt-5"),
        // A date the table does not have: the model without it.
        ("claude-sonnet-4-5-20991231", "claude-sonnet-4-5"),
        ("claude-opus-4-5@20991231", "claude-opus-4-5"),
        (" gpt-5 ", "gpt-5"),
        // LiteLLM names it only as Bedrock does: the shortest (Anthropic's own price; the
        // regional names cost a tenth more).
        (
            "claude-sonnet-4-20250514",
            "anthropic.claude-sonnet-4-20250514-v1:0",
        ),
    ] {
        assert_eq!(t.lookup(written).map(|(k, _)| k), Some(table), "{written}");
    }
    // Never a guess.
    for unknown in [
        "",
        "scripted-1",
        "claude",
        "gpt-5-20991231-turbo",
        "my-own-model",
    ] {
        assert_eq!(t.lookup(unknown), None, "{unknown}");
    }
}

#[test]
fn a_provider_s_name_is_found_by_the_shortest_then_first() {
    let table = PriceTable::parse(
        r#"{"models": {
            "vertex_ai/gemini-x": {"input": 2e-6},
            "gemini/gemini-x": {"input": 1e-6},
            "openrouter/google/gemini-x": {"input": 3e-6}
        }}"#,
    )
    .unwrap();
    assert_eq!(table.lookup("gemini-x").unwrap().0, "gemini/gemini-x");
    assert_eq!(
        table.lookup("google/gemini-x").unwrap().0,
        "gemini/gemini-x"
    );
}

/// The figures ccusage 20.0.24 printed for the same requests (`ccusage claude daily --offline
/// --json` over a transcript of them), each LiteLLM's prices applied to the tokens.
#[test]
fn costs_are_litellm_s_prices_applied_as_ccusage_applies_them() {
    let t = PriceTable::embedded();
    let cost = |model: &str, tokens: Tokens| t.lookup(model).unwrap().1.cost(&tokens);
    // Past 200,000 input tokens, those past it at the higher rate.
    assert!(close(
        cost(
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            Tokens {
                input: 300_000,
                output: 10,
                ..Tokens::default()
            }
        ),
        1.320165
    ));
    // Five-minute and one-hour cache writes, each at its own rate.
    assert!(close(
        cost(
            "claude-sonnet-4-5-20250929",
            Tokens {
                input: 100,
                output: 10,
                cache_read: 1000,
                cache_write_5m: 1000,
                cache_write_1h: 2000,
                ..Tokens::default()
            }
        ),
        0.0165
    ));
    assert!(close(
        cost(
            "claude-sonnet-4-5",
            Tokens {
                input: 100,
                output: 10,
                cache_write_5m: 3000,
                ..Tokens::default()
            }
        ),
        0.0117
    ));
    // The genuine fixture's day of claude-sonnet-4-20250514 (seven answers), as ccusage priced
    // it.
    assert!(close(
        cost(
            "claude-sonnet-4-20250514",
            Tokens {
                input: 93,
                output: 953,
                cache_read: 103_219,
                cache_write_5m: 12_698,
                ..Tokens::default()
            }
        ),
        0.093_157_2
    ));
    assert!(close(
        cost(
            "claude-sonnet-4-5-20991231",
            Tokens {
                input: 100,
                output: 10,
                ..Tokens::default()
            }
        ),
        0.00045
    ));
}

#[test]
fn reasoning_is_output_unless_priced_apart_and_cache_kinds_fall_back_to_input() {
    let p = Price {
        input: Some(1.0),
        output: Some(10.0),
        ..Price::default()
    };
    let t = Tokens {
        output: 5,
        reasoning: 3,
        cache_read: 2,
        cache_write_1h: 1,
        ..Tokens::default()
    };
    assert_eq!(p.cost(&t), 50.0 + 2.0 + 1.0);
    let apart = Price {
        reasoning: Some(100.0),
        cache_read: Some(0.5),
        ..p
    };
    assert_eq!(apart.cost(&t), 2.0 * 10.0 + 3.0 * 100.0 + 1.0 + 1.0);
}

#[test]
fn a_user_s_table_adds_and_replaces_whole_models_and_a_bad_one_names_its_line() {
    let mine = PriceTable::parse(
        "{\"models\": {\n  \"scripted-1\": {\"input\": 1e-6, \"output\": 2e-6},\n  \"gpt-5\": {\"input\": 0}\n}}",
    )
    .unwrap();
    let t = PriceTable::embedded().with(&mine);
    assert_eq!(t.lookup("scripted-1").unwrap().1.output, Some(2e-6));
    assert_eq!(
        t.lookup("gpt-5").unwrap().1,
        &Price {
            input: Some(0.0),
            ..Price::default()
        }
    );
    let err = PriceTable::parse("{\"models\": {\n  \"x\": {\"input\": \"cheap\"}\n}}").unwrap_err();
    assert_eq!(err.line, 2, "{err}");
    let err = PriceTable::parse("{\"models\": {\"x\": {\"inptu\": 1}}}").unwrap_err();
    assert!(err.message.contains("inptu"), "{err}");
}
