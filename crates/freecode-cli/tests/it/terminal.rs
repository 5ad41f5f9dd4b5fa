//! What a person at a terminal meets: no escape sequence from a session reaches the terminal,
//! search highlights without brackets, tables fit the width, counts and durations read well,
//! long output pages, slow work shows progress — and none of it when the output is piped.
//!
//! Terminal tests run the binary under `script` (util-linux), which gives it a pseudo-terminal.

use crate::common;

use crate::common::Ctx;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The text of a hostile session: colour, screen clearing, an OSC-8 link, a title change, C1
/// controls, a carriage return that would overwrite the line, and bidi overrides.
const HOSTILE: &str = "\x1b[31mred\x1b[0m \x1b[2J\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\ \x1b]0;pwned\x07 \u{9b}31mc1 \u{9d}8;;http://x\u{9c}safe\rEVIL \u{202E}txt.exe\u{202C} bell\x07";

impl Ctx {
    /// Writes one session as the original writes it (plain files) and its rollout log.
    fn add(&self, id: &str, title: &str, project: &str, status: &str, messages: &[(&str, &str)]) {
        let dir = self.home.join("sessions/home__dev__p").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let t0 = 1_768_000_000_000i64;
        let meta = serde_json::json!({
            "id": id, "title": title, "projectPath": project, "provider": "x",
            "status": status, "createdAt": t0, "updatedAt": t0, "lastTurnAt": t0,
            "turnCount": 1,
        });
        std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
        let mut log = String::new();
        for (i, (role, text)) in messages.iter().enumerate() {
            let m = serde_json::json!({
                "id": format!("{id}-m{i}"), "role": role, "timestamp": t0 + i as i64,
                "parts": [
                    {"type": "text", "content": text},
                    {"type": "tool", "tool": {"name": format!("read\x1b[31m{i}"), "args": {"p": text}},
                     "result": text},
                ],
            });
            log.push_str(&m.to_string());
            log.push('\n');
        }
        std::fs::write(dir.join("messages.jsonl"), log).unwrap();
        // The home as the store makes it (private modes), whatever the test wrote.
        set_private(&self.home);
    }
}

fn set_private(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in walk(root) {
        let mode = if entry.is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_owned()];
    let mut i = 0;
    while i < out.len() {
        if out[i].is_dir() {
            for e in std::fs::read_dir(&out[i]).unwrap() {
                out.push(e.unwrap().path());
            }
        }
        i += 1;
    }
    out
}

/// Whether `s` holds anything a terminal would act on: ESC, C0 (but newline and tab), C1,
/// bidi overrides.
fn has_terminal_controls(s: &str) -> Option<char> {
    s.chars().find(|&c| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    })
}

/// Runs `args` under a pseudo-terminal of `cols` × `rows` (`script`), with colour allowed,
/// and returns everything the terminal received.
fn on_terminal(home: &Ctx, args: &[&str], cols: u16, rows: u16, env: &[(&str, &str)]) -> String {
    set_private(&home.home);
    common::on_terminal(&home.home, args, cols, rows, env)
}

