//! `freecode ui` as a stranger meets it: the real process on a fixture home, spoken to over
//! loopback with plain HTTP/1.1. Without the token, with a wrong one, through another Host
//! name (DNS rebinding) or from another origin: 403. A message holding `<script>` arrives as
//! text; the listener is on 127.0.0.1 only; the JSON endpoints answer what `--json` prints.

use crate::ui_home;

use serde_json::{Value, json};
use ui_home::{EVIL, OTHER, Server, TRACED, fixture, freecode, http};

#[test]
fn without_the_right_token_everything_is_refused() {
    let f = fixture();
    let s = Server::start(&f.home);
    let host = [("Host", s.authority.as_str())];
    for path in [
        "/",
        "/session/ui-traced-0001",
        "/api/sessions",
        "/assets/app.js",
    ] {
        let r = http(&s.authority, path, &host);
        assert_eq!(r.status, 403, "{path} without a token: {r:?}");
        assert!(!r.body.contains("Fix the flaky parser"), "{path}");
    }
    let wrong = format!("/?token={}", "0".repeat(32));
    assert_eq!(http(&s.authority, &wrong, &host).status, 403);
    let short = format!("/?token={}", &s.token[..16]);
    assert_eq!(http(&s.authority, &short, &host).status, 403);
    let bad_cookie = format!("freecode_ui_{}={}", s.port(), "f".repeat(32));
    let r = http(
        &s.authority,
        "/api/sessions",
        &[("Host", &s.authority), ("Cookie", &bad_cookie)],
    );
    assert_eq!(r.status, 403);

    // The token from the URL becomes a cookie the page's script cannot read, sent only to us,
    // and the page reloads without it.
    let r = http(
        &s.authority,
        &format!("/session/{TRACED}?page=1&token={}", s.token),
        &host,
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.body
            .contains(&format!(r#"content="0;url=/session/{TRACED}?page=1""#)),
        "{}",
        r.body
    );
    assert!(!r.body.contains(&s.token));
    assert!(
        !r.body.contains("Fix the flaky parser"),
        "no data on the handshake page"
    );
    let r = http(
        &s.authority,
        &format!("//evil.example/?token={}", s.token),
        &host,
    );
    assert!(r.body.contains(r#"content="0;url=/""#), "{}", r.body);
    let r = http(&s.authority, &format!("/?token={}", s.token), &host);
    let cookie = r.header("set-cookie").unwrap();
    assert!(cookie.starts_with(&format!("{};", s.cookie())), "{cookie}");
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && cookie.contains("Max-Age=2592000"),
        "{cookie}"
    );
    let ok = s.get("/");
    assert_eq!(ok.status, 200);
    assert!(ok.body.contains("Fix the flaky parser"));
}

#[test]
fn foreign_hosts_and_other_origins_are_refused() {
    let f = fixture();
    let s = Server::start(&f.home);
    let cookie = s.cookie();
    let localhost = format!("localhost:{}", s.port());
    let req = |extra: &[(&str, &str)]| {
        let mut h = vec![("Cookie", cookie.as_str())];
        h.extend_from_slice(extra);
        http(&s.authority, "/api/sessions", &h).status
    };
    // DNS rebinding: a page of evil.example resolving to 127.0.0.1.
    assert_eq!(req(&[("Host", &format!("evil.example:{}", s.port()))]), 403);
    assert_eq!(req(&[("Host", "127.0.0.1")]), 403);
    assert_eq!(
        req(&[("Host", &format!("127.0.0.1:{}", s.port() ^ 1))]),
        403
    );
    assert_eq!(req(&[]), 403, "no Host at all");
    assert_eq!(req(&[("Host", &localhost)]), 200);
    // Requests another origin's page makes.
    let host = ("Host", s.authority.as_str());
    assert_eq!(req(&[host, ("Origin", "http://evil.example")]), 403);
    assert_eq!(req(&[host, ("Origin", "null")]), 403);
    let other_port = format!("http://127.0.0.1:{}", s.port() ^ 1);
    assert_eq!(req(&[host, ("Origin", &other_port)]), 403);
    assert_eq!(req(&[host, ("Sec-Fetch-Site", "cross-site")]), 403);
    assert_eq!(req(&[host, ("Sec-Fetch-Site", "same-site")]), 403);
    let ours = format!("http://{}", s.authority);
    assert_eq!(
        req(&[host, ("Origin", &ours), ("Sec-Fetch-Site", "same-origin")]),
        200
    );
    assert_eq!(req(&[host, ("Sec-Fetch-Site", "none")]), 200);
}

#[test]
fn pages_carry_the_policy_and_session_text_is_escaped() {
    let f = fixture();
    let s = Server::start(&f.home);
    let r = s.get(&format!("/session/{TRACED}"));
    assert_eq!(r.status, 200);
    // The agent that wrote it is named (this one is ours).
    assert!(
        r.body
            .contains(r#"<dt>Agent</dt><dd class="agent">freecode</dd>"#),
        "{}",
        r.body
    );
    let csp = r.header("content-security-policy").unwrap();
    for want in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
    ] {
        assert!(csp.contains(want), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"));
    // The one script is ours, from a file; the message's markup is text.
    assert_eq!(r.body.matches("<script").count(), 1, "{}", r.body);
    assert!(
        r.body
            .contains(r#"<script src="/assets/app.js" defer></script>"#)
    );
    assert!(!r.body.contains(EVIL));
    assert!(!r.body.contains("<img src=x"));
    assert!(
        r.body.contains("&lt;script&gt;document.title="),
        "{}",
        r.body
    );
    // The image is shown from a data: URL.
    assert!(r.body.contains(r#"src="data:image/png;base64,iVBOR"#));
    let js = s.get("/assets/app.js");
    assert_eq!(js.status, 200);
    assert!(
        js.header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );
}

#[test]
fn the_listener_is_on_loopback_only() {
    let f = fixture();
    let s = Server::start(&f.home);
    assert!(s.authority.starts_with("127.0.0.1:"), "{}", s.url);
    // The kernel's table of listening sockets: ours is bound to 127.0.0.1, not 0.0.0.0.
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port = format!("{:04X}", s.port());
    let ours: Vec<&str> = table
        .lines()
        .filter(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.get(1)
                .is_some_and(|a| a.ends_with(&format!(":{port}")))
                && cols.get(3) == Some(&"0A")
        })
        .collect();
    assert_eq!(ours.len(), 1, "{table}");
    assert!(
        ours[0]
            .split_whitespace()
            .nth(1)
            .unwrap()
            .starts_with("0100007F:"),
        "{}",
        ours[0]
    );
    // Another address is refused before anything listens.
    for bad in ["0.0.0.0:0", "[::]:0", "192.0.2.1:8080"] {
        let out = freecode(&f.home)
            .args(["ui", "--no-open", "--listen", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("loopback only"), "{bad}: {err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn the_json_endpoints_answer_what_json_prints() {
    let f = fixture();
    let s = Server::start(&f.home);
    let json = |path: &str| -> Value {
        let r = s.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        serde_json::from_str(&r.body).unwrap()
    };
    let cli = |args: &[&str]| -> Value {
        let out = freecode(&f.home).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(json("/api/sessions"), cli(&["session", "list", "--json"]));
    assert_eq!(
        json("/api/sessions?status=interrupted"),
        cli(&["session", "list", "--status", "interrupted", "--json"])
    );
    assert_eq!(
        json(&format!("/api/sessions/{OTHER}")),
        cli(&["session", "show", OTHER, "--json"])
    );
    assert_eq!(
        json("/api/search?q=zebrafish"),
        cli(&["search", "zebrafish", "--json"])
    );
    // Search's filters, as `search --agent` and `--project` take them.
    assert_eq!(
        json("/api/search?q=zebrafish&agent=freecode&project=/work/aquarium"),
        cli(&[
            "search",
            "zebrafish",
            "--agent",
            "freecode",
            "--project",
            "/work/aquarium",
            "--json"
        ])
    );
    assert_eq!(
        json("/api/search?q=zebrafish&project=/work/aquarium")
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert_eq!(json("/api/search?q=zebrafish&agent=codex"), json!([]));
    // The page counts in English: one session, "1 hit".
    let page = s.get("/search?q=zebrafish&project=/work/aquarium");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("1 hit for"), "{}", page.body);
    assert_eq!(
        json("/api/search?q=zebrafish&project=/work/parser"),
        json!([])
    );
    assert_eq!(json("/api/stats"), cli(&["stats", "--json"]));
    // Usage and cost, as `usage --json` answers; a key it does not take is a bad request.
    assert_eq!(
        json("/api/usage?by=model,day"),
        cli(&["usage", "--by", "model,day", "--json"])
    );
    assert_eq!(json("/api/usage"), cli(&["usage", "--json"]));
    assert_eq!(s.get("/api/usage?by=weekday").status, 400);
    let page = s.get("/stats");
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("Cost by model") && page.body.contains("Cost by day"),
        "{}",
        page.body
    );
    // The hung request is aged against the clock: everything but its age is the CLI's.
    let mut ui = json(&format!("/api/trace/{TRACED}"));
    let mut want = cli(&["trace", TRACED, "--json"]);
    for t in [&mut ui, &mut want] {
        // Where the time went adds up to the wall time, whatever the clock said.
        let parts: i64 = ["modelMs", "toolsMs", "idleMs", "otherMs"]
            .iter()
            .map(|k| t["time"][*k].as_i64().unwrap())
            .sum();
        assert_eq!(Some(parts), t["wallMs"].as_i64(), "{t}");
        t["wallMs"] = Value::Null;
        t["endedAt"] = Value::Null;
        t["modelMs"] = Value::Null;
        t["time"]["modelMs"] = Value::Null;
        t["modelSpans"][2]["durationMs"] = Value::Null;
    }
    assert_eq!(ui, want);
    assert_eq!(ui["modelSpans"][2]["status"], "hung");
    let missing = s.get("/api/sessions/no-such-session");
    assert_eq!(missing.status, 404);
    let err: Value = serde_json::from_str(&missing.body).unwrap();
    assert_eq!(err["status"], 404);
    assert!(
        err["error"].as_str().unwrap().contains("no-such-session"),
        "{err}"
    );
    assert_eq!(s.get("/api/trace/..%2Fetc").status, 400);
}

#[test]
fn the_browser_is_opened_without_the_token_on_a_command_line() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let bin = f.tmp.path().join("bin");
    let s = Server::start_opening(&f.home, &bin);
    let args = Server::opened(&bin);
    // One argument: a private page in the home's state directory, not the URL.
    assert_eq!(args.len(), 1, "{args:?}");
    let page = std::path::PathBuf::from(&args[0]);
    assert_eq!(
        page,
        f.home.join("state").join(format!("ui-{}.html", s.port()))
    );
    let cmdline = std::fs::read(bin.join("cmdline")).unwrap();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains(&s.token),
        "the token is in argv"
    );
    assert_eq!(
        std::fs::metadata(&page).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(&format!(r#"content="0;url={}""#, s.url)),
        "{html}"
    );
    // Ctrl+C stops the server, even with a live stream open, and removes the page.
    let mut stream = std::net::TcpStream::connect(&s.authority).unwrap();
    let req = format!(
        "GET /api/events/{TRACED} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\n\r\n",
        s.authority,
        s.cookie()
    );
    std::io::Write::write_all(&mut stream, req.as_bytes()).unwrap();
    let mut head = [0u8; 64];
    let n = std::io::Read::read(&mut stream, &mut head).unwrap();
    assert!(
        String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"),
        "{:?}",
        &head[..n]
    );
    let started = std::time::Instant::now();
    let status = s.interrupt();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(status.success(), "{status:?}");
    assert!(!page.exists(), "the launch page outlived the server");
}

/// `/api/progress` is a stream of server-sent events saying how far an index refresh has got,
/// answered at once (nothing is being indexed here), behind the same token as every page.
#[test]
fn index_progress_is_a_stream_of_events() {
    let f = fixture();
    let s = Server::start(&f.home);
    let mut stream = std::net::TcpStream::connect(&s.authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let req = format!(
        "GET /api/progress HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\n\r\n",
        s.authority,
        s.cookie()
    );
    std::io::Write::write_all(&mut stream, req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\n\n") || !got.windows(5).any(|w| w == b"data:")
    {
        let n = std::io::Read::read(&mut stream, &mut buf).unwrap();
        assert!(n > 0, "the stream ended: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).to_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text}");
    assert!(text.contains("content-type: text/event-stream"), "{text}");
    assert!(
        text.contains("event: progress\r\ndata: {\"indexing\":false}")
            || text.contains("event: progress\ndata: {\"indexing\":false}"),
        "{text}"
    );
    let refused = http(&s.authority, "/api/progress", &[("Host", &s.authority)]);
    assert_eq!(refused.status, 403);
}

#[test]
fn session_show_html_is_written_as_the_messages_are_read() {
    let f = fixture();
    // Several of the reader's 2 MiB blocks: every message once, in order, in one page.
    let n = 40_000usize;
    let id = "ui-long-0003";
    let messages: Vec<Value> = (0..n)
        .map(|i| {
            let text = if i == n / 2 { EVIL.to_owned() } else { format!("message {i} of a long session, with some words to fill the line up") };
            json!({"id": format!("m{i}"), "role": if i % 2 == 0 { "user" } else { "assistant" },
                "parts": [{"type": "text", "content": text}], "timestamp": 1_700_000_000_000i64 + i as i64})
        })
        .collect();
    ui_home::write_session(
        &f.home,
        &json!({"id": id, "title": "Long <b>one</b>", "projectPath": "/work/long", "provider": "openai",
            "model": "gpt-test", "status": "active", "createdAt": 1, "updatedAt": 2, "lastTurnAt": 2, "turnCount": n / 2}),
        &messages,
    );
    let file = f.tmp.path().join("long.html");
    let out = freecode(&f.home)
        .args(["session", "show", id, "--html"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&file).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{}", &page[..100]);
    assert!(page.trim_end().ends_with("</html>"));
    assert_eq!(page.matches("<li class=\"msg ").count(), n);
    let mut at = 0;
    for i in [0, 1, n / 3, n / 2, n - 1] {
        let pos = page.find(&format!("id=\"m-m{i}\"")).unwrap();
        assert!(pos > at, "message {i} out of order");
        at = pos;
    }
    assert!(page.contains("40,000 messages"));
    assert!(!page.contains("<script>document") && page.contains("&lt;script&gt;"));
    assert!(page.contains("Long &lt;b&gt;one&lt;/b&gt;"));
    assert!(!page.contains("<!--freecode:messages-->"));
    // `-` writes the same page to standard output.
    let out = freecode(&f.home)
        .args(["session", "show", id, "--html", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), page);
}

/// A client that sends half a request line and then nothing is cut off at the share server's
/// header deadline (10 s), and holds nothing meanwhile: the page is still served to others.
/// That is worth a warning; a socket opened and never used (browsers open spare ones) is
/// closed at the same deadline without one.
#[test]
fn a_half_sent_request_is_cut_off_and_the_server_keeps_answering() {
    use std::io::{Read as _, Write as _};
    use std::time::{Duration, Instant};
    let f = fixture();
    let log = f.tmp.path().join("ui.log");
    let s = Server::start_logged(&f.home, &[], &log);
    let mut spare = std::net::TcpStream::connect(&s.authority).unwrap();
    let mut slow = std::net::TcpStream::connect(&s.authority).unwrap();
    slow.write_all(b"GET /api/sessi").unwrap();
    let t0 = Instant::now();
    // Others are answered while it waits.
    let host = [("Host", s.authority.as_str())];
    let r = http(&s.authority, &format!("/?token={}", s.token), &host);
    assert_eq!(r.status, 200, "{r:?}");
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = Vec::new();
    let read = slow.read_to_end(&mut got);
    let waited = t0.elapsed();
    // Closed without an answer (EOF, or a reset), after the deadline and well before 30 s.
    assert!(
        read.is_ok()
            || read
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?}"
    );
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    assert!(
        waited >= Duration::from_secs(8) && waited < Duration::from_secs(25),
        "closed after {waited:?}"
    );
    spare
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = spare.read_to_end(&mut rest);
    assert!(rest.is_empty());
    assert_eq!(s.interrupt().code(), Some(0));
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        said.matches("request head not received in time").count(),
        1,
        "the half-sent request, not the spare socket: {said}"
    );
    assert_eq!(said.matches("WARN").count(), 1, "{said}");
}

/// The address stays: the port and the token are kept in the home (0600), so the next run
/// serves the same URL and a bookmark keeps working. A second viewer of the same home while
/// the first runs gets a free port for that run and says so. `--new-token` refuses every older
/// link and cookie with a page that says what to do.
#[test]
fn the_address_stays_from_run_to_run_until_the_token_is_rotated() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let first = Server::start(&f.home);
    let kept = f.home.join("state/ui.json");
    assert_eq!(
        std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let saved: Value = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    assert_eq!(saved["port"], first.port());
    assert_eq!(saved["token"], first.token.as_str());
    let (url, cookie) = (first.url.clone(), first.cookie());
    assert_eq!(first.interrupt().code(), Some(0));

    let again = Server::start(&f.home);
    assert_eq!(again.url, url, "the same link as the last run");
    let bookmarked = http(
        &again.authority,
        "/",
        &[("Host", &again.authority), ("Cookie", &cookie)],
    );
    assert_eq!(bookmarked.status, 200, "the old tab's cookie still works");

    // A second viewer of this home while the first runs: another port, the same token.
    let log = f.tmp.path().join("second.log");
    let second = Server::start_logged(&f.home, &[], &log);
    assert_ne!(second.port(), again.port());
    assert_eq!(second.token, again.token);
    assert_eq!(second.interrupt().code(), Some(0));
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains(&format!("port {} is taken", again.port())),
        "{said}"
    );
    assert_eq!(again.interrupt().code(), Some(0));
    let saved: Value = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    assert_eq!(
        saved["port"],
        first_port(&url),
        "a one-off port is not kept"
    );

    // A new token: the same port, and links, bookmarks and tabs from before are refused with
    // a page that says what happened and what to do.
    let log = f.tmp.path().join("rotated.log");
    let rotated = Server::start_logged(&f.home, &["--new-token"], &log);
    assert_eq!(rotated.port(), first_port(&url));
    assert_ne!(rotated.url, url);
    let host = [("Host", rotated.authority.as_str())];
    let old_link = http(
        &rotated.authority,
        url.trim_start_matches(&format!("http://{}", rotated.authority)),
        &host,
    );
    assert_eq!(old_link.status, 403);
    assert!(
        old_link.body.contains("open the link freecode ui printed")
            && old_link.body.contains("freecode ui --new-token"),
        "{}",
        old_link.body
    );
    assert!(!old_link.body.contains("Fix the flaky parser"));
    assert!(!old_link.body.contains(&rotated.token));
    let old_tab = http(
        &rotated.authority,
        "/",
        &[("Host", &rotated.authority), ("Cookie", &cookie)],
    );
    assert_eq!(old_tab.status, 403);
    assert!(old_tab.body.contains("freecode ui --new-token"));
    assert_eq!(rotated.get("/").status, 200);
    let saved: Value = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    assert_eq!(saved["token"], rotated.token.as_str());
    assert_eq!(rotated.interrupt().code(), Some(0));
    // Ordinary browsing logs nothing.
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(!said.contains("WARN"), "{said}");
}

/// The port of a printed URL.
fn first_port(url: &str) -> u16 {
    url.trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// An assistant's answer is markdown, rendered with its raw HTML as text and only web links;
/// a slash command and a system reminder are quiet blocks; a user's text is as typed; tokens
/// read `25.8k in · 27 out`; the agent is named; a long transcript has a pager.
#[test]
fn answers_are_markdown_and_what_agents_wrap_is_quiet() {
    let f = fixture();
    ui_home::write_markdown_session(&f.home, f.base);
    let id = "ui-pages-0004";
    let msgs: Vec<Value> = (0..450)
        .map(|i| json!({"id": format!("p{i}"), "role": "user", "parts": [{"type": "text", "content": format!("line {i}")}], "timestamp": f.base + i}))
        .collect();
    ui_home::write_session(
        &f.home,
        &json!({"id": id, "title": "Paged", "projectPath": "/work/pages", "provider": "openai",
                "model": "gpt-test", "status": "active", "createdAt": f.base, "updatedAt": f.base,
                "lastTurnAt": f.base, "turnCount": 450}),
        &msgs,
    );
    let s = Server::start(&f.home);
    let r = s.get(&format!("/session/{}", ui_home::MARKDOWN));
    assert_eq!(r.status, 200, "{}", r.body);
    let body = &r.body;
    for want in [
        "<h2>What changed in the parser</h2>",
        "<strong>two</strong>",
        "<em>both</em>",
        "<code>1_000</code>",
        "<ol>",
        "<table>",
        // Alignment would be a style attribute, which the CSP refuses: left out.
        "<td>42</td>",
        "<pre class=\"code\" data-lang=\"rust\">",
        "<blockquote>",
        "<a href=\"https://spec.commonmark.org/\">the CommonMark spec</a>",
        "<a href=\"https://example.com/diagram.png\">diagram</a>",
        // Raw HTML is shown as written (a block of it as code).
        "&lt;div onclick=",
        "raw html stays text&lt;/div&gt;",
        "and a bad link.",
        "Ça marche — готово ✓",
        "type=\"checkbox\"",
        // The slash command on one quiet line, the reminder folded away.
        "<code>/review src/parser.rs</code>",
        "<summary>system reminder</summary>",
        // A person's text is shown as typed.
        "Why was the **parser** test flaky?",
        "25.8k in · 27 out",
        "<dd class=\"agent\">claude-code</dd>",
        "3 messages",
    ] {
        assert!(body.contains(want), "{want:?} not in {body}");
    }
    for never in [
        "href=\"javascript",
        "<div onclick",
        "<img src=\"https://example.com",
        "&lt;command-name&gt;",
        "&lt;system-reminder&gt;",
        "nav class=\"pager\"",
    ] {
        assert!(!body.contains(never), "{never:?} in {body}");
    }
    // Pages: numbered, the current one marked, the count known.
    let r = s.get(&format!("/session/{id}?page=2"));
    assert_eq!(r.status, 200);
    assert_eq!(r.body.matches("<nav class=\"pager\"").count(), 2);
    for want in [
        "450 messages, 200 a page",
        "aria-current=\"page\">2</span>",
        &format!("href=\"/session/{id}?page=1\""),
        &format!("href=\"/session/{id}?page=3\""),
        "page 2 of 3",
        "id=\"m-p200\"",
    ] {
        assert!(r.body.contains(want), "{want:?} not in the page");
    }
    assert!(!r.body.contains("id=\"m-p199\"") && !r.body.contains("id=\"m-p400\""));
}

/// A trace with nothing open and no writer is finished: its page follows nothing. One with a
/// request open, or whose session a writer holds, is followed as it grows.
#[test]
fn only_a_trace_that_can_grow_is_followed() {
    let f = fixture();
    ui_home::write_markdown_session(&f.home, f.base);
    let id = ui_home::MARKDOWN;
    let ev = [
        ui_home::event(1, id, f.base, "turn.started", json!({"turnId": "t0"})),
        ui_home::event(
            2,
            id,
            f.base + 100,
            "model.request",
            json!({"turnId": "t0", "provider": "anthropic", "model": "claude-test", "messageCount": 2, "toolCount": 0, "promptChars": 90, "streamed": true}),
        ),
        ui_home::event(
            3,
            id,
            f.base + 1_100,
            "model.response",
            json!({"turnId": "t0", "provider": "anthropic", "model": "claude-test", "duration_ms": 1_000, "inputTokens": 25_801, "outputTokens": 27, "toolCalls": [], "textChars": 900, "thinkingChars": 0}),
        ),
    ]
    .concat();
    ui_home::write_events(&f.home, id, &ev);
    let s = Server::start(&f.home);
    let live = |session: &str| {
        let r = s.get(&format!("/trace/{session}"));
        assert_eq!(r.status, 200, "{}", r.body);
        r.body.contains("data-live=\"true\"")
    };
    assert!(!live(id), "a finished trace");
    assert!(live(TRACED), "a request open");
    // A writer (a run, an import) holds the session: it may go on.
    let lock = std::fs::read_dir(f.home.join("sessions"))
        .unwrap()
        .map(|d| d.unwrap().path().join(id))
        .find(|p| p.is_dir())
        .unwrap()
        .join(".lock");
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .unwrap();
    held.lock().unwrap();
    assert!(live(id), "a writer holds it");
    drop(held);
    assert!(!live(id));
}

/// The pages a person attaches to a bug report (`session show --html`, `trace --html`) and
/// everything the viewer serves (pages and API, so a page saved from the browser too) redact
/// what `session export --dry-run` finds, by default; `--no-redact` keeps it, with a warning.
#[test]
fn pages_and_the_viewer_redact_what_an_export_redacts() {
    let f = fixture();
    let id = "ui-secret-0004";
    let gh = "ghp_Zq8rT1vXw0yB3nC5mD7fG9hJ2kL4pQ6sU8wA";
    let aws = "aws_secret_access_key = 9dJ2kL7pQ1xZ8vB3nM6cR4tY0wE5uI2oP7aS1dF3";
    let aws_secret = "9dJ2kL7pQ1xZ8vB3nM6cR4tY0wE5uI2oP7aS1dF3";
    let prompt = format!("Déploie avec {gh} puis {aws} — merci");
    let at = f.base;
    ui_home::write_session(
        &f.home,
        // The title is the prompt's first line cut inside the token, as agents cut it.
        &json!({"id": id, "title": format!("{}…", &prompt[..28]), "projectPath": "/work/deploy",
            "provider": "openai", "model": "gpt-test", "status": "active", "createdAt": at,
            "updatedAt": at, "lastTurnAt": at, "turnCount": 1}),
        &[
            json!({"id": "d1", "role": "user", "timestamp": at,
                "parts": [{"type": "text", "content": prompt}]}),
            json!({"id": "d2", "role": "assistant", "timestamp": at + 1,
                "parts": [{"type": "tool", "tool": {"name": "bash", "args": {"command": format!("GITHUB_TOKEN={gh} ./deploy")}},
                           "result": format!("using {aws}")}]}),
        ],
    );
    let ev = [
        ui_home::event(1, id, at, "turn.started", json!({"turnId": "t0"})),
        ui_home::event(2, id, at + 10, "function.call",
            json!({"turnId": "t0", "tool": "bash", "args": {"command": format!("GITHUB_TOKEN={gh} ./deploy")}})),
        ui_home::event(3, id, at + 20, "function.output",
            json!({"turnId": "t0", "tool": "bash", "output": format!("using {aws}"), "duration_ms": 10})),
        ui_home::event(4, id, at + 30, "function.denied",
            json!({"turnId": "t0", "tool": "bash", "args": {"command": format!("curl -H 'Authorization: token {gh}'")}, "reason": format!("refused {gh}"), "source": "rule"})),
    ]
    .concat();
    ui_home::write_events(&f.home, id, &ev);
    let run = |args: &[&str]| {
        let out = freecode(&f.home).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {err}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), err)
    };
    // What an export finds: the token and the key.
    let (dry, _) = run(&["session", "export", id, "--dry-run", "--json"]);
    assert!(!dry.contains(gh) && !dry.contains(aws_secret), "{dry}");
    let clean = |what: &str, page: &str| {
        assert!(!page.contains(gh), "{what}: the token");
        assert!(!page.contains(aws_secret), "{what}: the key");
        assert!(
            !page.contains(&gh[..12]),
            "{what}: the cut title's piece of the token"
        );
    };
    let file = f.tmp.path().join("page.html");
    let path = file.to_str().unwrap();
    let (_, err) = run(&["session", "show", id, "--html", path]);
    let page = std::fs::read_to_string(&file).unwrap();
    clean("session page", &page);
    assert!(
        page.contains("[REDACTED:github-pat]") && page.contains("Déploie"),
        "{page}"
    );
    assert!(
        err.contains("redacted in") && err.contains("--no-redact"),
        "{err}"
    );
    let (_, err) = run(&["trace", id, "--html", path]);
    let page = std::fs::read_to_string(&file).unwrap();
    clean("trace page", &page);
    assert!(page.contains("REDACTED"), "{page}");
    assert!(err.contains("redacted in"), "{err}");
    // --no-redact keeps them, and says so.
    let (_, err) = run(&["session", "show", id, "--html", path, "--no-redact"]);
    assert!(std::fs::read_to_string(&file).unwrap().contains(gh));
    assert!(
        err.contains("--no-redact") && err.contains("do not attach"),
        "{err}"
    );
    let (_, _) = run(&["trace", id, "--html", path, "--no-redact"]);
    assert!(std::fs::read_to_string(&file).unwrap().contains(gh));
    let out = freecode(&f.home)
        .args(["session", "show", id, "--no-redact"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--no-redact is for --html");

    // The viewer: every page and answer that shows the session.
    let s = Server::start(&f.home);
    for path in [
        "/".to_owned(),
        format!("/session/{id}"),
        format!("/api/sessions/{id}"),
        "/api/sessions".to_owned(),
        format!("/trace/{id}"),
        format!("/api/trace/{id}"),
        "/search?q=deploy".to_owned(),
        "/api/search?q=deploy".to_owned(),
        "/api/search?q=GITHUB_TOKEN".to_owned(),
    ] {
        let r = s.get(&path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        clean(&path, &r.body);
    }
    assert!(s.get(&format!("/session/{id}")).body.contains("REDACTED"));
    drop(s);
    let log = f.tmp.path().join("ui.log");
    let s = Server::start_logged(&f.home, &["--no-redact"], &log);
    assert!(s.get(&format!("/session/{id}")).body.contains(gh));
    drop(s);
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("--no-redact")
    );
}
