//! Share server over a filesystem store: the HTTP contract end to end, through real sockets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use freecode_sync::blob::StoreSpec;
use freecode_sync::server::{self, EXPIRES_IN_HEADER, ServerConfig, ServerHandle};
use support::{agent, delete, get, post, random_bytes, upload, upload_expiring, upload_with};

fn config(dir: &Path) -> ServerConfig {
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
    let agent = agent();

    let bundle = random_bytes(64 * 1024);
    let up = upload(&agent, &a.url, &bundle, "application/octet-stream");
    let reply = get(&agent, &b.url, &up.code);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, bundle);

    assert_eq!(delete(&agent, &b.url, &up.code, Some("nope")).status, 403);
    assert_eq!(
        delete(&agent, &b.url, &up.code, Some(&up.delete_token)).status,
        204
    );
    assert_eq!(get(&agent, &a.url, &up.code).status, 404);
    assert_eq!(get(&agent, &b.url, &up.code).status, 404);
}