/// The terminal output without our own colour codes (SGR `ESC [ … m`).
fn strip_sgr(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\x1b' && it.peek() == Some(&'[') {
            it.next();
            for c in it.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

const ID: &str = "aaaaaaaa-0000-4000-8000-000000000001";

#[test]
fn no_escape_from_a_session_reaches_the_terminal() {
    let home = Ctx::missing();
    home.add(
        ID,
        &format!("title {HOSTILE}"),
        &format!("/home/dev/{HOSTILE}"),
        "active",
        &[
            ("user", &format!("findme {HOSTILE}")),
            ("assistant", HOSTILE),
        ],
    );
    for args in [
        vec!["session", "list"],
        vec!["session", "show", ID],
        vec!["search", "findme"],
        vec!["search", "click"],
    ] {
        // Piped.
        let out = home.ok(&args);
        assert_eq!(has_terminal_controls(&out), None, "{args:?}: {out:?}");
        // The link's target and the window title are gone with their sequences (tool
        // arguments are shown as JSON, where they are inert escaped text).
        let prose: String = out.lines().filter(|l| !l.contains("→")).collect();
        assert!(!prose.contains("evil.example"), "{args:?}: {out}");
        assert!(!prose.contains("pwned"), "{args:?}: {out}");
        // On a terminal (with colour on): only our own SGR codes remain.
        let tty = strip_sgr(&on_terminal(&home, &args, 200, 500, &[]));
        let tty = tty.replace("\r\n", "\n");
        assert_eq!(has_terminal_controls(&tty), None, "{args:?}: {tty:?}");
    }
    let show = home.ok(&["session", "show", ID]);
    assert!(show.contains("red"), "the text itself stays: {show}");
    assert!(show.contains("click me"), "{show}");
    assert!(show.contains("safeEVIL"), "no carriage return: {show}");
    // JSON carries the data as it is (escaped by JSON itself).
    let json: Value = serde_json::from_str(&home.ok(&["session", "show", ID, "--json"])).unwrap();
    assert_eq!(json["messages"][1]["parts"][0]["content"], HOSTILE);
}

#[test]
fn trace_and_replay_rows_are_terminal_safe() {
    let home = Ctx::missing();
    home.add(ID, "t", "/p", "active", &[("user", "hi")]);
    let dir = home.home.join("rollout/sessions").join(ID);
    std::fs::create_dir_all(&dir).unwrap();
    let t0 = 1_768_000_000_000i64;
    let ev = |seq: u64, ts: i64, body: Value| {
        let mut v = serde_json::json!({
            "id": format!("e{seq}"), "seq": seq, "aggregateID": ID, "timestamp": ts,
        });
        for (k, x) in body.as_object().unwrap() {
            v[k] = x.clone();
        }
        v.to_string() + "\n"
    };
    let hostile_tool = format!("read{HOSTILE}");
    let log = [
        ev(1, t0, serde_json::json!({"type": "turn.started", "turnId": "turn-0"})),
        ev(2, t0 + 1, serde_json::json!({"type": "model.request", "turnId": "turn-0", "provider": HOSTILE, "model": "m"})),
        ev(3, t0 + 2, serde_json::json!({"type": "model.error", "turnId": "turn-0", "duration_ms": 5, "kind": "http", "error": HOSTILE})),
        ev(4, t0 + 3, serde_json::json!({"type": "function.call", "turnId": "turn-0", "tool": hostile_tool, "args": {"x": HOSTILE}})),
        ev(5, t0 + 4, serde_json::json!({"type": "function.output", "turnId": "turn-0", "tool": hostile_tool, "output": HOSTILE, "duration_ms": 3})),
    ]
    .concat();
    std::fs::write(dir.join("events.jsonl"), log).unwrap();
    set_private(&home.home);
    for args in [vec!["trace", ID], vec!["replay", ID]] {
        let out = home.ok(&args);
        assert_eq!(has_terminal_controls(&out), None, "{args:?}: {out:?}");
        let prose: String = out.lines().filter(|l| !l.contains("→")).collect();
        assert!(!prose.contains("evil.example"), "{args:?}: {out}");
    }
    let replay = home.ok(&["replay", ID]);
    assert!(replay.contains("turn 1"), "{replay}");
    assert!(replay.contains("→ read"), "the call is listed: {replay}");
}

#[test]
fn search_snippets_keep_code_and_highlight_only_on_a_terminal() {
    let home = Ctx::missing();
    home.add(
        ID,
        "code",
        "/p",
        "active",
        &[(
            "user",
            "let v = vec![1, 2]; const [dark, setDark] = useState(false);",
        )],
    );
    home.add(
        "aaaaaaaa-0000-4000-8000-000000000002",
        "old",
        "/p",
        "archived",
        &[("user", "dark archived")],
    );
    home.add(
        "aaaaaaaa-0000-4000-8000-000000000003",
        "gone",
        "/p",
        "deleted",
        &[("user", "dark deleted")],
    );
    for backend in ["sqlite", "json"] {
        let run = |args: &[&str]| {
            home.cmd(args)
                .env("FREECODE_THREAD_STORE", backend)
                .output()
                .unwrap()
        };
        let out = run(&["search", "dark"]);
        assert!(out.status.success(), "{backend}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("vec![1, 2]"), "{backend}: {text}");
        assert!(text.contains("const [dark, setDark]"), "{backend}: {text}");
        assert!(
            !text.contains("archived") && !text.contains("deleted"),
            "{text}"
        );

        let all = String::from_utf8(run(&["search", "dark", "--all"]).stdout).unwrap();
        assert!(
            all.contains("dark archived") && all.contains("dark deleted"),
            "{all}"
        );

        let json: Value =
            serde_json::from_slice(&run(&["search", "dark", "--json"]).stdout).unwrap();
        let hit = &json[0];
        let snippet = hit["snippet"].as_str().unwrap();
        assert!(snippet.contains("vec![1, 2]"), "{snippet}");
        let chars: Vec<char> = snippet.chars().collect();
        let words: Vec<String> = hit["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let (a, b) = (m["start"].as_u64().unwrap(), m["end"].as_u64().unwrap());
                chars[a as usize..b as usize].iter().collect()
            })
            .collect();
        // Character offsets; `setDark` is one word, which `dark` does not begin.
        assert!(
            !words.is_empty() && words.iter().all(|w| w == "dark"),
            "{backend}: {words:?}"
        );
    }
    // On a terminal the matches are coloured (bold yellow), the brackets of the code stay.
    let tty = on_terminal(&home, &["search", "dark"], 120, 100, &[]);
    assert!(
        tty.contains("const [\x1b[1;33mdark\x1b[0m, setDark]"),
        "{tty:?}"
    );
    let plain = on_terminal(&home, &["search", "dark"], 120, 100, &[("NO_COLOR", "1")]);
    assert!(!plain.contains('\x1b'), "{plain:?}");
}

fn many_messages(n: usize) -> Vec<(&'static str, String)> {
    (0..n)
        .map(|i| ("user", format!("message number {i} of a long session")))
        .collect()
}

#[test]
fn long_output_pages_on_a_terminal_only() {
    let home = Ctx::missing();
    let msgs = many_messages(200);
    let refs: Vec<(&str, &str)> = msgs.iter().map(|(r, t)| (*r, t.as_str())).collect();
    home.add(ID, "long", "/p", "active", &refs);
    let paged = home.home.join("paged.txt");
    let pager = format!("cat > '{}'", paged.display());
    let show = ["session", "show", ID];

    // On a terminal, longer than the screen: through $PAGER.
    let tty = on_terminal(&home, &show, 100, 20, &[("PAGER", &pager)]);
    let got = std::fs::read_to_string(&paged).unwrap();
    assert!(got.contains("message number 199 of"), "{got}");
    assert!(!tty.contains("message number 199 of"), "{tty}");
    std::fs::remove_file(&paged).unwrap();

    // --no-pager, or a screen it fits on: printed directly.
    let tty = on_terminal(
        &home,
        &[&show[..], &["--no-pager"]].concat(),
        100,
        20,
        &[("PAGER", &pager)],
    );
    assert!(tty.contains("message number 199 of"));
    assert!(!paged.exists());
    let tty = on_terminal(&home, &show, 100, 2000, &[("PAGER", &pager)]);
    assert!(tty.contains("message number 199 of"));
    assert!(!paged.exists());

    // Piped: never paged.
    let out = home.cmd(&show).env("PAGER", &pager).output().unwrap();
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("message number 199 of")
    );
    assert!(!paged.exists());
    // The header reads well: one turn, thousands separators.
    assert!(home.ok(&show).contains("(1 turn)"));
}

#[test]
fn list_rows_fit_an_80_column_terminal() {
    let home = Ctx::missing();
    for i in 0..5 {
        home.add(
            &format!("aaaaaaaa-0000-4000-8000-00000000000{i}"),
            "A rather long title that would wrap the row at eighty columns 日本語のタイトル",
            "/home/someone/src/github.com/some-organisation/platform/services/the-repository",
            if i == 0 { "interrupted" } else { "active" },
            &[("user", "hi")],
        );
    }
    for cols in [80u16, 120] {
        let tty = strip_sgr(&on_terminal(&home, &["session", "list"], cols, 50, &[]));
        let lines: Vec<&str> = tty.split("\r\n").filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 6, "{tty}");
        for l in &lines {
            let w = unicode_width::UnicodeWidthStr::width(*l);
            assert!(w <= cols as usize, "{w} > {cols}: {l:?}");
        }
        if cols == 120 {
            assert!(
                tty.contains("the-repository"),
                "the repository's name stays: {tty}"
            );
        }
    }
    // Piped: whole rows.
    assert!(
        home.ok(&["session", "list"])
            .contains("platform/services/the-repository")
    );
}

