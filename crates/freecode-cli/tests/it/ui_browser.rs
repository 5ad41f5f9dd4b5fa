//! `freecode ui` in a real browser: Debian's Chromium, headless, driven over WebDriver
//! (chromedriver on a free loopback port, `fantoccini`) through the real `freecode ui --no-open`
//! on a fixture home. The list, the search and its marks, a transcript and a tool call opened,
//! the waterfall (one bar per span, widths proportional to durations, read from the DOM), the
//! hung request, a live update over server-sent events, and the `--html` files opened offline.
//!
//! Without `chromium` and `chromedriver` (scripts/test-deps installs them) the tests print a
//! notice and pass, except under `CI=true`, where they fail saying what is missing.
//! `FREECODE_UI_SCREENSHOTS=DIR` saves PNGs of the list, a session and a waterfall into DIR
//! (an absolute path: tests run in the crate's directory). A long markdown answer is compared
//! with the reference screenshot in `tests/ui_reference/` (`FREECODE_UI_REFERENCE=update`
//! rewrites it; a look at the new one before committing it is the review).
//! The ignored `perf_…` test measures first paint of a 100,000-message session and the
//! waterfall of a 1,000,000-event log in the browser (figures on stderr, no timed assertion).

use crate::ui_home;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::error::NewSessionError;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use ui_home::{EVIL, HUNG_AT, MODEL, OTHER, Server, TRACED, WORD, fixture, freecode};

