//! Redaction speed: `cargo bench -p freecode-core --bench redact`.
//!
//! Scans 1 MiB texts shaped like transcripts — clean prose and code, text dense with
//! `key:`/`token` words that are not secrets, base64 (image data), and text with a secret every
//! 4 KiB — and prints the median time of one `redact` and the throughput, beside a raw memchr
//! scan of the same bytes (one pass counting newlines: what reading them at all costs).

#![allow(missing_docs, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use freecode_core::redact::redact;

const MIB: usize = 1 << 20;

fn repeat_to_mib(unit: &str) -> String {
    let mut s = String::with_capacity(MIB + unit.len());
    while s.len() < MIB {
        s.push_str(unit);
    }
    s
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn bench(name: &str, text: &str) {
    // `cargo bench … -- base64` runs only the texts whose name contains `base64`.
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-'))
        && !name.contains(&filter)
    {
        return;
    }
    let (_, findings) = redact(text);
    let runs: Vec<Duration> = (0..21)
        .map(|_| {
            let t = Instant::now();
            let out = redact(text);
            std::hint::black_box(out);
            t.elapsed()
        })
        .collect();
    let m = median(runs);
    let raw = median(
        (0..21)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(memchr::memchr_iter(b'\n', text.as_bytes()).count());
                t.elapsed()
            })
            .collect(),
    );
    let mib = text.len() as f64 / MIB as f64;
    println!(
        "{name:<24} {:>8.2} ms/MiB  {:>8.1} MiB/s  {:>6} findings   raw memchr {:>8.1} MiB/s",
        m.as_secs_f64() * 1e3 / mib,
        mib / m.as_secs_f64(),
        findings.len(),
        mib / raw.as_secs_f64()
    );
}

fn main() {
    let prose = repeat_to_mib(
        "I read src/session/mod.rs: the writer appends one line per message and fsyncs at the \
         end of a turn. fn append(&mut self, msg: &StoredMessage) -> Result<()> { self.log.write_all(&line)?; }\n",
    );
    let keyish = repeat_to_mib(
        "max_tokens: 4096\ninput_tokens = 120\ntoken_type: bearer\npassword_min_length: 8\n\
         api_key: str\nSECRET_NAME=prod-db\nauthor: someone\nthe token count is 42\n",
    );
    let base64 = repeat_to_mib(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg",
    );
    let mut dense = String::new();
    while dense.len() < MIB {
        dense.push_str(&"ordinary tool output line, nothing to see here\n".repeat(80));
        dense.push_str("export GITHUB_TOKEN=ghp_Zq8rT1vXw0yB3nC5mD7fG9hJ2kL4pQ6sU8wA\n");
    }
    // The rule set compiles on first use (about 40 ms): not part of a scan.
    let _ = redact("warm up");
    println!("redact(text), median of 21 runs, 1 MiB each");
    bench("clean prose and code", &prose);
    bench("key/token look-alikes", &keyish);
    bench("base64 image data", &base64);
    bench("a secret every ~4 KiB", &dense);
}