/// `session list` names each session's agent, on a terminal as piped: ours `freecode`, an
/// imported one the agent it came from.
#[test]
fn list_has_an_agent_column_on_a_terminal() {
    let home = Ctx::missing();
    home.add(
        "aaaaaaaa-0000-4000-8000-000000000001",
        "ours, ünïcödé",
        "/home/dev/p",
        "active",
        &[("user", "hi")],
    );
    let codex = "aaaaaaaa-0000-4000-8000-000000000002";
    home.add(
        codex,
        "from codex",
        "/home/dev/p",
        "active",
        &[("user", "hi")],
    );
    let meta = home
        .home
        .join("sessions/home__dev__p")
        .join(codex)
        .join("meta.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    m["importedFrom"] = serde_json::json!({"agent": "codex", "sourceId": "x"});
    std::fs::write(&meta, m.to_string()).unwrap();
    let tty = strip_sgr(&on_terminal(&home, &["session", "list"], 120, 20, &[]));
    let lines: Vec<&str> = tty.split("\r\n").filter(|l| !l.is_empty()).collect();
    insta::assert_snapshot!("session_list_terminal_agents", lines.join("\n"));
    assert!(lines[0].contains("  AGENT  "), "{tty}");
    let row = |id: &str| lines.iter().find(|l| l.starts_with(id)).copied().unwrap();
    assert!(row(codex).contains("  codex  "), "{tty}");
    assert!(
        row("aaaaaaaa-0000-4000-8000-000000000001").contains("  freecode  "),
        "{tty}"
    );
    let json: Value = serde_json::from_str(&home.ok(&["session", "list", "--json"])).unwrap();
    let agents: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents.len(), 2);
    assert!(
        agents.contains(&"codex") && agents.contains(&"freecode"),
        "{json}"
    );
}

