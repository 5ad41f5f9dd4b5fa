//! Share server over a filesystem store: the HTTP contract end to end, through real sockets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use freecode_remote::blob::StoreSpec;
use freecode_remote::server::{self, EXPIRES_IN_HEADER, ServerConfig, ServerError, ServerHandle};
use support::{
    agent, assert_replicas_act_as_one, delete, get, post, random_bytes, upload, upload_expiring,
    upload_with,
};

/// Everything the server logs, from every test of this binary (the subscriber is global, as
/// servers log from their own threads).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&buffer);
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "freecode_remote=debug,freecode_http=debug",
            ))
            .with_ansi(false)
            .with_writer(move || LogSink(Arc::clone(&sink)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buffer
    })
    .clone()
}

struct LogSink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged() -> String {
    String::from_utf8_lossy(&logs().lock().unwrap()).into_owned()
}

fn config(dir: &Path) -> ServerConfig {
    logs();
    ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        store: StoreSpec::File(dir.to_owned()),
        // Long enough that the sweeper (which runs once at start) stays out of the way.
        sweep_interval: Duration::from_secs(3600),
        ..ServerConfig::default()
    }
}

fn start(dir: &Path) -> ServerHandle {
    server::spawn(config(dir)).unwrap()
}

fn blob_path(dir: &Path, code: &str) -> std::path::PathBuf {
    dir.join("blobs").join(code)
}

fn record_path(dir: &Path, code: &str) -> std::path::PathBuf {
    dir.join("meta").join(format!("{code}.json"))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[test]
fn round_trip_preserves_bytes_and_content_type() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let agent = agent();

    let bundle = random_bytes(300 * 1024 + 7);
    let before = now_ms();
    let up = upload(&agent, &server.url, &bundle, "application/octet-stream");
    assert!(is_hex(&up.code, 32), "{}", up.code);
    assert!(is_hex(&up.delete_token, 64), "{}", up.delete_token);
    assert_eq!(up.url, format!("{}/{}", server.url, up.code));
    let week = 7 * 24 * 3600 * 1000;
    assert!(up.expires_at >= before + week && up.expires_at <= now_ms() + week);

    let reply = get(&agent, &server.url, &up.code);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, bundle);
    assert_eq!(
        reply.content_type.as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert_eq!(
        reply.header("x-freecode-expires-at"),
        Some(up.expires_at.to_string().as_str())
    );
    assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));

    // A plain (JSON) bundle keeps its type; two uploads of the same bytes get distinct codes.
    let json = br#"{"messages":[]}"#;
    let a = upload(&agent, &server.url, json, "application/json");
    let b = upload(&agent, &server.url, json, "application/json");
    assert_ne!(a.code, b.code);
    assert_ne!(a.delete_token, b.delete_token);
    let reply = get(&agent, &server.url, &a.code);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, json);
    assert_eq!(reply.content_type.as_deref(), Some("application/json"));
}

#[test]
fn stored_files_are_private_and_exact() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let server = start(&root);
    let agent = agent();
    let bundle = random_bytes(4096);
    let up = upload(&agent, &server.url, &bundle, "application/octet-stream");

    let blob = blob_path(&root, &up.code);
    let record = record_path(&root, &up.code);
    assert_eq!(std::fs::read(&blob).unwrap(), bundle);
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(meta["size"], 4096);
    assert_eq!(meta["expiresAt"].as_u64(), Some(up.expires_at));
    assert_eq!(meta["contentType"], "application/octet-stream");
    // Only the token's hash is kept.
    let text = std::fs::read_to_string(&record).unwrap();
    assert!(!text.contains(&up.delete_token));
    use sha2::Digest as _;
    let hash: String = sha2::Sha256::digest(up.delete_token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(meta["deleteTokenSha256"], hash);

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&blob), 0o600);
        assert_eq!(mode(&record), 0o600);
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&root.join("blobs")), 0o700);
        assert_eq!(mode(&root.join("meta")), 0o700);
    }
    // Nothing else lying around (no temp files).
    assert_eq!(std::fs::read_dir(root.join("blobs")).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(root.join("meta")).unwrap().count(), 1);
}

#[test]
fn unknown_and_malformed_codes_are_404() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let agent = agent();
    let up = upload(&agent, &server.url, b"x", "application/octet-stream");

    let unknown = "0123456789abcdef0123456789abcdef";
    for path in [
        unknown,
        "abc",
        &up.code.to_uppercase(),
        &format!("{}0", up.code),
        &up.code[..31],
        "..%2f..%2fetc%2fpasswd",
        "%2e%2e",
        "blobs",
        "meta",
        &format!("{}.json", up.code),
        &format!("{}/x", up.code),
    ] {
        let reply = get(&agent, &server.url, path);
        assert_eq!(reply.status, 404, "GET /{path}");
        assert!(reply.json()["error"].is_string(), "GET /{path}");
        let reply = delete(&agent, &server.url, path, Some(&up.delete_token));
        assert_eq!(reply.status, 404, "DELETE /{path}");
    }
    // The real one is untouched by all that.
    assert_eq!(get(&agent, &server.url, &up.code).status, 200);
}

