//! Rollout logs the trace, replay and RPC tests share.

/// A log past the two-core split (8 MiB) and the spool's memory (1 MiB) with requests that
/// overlap and close out of order, parallel tool calls answered in reverse, denials, clock
/// steps back, unreadable lines and a torn tail.
pub fn big_odd_log() -> Vec<u8> {
    let mut out = Vec::new();
    let mut push = |s: String| {
        out.extend_from_slice(s.as_bytes());
        out.push(b'\n');
    };
    for n in 0..24_000i64 {
        let ts = 1_700_000_000_000 + n * 1000 - (n % 7) * 3000;
        let h = |t: &str, dt: i64| format!("\"timestamp\":{},\"turnId\":\"{t}\"", ts + dt);
        let (a, b) = (format!("turn-{n}"), format!("sub-{n}"));
        push(format!("{{\"type\":\"turn.started\",{}}}", h(&a, 0)));
        push(format!(
            "{{\"type\":\"model.request\",{},\"provider\":\"p\",\"model\":\"m\",\"messageCount\":{n},\"toolCount\":2,\"promptChars\":{}}}",
            h(&a, 1),
            n * 37
        ));
        push(format!(
            "{{\"type\":\"model.request\",{},\"provider\":\"q\",\"model\":\"m2\",\"messageCount\":1,\"toolCount\":0,\"promptChars\":5}}",
            h(&b, 2)
        ));
        push(format!(
            "{{\"type\":\"model.first_token\",{},\"ttft_ms\":{}}}",
            h(&b, 3),
            n % 900
        ));
        // The later request closes first.
        push(format!(
            "{{\"type\":\"model.response\",{},\"duration_ms\":{},\"inputTokens\":{},\"toolCalls\":[\"bash\",\"read\"]}}",
            h(&b, 4),
            n % 1500,
            n * 11
        ));
        if n % 5 == 0 {
            push(format!(
                "{{\"type\":\"model.error\",{},\"duration_ms\":61250,\"kind\":\"stall\",\"error\":\"slow \\\"x\\\"\"}}",
                h(&a, 5)
            ));
        } else {
            push(format!(
                "{{\"type\":\"model.response\",{},\"duration_ms\":{},\"outputTokens\":{},\"cacheReadTokens\":{}}}",
                h(&a, 5),
                1000 + n % 70_000,
                n,
                n % 3
            ));
        }
        push(format!(
            "{{\"type\":\"function.call\",{},\"tool\":\"bash\",\"callId\":\"c{n}\",\"args\":{{\"cmd\":\"ls -la\",\"n\":{n}.5}}}}",
            h(&a, 6)
        ));
        push(format!(
            "{{\"type\":\"function.call\",{},\"tool\":\"read\",\"callId\":\"d{n}\",\"args\":{{\"path\":\"src/lib.rs\"}}}}",
            h(&a, 7)
        ));
        push(format!(
            "{{\"type\":\"function.output\",{},\"tool\":\"read\",\"callId\":\"d{n}\",\"output\":\"ok\",\"duration_ms\":{}}}",
            h(&a, 8),
            n % 50
        ));
        push(format!(
            "{{\"type\":\"function.output\",{},\"tool\":\"bash\",\"callId\":\"c{n}\",\"output\":\"ok\",\"duration_ms\":9,\"failed\":true}}",
            h(&a, 9)
        ));
        if n % 3 == 0 {
            push(format!(
                "{{\"type\":\"function.denied\",{},\"tool\":\"rm\",\"args\":{{\"p\":\"/\"}},\"reason\":\"no\",\"source\":\"mode\"}}",
                h(&a, 10)
            ));
        }
        if n % 997 == 0 {
            push("{not json".to_owned());
            push(format!("{{\"type\":\"future.event\",{}}}", h(&a, 11)));
        }
    }
    out.extend_from_slice(b"{\"type\":\"model.request\",\"timestamp\":1");
    out
}