#[test]
fn slow_work_shows_progress_on_a_terminal_and_nothing_when_piped() {
    let home = Ctx::missing();
    for i in 0..300 {
        home.add(
            &format!("cccccccc-0000-4000-8000-{i:012}"),
            "bulk",
            "/p",
            "active",
            &[("user", "some words to index")],
        );
    }
    let tty = on_terminal(&home, &["index", "rebuild"], 100, 40, &[]);
    assert!(tty.contains("rebuilding the index"), "{tty:?}");
    assert!(
        tty.contains("indexed 300 sessions, 300 messages"),
        "{tty:?}"
    );
    let out = home.run(&["index", "rebuild"]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // `run` waits for its first token behind a spinner on a terminal; piped, nothing extra.
    let slow = [("FREECODE_SCRIPTED_DELAY_MS", "100")];
    let tty = on_terminal(
        &home,
        &["run", "--project", home.home.to_str().unwrap(), "hello"],
        100,
        40,
        &slow,
    );
    assert!(tty.contains("waiting for the model"), "{tty:?}");
    let out = home
        .cmd(&["run", "--project", home.home.to_str().unwrap(), "hello"])
        .env("FREECODE_SCRIPTED_DELAY_MS", "100")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("waiting for the model"), "{stderr}");
    assert!(!stderr.contains('\x1b'), "{stderr}");
}

/// At 80 columns `session list` prints the shortest prefix that names one session (at least
/// 8 characters), so the title keeps its room; each prefix works as an id. Wider, piped or
/// `--json`: full ids.
#[test]
fn narrow_terminals_get_short_unique_ids() {
    let home = Ctx::missing();
    let ids = [
        "1234abcd-0000-4000-8000-000000000001",
        "1234abce-0000-4000-8000-000000000002",
        "99999999-aaaa-4000-8000-000000000003",
        "99999999-aaab-4000-8000-000000000004",
    ];
    for (n, id) in ids.iter().enumerate() {
        home.add(
            id,
            &format!("session {n} has a long title"),
            "/p",
            "active",
            &[("user", "hi")],
        );
    }
    let short = ["1234abcd", "1234abce", "99999999-aaaa", "99999999-aaab"];
    let tty = strip_sgr(&on_terminal(&home, &["session", "list"], 80, 50, &[]));
    let rows: Vec<&str> = tty
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 4, "{tty}");
    for (n, (id, prefix)) in ids.iter().zip(short).enumerate() {
        // With full ids the title would have 9 columns at 80; short ids leave it whole.
        let row = rows
            .iter()
            .find(|r| r.ends_with(&format!("session {n} has a long title")))
            .unwrap_or_else(|| panic!("no whole title for {id}: {tty}"));
        assert!(row.starts_with(&format!("{prefix} ")), "{prefix}: {row:?}");
        let shown: Value =
            serde_json::from_str(&home.ok(&["session", "show", prefix, "--json"])).unwrap();
        assert_eq!(shown["id"], *id);
    }
    let wide = strip_sgr(&on_terminal(&home, &["session", "list"], 140, 50, &[]));
    let piped = home.ok(&["session", "list"]);
    for id in ids {
        assert!(wide.contains(&format!("{id} ")), "{wide}");
        assert!(piped.contains(&format!("{id} ")), "{piped}");
    }
}