#[test]
fn expired_share_is_410_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let agent = agent();
    let up = upload_expiring(&agent, &server.url, b"short-lived", 1);
    assert!(up.expires_at <= now_ms() + 1000);
    assert_eq!(get(&agent, &server.url, &up.code).status, 200);

    std::thread::sleep(Duration::from_millis(1300));
    let reply = get(&agent, &server.url, &up.code);
    assert_eq!(reply.status, 410);
    assert!(reply.json()["error"].is_string());
    assert!(!blob_path(dir.path(), &up.code).exists());
    assert!(!record_path(dir.path(), &up.code).exists());
    assert_eq!(get(&agent, &server.url, &up.code).status, 404);
}

#[test]
fn sweeper_removes_expired_shares_nobody_reads() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        sweep_interval: Duration::from_millis(200),
        ..config(dir.path())
    })
    .unwrap();
    let agent = agent();
    let short = upload_expiring(&agent, &server.url, b"short", 1);
    let long = upload(&agent, &server.url, b"long", "application/octet-stream");
    assert!(blob_path(dir.path(), &short.code).exists());

    let swept = support::wait_until(Duration::from_secs(10), || {
        !record_path(dir.path(), &short.code).exists()
            && !blob_path(dir.path(), &short.code).exists()
    });
    assert!(swept, "expired share still on disk");
    assert!(record_path(dir.path(), &long.code).exists());
    assert_eq!(get(&agent, &server.url, &long.code).status, 200);
}

#[test]
fn delete_needs_the_right_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let agent = agent();
    let up = upload(&agent, &server.url, b"secret", "application/octet-stream");

    assert_eq!(delete(&agent, &server.url, &up.code, None).status, 403);
    assert_eq!(
        delete(&agent, &server.url, &up.code, Some("wrong")).status,
        403
    );
    let other = upload(&agent, &server.url, b"other", "application/octet-stream");
    assert_eq!(
        delete(&agent, &server.url, &up.code, Some(&other.delete_token)).status,
        403
    );
    assert_eq!(get(&agent, &server.url, &up.code).status, 200);

    let reply = delete(&agent, &server.url, &up.code, Some(&up.delete_token));
    assert_eq!(reply.status, 204);
    assert_eq!(get(&agent, &server.url, &up.code).status, 404);
    assert!(!blob_path(dir.path(), &up.code).exists());
    assert!(!record_path(dir.path(), &up.code).exists());
    assert_eq!(
        delete(&agent, &server.url, &up.code, Some(&up.delete_token)).status,
        404
    );
    assert_eq!(get(&agent, &server.url, &other.code).status, 200);
}

#[test]
fn api_key_is_enforced_on_upload() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        api_key: Some("s3cret-key".into()),
        ..config(dir.path())
    })
    .unwrap();
    let agent = agent();
    let ct = "application/octet-stream";

    let reply = post(&agent, &server.url, b"x", ct, &[]);
    assert_eq!(reply.status, 401);
    assert!(reply.json()["error"].is_string());
    for auth in [
        "Bearer wrong",
        "Bearer s3cret-ke",
        "Bearer s3cret-key2",
        "Basic s3cret-key",
        "s3cret-key",
    ] {
        assert_eq!(
            post(&agent, &server.url, b"x", ct, &[("authorization", auth)]).status,
            401,
            "{auth}"
        );
    }
    let huge = random_bytes(8 * 1024 * 1024);
    let reply = post(
        &agent,
        &server.url,
        &huge,
        ct,
        &[("expect", "100-continue")],
    );
    assert_eq!(reply.status, 401);
    assert_eq!(
        std::fs::read_dir(dir.path().join("blobs")).unwrap().count(),
        0
    );

    let up = upload_with(
        &agent,
        &server.url,
        b"x",
        ct,
        &[("authorization", "Bearer s3cret-key")],
    );
    // Reading needs only the code.
    assert_eq!(get(&agent, &server.url, &up.code).status, 200);
}

#[test]
fn body_limits() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        max_body: 1024,
        ..config(dir.path())
    })
    .unwrap();
    let agent = agent();
    let ct = "application/octet-stream";

    let reply = post(&agent, &server.url, &random_bytes(2048), ct, &[]);
    assert_eq!(reply.status, 413);
    assert!(reply.json()["error"].is_string());
    assert_eq!(
        post(&agent, &server.url, &random_bytes(1025), ct, &[]).status,
        413
    );
    let reply = post(&agent, &server.url, b"", ct, &[]);
    assert_eq!(reply.status, 400);
    assert!(reply.json()["error"].is_string());

    // With `Expect: 100-continue` the refusal comes before the body is sent, so even a body
    // far past the limit gets a clean 413 rather than a broken pipe.
    let huge = random_bytes(8 * 1024 * 1024);
    let reply = post(
        &agent,
        &server.url,
        &huge,
        ct,
        &[("expect", "100-continue")],
    );
    assert_eq!(reply.status, 413);
    assert!(reply.json()["error"].as_str().unwrap().contains("1024"));

    let exact = random_bytes(1024);
    let up = upload(&agent, &server.url, &exact, ct);
    assert_eq!(get(&agent, &server.url, &up.code).body, exact);
    assert_eq!(
        std::fs::read_dir(dir.path().join("blobs")).unwrap().count(),
        1
    );
}

