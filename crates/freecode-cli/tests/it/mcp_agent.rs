//! The real Claude Code (pinned, `scripts/agents.pinned`) given `freecode mcp` as an MCP server
//! reads a long session page by page: the scripted model asks for each page as freecode pages
//! it, and every page reaches the model whole (inline, not saved to a file with a preview),
//! every message of the session once, in order.
//!
//! Without Claude Code installed the test prints a notice and passes, except under `CI=true`.

use std::path::Path;

use crate::agents::{agent_home, anthropic_results, run, workspace};
use crate::common::Ctx;
use freecode_core::StoredMessage;
use freecode_core::message::{Part, Role};
use freecode_store::{Home, NewSession, SessionStore};
use freecode_testkit::agents::{self, Agent};
use freecode_testkit::model_server::{ModelServer, Script, Step};
use serde_json::{Value, json};

/// Turns of the long session, each a prompt and an answer of [`TURN_BYTES`].
const TURNS: usize = 40;
const TURN_BYTES: usize = 8 * 1024;
/// Past about this many characters Claude Code keeps a tool's result in a file and gives the
/// model a preview (issue 54).
const INLINE_LIMIT: usize = 50_000;

/// A session of [`TURNS`] long turns (not ASCII only) in `home`; its id.
fn long_session(home: &Path) -> String {
    std::fs::create_dir_all(home).unwrap();
    let store = SessionStore::open(Home::new(home)).unwrap();
    let mut w = store
        .create_writer(NewSession {
            title: "Migration au schéma v2".into(),
            project_path: "/work/zoo".into(),
            provider: "scripted".into(),
            model: Some("scripted-1".into()),
        })
        .unwrap();
    let id = w.id().to_string();
    let line = "la table « events » passe au schéma partitionné; ";
    for n in 0..TURNS {
        let at = 1_767_225_600_000 + n as i64 * 60_000;
        let body: String = line.repeat(TURN_BYTES / line.len() + 1);
        for (role, who) in [(Role::User, "u"), (Role::Assistant, "a")] {
            let text = format!("turn {n} ({who}): {body}");
            w.append(&StoredMessage::new(
                format!("{who}{n}"),
                role,
                vec![Part::text(text)],
                at,
            ))
            .unwrap();
        }
    }
    w.end_turn(0).unwrap();
    id
}

#[test]
fn claude_code_reads_a_long_session_through_freecode_mcp_page_by_page() {
    let Some(bin) = agents::installed(Agent::ClaudeCode) else {
        return;
    };
    let ctx = Ctx::empty();
    let id = long_session(&ctx.home);
    // The pages as freecode pages them: the offsets the model will ask for.
    let home = Home::new(&ctx.home);
    let mut offsets = vec![0usize];
    let mut want_ids = Vec::new();
    loop {
        let p = serde_json::from_value(json!({"sessionId": id, "offset": offsets.last()})).unwrap();
        let page = serde_json::to_value(freecode_ops::page::messages(&home, p).unwrap()).unwrap();
        want_ids.extend(
            page["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap().to_owned()),
        );
        match page["nextOffset"].as_u64() {
            Some(next) => offsets.push(usize::try_from(next).unwrap()),
            None => break,
        }
    }
    assert_eq!(want_ids.len(), TURNS * 2);
    assert!(
        offsets.len() > 3,
        "a long session is several pages: {offsets:?}"
    );

    let mut steps: Vec<Step> = offsets
        .iter()
        .map(|o| {
            Step::tool(
                "mcp__freecode__get_session",
                json!({"sessionId": id, "offset": o}),
            )
        })
        .collect();
    steps.push(Step::text("I have read the whole session."));
    let server = ModelServer::start(Script::new(steps));
    let work = workspace(&ctx);
    let agent_home = agent_home(&ctx);
    let config = ctx.path("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"freecode": {
            "type": "stdio",
            "command": env!("CARGO_BIN_EXE_freecode"),
            "args": ["mcp"],
            "env": {"FREECODE_HOME": ctx.home, "HOME": agent_home, "NO_COLOR": "1"},
        }}})
        .to_string(),
    )
    .unwrap();
    let mut c = agents::claude(&bin, &agent_home, &work, &server.url());
    c.args([
        "--mcp-config",
        config.to_str().unwrap(),
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__freecode__get_session",
        "--",
        &format!("Read session {id} whole, every page."),
    ]);
    run(&mut c);

    // The model was asked once a page, then once more with the last page's result.
    let turns = server.turns();
    assert_eq!(turns.len(), offsets.len() + 1, "{:?}", server.steps_left());
    let results = anthropic_results(turns.last().unwrap());
    assert_eq!(results.len(), offsets.len(), "one result a page");
    let mut got_ids = Vec::new();
    for (n, (_, text)) in results.iter().enumerate() {
        assert!(
            text.len() < INLINE_LIMIT,
            "page {n}: {} characters, more than Claude Code passes inline",
            text.len()
        );
        // Whole: the page's JSON as freecode wrote it, not a preview of a saved file.
        let page: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("page {n} is not whole JSON ({e}): {text:.300}"));
        assert_eq!(page["session"]["id"], id.as_str());
        let expected_next = offsets.get(n + 1).map(|o| json!(o));
        assert_eq!(
            page.get("nextOffset").cloned().filter(|v| !v.is_null()),
            expected_next,
            "page {n}"
        );
        for m in page["messages"].as_array().unwrap() {
            got_ids.push(m["id"].as_str().unwrap().to_owned());
            // Each message's text is all there or says it was cut, with its whole size.
            let texts = m.to_string();
            assert!(texts.contains("events"), "page {n}: {texts:.200}");
        }
    }
    assert_eq!(got_ids, want_ids, "every message once, in order");
}
