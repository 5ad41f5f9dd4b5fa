//! `freecode usage` as a user meets it: Claude Code transcripts imported, then tokens and cost
//! by day, model and agent; each answer counted once however many lines it takes; LiteLLM's
//! prices applied (checked here against LiteLLM's own table in `../shared`); a model no table
//! knows counted but not priced; a user's prices file on top, a broken one named by its line;
//! filters; bad `--by` exit 2.

use serde_json::{Value, json};

use crate::common::Ctx;

/// One Claude Code session over two days: an answer of claude-sonnet-4-5 on 2026-03-01 (its
/// cache writes a third for five minutes, two thirds for an hour), then
/// an answer of a model no table knows on 2026-03-02, written on two lines (text, then a tool
/// call) that repeat its usage, as Claude Code writes them.
fn transcript(dir: &std::path::Path) {
    let project = dir.join("projects/-work-café");
    std::fs::create_dir_all(&project).unwrap();
    let line = |v: Value| format!("{}\n", serde_json::to_string(&v).unwrap());
    let user = |uuid: &str, parent: Option<&str>, ts: &str, text: &str| {
        line(
            json!({"type": "user", "uuid": uuid, "parentUuid": parent, "timestamp": ts,
            "cwd": "/work/café", "sessionId": "s-1", "version": "2.1.0",
            "message": {"role": "user", "content": text}}),
        )
    };
    let answer = |uuid: &str,
                  parent: &str,
                  ts: &str,
                  id: &str,
                  model: &str,
                  block: Value,
                  usage: Value| {
        line(
            json!({"type": "assistant", "uuid": uuid, "parentUuid": parent, "timestamp": ts,
            "cwd": "/work/café", "sessionId": "s-1", "version": "2.1.0", "requestId": format!("req-{id}"),
            "message": {"id": id, "type": "message", "role": "assistant", "model": model,
                "content": [block], "usage": usage}}),
        )
    };
    let text = |t: &str| json!({"type": "text", "text": t});
    let priced = json!({"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 3000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000}});
    let unknown = json!({"input_tokens": 7, "output_tokens": 5});
    let body = [
        user("u1", None, "2026-03-01T10:00:00Z", "Où est le bug ?"),
        answer("a1", "u1", "2026-03-01T10:00:05Z", "m1", "claude-sonnet-4-5-20250929", text("Là."), priced),
        user("u2", Some("a1"), "2026-03-02T10:00:00Z", "Et maintenant ?"),
        answer("a2", "u2", "2026-03-02T10:00:03Z", "m2", "scripted-1", text("Je regarde."), unknown.clone()),
        answer("a3", "a2", "2026-03-02T10:00:04Z", "m2", "scripted-1",
            json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}), unknown),
        line(json!({"type": "user", "uuid": "r1", "parentUuid": "a3", "timestamp": "2026-03-02T10:00:06Z",
            "cwd": "/work/café", "sessionId": "s-1",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]}})),
    ]
    .concat();
    std::fs::write(project.join("s-1.jsonl"), body).unwrap();
}

fn imported() -> Ctx {
    // Days are the local calendar's: UTC here, whatever the machine's zone.
    let ctx = Ctx::empty().with_env("TZ", "UTC");
    let claude = ctx.path("claude");
    transcript(&claude);
    let out = ctx
        .cmd(&["import", "claude-code"])
        .env("CLAUDE_CONFIG_DIR", &claude)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ctx
}

/// LiteLLM's own price of `model` for `field`, from its table in `../shared`.
fn litellm(model: &str, field: &str) -> f64 {
    let table: Value =
        serde_json::from_slice(&std::fs::read(freecode_testkit::litellm_prices()).unwrap())
            .unwrap();
    table[model][field].as_f64().unwrap()
}