#[test]
fn expiry_header_is_validated_and_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        max_ttl: Duration::from_secs(3600),
        default_ttl: Duration::from_secs(600),
        ..config(dir.path())
    })
    .unwrap();
    let agent = agent();
    let ct = "application/octet-stream";

    for bad in ["abc", "1.5", "", "10s", "1e3"] {
        let reply = post(&agent, &server.url, b"x", ct, &[(EXPIRES_IN_HEADER, bad)]);
        assert_eq!(reply.status, 400, "{bad:?}");
        assert!(
            reply.json()["error"]
                .as_str()
                .unwrap()
                .contains(EXPIRES_IN_HEADER)
        );
    }
    let before = now_ms();
    let default = upload(&agent, &server.url, b"x", ct);
    assert!(default.expires_at >= before + 600_000 && default.expires_at <= now_ms() + 600_000);
    let clamped = upload_expiring(&agent, &server.url, b"x", 10 * 24 * 3600);
    assert!(clamped.expires_at <= now_ms() + 3_600_000);
    assert!(clamped.expires_at >= before + 3_600_000);
    let asked = upload_expiring(&agent, &server.url, b"x", 120);
    assert!(asked.expires_at >= before + 120_000 && asked.expires_at <= now_ms() + 120_000);
    // Zero is raised to the 1-second minimum.
    let zero = upload_expiring(&agent, &server.url, b"x", 0);
    assert!(zero.expires_at >= before + 1000 && zero.expires_at <= now_ms() + 1000);
}

#[test]
fn public_url_shapes_share_urls() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        public_url: Some("https://share.example.com/".into()),
        ..config(dir.path())
    })
    .unwrap();
    let up = upload(&agent(), &server.url, b"x", "application/octet-stream");
    assert_eq!(up.url, format!("https://share.example.com/{}", up.code));
}

#[test]
fn health_reflects_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let server = start(&root);
    let agent = agent();
    let reply = get(&agent, &server.url, "healthz");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json(), serde_json::json!({"status": "ok"}));

    std::fs::remove_dir_all(&root).unwrap();
    let reply = get(&agent, &server.url, "healthz");
    assert_eq!(reply.status, 503);
    assert_eq!(reply.json()["status"], "unavailable");
}

#[test]
fn unrouted_requests_get_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let agent = agent();
    let reply = get(&agent, &server.url, "a/b/c");
    assert_eq!(reply.status, 404);
    assert!(reply.json()["error"].is_string());
    // GET /upload is not an upload (and not a code either).
    assert_ne!(get(&agent, &server.url, "upload").status, 200);
}

#[test]
fn dropping_the_handle_closes_the_port() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let addr = server.addr;
    let agent = agent();
    let up = upload(&agent, &server.url, b"x", "application/octet-stream");
    assert_eq!(get(&agent, &server.url, &up.code).status, 200);
    // The agent keeps an idle keep-alive connection open: shutdown must not wait on it.
    let started = std::time::Instant::now();
    drop(server);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "{addr} still open"
    );

    let other = start(dir.path());
    other.shutdown().unwrap();
}

#[test]
fn two_servers_over_one_directory_act_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path());
    let b = start(dir.path());
    assert_replicas_act_as_one(&a.url, &b.url, 64 * 1024);
}

/// Sends `head` (and `body`) on a fresh connection; the raw stream, to read from or stall on.
fn raw(addr: SocketAddr, head: &str, body: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    stream
}

/// The head of an upload declaring `len` body bytes.
fn upload_head(len: usize) -> String {
    format!(
        "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {len}\r\n\r\n"
    )
}

/// Reads until the server closes the connection (or the read timeout).
fn read_all(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn blob_count(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("blobs")).unwrap().count()
}

#[test]
fn concurrency_limit_turns_excess_requests_away() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        max_concurrent: 1,
        ..config(dir.path())
    })
    .unwrap();
    let agent = agent();
    let ct = "application/octet-stream";

    // A slow upload takes the only slot and keeps it while it trickles its body.
    let mut slow = raw(server.addr, &upload_head(1_000_000), &[7; 1000]);
    std::thread::sleep(Duration::from_millis(500));
    slow.write_all(&[7; 1000]).unwrap();

    let started = Instant::now();
    let reply = post(&agent, &server.url, b"x", ct, &[]);
    let waited = started.elapsed();
    assert_eq!(reply.status, 503);
    assert_eq!(reply.json()["error"], "server busy");
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(8),
        "{waited:?}"
    );
    // Health checks need no slot.
    assert_eq!(get(&agent, &server.url, "healthz").status, 200);
    slow.write_all(&[7; 1000]).unwrap();

    // Once the slow client gives up, the slot is free again.
    drop(slow);
    let mut last = 0;
    let freed = support::wait_until(Duration::from_secs(10), || {
        last = post(&agent, &server.url, b"x", ct, &[]).status;
        last == 201
    });
    assert!(freed, "last status {last}");
    assert_eq!(blob_count(dir.path()), 1);
}

#[test]
fn stalled_request_times_out_with_408() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        request_timeout: Duration::from_millis(500),
        ..config(dir.path())
    })
    .unwrap();

    let started = Instant::now();
    let mut stalled = raw(server.addr, &upload_head(1000), b"only part of it");
    let reply = read_all(&mut stalled);
    let took = started.elapsed();
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
    assert!(reply.contains("request timed out"), "{reply:?}");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert_eq!(blob_count(dir.path()), 0);

    // Quick requests are unaffected.
    let up = upload(&agent(), &server.url, b"quick", "application/octet-stream");
    assert_eq!(get(&agent(), &server.url, &up.code).status, 200);
}

