//! Unit tests of `trace`.

use super::*;
use crate::rollout::event::EventKind;

fn event(seq: u64, at: i64, kind: EventKind) -> Event {
    Event {
        id: format!("e{seq}"),
        seq,
        aggregate_id: "s".into(),
        timestamp: at,
        kind,
        extra: crate::Extra::new(),
    }
}

fn request(turn: &str) -> EventKind {
    EventKind::ModelRequest {
        turn_id: turn.into(),
        provider: "p".into(),
        model: "m".into(),
        message_count: 1,
        tool_count: 0,
        prompt_chars: 0,
        streamed: true,
    }
}

fn response(turn: &str, duration_ms: i64) -> EventKind {
    EventKind::ModelResponse {
        turn_id: turn.into(),
        provider: "p".into(),
        model: "m".into(),
        duration_ms,
        ttft_ms: None,
        input_tokens: None,
        output_tokens: None,
        cache_read_tokens: None,
        cache_write_tokens: None,
        cache_write_1h_tokens: None,
        reasoning_tokens: None,
        tool_calls: vec!["t".into()],
        text_chars: 0,
        thinking_chars: 0,
        echoed_model: None,
    }
}

/// A tool that runs while the model still streams counts once; the user's pause between
/// two turns is idle; the four parts add up to the wall time and their shares to 100%.
#[test]
fn the_wall_time_is_cut_into_parts_that_add_up() {
    let call = |turn: &str| EventKind::FunctionCall {
        turn_id: turn.into(),
        tool: "t".into(),
        args: serde_json::json!({}),
        call_id: Some("c1".into()),
        parent_call_id: None,
    };
    let output = |turn: &str, duration_ms| EventKind::FunctionOutput {
        turn_id: turn.into(),
        tool: "t".into(),
        output: String::new(),
        duration_ms,
        failed: None,
        call_id: Some("c1".into()),
    };
    let started = |turn: &str| EventKind::TurnStarted {
        turn_id: turn.into(),
    };
    let log = [
        event(1, 0, started("a")),
        event(2, 0, request("a")),
        // The tool starts at 6 s while the response closes at 10 s, and runs 8 s.
        event(3, 6_000, call("a")),
        event(4, 10_000, response("a", 10_000)),
        event(5, 14_000, output("a", 8_000)),
        // The user reads for a minute, then asks again; the agent thinks for 2 s first.
        event(6, 74_000, started("b")),
        event(7, 76_000, request("b")),
        event(8, 80_000, response("b", 4_000)),
    ];
    let mut fold = TraceBuilder::new("s");
    for e in &log {
        fold.apply(e);
    }
    let t = fold.finish(None);
    assert_eq!(t.wall_ms, 80_000);
    // Span sums count the overlap twice; the parts never do.
    assert_eq!((t.model_ms, t.tool_ms), (14_000, 8_000));
    assert_eq!(
        t.time,
        TimeShares {
            model_ms: 14_000,
            tools_ms: 4_000,
            idle_ms: 60_000,
            other_ms: 2_000,
        }
    );
    assert_eq!(t.time.percents().iter().sum::<u64>(), 100);
    assert_eq!(t.time.percents(), [18, 5, 75, 2]);
    assert_eq!(TimeShares::default().percents(), [0; 4]);
    let thirds = TimeShares {
        model_ms: 1,
        tools_ms: 1,
        idle_ms: 1,
        other_ms: 0,
    };
    assert_eq!(thirds.percents().iter().sum::<u64>(), 100);
}
