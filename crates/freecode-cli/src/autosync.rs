//! `sync.auto`: after a turn of `run` or `serve`, the home is synced in the background, so the
//! turn never waits for the network.
//!
//! The sync is a detached `freecode sync now --auto` (its own process group, so Ctrl+C at the
//! terminal does not stop it, and it outlives a one-shot `run`). It waits for any sync already
//! running and does nothing when another is already waiting (see [`freecode_ops::home_sync::auto`]).
//! What it did, or why it failed, is appended to `state/sync/auto.log` (0600, started afresh
//! past [`LOG_MAX`]); nothing of it reaches the turn's output.

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};

use freecode_store::{Home, fsutil};

/// The most `auto.log` grows to before it is started afresh.
const LOG_MAX: u64 = 1 << 20;

/// Starts the background sync if `sync.auto` is on and this home syncs; a failure to start it
/// is logged, never returned: the turn is done either way.
pub fn after_turn(home: &Home) {
    if let Err(e) = start(home) {
        tracing::warn!(error = %e, "sync.auto: could not start the background sync");
    }
}

fn start(home: &Home) -> anyhow::Result<()> {
    let config = home.read_config()?;
    if !freecode_ops::keys::lookup_bool(&config, "sync.auto").unwrap_or(false)
        || !freecode_ops::home_sync::is_set_up(home)
    {
        return Ok(());
    }
    let path = home.state_dir().join("sync").join("auto.log");
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() > LOG_MAX) {
        fsutil::remove_file(&path)?;
    }
    let log = fsutil::open_append(&path)?;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--home")
        .arg(home.root())
        .args(["sync", "now", "--auto"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()?;
    // Reaped when it ends (a long `serve` would collect zombies otherwise).
    std::thread::Builder::new()
        .name("sync-auto".into())
        .spawn(move || {
            let _ = child.wait();
        })?;
    Ok(())
}