#[test]
fn shutdown_does_not_wait_forever_on_a_stuck_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let addr = server.addr;
    let mut stuck = raw(addr, &upload_head(1000), b"partial");
    std::thread::sleep(Duration::from_millis(300));

    let started = Instant::now();
    drop(server);
    let took = started.elapsed();
    assert!(
        took < server::SHUTDOWN_GRACE + Duration::from_secs(5),
        "{took:?}"
    );
    // The stuck connection went with the server.
    stuck
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(matches!(stuck.read(&mut buf), Ok(0) | Err(_)));
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
}

#[test]
fn plain_http_share_urls_only_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let anywhere = ServerConfig {
        listen: SocketAddr::from(([0, 0, 0, 0], 0)),
        ..config(dir.path())
    };
    let err = server::spawn(anywhere.clone()).unwrap_err();
    assert!(matches!(err, ServerError::Config(_)), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("listening on 0.0.0.0:0 needs --public-url https://"),
        "{message}"
    );
    // `serve` refuses the same way, before binding anything.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = runtime
        .block_on(server::serve(anywhere.clone(), std::future::pending()))
        .unwrap_err();
    assert!(matches!(err, ServerError::Config(_)), "{err}");

    // With an https public URL any address will do.
    let server = server::spawn(ServerConfig {
        public_url: Some("https://share.example.com".into()),
        ..anywhere.clone()
    })
    .unwrap();
    let local = format!("http://127.0.0.1:{}", server.addr.port());
    let up = upload(&agent(), &local, b"x", "application/octet-stream");
    assert_eq!(up.url, format!("https://share.example.com/{}", up.code));
    drop(server);

    // A public URL must be https unless it is loopback.
    for url in [
        "http://share.example.com",
        "http://10.1.2.3:8787",
        "ftp://x.y",
    ] {
        let err = server::spawn(ServerConfig {
            public_url: Some(url.into()),
            ..config(dir.path())
        })
        .unwrap_err();
        assert!(matches!(err, ServerError::Config(_)), "{url}: {err}");
        assert!(err.to_string().contains("public_url"), "{url}: {err}");
    }
    let err = server::spawn(ServerConfig {
        public_url: Some("http://share.example.com".into()),
        ..anywhere
    })
    .unwrap_err();
    assert!(err.to_string().contains("https://"), "{err}");
    server::spawn(ServerConfig {
        public_url: Some("http://localhost:8787".into()),
        ..config(dir.path())
    })
    .unwrap()
    .shutdown()
    .unwrap();
}

#[test]
fn uploads_whose_url_clients_would_refuse_are_refused_first() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    for head in [
        // Reached through a name that is not loopback (a port forward, a plain proxy).
        "POST /upload HTTP/1.1\r\nHost: share.example.com\r\n",
        // Behind a TLS-terminating proxy that keeps the loopback Host.
        "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: https\r\n",
        "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nForwarded: for=1.2.3.4;proto=https\r\n",
    ] {
        let head = format!("{head}Content-Length: 1\r\nConnection: close\r\n\r\n");
        let reply = read_all(&mut raw(server.addr, &head, b"x"));
        assert!(reply.starts_with("HTTP/1.1 500"), "{head:?}: {reply:?}");
        assert!(reply.contains("--public-url"), "{reply:?}");
    }
    assert_eq!(blob_count(dir.path()), 0);
    let head = "POST /upload HTTP/1.1\r\nHost: localhost:1\r\nContent-Length: 1\r\nConnection: close\r\n\r\n";
    let reply = read_all(&mut raw(server.addr, head, b"x"));
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply:?}");
    assert!(reply.contains("\"url\":\"http://localhost:1/"), "{reply:?}");
}

/// The first run of exactly 32 lowercase hex characters in `text` (a whole share code).
fn find_code(text: &str) -> Option<&str> {
    let is_hex = |b: u8| matches!(b, b'0'..=b'9' | b'a'..=b'f');
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if is_hex(bytes[i]) {
            let start = i;
            while i < bytes.len() && is_hex(bytes[i]) {
                i += 1;
            }
            if i - start == 32 {
                return Some(&text[start..i]);
            }
        } else {
            i += 1;
        }
    }
    None
}

#[test]
fn logs_never_carry_a_whole_code() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        sweep_interval: Duration::from_millis(200),
        ..config(dir.path())
    })
    .unwrap();
    let agent = agent();

    // A record the store cannot read: the error names its path, code and all.
    let broken = upload(&agent, &server.url, b"x", "application/octet-stream");
    let record = record_path(dir.path(), &broken.code);
    std::fs::remove_file(&record).unwrap();
    std::fs::create_dir(&record).unwrap();
    let reply = get(&agent, &server.url, &broken.code);
    assert_eq!(reply.status, 500);
    assert!(!String::from_utf8_lossy(&reply.body).contains(&broken.code));
    assert_eq!(
        delete(
            &agent,
            &server.url,
            &broken.code,
            Some(&broken.delete_token)
        )
        .status,
        500
    );

    // An expired share whose blob the sweeper cannot remove.
    let stuck = upload_expiring(&agent, &server.url, b"y", 1);
    let blob = blob_path(dir.path(), &stuck.code);
    std::fs::remove_file(&blob).unwrap();
    std::fs::create_dir_all(blob.join("inside")).unwrap();
    let short = |code: &str| format!("{}…", &code[..6]);
    let swept = support::wait_until(Duration::from_secs(10), || {
        let logs = logged();
        logs.contains("sweep: removing failed") && logs.contains(&short(&stuck.code))
    });
    drop(server);

    let logs = logged();
    assert!(swept, "{logs}");
    assert!(logs.contains(&short(&broken.code)), "{logs}");
    assert!(logs.contains("store request failed"), "{logs}");
    for code in [&broken.code, &stuck.code] {
        assert!(!logs.contains(code.as_str()), "{code} in {logs}");
    }
    assert_eq!(find_code(&logs), None, "{logs}");
}

