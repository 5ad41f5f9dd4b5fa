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

/// Runs `f` three times and returns the median wall time.
pub fn median3(f: &dyn Fn() -> Res<()>) -> Res<Duration> {
    let mut v = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed());
    }
    Ok(median(&mut v))
}

/// [`median3`] for a call that returns its answer: the time until it is returned, with freeing
/// it left out (as in the original's timings, whose answer its GC frees later, if ever).
pub fn median3_kept<T>(f: &dyn Fn() -> Res<T>) -> Res<Duration> {
    let mut v = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let answer = f()?;
        v.push(t.elapsed());
        drop(std::hint::black_box(answer));
    }
    Ok(median(&mut v))
}

/// The original's figures from a run of its own code now (`run-bench.sh`).
pub struct Original {
    /// Its JSON results.
    pub results: serde_json::Value,
    /// Where its data lives (`BENCH_DIR`).
    pub bench_dir: PathBuf,
    /// The `SIZE` it ran at.
    pub size: &'static str,
}

impl Original {
    /// One benchmark's result, `Null` when absent.
    pub fn result(&self, bench: &str) -> serde_json::Value {
        self.results["results"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["bench"] == bench))
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    }
}

/// Runs the original's `run-bench.sh` on `benches` (`SIZE=1`, or `0.1` when quick; `RUNS=3`)
/// and returns its results; `None` when `FREECODE_BENCH_NO_ORIGINAL` is set or there is no
/// `node` on PATH. The results go to a file of this process's own (`BENCH_OUT`), not
/// `$BENCH_DIR/results-<SIZE>.json`, which another run may be writing at the same time.
pub fn run_original(quick: bool, benches: &str) -> Res<Option<Original>> {
    if std::env::var_os("FREECODE_BENCH_NO_ORIGINAL").is_some() {
        eprintln!("  original skipped: FREECODE_BENCH_NO_ORIGINAL is set");
        return Ok(None);
    }
    if !Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("  original skipped: no node on PATH");
        return Ok(None);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::env::var_os("FREECODE_ORIGINAL_BENCH").map_or_else(
        || manifest.join("../../../shared/reference/original/run-bench.sh"),
        PathBuf::from,
    );
    let size = if quick { "0.1" } else { "1" };
    let bench_dir = std::env::var_os("BENCH_DIR")
        .map_or_else(|| PathBuf::from("/tmp/fc-bench-ref"), PathBuf::from);
    let out_json = std::env::temp_dir().join(format!(
        "fc-orig-{}-{}.json",
        benches.replace(',', "-"),
        std::process::id()
    ));
    let status = Command::new(&script)
        .env("SIZE", size)
        .env("RUNS", "3")
        .env("BENCHES", benches)
        .env("BENCH_DIR", &bench_dir)
        .env("BENCH_OUT", &out_json)
        .status()?;
    if !status.success() {
        return Err(format!("{} failed: {status}", script.display()).into());
    }
    let results: serde_json::Value = serde_json::from_slice(&fs::read(&out_json)?)?;
    let _ = fs::remove_file(&out_json);
    Ok(Some(Original {
        results,
        bench_dir,
        size,
    }))
}

/// The release `freecode` binary (`cargo build --release -p freecode-cli` beforehand).
pub fn release_cli() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/freecode"),
        |d| Path::new(&d).join("release/freecode"),
    )
}

/// A program (the release CLI on `home`, or a bench's own child mode) as a whole process under
/// `/usr/bin/time`, three times: the median wall time (timed here, to the microsecond: `time`'s
/// own `%e` counts in 10 ms steps; the start of `time` itself, under a millisecond, is in it)
/// and the median peak RSS in KiB.
pub fn time_cli(cli: &Path, home: Option<&Path>, args: &[&str]) -> Res<(Duration, u64)> {
    time_cli_each(cli, home, args, &mut || Ok(()))
}

/// [`time_cli`], with `before` run (untimed) before each of the three runs.
pub fn time_cli_each(
    cli: &Path,
    home: Option<&Path>,
    args: &[&str],
    before: &mut dyn FnMut() -> Res<()>,
) -> Res<(Duration, u64)> {
    let (mut times, mut peaks) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        before()?;
        let mut cmd = Command::new("/usr/bin/time");
        cmd.args(["-f", "%M"]).arg(cli);
        if let Some(home) = home {
            cmd.arg("--home").arg(home);
        }
        let started = Instant::now();
        let out = cmd
            .args(args)
            .stdout(std::process::Stdio::null())
            .output()?;
        let took = started.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("{} {args:?} failed: {err}", cli.display()).into());
        }
        let last = err.lines().last().unwrap_or("");
        let kib: u64 = last.trim().parse()?;
        times.push(took);
        peaks.push(kib);
    }
    peaks.sort_unstable();
    Ok((median(&mut times), peaks[peaks.len() / 2]))
}
