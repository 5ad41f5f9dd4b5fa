//! Helpers the benchmarks share: where temp data goes, timing, formatting, peak memory.
//!
//! Included by each bench with `#[path = "common/mod.rs"] mod common;`; each uses a subset.
#![allow(dead_code)]

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The benches' result type.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// A directory for the bench's temp data on the real disk (the target dir), never tmpfs.
pub fn bench_base(name: &str) -> Res<PathBuf> {
    let base = match option_env!("CARGO_TARGET_TMPDIR") {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("CARGO_TARGET_TMPDIR") {
            Some(d) => PathBuf::from(d),
            None => PathBuf::from("target/bench-tmp"),
        },
    }
    .join(name);
    fs::create_dir_all(&base)?;
    Ok(fs::canonicalize(&base)?)
}

pub fn fs_type(path: &Path) -> String {
    let Ok(mounts) = fs::read_to_string("/proc/mounts") else {
        return "unknown".to_owned();
    };
    let mut best = (0, "unknown".to_owned());
    for line in mounts.lines() {
        let mut it = line.split_whitespace();
        let (Some(dev), Some(mp), Some(ty)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if path.starts_with(mp) && mp.len() >= best.0 {
            best = (mp.len(), format!("{ty} ({dev} on {mp})"));
        }
    }
    best.1
}

pub fn settle() {
    let _ = Command::new("sync").status();
}

pub fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

pub fn time<T>(f: impl FnOnce() -> Res<T>) -> Res<(Duration, T)> {
    let t = Instant::now();
    let v = f()?;
    Ok((t.elapsed(), v))
}

pub fn fmt_dur(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.2} µs", s * 1e6)
    } else {
        format!("{:.0} ns", s * 1e9)
    }
}

pub fn open_append(path: &Path) -> Res<File> {
    Ok(OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?)
}

pub fn vm_hwm_kib() -> Res<u64> {
    let status = fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .ok_or("no VmHWM in /proc/self/status")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or("bad VmHWM line")?
        .parse()?)
}