/// Reads until the server closes the connection or `bound` passes without a byte: the bytes
/// read, and whether the server closed it (end of stream or a reset, not the bound).
fn until_closed(stream: &mut TcpStream, bound: Duration) -> (Vec<u8>, bool) {
    stream.set_read_timeout(Some(bound)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (out, false);
            }
            Err(_) => return (out, true),
        }
    }
}

/// Sends `GET /healthz` on `stream` and reads its whole response (the connection stays open).
fn healthz_on(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "closed mid-response: {:?}",
            String::from_utf8_lossy(&out)
        );
        out.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap();
            if out.len() >= end + 4 + len {
                return text;
            }
        }
    }
}

/// A connection from a given loopback address (any of 127/8 reaches a 127.0.0.1 listener).
fn connect_from(local: [u8; 4], to: SocketAddr) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((local, 0))).unwrap();
        let stream = socket.connect(to).await.unwrap();
        let stream = stream.into_std().unwrap();
        stream.set_nonblocking(false).unwrap();
        stream
    })
}

#[test]
fn a_silent_socket_is_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        header_timeout: Duration::from_secs(1),
        ..config(dir.path())
    })
    .unwrap();
    let started = Instant::now();
    let mut silent = TcpStream::connect(server.addr).unwrap();
    let (bytes, closed) = until_closed(&mut silent, Duration::from_secs(15));
    let took = started.elapsed();
    eprintln!("silent socket closed after {took:?}");
    assert!(closed, "still open after {took:?}");
    assert!(bytes.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert!(support::wait_until(Duration::from_secs(5), || {
        logged().contains("request head not received in time")
    }));
    // A prompt client on a fresh connection is unaffected.
    assert!(healthz_on(&mut TcpStream::connect(server.addr).unwrap()).starts_with("HTTP/1.1 200"));
}

#[test]
fn a_head_sent_a_line_at_a_time_is_cut_at_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        header_timeout: Duration::from_secs(1),
        ..config(dir.path())
    })
    .unwrap();
    let started = Instant::now();
    let mut stream = TcpStream::connect(server.addr).unwrap();
    let mut writer = stream.try_clone().unwrap();
    // A new header line every 250 ms for 12 s: each one is progress, none ends the head.
    let trickle = std::thread::spawn(move || {
        let mut sent = 0;
        if writer.write_all(b"GET /healthz HTTP/1.1\r\n").is_err() {
            return sent;
        }
        for i in 0..48 {
            std::thread::sleep(Duration::from_millis(250));
            if writer
                .write_all(format!("X-Slow-{i}: y\r\n").as_bytes())
                .is_err()
            {
                break;
            }
            sent += 1;
        }
        sent
    });
    let (bytes, closed) = until_closed(&mut stream, Duration::from_secs(15));
    let took = started.elapsed();
    let lines = trickle.join().unwrap();
    eprintln!("slow head cut after {took:?} ({lines} header lines written)");
    assert!(closed, "still open after {took:?}");
    assert!(bytes.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(6),
        "{took:?}"
    );
    assert!(lines < 48, "every line was taken: {lines}");
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        header_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(3),
        ..config(dir.path())
    })
    .unwrap();
    let mut stream = TcpStream::connect(server.addr).unwrap();
    assert!(healthz_on(&mut stream).starts_with("HTTP/1.1 200"));
    // Idle longer than the header timeout but within the idle timeout: still usable.
    std::thread::sleep(Duration::from_millis(1800));
    assert!(healthz_on(&mut stream).starts_with("HTTP/1.1 200"));
    // Requests keep it alive well past the idle timeout counted from the accept.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(1000));
        assert!(healthz_on(&mut stream).starts_with("HTTP/1.1 200"));
    }
    let idle_from = Instant::now();
    let (bytes, closed) = until_closed(&mut stream, Duration::from_secs(15));
    let took = idle_from.elapsed();
    eprintln!("idle keep-alive connection closed after {took:?}");
    assert!(closed, "still open after {took:?}");
    assert!(bytes.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));
    assert!(
        took >= Duration::from_millis(2700) && took < Duration::from_secs(9),
        "{took:?}"
    );
    assert!(support::wait_until(Duration::from_secs(5), || {
        logged().contains("keep-alive connection idle too long")
    }));
}

#[test]
fn a_trickling_body_is_cut_with_408_at_the_body_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        body_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(30),
        ..config(dir.path())
    })
    .unwrap();
    let started = Instant::now();
    let mut stream = raw(server.addr, &upload_head(1000), &[1; 10]);
    let mut writer = stream.try_clone().unwrap();
    // 10 bytes every 200 ms: the 1000 bytes would take 20 s.
    let trickle = std::thread::spawn(move || {
        for _ in 0..60 {
            std::thread::sleep(Duration::from_millis(200));
            if writer.write_all(&[1; 10]).is_err() {
                break;
            }
        }
    });
    let (bytes, closed) = until_closed(&mut stream, Duration::from_secs(15));
    let took = started.elapsed();
    let reply = String::from_utf8_lossy(&bytes).into_owned();
    eprintln!("trickling body cut after {took:?}");
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
    assert!(reply.contains("request body timed out"), "{reply:?}");
    assert!(
        reply.to_ascii_lowercase().contains("connection: close"),
        "{reply:?}"
    );
    assert!(closed, "connection left open after the 408");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(8),
        "{took:?}"
    );
    drop(stream);
    trickle.join().unwrap();
    assert_eq!(blob_count(dir.path()), 0);
    // A body sent at once is within any body timeout.
    let up = upload(
        &agent(),
        &server.url,
        &random_bytes(256 * 1024),
        "application/octet-stream",
    );
    assert_eq!(get(&agent(), &server.url, &up.code).status, 200);
}