#[test]
fn usage_counts_each_answer_once_and_prices_it_as_litellm_does() {
    let ctx = imported();
    let report = ctx.json(&["usage", "--by", "day,model", "--json"]);
    crate::json::check("usage.json", &report);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{report:#}");
    let m = "claude-sonnet-4-5-20250929";
    let cost = 100.0 * litellm(m, "input_cost_per_token")
        + 10.0 * litellm(m, "output_cost_per_token")
        + 1000.0 * litellm(m, "cache_read_input_token_cost")
        // Five-minute and one-hour cache writes, each at its own rate.
        + 1000.0 * litellm(m, "cache_creation_input_token_cost")
        + 2000.0 * litellm(m, "cache_creation_input_token_cost_above_1hr");
    let first = &rows[0];
    assert_eq!(
        (&first["day"], &first["model"], &first["requests"]),
        (&json!("2026-03-01"), &json!(m), &json!(1))
    );
    // The input at the full rate only: cache reads and writes apart.
    assert_eq!(
        [
            &first["inputTokens"],
            &first["outputTokens"],
            &first["cacheReadTokens"],
            &first["cacheWriteTokens"]
        ],
        [&json!(100), &json!(10), &json!(1000), &json!(3000)]
    );
    assert!(
        (first["costUsd"].as_f64().unwrap() - cost).abs() < 1e-12,
        "{first}"
    );
    // Two lines, one answer: counted once; a model no table knows has no cost, never a guess.
    let second = &rows[1];
    assert_eq!(
        (&second["model"], &second["requests"]),
        (&json!("scripted-1"), &json!(1))
    );
    assert_eq!(
        (&second["inputTokens"], &second["outputTokens"]),
        (&json!(7), &json!(5))
    );
    assert_eq!(second["costUsd"], Value::Null);
    assert_eq!(report["unpriced"], json!(["scripted-1"]));
    assert_eq!(report["total"]["requests"], 2);
    assert_eq!(report["total"]["costUsd"], Value::Null);

    // By agent: one row; filters.
    let by_agent = ctx.json(&["usage", "--by", "agent", "--json"]);
    assert_eq!(by_agent["rows"][0]["agent"], "claude-code");
    let later = ctx.json(&["usage", "--by", "model", "--since", "2026-03-02", "--json"]);
    assert_eq!(later["rows"].as_array().unwrap().len(), 1);
    assert_eq!(later["rows"][0]["model"], "scripted-1");
    let before = ctx.json(&["usage", "--until", "2026-03-01", "--json"]);
    assert_eq!(before["total"]["requests"], 1);
    let none = ctx.json(&["usage", "--agent", "codex", "--json"]);
    assert_eq!(none["total"]["requests"], 0);
    assert_eq!(none["total"]["costUsd"], 0.0);

    // A person's table: the keys, the figures, the total, the cost of what is priced.
    let text = ctx.ok(&["usage", "--by", "model"]);
    assert!(
        text.contains("claude-sonnet-4-5-20250929") && text.contains("TOTAL"),
        "{text}"
    );
    assert!(text.contains("—"), "an unknown cost is not $0: {text}");

    // A bad key or time is a usage error.
    let out = ctx.run(&["usage", "--by", "weekday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("day, week, month"));
    for (flag, bad) in [("--since", "yesterdayish"), ("--until", "soon")] {
        let out = ctx.run(&["usage", flag, bad]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("expected a date"));
    }
}

#[test]
fn a_user_s_prices_add_a_model_and_a_broken_file_is_named_by_its_line() {
    let ctx = imported();
    std::fs::write(
        ctx.home.join("prices.json"),
        r#"{"models": {"scripted-1": {"input": 0.001, "output": 0.002}}}"#,
    )
    .unwrap();
    let report = ctx.json(&["usage", "--by", "model", "--json"]);
    assert_eq!(report["unpriced"], json!([]));
    let scripted = &report["rows"][1];
    assert!((scripted["costUsd"].as_f64().unwrap() - (7.0 * 0.001 + 5.0 * 0.002)).abs() < 1e-12);

    std::fs::write(
        ctx.home.join("prices.json"),
        "{\"models\": {\n  \"x\": {\"input\": \"cheap\"}\n}}",
    )
    .unwrap();
    let out = ctx.run(&["usage", "--json"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("prices.json: line 2") && stderr.contains("embedded"),
        "{stderr}"
    );
}