fn find_tool(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

/// Chromium's executable and chromedriver, or `None` after the notice (a failure under CI).
fn browser_tools() -> Option<(PathBuf, PathBuf)> {
    // Debian's /usr/bin/chromium is a wrapper script; the driver wants the program itself.
    let chromium = ["/usr/lib/chromium/chromium"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .or_else(|| find_tool(&["chromium", "chromium-browser", "google-chrome"]));
    let driver = find_tool(&["chromedriver"]);
    let tools = chromium.zip(driver);
    freecode_testkit::prerequisite(
        tools.is_some(),
        "Debian's `chromium` and `chromium-driver` on PATH",
        "scripts/test-deps installs them",
    )
    .then_some(tools)
    .flatten()
}

/// chromedriver on a free loopback port and a headless Chromium session through it; both
/// ended on drop.
struct Browser {
    driver: Child,
    client: Option<Client>,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start(chromium: &Path, chromedriver: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Ready means its /status says so, not that its port takes a connection: a session
        // asked for before then can be reset (seen on a loaded CI machine).
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = format!("http://127.0.0.1:{port}/status");
        loop {
            let ready = ureq::get(&status)
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok())
                .and_then(|body| serde_json::from_str::<Value>(&body).ok())
                .is_some_and(|v| v["value"]["ready"] == json!(true));
            if ready {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        // A session that fails in transport (the driver reset the connection while Chromium
        // started) is asked for again, twice at most; a refusal by the driver is not.
        let mut tries = 0;
        let client = loop {
            tries += 1;
            let made =
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                    .capabilities(caps.clone())
                    .connect(&format!("http://127.0.0.1:{port}"))
                    .await;
            match made {
                Ok(c) => break c,
                Err(
                    e @ (NewSessionError::Failed(_)
                    | NewSessionError::FailedC(_)
                    | NewSessionError::Lost(_)),
                ) if tries < 3 => {
                    eprintln!("asking chromedriver for a session again after: {e}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => panic!("a Chromium session over WebDriver: {e:?}"),
            }
        };
        Self {
            driver,
            client: Some(client),
            _profile: profile,
        }
    }

    fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    async fn finish(mut self) {
        if let Some(c) = self.client.take() {
            let _ = c.close().await;
        }
    }

    async fn js(&self, script: &str) -> Value {
        self.c().execute(script, vec![]).await.unwrap()
    }

    async fn count(&self, css: &str) -> usize {
        self.c().find_all(Locator::Css(css)).await.unwrap().len()
    }

    /// Saves a screenshot as DIR/name.png when FREECODE_UI_SCREENSHOTS=DIR.
    async fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("FREECODE_UI_SCREENSHOTS") else {
            return;
        };
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let png = self.c().screenshot().await.unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Each row of the waterfall on the page: kind, class, duration, and the widths of its bar,
/// its TTFT bar and its track, as laid out.
const ROWS_JS: &str = r#"
  const w = document.querySelector('.waterfall');
  return {
    span: Number(w.dataset.span),
    rows: Array.from(document.querySelectorAll('.wf-row')).map(r => {
      const bar = r.querySelector('rect.wf-bar').getBoundingClientRect();
      const ttft = r.querySelector('rect.wf-ttft');
      const t = ttft ? ttft.getBoundingClientRect() : null;
      return {
        kind: r.dataset.kind, cls: r.className, dur: Number(r.dataset.dur),
        w: bar.width, left: bar.left,
        track: r.querySelector('svg.wf-track').getBoundingClientRect().width,
        ttftW: t ? t.width : null, ttftLeft: t ? t.left : null,
        flag: r.querySelector('.wf-flag').textContent,
      };
    }),
  };
"#;

fn kinds(rows: &[Value]) -> Vec<&str> {
    rows.iter().map(|r| r["kind"].as_str().unwrap()).collect()
}

/// Every bar's width over its track is its duration over the axis (within layout rounding).
fn assert_proportional(layout: &Value) {
    let span = layout["span"].as_f64().unwrap();
    for r in layout["rows"].as_array().unwrap() {
        let (dur, w, track) = (
            r["dur"].as_f64().unwrap(),
            r["w"].as_f64().unwrap(),
            r["track"].as_f64().unwrap(),
        );
        let want = dur / span * track;
        assert!(
            (w - want).abs() <= 0.5 + want * 0.01,
            "bar of {dur} ms on a {span} ms axis is {w}px of {track}px, want {want}px: {r}"
        );
    }
}

#[tokio::test]
async fn the_pages_in_a_real_browser() {
    let Some((chromium, driver)) = browser_tools() else {
        return;
    };
    let f = fixture();
    let server = Server::start(&f.home);
    let b = Browser::start(&chromium, &driver).await;
    let c = b.c();

    // The list: the URL's token becomes the cookie; both sessions, newest activity first.
    c.goto(&server.url).await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("table.sessions"))
        .await
        .unwrap();
    assert_eq!(
        c.current_url().await.unwrap().as_str(),
        format!("{}/", server.base())
    );
    let titles: Vec<String> = {
        let mut v = Vec::new();
        for e in c
            .find_all(Locator::Css("table.sessions td.title"))
            .await
            .unwrap()
        {
            v.push(e.text().await.unwrap());
        }
        v
    };
    assert_eq!(titles, ["Fix the flaky parser", "Aquarium inventory"]);
    b.screenshot("list").await;
    c.goto(&format!("{}/?status=interrupted", server.base()))
        .await
        .unwrap();
    assert_eq!(b.count("table.sessions tbody tr").await, 1);

    // The search box: the word is found and marked.
    c.find(Locator::Css("header form.search input[name=q]"))
        .await
        .unwrap()
        .send_keys(WORD)
        .await
        .unwrap();
    c.find(Locator::Css("header form.search button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let mark = c
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("ol.hits mark"))
        .await
        .unwrap();
    assert_eq!(mark.text().await.unwrap().to_lowercase(), WORD);
    let hit = c
        .find(Locator::Css("ol.hits li.hit"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        hit.contains("Aquarium inventory") && hit.contains("tank three"),
        "{hit}"
    );
    assert_eq!(b.count("ol.hits li.hit").await, 1);
    // The search page's filters: another agent, or another project, finds nothing; ours does.
    for (agent, project, hits) in [
        ("codex", "", 0),
        ("freecode", "/work/parser", 0),
        ("freecode", "/work/aquarium", 1),
    ] {
        c.find(Locator::Css("form.search-big select[name=agent]"))
            .await
            .unwrap()
            .select_by_value(agent)
            .await
            .unwrap();
        let input = c
            .find(Locator::Css("form.search-big input[name=project]"))
            .await
            .unwrap();
        input.clear().await.unwrap();
        input.send_keys(project).await.unwrap();
        c.find(Locator::Css("form.search-big button"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        // The form's query, different at each step: the new page, not the last one.
        let want = format!("project={}&agent={agent}", project.replace('/', "%2F"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !c.current_url().await.unwrap().as_str().contains(&want)
            || b.js("return document.readyState").await != "complete"
        {
            assert!(Instant::now() < deadline, "the search never ran: {want}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(b.count("ol.hits li.hit").await, hits, "{agent} {project}");
        assert_eq!(
            b.js("return document.querySelector('form.search-big select[name=agent]').value")
                .await,
            agent,
            "the filter is kept"
        );
    }

    // A transcript: its messages, a tool call folded then opened, markup shown as text, the
    // image drawn from its data: URL, code highlighted.
    c.goto(&format!("{}/session/{TRACED}", server.base()))
        .await
        .unwrap();
    assert_eq!(b.count("ol.transcript li.msg").await, 5);
    let tool = c.find(Locator::Css("details.tool")).await.unwrap();
    assert_eq!(tool.attr("open").await.unwrap(), None);
    let result = c
        .find(Locator::XPath(
            "//details[contains(@class,'tool')]//code[contains(., 'TOOL-RESULT-MARKER')]",
        ))
        .await
        .unwrap();
    assert!(!result.is_displayed().await.unwrap(), "folded at first");
    c.find(Locator::Css("details.tool summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(tool.attr("open").await.unwrap().is_some());
    assert!(result.is_displayed().await.unwrap(), "shown once opened");
    let evil = c
        .find(Locator::Css("li#m-m4"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(evil.contains(EVIL), "{evil}");
    assert_eq!(
        b.js("return document.title").await,
        "Fix the flaky parser — freecode"
    );
    assert_eq!(
        b.js("return document.querySelectorAll('main script, main img[src=x]').length")
            .await,
        0
    );
    assert_eq!(
        b.js("return document.querySelector('img.image').naturalWidth")
            .await,
        1
    );
    assert!(b.count("pre.code span.hl-kw").await >= 1);
    b.screenshot("session").await;

    // The waterfall: one bar per span (2 answered calls and the hung one, 2 tools, 1 refusal).
    c.goto(&format!("{}/trace/{TRACED}", server.base()))
        .await
        .unwrap();
    let layout = b.js(ROWS_JS).await;
    let rows = layout["rows"].as_array().unwrap();
    assert_eq!(
        kinds(rows),
        ["model", "tool", "model", "tool", "denied", "model"]
    );
    let hung: Vec<&Value> = rows
        .iter()
        .filter(|r| r["cls"].as_str().unwrap().contains("hung"))
        .collect();
    assert_eq!(hung.len(), 1, "{rows:?}");
    assert_eq!(hung[0]["flag"], "hung");
    assert_eq!(
        c.find(Locator::Css(".wf-row.hung .wf-flag"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "HUNG"
    );
    assert_proportional(&layout);
    b.screenshot("waterfall-hung").await;
    // A row opens its details (the script runs under the CSP).
    let details = c
        .find(Locator::Css(".wf-row.model .wf-details"))
        .await
        .unwrap();
    assert!(!details.is_displayed().await.unwrap());
    c.find(Locator::Css(".wf-row.model .wf-label"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(details.is_displayed().await.unwrap());
    let text = details.text().await.unwrap();
    assert!(
        text.contains("in 1500, out 60") && text.contains("first token"),
        "{text}"
    );

    // Zoomed into the first turn: the bars are wide enough to measure, TTFT inside its bar.
    c.goto(&format!("{}/trace/{TRACED}?turn=1", server.base()))
        .await
        .unwrap();
    let layout = b.js(ROWS_JS).await;
    let rows = layout["rows"].as_array().unwrap();
    assert_eq!(kinds(rows), ["model", "tool", "model", "tool", "denied"]);
    assert_proportional(&layout);
    let span = layout["span"].as_f64().unwrap();
    // From the first call to the refusal at 7.7 s, the turn's last span.
    assert_eq!(span as i64, 7_700 - MODEL[0].0);
    for (r, (_, dur, ttft)) in rows.iter().filter(|r| r["kind"] == "model").zip(MODEL) {
        let (w, tw) = (r["w"].as_f64().unwrap(), r["ttftW"].as_f64().unwrap());
        assert!((tw / w - ttft as f64 / dur as f64).abs() < 0.02, "{r}");
        assert!((r["ttftLeft"].as_f64().unwrap() - r["left"].as_f64().unwrap()).abs() < 0.5);
    }
    // A tool's details: its arguments and the start of its output (as text).
    c.find(Locator::Css(".wf-row.tool .wf-label"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let tool = c
        .find(Locator::Css(".wf-row.tool .wf-details"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        tool.contains("src/parser.rs") && tool.contains("read_file said <b>hello</b>"),
        "{tool}"
    );
    c.find(Locator::Css(".wf-row.tool .wf-label"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.find(Locator::Css(".wf-row.model .wf-label"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.screenshot("waterfall").await;

    // Live: the hung request is answered; the open page redraws without a reload.
    c.goto(&format!("{}/trace/{TRACED}", server.base()))
        .await
        .unwrap();
    assert_eq!(b.count(".wf-row.hung").await, 1);
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#chart[data-stream=open]"))
        .await
        .unwrap();
    b.js("window.__same_page = true; return 1").await;
    let answer = ui_home::event(
        99,
        TRACED,
        f.base + HUNG_AT + 4_000,
        "model.response",
        json!({
            "turnId": "turn-1", "provider": "openai", "model": "gpt-test", "duration_ms": 4_000,
            "inputTokens": 10, "outputTokens": 5, "toolCalls": [], "textChars": 3, "thinkingChars": 0,
        }),
    );
    let log = f
        .home
        .join("rollout/sessions")
        .join(TRACED)
        .join("events.jsonl");
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut file, answer.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.count(".wf-row.hung").await > 0 {
        assert!(
            Instant::now() < deadline,
            "the page never showed the answered request"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        b.js("return window.__same_page === true").await,
        true,
        "no reload"
    );
    assert_eq!(b.count(".wf-row.model").await, 3);
    let summary = c
        .find(Locator::Css("#summary"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        summary.contains("live") && !summary.contains("hung"),
        "{summary}"
    );
    // The session goes on: a new turn's request, then a tool call, each appended while the
    // page is open, each shown as a new bar without a reload (the server tails the log).
    let tools_before = b.count(".wf-row.tool").await;
    let more = [
        ui_home::event(
            100,
            TRACED,
            f.base + 13_000,
            "turn.started",
            json!({"turnId": "turn-2"}),
        ),
        ui_home::event(
            101,
            TRACED,
            f.base + 13_100,
            "model.request",
            json!({"turnId": "turn-2", "provider": "openai", "model": "gpt-test", "messageCount": 7, "toolCount": 3, "promptChars": 2100, "streamed": true}),
        ),
    ];
    for line in &more {
        std::io::Write::write_all(&mut file, line.as_bytes()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.count(".wf-row.model").await < 4 {
        assert!(Instant::now() < deadline, "the new request never showed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Open for an hour by the fixture's clock: hung.
    assert_eq!(b.count(".wf-row.hung").await, 1, "the new request is open");
    let answered = [
        ui_home::event(
            102,
            TRACED,
            f.base + 13_600,
            "model.response",
            json!({"turnId": "turn-2", "provider": "openai", "model": "gpt-test", "duration_ms": 500,
                "inputTokens": 20, "outputTokens": 4, "toolCalls": ["grep"], "textChars": 0, "thinkingChars": 0}),
        ),
        ui_home::event(
            103,
            TRACED,
            f.base + 13_650,
            "function.call",
            json!({"turnId": "turn-2", "tool": "grep", "args": {"pattern": "LIVE-TOOL"}}),
        ),
        ui_home::event(
            104,
            TRACED,
            f.base + 14_650,
            "function.output",
            json!({"turnId": "turn-2", "tool": "grep", "output": "found", "duration_ms": 1_000}),
        ),
    ];
    // Written in two pieces, the cut inside a line: the half line waits for its newline.
    let text: String = answered.concat();
    let (a, rest) = text.split_at(text.len() - 20);
    std::io::Write::write_all(&mut file, a.as_bytes()).unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    std::io::Write::write_all(&mut file, rest.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.count(".wf-row.tool").await <= tools_before {
        assert!(Instant::now() < deadline, "the new tool span never showed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(b.count(".wf-row.tool").await, tools_before + 1);
    assert_eq!(b.count(".wf-row.hung").await, 0);
    assert_eq!(
        b.js("return window.__same_page === true").await,
        true,
        "no reload"
    );
    let summary = c
        .find(Locator::Css("#summary"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(summary.contains("4 model calls, 3 tools"), "{summary}");

    // Stats: time and tokens by tool, model and day as bars, each chart holding the figures
    // `stats --json` prints, the largest the full width, the others in proportion.
    let out = freecode(&f.home)
        .args(["stats", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    let num = |v: &Value, k: &str| v[k].as_f64().unwrap();
    let rows_of = |list: &str, label: &str, value: &dyn Fn(&Value) -> f64| -> Vec<(String, f64)> {
        stats[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v[label].as_str().unwrap().to_owned(), value(v)))
            .collect()
    };
    let mut model_tokens = rows_of("models", "model", &|v| {
        num(v, "inputTokens") + num(v, "outputTokens")
    });
    model_tokens.sort_by(|a, b| b.1.total_cmp(&a.1));
    let charts = [
        (
            "tool-time",
            rows_of("tools", "tool", &|v| num(v, "totalMs")),
        ),
        (
            "model-time",
            rows_of("models", "model", &|v| num(v, "totalMs")),
        ),
        ("model-tokens", model_tokens),
        (
            "day-tokens",
            rows_of("days", "day", &|v| {
                num(v, "inputTokens") + num(v, "outputTokens")
            }),
        ),
        (
            "day-time",
            rows_of("days", "day", &|v| num(v, "modelMs") + num(v, "toolMs")),
        ),
    ];
    // The fixture's figures with the live appends: three tools, one model, one day.
    assert_eq!(charts[0].1.len(), 3, "{stats}");
    assert_eq!(
        charts[1].1,
        [("gpt-test".to_owned(), 1_000.0 + 2_000.0 + 4_000.0 + 500.0)],
        "{stats}"
    );
    assert_eq!(
        charts[3].1,
        [(
            ui_home::local_day(f.base + MODEL[0].0),
            1_500.0 * 2.0 + 60.0 * 2.0 + 15.0 + 24.0
        )],
        "{stats}"
    );
    c.goto(&format!("{}/stats", server.base())).await.unwrap();
    for (chart, want) in &charts {
        let bars = b
            .js(&format!(r#"return Array.from(document.querySelectorAll('.bars[data-chart="{chart}"] .bar-row')).map(r => ({{
                label: r.querySelector('.bar-label').textContent, value: Number(r.dataset.value),
                w: r.querySelector('rect.bar').getBoundingClientRect().width,
                track: r.querySelector('svg.bar-track').getBoundingClientRect().width }}))"#))
            .await;
        let bars = bars.as_array().unwrap();
        let got: Vec<(String, f64)> = bars
            .iter()
            .map(|r| (r["label"].as_str().unwrap().to_owned(), num(r, "value")))
            .collect();
        assert_eq!(&got, want, "{chart}");
        let max = want.iter().map(|r| r.1).fold(0.0, f64::max);
        for r in bars {
            let want = num(r, "value") / max * num(r, "track");
            assert!((num(r, "w") - want).abs() < 1.0, "{chart}: {r}");
        }
    }
    b.screenshot("stats").await;

    // The --html files, opened from disk with nothing fetched.
    let trace_file = f.tmp.path().join("trace.html");
    let session_file = f.tmp.path().join("session.html");
    for (args, file) in [
        (vec!["trace", TRACED, "--html"], &trace_file),
        (vec!["session", "show", OTHER, "--html"], &session_file),
    ] {
        let out = freecode(&f.home).args(&args).arg(file).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    c.goto(&format!("file://{}", trace_file.display()))
        .await
        .unwrap();
    assert_eq!(
        b.count(".wf-row").await,
        8,
        "4 model calls, 3 tools, 1 refusal"
    );
    assert_eq!(
        b.js("return performance.getEntriesByType('resource').length")
            .await,
        0
    );
    assert_eq!(
        b.js("return getComputedStyle(document.querySelector('rect.wf-bar')).fill")
            .await,
        "rgb(79, 127, 232)",
        "the stylesheet inside the file applies"
    );
    c.find(Locator::Css(".wf-row.tool .wf-label"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(
        c.find(Locator::Css(".wf-row.tool .wf-details"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap()
    );
    let offline = c
        .find(Locator::Css(".wf-row.tool .wf-details"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(offline.contains("read_file said <b>hello</b>"), "{offline}");
    c.goto(&format!("file://{}", session_file.display()))
        .await
        .unwrap();
    assert_eq!(b.count("ol.transcript li.msg").await, 2);
    assert!(
        c.find(Locator::Css("main"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains("tank three")
    );
    assert_eq!(
        b.js("return performance.getEntriesByType('resource').length")
            .await,
        0
    );

    // Started the way `freecode ui` opens a browser: the private launch page, from disk.
    let bin = f.tmp.path().join("bin");
    let opening = Server::start_opening(&f.home, &bin);
    let page = Server::opened(&bin).remove(0);
    c.goto(&format!("file://{page}")).await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("table.sessions td.title"))
        .await
        .unwrap();
    assert_eq!(
        c.current_url().await.unwrap().as_str(),
        format!("{}/", opening.base())
    );
    b.finish().await;
}

/// Where the reference screenshots live (`FREECODE_UI_REFERENCE=update` rewrites them).
fn reference_png(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ui_reference")
        .join(format!("{name}.png"))
}

/// RGBA pixels and size of a PNG.
fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let rgba: Vec<u8> = match info.color_type {
        png::ColorType::Rgba => buf,
        png::ColorType::Rgb => buf
            .chunks(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect(),
        other => panic!("a screenshot in {other:?}"),
    };
    (info.width, info.height, rgba)
}

/// Compares `png` with the reference `name`: the same size, and at most 1% of the pixels
/// visibly different (a channel off by more than 48 of 255), which leaves room for
/// anti-aliasing and nothing else. What was seen is kept in Cargo's temporary directory for
/// tests (`target/tmp`), and a mismatch says where.
fn compare_with_reference(name: &str, shot: &[u8]) {
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = reference_png(name);
    if std::env::var("FREECODE_UI_REFERENCE").is_ok_and(|v| v == "update") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, shot).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; make it with FREECODE_UI_REFERENCE=update",
            path.display()
        )
    });
    let seen = keep.join(format!("{name}.seen.png"));
    std::fs::write(&seen, shot).unwrap();
    let (w1, h1, a) = decode_png(&want);
    let (w2, h2, b) = decode_png(shot);
    assert_eq!(
        (w1, h1),
        (w2, h2),
        "{name}: the reference is {w1}×{h1}, the page {w2}×{h2} (seen: {})",
        seen.display()
    );
    let differ = a
        .chunks(4)
        .zip(b.chunks(4))
        .filter(|(p, q)| p.iter().zip(q.iter()).any(|(x, y)| x.abs_diff(*y) > 48))
        .count();
    let share = differ as f64 / f64::from(w1 * h1);
    eprintln!(
        "{name}: {differ} of {} pixels differ ({:.3}%)",
        w1 * h1,
        share * 100.0
    );
    assert!(
        share <= 0.01,
        "{name}: {:.2}% of the pixels differ from {} (seen: {})",
        share * 100.0,
        path.display(),
        seen.display()
    );
}

/// A long markdown answer as a reader sees it: headings, lists, a table, code, a quote and
/// links rendered (not `**` and `- `), raw HTML as text, the slash command and the system
/// reminder quiet, tokens short; compared with a reference screenshot. A finished trace page
/// opens no live connection.
#[tokio::test]
async fn a_long_markdown_answer_as_a_reader_sees_it() {
    let Some((chromium, driver)) = browser_tools() else {
        return;
    };
    let f = fixture();
    // A fixed time, so the screenshot shows the same clock on every run.
    ui_home::write_markdown_session(&f.home, 1_767_225_600_000);
    let server = Server::start(&f.home);
    let b = Browser::start(&chromium, &driver).await;
    let c = b.c();
    // Tall enough for the whole answer: an element's screenshot is cut at the viewport.
    c.set_window_size(1280, 2000).await.unwrap();
    c.goto(&server.url).await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("table.sessions"))
        .await
        .unwrap();
    c.goto(&format!("{}/session/{}", server.base(), ui_home::MARKDOWN))
        .await
        .unwrap();
    let seen = b
        .js(r#"
        const md = document.querySelector('li#m-k3 .md');
        const strong = md.querySelector('strong');
        return {
          h2: md.querySelector('h2').textContent,
          items: md.querySelectorAll('li').length,
          cells: Array.from(md.querySelectorAll('table td')).map(td => td.textContent),
          code: md.querySelector('pre.code[data-lang=rust]').textContent.includes("replace('_'"),
          bold: Number(getComputedStyle(strong).fontWeight),
          links: Array.from(md.querySelectorAll('a')).map(a => a.getAttribute('href')),
          images: md.querySelectorAll('img').length,
          raw: md.textContent.includes('<div onclick="alert(1)">raw html stays text</div>'),
          stars: md.textContent.includes('**'),
          command: document.querySelector('li#m-k1 .quiet.command code').textContent,
          reminderOpen: document.querySelector('li#m-k2 details.quiet').open,
          reminderShown: document.querySelector('li#m-k2 details.quiet .text').checkVisibility(),
          usage: document.querySelector('li#m-k3 .usage').textContent,
          agent: document.querySelector('dd.agent').textContent,
        };
    "#)
        .await;
    assert_eq!(seen["h2"], "What changed in the parser");
    assert_eq!(seen["items"], 7, "2 numbered, 2 bullets, 1 nested, 2 tasks");
    assert_eq!(
        seen["cells"],
        json!([
            "src/lexer.rs",
            "42",
            "line ends",
            "src/number.rs",
            "7",
            "underscores"
        ])
    );
    assert_eq!(seen["code"], true);
    assert!(seen["bold"].as_f64().unwrap() >= 600.0, "{seen}");
    assert_eq!(
        seen["links"],
        json!([
            "https://spec.commonmark.org/",
            "https://example.com/diagram.png"
        ])
    );
    assert_eq!(seen["images"], 0);
    assert_eq!(seen["raw"], true);
    assert_eq!(seen["stars"], false);
    assert_eq!(seen["command"], "/review src/parser.rs");
    assert_eq!(seen["reminderOpen"], false);
    assert_eq!(seen["reminderShown"], false);
    assert_eq!(seen["usage"], "25.8k in · 27 out");
    assert_eq!(seen["agent"], "claude-code");
    b.screenshot("session-markdown").await;
    let answer = c.find(Locator::Css("li#m-k3")).await.unwrap();
    let shot = answer.screenshot().await.unwrap();
    compare_with_reference("markdown-answer", &shot);

    // A finished trace: drawn, and no stream opened.
    let events = [
        ui_home::event(1, ui_home::MARKDOWN, 1_767_225_590_000, "turn.started", json!({"turnId": "t0"})),
        ui_home::event(
            2,
            ui_home::MARKDOWN,
            1_767_225_590_100,
            "model.request",
            json!({"turnId": "t0", "provider": "anthropic", "model": "claude-test", "messageCount": 2, "toolCount": 0, "promptChars": 90, "streamed": true}),
        ),
        ui_home::event(
            3,
            ui_home::MARKDOWN,
            1_767_225_599_000,
            "model.response",
            json!({"turnId": "t0", "provider": "anthropic", "model": "claude-test", "duration_ms": 8_900, "inputTokens": 25_801, "outputTokens": 27, "toolCalls": [], "textChars": 900, "thinkingChars": 0}),
        ),
    ]
    .concat();
    ui_home::write_events(&f.home, ui_home::MARKDOWN, &events);
    c.goto(&format!("{}/trace/{}", server.base(), ui_home::MARKDOWN))
        .await
        .unwrap();
    assert_eq!(b.count(".wf-row.model").await, 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        b.js("return [document.getElementById('chart').dataset.live, document.getElementById('chart').dataset.stream || null, performance.getEntriesByType('resource').filter(e => e.name.includes('/api/events/')).length]").await,
        json!(["false", null, 0])
    );
    b.finish().await;
}

/// Writes a session of `n` messages (a tool call every tenth) straight to its files.
fn big_session(home: &Path, id: &str, n: usize) {
    use std::io::Write;
    let meta = json!({
        "id": id, "title": "A long session", "projectPath": "/work/big", "provider": "openai",
        "model": "gpt-test", "status": "active", "createdAt": 1, "updatedAt": 2,
        "lastTurnAt": 2, "turnCount": n / 2,
    });
    ui_home::write_session(home, &meta, &[]);
    let path = home
        .join("sessions")
        .join(freecode_core::project_key::project_key("/work/big").dir_name())
        .join(id)
        .join("messages.jsonl");
    let mut w =
        std::io::BufWriter::new(std::fs::OpenOptions::new().append(true).open(path).unwrap());
    for i in 0..n {
        let m = if i % 10 == 9 {
            json!({"id": format!("m{i}"), "role": "assistant", "parts": [{"type": "tool", "tool": {"name": "grep", "args": {"pattern": format!("p{i}")}}, "result": "src/a.rs:1: x\nsrc/b.rs:2: y"}], "timestamp": i})
        } else {
            json!({"id": format!("m{i}"), "role": if i % 2 == 0 { "user" } else { "assistant" }, "parts": [{"type": "text", "content": format!("message {i}: the quick brown fox jumps over the lazy dog, and then reads ```rust\nfn f() -> u32 {{ {i} }}\n``` once more")}], "timestamp": i})
        };
        writeln!(w, "{m}").unwrap();
    }
    w.flush().unwrap();
}

/// Writes a rollout log of `n` events: turns of 10 model calls, each followed by a tool call.
fn big_log(home: &Path, id: &str, n: u64) {
    use std::io::Write;
    let dir = home.join("rollout/sessions").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = std::io::BufWriter::new(std::fs::File::create(dir.join("events.jsonl")).unwrap());
    let (mut seq, mut t, mut turn) = (0u64, 1_700_000_000_000i64, 0u64);
    let line =
        |w: &mut std::io::BufWriter<std::fs::File>, seq: &mut u64, t: i64, kind: &str, f: Value| {
            *seq += 1;
            w.write_all(ui_home::event(*seq, id, t, kind, f).as_bytes())
                .unwrap();
        };
    while seq < n {
        let tid = format!("turn-{turn}");
        line(&mut w, &mut seq, t, "turn.started", json!({"turnId": tid}));
        for _ in 0..10 {
            line(
                &mut w,
                &mut seq,
                t,
                "model.request",
                json!({"turnId": tid, "provider": "openai", "model": "gpt-test", "messageCount": 3, "toolCount": 2, "promptChars": 100, "streamed": true}),
            );
            line(
                &mut w,
                &mut seq,
                t + 100,
                "model.first_token",
                json!({"turnId": tid, "ttft_ms": 100}),
            );
            line(
                &mut w,
                &mut seq,
                t + 400,
                "model.response",
                json!({"turnId": tid, "provider": "openai", "model": "gpt-test", "duration_ms": 400, "ttft_ms": 100, "inputTokens": 100, "outputTokens": 10, "toolCalls": ["bash"], "textChars": 1, "thinkingChars": 0}),
            );
            line(
                &mut w,
                &mut seq,
                t + 400,
                "function.call",
                json!({"turnId": tid, "tool": "bash", "args": {"command": "ls"}}),
            );
            line(
                &mut w,
                &mut seq,
                t + 450,
                "function.output",
                json!({"turnId": tid, "tool": "bash", "output": "ok", "duration_ms": 50}),
            );
            t += 500;
        }
        turn += 1;
    }
    w.flush().unwrap();
}

/// Timings of the page now loaded, ms from navigation start: the response's end, first
/// contentful paint (the browser's paint entry, when it reports one), and "painted": two
/// animation frames after the load event, a frame drawn with the whole document laid out.
const TIMING_JS: &str = r#"
  const done = arguments[arguments.length - 1];
  const nav = performance.getEntriesByType('navigation')[0];
  const report = (fcp) => requestAnimationFrame(() => requestAnimationFrame(() => done({
    response: nav.responseEnd, domContentLoaded: nav.domContentLoadedEventEnd,
    load: nav.loadEventEnd, firstContentfulPaint: fcp, painted: performance.now(),
    nodes: document.getElementsByTagName('*').length,
  })));
  const seen = performance.getEntriesByName('first-contentful-paint')[0];
  if (seen) { report(seen.startTime); return; }
  try {
    new PerformanceObserver((list) => {
      const e = list.getEntriesByName('first-contentful-paint')[0];
      if (e) report(e.startTime);
    }).observe({ type: 'paint', buffered: true });
  } catch (e) {}
  setTimeout(() => report(null), 2000);
"#;

#[tokio::test]
#[ignore = "performance figures: cargo test --release -p freecode-cli --test it ui_browser:: -- --ignored --nocapture"]
async fn perf_first_paint_and_waterfall() {
    let Some((chromium, driver)) = browser_tools() else {
        return;
    };
    let f = fixture();
    big_session(&f.home, "big-session", 100_000);
    big_log(&f.home, "big-session", 1_000_000);
    // What the fold alone costs: `trace --json` of the same log, to /dev/null.
    let mut cli = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let status = freecode(&f.home)
            .args(["trace", "big-session", "--json"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        cli.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    cli.sort_by(f64::total_cmp);
    eprintln!(
        "trace --json of 1,000,000 events: {:.0} ms (median of 3)",
        cli[1]
    );
    let server = Server::start(&f.home);
    let b = Browser::start(&chromium, &driver).await;
    let c = b.c();
    c.goto(&server.url).await.unwrap();
    for (what, path) in [
        (
            "session of 100,000 messages, page 1",
            "/session/big-session",
        ),
        (
            "session of 100,000 messages, page 250",
            "/session/big-session?page=250",
        ),
        ("waterfall of 1,000,000 events", "/trace/big-session"),
        (
            "waterfall of 1,000,000 events, a group of turns",
            "/trace/big-session?turns=1-66",
        ),
        (
            "waterfall of 1,000,000 events, one turn",
            "/trace/big-session?turn=500",
        ),
    ] {
        let mut runs = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            c.goto(&format!("{}{path}", server.base())).await.unwrap();
            let wall = started.elapsed().as_secs_f64() * 1000.0;
            let t = c.execute_async(TIMING_JS, vec![]).await.unwrap();
            runs.push((wall, t));
        }
        let ms = |t: &Value, k: &str| t[k].as_f64().unwrap_or(f64::NAN);
        // The first view of a trace folds the log; later ones of an unchanged log do not.
        eprintln!(
            "{what}, first view: painted {:.0} ms, response end {:.0} ms",
            ms(&runs[0].1, "painted"),
            ms(&runs[0].1, "response")
        );
        runs.sort_by(|a, b| ms(&a.1, "painted").total_cmp(&ms(&b.1, "painted")));
        let (wall, t) = &runs[2];
        eprintln!(
            "{what}: painted {:.0} ms, first contentful paint {:.0} ms, response end {:.0} ms, \
             load {:.0} ms, goto {wall:.0} ms, {} elements (median of 5 by painted)",
            ms(t, "painted"),
            ms(t, "firstContentfulPaint"),
            ms(t, "response"),
            ms(t, "load"),
            t["nodes"]
        );
    }
    b.finish().await;
}