#[test]
fn silent_sockets_past_the_caps_do_not_starve_healthz() {
    let dir = tempfile::tempdir().unwrap();
    let per_ip = 8;
    let max = 16;
    let server = server::spawn(ServerConfig {
        // Long: it is the caps that must keep /healthz reachable here, not the timeout.
        header_timeout: Duration::from_secs(60),
        max_connections: max,
        max_connections_per_ip: per_ip,
        ..config(dir.path())
    })
    .unwrap();

    // Per address: 8 + 24 silent sockets from 127.0.0.1.
    let attack = per_ip + 24;
    let mut silent: Vec<TcpStream> = (0..attack)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    // The oldest is closed as soon as it is in the way of a newer one.
    let started = Instant::now();
    let (_, first_closed) = until_closed(&mut silent[0], Duration::from_secs(10));
    let first_closed_after = started.elapsed();
    assert!(first_closed);
    let asked = Instant::now();
    let reply = healthz_on(&mut TcpStream::connect(server.addr).unwrap());
    let latency = asked.elapsed();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply:?}");
    // The oldest were closed to make room; the newest per_ip - 1 are still open.
    let mut closed = 0;
    for (i, socket) in silent.iter_mut().enumerate() {
        let (bytes, was_closed) = until_closed(socket, Duration::from_millis(200));
        assert!(bytes.is_empty());
        assert_eq!(was_closed, i < attack - (per_ip - 1), "socket {i}");
        closed += usize::from(was_closed);
    }
    eprintln!(
        "per-address cap {per_ip}: {attack} silent sockets, {closed} evicted (the oldest \
         read EOF {first_closed_after:?} after the last connect); /healthz answered in \
         {latency:?}"
    );
    assert!(logged().contains("connection cap reached: closing this idle connection"));
    drop(silent);

    // Overall: silent sockets from many addresses fill every slot; a client from yet another
    // address still gets its answer.
    let mut spread: Vec<TcpStream> = (0..max + 8)
        .map(|i| connect_from([127, 0, 1, 1 + (i % 8) as u8], server.addr))
        .collect();
    let asked = Instant::now();
    let reply = healthz_on(&mut connect_from([127, 0, 2, 1], server.addr));
    let latency = asked.elapsed();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply:?}");
    let still_open = spread
        .iter_mut()
        .map(|s| until_closed(s, Duration::from_millis(200)).1)
        .filter(|closed| !closed)
        .count();
    eprintln!(
        "overall cap {max}: {} silent sockets over 8 addresses, {still_open} left open; \
         /healthz answered in {latency:?}",
        max + 8
    );
    assert_eq!(still_open, max - 1);
}

#[test]
fn past_a_cap_with_every_connection_busy_the_new_one_is_closed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        max_connections_per_ip: 2,
        body_timeout: Duration::from_secs(30),
        ..config(dir.path())
    })
    .unwrap();
    // Two uploads in the handlers, their bodies still coming: busy, so never evicted.
    let head = upload_head(1000).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    let mut busy: Vec<TcpStream> = (0..2).map(|_| raw(server.addr, &head, b"part")).collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let mut refused = TcpStream::connect(server.addr).unwrap();
    let _ = refused.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let (bytes, closed) = until_closed(&mut refused, Duration::from_secs(10));
    assert!(
        closed && bytes.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&bytes)
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(support::wait_until(Duration::from_secs(5), || {
        logged().contains("refusing the new one")
    }));
    // The busy ones were left alone: they finish their uploads.
    for stream in &mut busy {
        stream.write_all(&[0; 996]).unwrap();
        let reply = read_all(stream);
        assert!(reply.starts_with("HTTP/1.1 201"), "{reply:?}");
    }
    assert_eq!(blob_count(dir.path()), 2);
}

