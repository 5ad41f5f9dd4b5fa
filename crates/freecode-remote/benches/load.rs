//! Load test for the share server: N client threads loop upload-then-download of random
//! bundles (1 KiB–256 KiB) against one server on loopback, verify every download, and print
//! throughput and latency figures.
//!
//! ```text
//! LOAD_CLIENTS=16 LOAD_SECS=10 cargo bench -p freecode-remote --bench load
//! ```
//!
//! - `LOAD_CLIENTS`: concurrent client threads (default 16, at most 256).
//! - `LOAD_SECS`: how long to run (default 10, at most 300).
//! - `LOAD_STORE`: `file` (default: a fresh temporary directory) or any store spec the server
//!   accepts, e.g. `s3://bucket/prefix` configured through `AWS_*` (point it at a local S3
//!   server only).
//!
//! Exits non-zero if any download differs from its upload, or any request fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use freecode_remote::blob::StoreSpec;
use freecode_remote::server::{self, ServerConfig};

const MIN_SIZE: usize = 1024;
const MAX_SIZE: usize = 256 * 1024;

fn env_num(name: &str, default: u64, max: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if (1..=max).contains(&n) => n,
            _ => {
                eprintln!("{name}={v:?} must be an integer in 1..={max}");
                std::process::exit(2);
            }
        },
        Err(_) => default,
    }
}

/// What one client thread measured.
#[derive(Default)]
struct Tally {
    upload_us: Vec<u32>,
    download_us: Vec<u32>,
    bytes_up: u64,
    bytes_down: u64,
    upload_errors: u64,
    download_errors: u64,
    mismatches: u64,
    first_error: Option<String>,
}

impl Tally {
    fn merge(&mut self, other: Self) {
        self.upload_us.extend(other.upload_us);
        self.download_us.extend(other.download_us);
        self.bytes_up += other.bytes_up;
        self.bytes_down += other.bytes_down;
        self.upload_errors += other.upload_errors;
        self.download_errors += other.download_errors;
        self.mismatches += other.mismatches;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    fn error(&mut self, what: String) {
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }
}

/// xorshift64: cheap, varied bytes (the server sees them as opaque anyway).
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn fill(state: &mut u64, buf: &mut Vec<u8>, len: usize) {
    buf.clear();
    while buf.len() < len {
        buf.extend_from_slice(&next(state).to_le_bytes());
    }
    buf.truncate(len);
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

fn client(base: String, deadline: Instant, seed: u64) -> Tally {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut tally = Tally::default();
    let mut state = seed | 1;
    let mut bundle = Vec::with_capacity(MAX_SIZE);
    while Instant::now() < deadline {
        let size = MIN_SIZE + (next(&mut state) as usize) % (MAX_SIZE - MIN_SIZE + 1);
        fill(&mut state, &mut bundle, size);

        let started = Instant::now();
        let uploaded = agent
            .post(format!("{base}/upload"))
            .header("content-type", "application/octet-stream")
            .send(&bundle[..]);
        let code = match uploaded {
            Ok(mut response) if response.status() == 201 => {
                let body = response.body_mut().read_to_string();
                tally.upload_us.push(micros(started.elapsed()));
                tally.bytes_up += size as u64;
                let json: Option<serde_json::Value> =
                    body.ok().and_then(|b| serde_json::from_str(&b).ok());
                match json.and_then(|j| j["code"].as_str().map(str::to_owned)) {
                    Some(code) => code,
                    None => {
                        tally.upload_errors += 1;
                        tally.error("upload: no code in the response".into());
                        continue;
                    }
                }
            }
            Ok(response) => {
                tally.upload_errors += 1;
                tally.error(format!("upload: status {}", response.status()));
                continue;
            }
            Err(e) => {
                tally.upload_errors += 1;
                tally.error(format!("upload: {e}"));
                continue;
            }
        };

        let started = Instant::now();
        match agent.get(format!("{base}/{code}")).call() {
            Ok(mut response) if response.status() == 200 => {
                match response
                    .body_mut()
                    .with_config()
                    .limit(MAX_SIZE as u64 * 2)
                    .read_to_vec()
                {
                    Ok(body) => {
                        tally.download_us.push(micros(started.elapsed()));
                        tally.bytes_down += body.len() as u64;
                        if body != bundle {
                            tally.mismatches += 1;
                            tally.error(format!(
                                "download of {}… differs from its upload",
                                &code[..6]
                            ));
                        }
                    }
                    Err(e) => {
                        tally.download_errors += 1;
                        tally.error(format!("download body: {e}"));
                    }
                }
            }
            Ok(response) => {
                tally.download_errors += 1;
                tally.error(format!("download: status {}", response.status()));
            }
            Err(e) => {
                tally.download_errors += 1;
                tally.error(format!("download: {e}"));
            }
        }
    }
    tally
}

fn percentile_ms(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1]) / 1000.0
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; a filter argument that is not ours means "not me".
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && a != "load")
    {
        return ExitCode::SUCCESS;
    }
    let clients = env_num("LOAD_CLIENTS", 16, 256);
    let secs = env_num("LOAD_SECS", 10, 300);
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = match std::env::var("LOAD_STORE").ok().filter(|s| s != "file") {
        None => StoreSpec::File(dir.path().join("store")),
        Some(spec) => match spec.parse() {
            Ok(spec) => spec,
            Err(e) => {
                eprintln!("LOAD_STORE: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let store_label = store.to_string();
    let handle = server::spawn(ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        store,
        // Every client thread connects from 127.0.0.1.
        max_connections_per_ip: ServerConfig::default().max_connections,
        ..ServerConfig::default()
    })
    .expect("starting the share server");

    println!(
        "load: {clients} clients x {secs}s against {} (store {store_label}), bundles {}–{} KiB",
        handle.url,
        MIN_SIZE / 1024,
        MAX_SIZE / 1024
    );
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let base = handle.url.clone();
            let seed =
                0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(i + 1) ^ started.elapsed().as_nanos() as u64;
            std::thread::spawn(move || client(base, deadline, seed))
        })
        .collect();
    let mut total = Tally::default();
    for thread in threads {
        total.merge(thread.join().expect("client thread panicked"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    handle.shutdown().expect("server shutdown");

    total.upload_us.sort_unstable();
    total.download_us.sort_unstable();
    let ups = total.upload_us.len();
    let downs = total.download_us.len();
    let mb = |bytes: u64| bytes as f64 / 1e6 / elapsed;
    println!("elapsed            {elapsed:.2} s");
    println!(
        "requests/s         {:.1} ({ups} uploads + {downs} downloads)",
        (ups + downs) as f64 / elapsed
    );
    println!(
        "upload             {:.1} req/s  {:.1} MB/s  p50 {:.2} ms  p99 {:.2} ms",
        ups as f64 / elapsed,
        mb(total.bytes_up),
        percentile_ms(&total.upload_us, 50.0),
        percentile_ms(&total.upload_us, 99.0)
    );
    println!(
        "download           {:.1} req/s  {:.1} MB/s  p50 {:.2} ms  p99 {:.2} ms",
        downs as f64 / elapsed,
        mb(total.bytes_down),
        percentile_ms(&total.download_us, 50.0),
        percentile_ms(&total.download_us, 99.0)
    );
    println!(
        "errors             upload {}  download {}  mismatches {}",
        total.upload_errors, total.download_errors, total.mismatches
    );
    if let Some(first) = &total.first_error {
        println!("first error        {first}");
    }
    let failed =
        total.mismatches > 0 || total.upload_errors > 0 || total.download_errors > 0 || ups == 0;
    if failed {
        eprintln!("load: FAILED");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