/// Writes a rollout log of one turn whose tool has a long name and long arguments.
fn long_tool_log(home: &Ctx, id: &str, tool: &str, arg: &str) {
    let dir = home.home.join("rollout/sessions").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let t0 = 1_768_000_000_000i64;
    let ev = |seq: u64, ts: i64, body: Value| {
        let mut v = serde_json::json!({
            "id": format!("e{seq}"), "seq": seq, "aggregateID": id, "timestamp": ts,
        });
        for (k, x) in body.as_object().unwrap() {
            v[k] = x.clone();
        }
        v.to_string() + "\n"
    };
    let log = [
        ev(1, t0, serde_json::json!({"type": "turn.started", "turnId": "turn-0"})),
        ev(2, t0 + 1, serde_json::json!({"type": "model.request", "turnId": "turn-0", "provider": "p", "model": "m"})),
        ev(3, t0 + 5, serde_json::json!({"type": "model.response", "turnId": "turn-0", "duration_ms": 4, "toolCalls": [tool, tool]})),
        ev(4, t0 + 6, serde_json::json!({"type": "function.call", "turnId": "turn-0", "tool": tool, "args": {"path": arg}, "callId": "c1"})),
        ev(5, t0 + 9, serde_json::json!({"type": "function.output", "turnId": "turn-0", "tool": tool, "output": arg, "duration_ms": 3, "callId": "c1"})),
    ]
    .concat();
    std::fs::write(dir.join("events.jsonl"), log).unwrap();
}

/// At 60 columns `replay` and `trace` rows are cut with `…`, never wrapped; piped they are
/// whole.
#[test]
fn replay_and_trace_rows_fit_a_60_column_terminal() {
    let home = Ctx::missing();
    home.add(ID, "t", "/p", "active", &[("user", "hi")]);
    let tool = "a_tool_with_a_remarkably_long_name_that_goes_on_and_on_日本語";
    let arg = "/home/someone/src/some-organisation/platform/services/the-repository/file.rs";
    long_tool_log(&home, ID, tool, arg);
    for args in [vec!["replay", ID], vec!["trace", ID, "--no-pager"]] {
        let tty = strip_sgr(&on_terminal(&home, &args, 60, 200, &[]));
        let lines: Vec<&str> = tty.split("\r\n").collect();
        let mut cut = 0;
        for l in &lines {
            let w = unicode_width::UnicodeWidthStr::width(*l);
            assert!(w <= 60, "{args:?}: {w} > 60: {l:?}");
            cut += usize::from(l.ends_with('…'));
        }
        assert!(cut >= 1, "{args:?}: nothing was cut: {tty}");
        let piped = home.ok(&args);
        assert!(
            piped.contains(tool) || piped.contains(&format!("= {arg}")),
            "{args:?}: {piped}"
        );
        assert!(
            piped
                .lines()
                .any(|l| unicode_width::UnicodeWidthStr::width(l) > 60),
            "{args:?}: piped rows are whole: {piped}"
        );
    }
}

/// Writes a session of `n` messages straight to the files (fast, whatever the build).
fn add_big(home: &Ctx, id: &str, n: usize) {
    use std::io::Write as _;
    let dir = home.home.join("sessions/home__dev__p").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let t0 = 1_768_000_000_000i64;
    let meta = serde_json::json!({
        "id": id, "title": "big", "projectPath": "/p", "provider": "x", "status": "active",
        "createdAt": t0, "updatedAt": t0, "lastTurnAt": t0, "turnCount": n / 2,
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(dir.join("messages.jsonl")).unwrap());
    for i in 0..n {
        let m = serde_json::json!({
            "id": format!("m{i}"), "role": if i % 2 == 0 { "user" } else { "assistant" },
            "timestamp": t0 + i as i64,
            "parts": [{"type": "text", "content": format!("message {i} of a long session about the settings page and its theme toggle")}],
        });
        serde_json::to_writer(&mut out, &m).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
}

/// A big export and its import show a bar of steps on a terminal; piped, stderr stays empty.
#[test]
fn big_exports_and_imports_show_progress_on_a_terminal_only() {
    let home = Ctx::missing();
    let big = "bbbbbbbb-0000-4000-8000-000000000001";
    add_big(&home, big, 60_000);
    let file = home.home.join("big.json.zst");
    let file = file.to_str().unwrap();
    let tty = on_terminal(
        &home,
        &["session", "export", big, "--file", file],
        120,
        40,
        &[],
    );
    assert!(tty.contains("exporting"), "{tty:?}");
    // A regular `.zst` file is streamed: one step that reads, redacts and writes.
    assert!(
        tty.contains("reading, redacting and writing the session"),
        "{tty:?}"
    );
    let tty = on_terminal(&home, &["session", "import", file], 120, 40, &[]);
    assert!(tty.contains("importing"), "{tty:?}");
    assert!(tty.contains("step "), "{tty:?}");

    // Piped: the result on stdout, nothing on stderr but the import's one-line report.
    let out = home.run(&["session", "export", big, "--file", file]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = home.run(&["session", "import", file]);
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("importing") && !err.contains('\x1b'), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