#[test]
fn a_client_that_stops_reading_a_response_is_cut_at_the_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        idle_timeout: Duration::from_secs(1),
        ..config(dir.path())
    })
    .unwrap();
    // Bigger than the socket buffers on both sides can hold.
    let size = 12 << 20;
    let up = upload(
        &agent(),
        &server.url,
        &random_bytes(size),
        "application/octet-stream",
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(64 * 1024).unwrap();
        let stream = socket
            .connect(server.addr)
            .await
            .unwrap()
            .into_std()
            .unwrap();
        stream.set_nonblocking(false).unwrap();
        stream
    });
    stream
        .write_all(format!("GET /{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", up.code).as_bytes())
        .unwrap();
    // Not reading: the server's writes stop making progress.
    std::thread::sleep(Duration::from_secs(4));
    let (bytes, closed) = until_closed(&mut stream, Duration::from_secs(15));
    eprintln!(
        "stalled reader: got {} of {size} body bytes before the close",
        bytes.len()
    );
    assert!(closed, "still open");
    assert!(
        bytes.len() < size,
        "the whole response arrived: {}",
        bytes.len()
    );
    assert!(support::wait_until(Duration::from_secs(5), || {
        let logs = logged();
        logs.contains("client stopped reading the response")
            || logs.contains("the end of a response not being read")
    }));

    // A client that reads slowly but steadily gets all of it, however long that takes.
    let mut slow = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(64 * 1024).unwrap();
        let stream = socket
            .connect(server.addr)
            .await
            .unwrap()
            .into_std()
            .unwrap();
        stream.set_nonblocking(false).unwrap();
        stream
    });
    slow.write_all(
        format!(
            "GET /{} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            up.code
        )
        .as_bytes(),
    )
    .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::with_capacity(size + 1024);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = slow.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        std::thread::sleep(Duration::from_millis(25));
    }
    let took = started.elapsed();
    eprintln!("steady slow reader: {} bytes in {took:?}", got.len());
    assert!(got.len() > size, "{} of {size}", got.len());
    assert!(
        took > Duration::from_secs(2),
        "not slow enough to test anything: {took:?}"
    );
}

#[test]
fn shutdown_closes_idle_connections_at_once_and_lets_a_request_in_flight_finish() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let addr = server.addr;
    let mut idle = TcpStream::connect(addr).unwrap();
    assert!(healthz_on(&mut idle).starts_with("HTTP/1.1 200"));
    let mut busy = raw(addr, &upload_head(1000), &[3; 500]);
    std::thread::sleep(Duration::from_millis(300));

    let stopping = std::thread::spawn(move || server.shutdown());
    // The idle connection goes first, while the upload is still waiting for its body.
    let (bytes, closed) = until_closed(&mut idle, Duration::from_secs(4));
    assert!(
        closed && bytes.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&bytes)
    );
    assert!(!stopping.is_finished());
    assert!(support::wait_until(Duration::from_secs(5), || {
        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
    }));
    // The request in flight completes within the grace period.
    busy.write_all(&[3; 500]).unwrap();
    let reply = read_all(&mut busy);
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply:?}");
    stopping.join().unwrap().unwrap();
    assert_eq!(blob_count(dir.path()), 1);
}

/// Each sync group's byte and object limits: a write past one is refused with 413 naming it,
/// before anything is stored (a batch as a whole); what was stored stays whole; another
/// group's writes go on against its own limits; a purge gives the room back.
#[test]
fn a_group_past_its_byte_or_object_limit_is_refused_and_nothing_is_half_written() {
    use freecode_remote::home_sync::{BatchItem, HostId, Kind, Remote, SyncKey};
    use freecode_remote::share::ClientError;
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        group_limits: server::GroupLimits {
            max_bytes: 5_000,
            max_objects: 6,
            requests_per_minute: 6_000,
        },
        ..config(dir.path())
    })
    .unwrap();
    let key = SyncKey::generate().unwrap();
    let remote = Remote::new(&server.url, None).unwrap().for_key(&key);
    let host = HostId::generate().unwrap();
    let log = key.log_id("séance");
    let record = |i: u64, n: usize| {
        key.seal(Kind::Session, &host, &log, i, &random_bytes(n))
            .unwrap()
    };
    let quota = |e: ClientError, limit: &str, max: u64| {
        let s = e.to_string();
        assert!(
            s.contains("413") && s.contains(limit) && s.contains(&max.to_string()),
            "{s}"
        );
    };
    // Bytes: three records of about 1 KB fit, a fourth of 1.5 KB does not.
    for i in 0..3 {
        remote
            .put_record(&log, &host, i, &record(i, 1_000))
            .unwrap();
    }
    let big = record(3, 1_500);
    quota(
        remote.put_record(&log, &host, 3, &big).unwrap_err(),
        "bytes",
        5_000,
    );
    let (got, next) = remote.get_records(&log, &host, 0).unwrap();
    assert_eq!((got.len(), next), (3, 3), "nothing of the refused record");
    for (i, r) in got.iter().enumerate() {
        assert_eq!(
            key.open(&host, &log, i as u64, r).unwrap().plaintext.len(),
            1_000
        );
    }
    // Objects: small records up to six objects; a batch of two with one place left is
    // refused whole.
    for i in 3..5 {
        remote.put_record(&log, &host, i, &record(i, 10)).unwrap();
    }
    let (r5, r6) = (record(5, 10), record(6, 10));
    let batch = [
        BatchItem::Record {
            log: &log,
            host: &host,
            index: 5,
            sealed: &r5,
        },
        BatchItem::Record {
            log: &log,
            host: &host,
            index: 6,
            sealed: &r6,
        },
    ];
    quota(remote.batch(&batch).unwrap_err(), "objects", 6);
    assert_eq!(
        remote.get_records(&log, &host, 0).unwrap().1,
        5,
        "neither stored"
    );
    remote.put_record(&log, &host, 5, &r5).unwrap();
    quota(
        remote.put_record(&log, &host, 6, &r6).unwrap_err(),
        "objects",
        6,
    );
    assert_eq!(remote.status().unwrap()[0].count, 6);
    // Another group is not held by this one's limits.
    let other = SyncKey::generate().unwrap();
    let theirs = Remote::new(&server.url, None).unwrap().for_key(&other);
    let olog = other.log_id("autre");
    let sealed = other.seal(Kind::Session, &host, &olog, 0, b"x").unwrap();
    theirs.put_record(&olog, &host, 0, &sealed).unwrap();
    // A purge gives the room back.
    remote.delete_log(&log).unwrap();
    remote
        .put_record(&log, &host, 0, &record(0, 3_000))
        .unwrap();
}

