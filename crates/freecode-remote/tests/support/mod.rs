//! Helpers shared by the share-server tests: an HTTP agent that reports 4xx/5xx as plain
//! responses, and small request wrappers.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::time::Duration;

use freecode_remote::server::{DELETE_TOKEN_HEADER, EXPIRES_IN_HEADER};

/// An agent for tests: statuses are data, not errors; bounded timeouts.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// A response, read in full.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: not JSON ({e}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

pub fn read(mut response: ureq::http::Response<ureq::Body>) -> Reply {
    let status = response.status().as_u16();
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let content_type = headers
        .iter()
        .find(|(n, _)| n == "content-type")
        .map(|(_, v)| v.clone());
    let body = response
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_vec()
        .unwrap();
    Reply {
        status,
        content_type,
        headers,
        body,
    }
}

/// An upload's answer.
#[derive(Debug, Clone)]
pub struct Uploaded {
    pub url: String,
    pub code: String,
    pub expires_at: u64,
    pub delete_token: String,
}

/// `POST /upload` with extra headers; the raw reply.
pub fn post(
    agent: &ureq::Agent,
    base: &str,
    body: &[u8],
    content_type: &str,
    extra: &[(&str, &str)],
) -> Reply {
    let mut request = agent
        .post(format!("{base}/upload"))
        .header("content-type", content_type);
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    read(request.send(body).unwrap())
}

/// Uploads and expects a 201.
pub fn upload(agent: &ureq::Agent, base: &str, body: &[u8], content_type: &str) -> Uploaded {
    upload_with(agent, base, body, content_type, &[])
}

/// Uploads with extra headers and expects a 201.
pub fn upload_with(
    agent: &ureq::Agent,
    base: &str,
    body: &[u8],
    content_type: &str,
    extra: &[(&str, &str)],
) -> Uploaded {
    let reply = post(agent, base, body, content_type, extra);
    assert_eq!(
        reply.status,
        201,
        "upload: {:?}",
        String::from_utf8_lossy(&reply.body)
    );
    let json = reply.json();
    Uploaded {
        url: json["url"].as_str().unwrap().to_owned(),
        code: json["code"].as_str().unwrap().to_owned(),
        expires_at: json["expiresAt"].as_u64().unwrap(),
        delete_token: json["deleteToken"].as_str().unwrap().to_owned(),
    }
}

/// Uploads with a lifetime in seconds.
pub fn upload_expiring(agent: &ureq::Agent, base: &str, body: &[u8], secs: u64) -> Uploaded {
    upload_with(
        agent,
        base,
        body,
        "application/octet-stream",
        &[(EXPIRES_IN_HEADER, &secs.to_string())],
    )
}

/// `GET <base>/<path>`.
pub fn get(agent: &ureq::Agent, base: &str, path: &str) -> Reply {
    read(agent.get(format!("{base}/{path}")).call().unwrap())
}

/// `DELETE <base>/<code>` with an optional token.
pub fn delete(agent: &ureq::Agent, base: &str, code: &str, token: Option<&str>) -> Reply {
    let mut request = agent.delete(format!("{base}/{code}"));
    if let Some(token) = token {
        request = request.header(DELETE_TOKEN_HEADER, token);
    }
    read(request.call().unwrap())
}

/// `len` random bytes.
pub fn random_bytes(len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    getrandom::fill(&mut out).unwrap();
    out
}

/// Polls `cond` every 50 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two servers over one store act as one: an upload through `a` downloads through `b`, a
/// revoke through `b` (with the right token only) is gone on both.
pub fn assert_replicas_act_as_one(a_url: &str, b_url: &str, size: usize) {
    let agent = agent();
    let bundle = random_bytes(size);
    let up = upload(&agent, a_url, &bundle, "application/octet-stream");
    let reply = get(&agent, b_url, &up.code);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, bundle);

    assert_eq!(delete(&agent, b_url, &up.code, Some("nope")).status, 403);
    assert_eq!(
        delete(&agent, b_url, &up.code, Some(&up.delete_token)).status,
        204
    );
    assert_eq!(get(&agent, a_url, &up.code).status, 404);
    assert_eq!(get(&agent, b_url, &up.code).status, 404);
}
