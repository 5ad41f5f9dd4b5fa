//! The embedded price table is LiteLLM's (`../shared/reference/prices`, as
//! `scripts/prices-snapshot` trims it): every model LiteLLM prices for chat, responses or
//! completion is there, each with LiteLLM's own prices and nothing else. Run the script again
//! when the shared table changes.

#![allow(clippy::unwrap_used, clippy::float_cmp)]

use freecode_core::prices::{Price, PriceTable};
use serde_json::Value;

#[test]
fn the_embedded_table_is_litellm_s_prices_field_for_field() {
    let litellm: Value =
        serde_json::from_slice(&std::fs::read(freecode_testkit::litellm_prices()).unwrap())
            .unwrap();
    let ours = PriceTable::embedded();
    let field = |entry: &Value, name: &str| entry.get(name).and_then(Value::as_f64);
    let mut checked = 0;
    for (name, entry) in litellm.as_object().unwrap() {
        let priced_mode = matches!(
            entry.get("mode").and_then(Value::as_str),
            Some("chat" | "responses" | "completion")
        );
        let want = Price {
            input: field(entry, "input_cost_per_token"),
            output: field(entry, "output_cost_per_token"),
            cache_read: field(entry, "cache_read_input_token_cost"),
            cache_write: field(entry, "cache_creation_input_token_cost"),
            cache_write_1h: field(entry, "cache_creation_input_token_cost_above_1hr"),
            reasoning: field(entry, "output_cost_per_reasoning_token"),
            input_above_200k: field(entry, "input_cost_per_token_above_200k_tokens"),
            output_above_200k: field(entry, "output_cost_per_token_above_200k_tokens"),
            cache_read_above_200k: field(entry, "cache_read_input_token_cost_above_200k_tokens"),
            cache_write_above_200k: field(
                entry,
                "cache_creation_input_token_cost_above_200k_tokens",
            ),
            cache_write_1h_above_200k: field(
                entry,
                "cache_creation_input_token_cost_above_1hr_above_200k_tokens",
            ),
        };
        let priced =
            name != "sample_spec" && priced_mode && (want.input.is_some() || want.output.is_some());
        assert_eq!(ours.models.get(name), priced.then_some(&want), "{name}");
        checked += usize::from(priced);
    }
    assert_eq!(
        ours.models.len(),
        checked,
        "models that LiteLLM does not price"
    );
}