/// Each sync group's request rate: past it, 429 naming the limit with Retry-After and nothing
/// done; the client waits as told and goes on; another group is not slowed.
#[test]
fn a_group_past_its_request_rate_is_told_to_wait_and_the_client_waits() {
    use freecode_remote::home_sync::{Remote, SyncKey};
    let dir = tempfile::tempdir().unwrap();
    let server = server::spawn(ServerConfig {
        group_limits: server::GroupLimits {
            requests_per_minute: 60,
            ..server::GroupLimits::default()
        },
        ..config(dir.path())
    })
    .unwrap();
    let key = SyncKey::generate().unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let status = |k: &SyncKey| {
        agent
            .get(&format!(
                "{}/sync/v1/logs/{}/{}?from=0",
                server.url,
                k.log_id("s"),
                "0".repeat(32)
            ))
            .header(server::SYNC_CREDENTIAL_HEADER, k.credential())
            .call()
            .unwrap()
    };
    // Reads by a credential the server has never seen make no group: a write first.
    let remote = Remote::new(&server.url, None).unwrap().for_key(&key);
    remote
        .put_ring("0123456789abcdef", b"FCSK-not-checked-by-the-server")
        .unwrap();
    let mut refused = None;
    for _ in 0..70 {
        let mut r = status(&key);
        if r.status().as_u16() == 429 {
            let wait = r
                .headers()
                .get("retry-after")
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            let body = r.body_mut().read_to_string().unwrap();
            refused = Some((wait, body));
            break;
        }
        assert_eq!(r.status().as_u16(), 200);
    }
    let (wait, body) = refused.expect("refused within the burst");
    assert!(wait.parse::<u64>().unwrap() >= 1, "{wait}");
    assert!(
        body.contains("\"requestsPerMinute\"") && body.contains("60"),
        "{body}"
    );
    // Another group is not slowed.
    let other = SyncKey::generate().unwrap();
    Remote::new(&server.url, None)
        .unwrap()
        .for_key(&other)
        .put_ring("0123456789abcdef", b"FCSK-theirs")
        .unwrap();
    // The client waits as told, then gets its answer.
    let started = Instant::now();
    assert!(remote.get_ring("0123456789abcdef").unwrap().is_some());
    assert!(started.elapsed() >= Duration::from_millis(900), "it waited");
}

/// Without an API key, one address makes a few new groups an hour and the server a bounded
/// number in all (429 `new-groups`, with `Retry-After`); requests with credentials that name
/// no group are rate limited per address (429 `unknown-rate`); the groups already made, and
/// their members, are not slowed. With an API key, its holder makes groups freely.
#[test]
fn strangers_make_few_groups_and_unknown_credentials_are_rate_limited() {
    use freecode_remote::home_sync::{Remote, SyncKey};
    let dir = tempfile::tempdir().unwrap();
    let limits = server::StrangerLimits {
        new_groups_per_address: 5,
        new_groups_per_hour: 1_000,
        unknown_per_address_per_minute: 10,
    };
    let server = server::spawn(ServerConfig {
        stranger_limits: limits,
        ..config(dir.path())
    })
    .unwrap();
    let make = |url: &str, api: Option<String>, k: &SyncKey| {
        Remote::new(url, api)
            .unwrap()
            .for_key(k)
            .put_ring("0123456789abcdef", b"FCSK-a-ring")
    };
    let keys: Vec<SyncKey> = (0..6).map(|_| SyncKey::generate().unwrap()).collect();
    for k in &keys[..5] {
        make(&server.url, None, k).unwrap();
    }
    let e = make(&server.url, None, &keys[5]).unwrap_err().to_string();
    assert!(e.contains("429") && e.contains("new sync groups"), "{e}");
    // The groups made go on.
    make(&server.url, None, &keys[0]).unwrap();

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let status = |k: &SyncKey| {
        agent
            .get(&format!("{}/sync/v1/status", server.url))
            .header(server::SYNC_CREDENTIAL_HEADER, k.credential())
            .header("x-freecode-peer", "203.0.113.9")
            .call()
            .unwrap()
    };
    let mut refused = None;
    for _ in 0..12 {
        let mut r = status(&SyncKey::generate().unwrap());
        if r.status().as_u16() == 429 {
            let wait: u64 = r.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            refused = Some((wait, r.body_mut().read_to_string().unwrap()));
            break;
        }
        assert_eq!(r.status().as_u16(), 200);
    }
    let (wait, body) = refused.expect("unknown credentials are limited");
    assert!(wait >= 1 && body.contains("unknown-rate"), "{wait} {body}");
    // A member is not: its credential names its group.
    for _ in 0..20 {
        assert_eq!(status(&keys[1]).status().as_u16(), 200);
    }

    // With an API key, its holder decides who makes groups.
    let dir = tempfile::tempdir().unwrap();
    let keyed = server::spawn(ServerConfig {
        stranger_limits: limits,
        api_key: Some("operator-key".into()),
        ..config(dir.path())
    })
    .unwrap();
    for _ in 0..8 {
        make(
            &keyed.url,
            Some("operator-key".into()),
            &SyncKey::generate().unwrap(),
        )
        .unwrap();
    }
}
