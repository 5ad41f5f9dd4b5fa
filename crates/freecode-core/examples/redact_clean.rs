//! Counts what redaction would change in text that holds no secrets: every finding in the text
//! files below the directories given (source code and prose, e.g. the crates of the cargo
//! registry), up to a byte budget, each listed as `path:line kind preview`.
//!
//! `cargo run --release -p freecode-core --example redact_clean -- [--mb 40] DIR…`
//!
//! Files are read in path order, each whole (up to 1 MiB; larger ones, and ones that are not
//! UTF-8, are skipped), so the same directories and budget give the same count.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_dir() {
            files(&p, out);
        } else if m.is_file() && m.len() <= 1 << 20 {
            out.push(p);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let mut budget: u64 = 40 << 20;
    let mut dirs = Vec::new();
    while let Some(a) = args.next() {
        if a == "--mb" {
            budget = args
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .expect("--mb N")
                << 20;
        } else {
            dirs.push(PathBuf::from(a));
        }
    }
    assert!(!dirs.is_empty(), "usage: redact_clean [--mb 40] DIR…");
    let mut paths = Vec::new();
    for d in &dirs {
        files(d, &mut paths);
    }
    let (mut read, mut count) = (0u64, 0usize);
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for p in paths {
        if read >= budget {
            break;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        read += text.len() as u64;
        for f in freecode_core::redact::scan(&text) {
            count += 1;
            *by_kind.entry(f.kind.name()).or_default() += 1;
            let line = text[..f.start].matches('\n').count() + 1;
            println!(
                "{}:{line} {} {}",
                p.display(),
                f.kind.name(),
                freecode_core::redact::preview(&text[f.range()])
            );
        }
    }
    println!("{count} findings in {:.1} MB", read as f64 / 1e6);
    for (k, n) in by_kind {
        println!("  {k}: {n}");
    }
}
