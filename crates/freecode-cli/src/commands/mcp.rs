//! `freecode mcp`: the Model Context Protocol server over stdio ([`freecode_mcp`]): any agent
//! searches and reads these sessions, read-only, bounded and paged. With `--watch [AGENT …]`
//! the same process also follows the agents' directories on a thread and imports each change
//! ([`freecode_ops::import::watch`]), so what it serves is current; the watcher's lines go to
//! the log (stderr), never to the protocol's stdout. `--allow-handoff` adds the one tool that
//! writes (a hand-back into another agent's home).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use freecode_ops::import::watch::{WatchEvent, WatchRequest};
use freecode_store::Home;

/// `freecode mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Also import other agents' sessions as they are written (every agent, or those named:
    /// `--watch claude-code,codex`), as `freecode import --watch` does.
    #[arg(long, value_name = "AGENT", num_args = 0.., value_delimiter = ',')]
    pub watch: Option<Vec<String>>,
    /// Also offer `handoff_session`, which writes a new transcript into Claude Code's, Codex's
    /// or Gemini CLI's home: without it the server only reads.
    #[arg(long)]
    pub allow_handoff: bool,
}

impl McpArgs {
    /// Whether the command writes (an import), and so may start a home.
    pub fn writes(&self) -> bool {
        self.watch.is_some()
    }

    /// Serves MCP on stdin/stdout until the client closes stdin.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        let opts = freecode_mcp::Options {
            allow_handoff: self.allow_handoff,
        };
        let Some(names) = &self.watch else {
            return Ok(freecode_mcp::serve_stdio(home, opts)?);
        };
        let agents = crate::commands::import::watched_agents(names)?;
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = {
            let home = home.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("import-watch".into())
                .spawn(move || {
                    freecode_ops::import::watch::watch(
                        &home,
                        &WatchRequest::new(agents, None),
                        &stop,
                        &mut log_watch_event,
                    )
                })?
        };
        let served = freecode_mcp::serve_stdio(home, opts);
        // The batch in progress is finished, then the watcher returns.
        stop.store(true, Ordering::SeqCst);
        match watcher.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("the import watcher stopped: {e}"),
            Err(_) => tracing::warn!("the import watcher panicked"),
        }
        Ok(served?)
    }
}

fn log_watch_event(event: WatchEvent) {
    match event {
        WatchEvent::Watching {
            agent,
            root,
            waiting,
            ..
        } => tracing::info!(
            "{agent}: {} {}",
            if waiting { "waiting for" } else { "watching" },
            root.display()
        ),
        WatchEvent::Imported(report) => {
            if let Some(line) = crate::commands::import::batch_line(&report) {
                tracing::info!("{line}");
            }
        }
        WatchEvent::Failed { agent, error } => {
            tracing::warn!(
                "{agent}: import failed: {}",
                freecode_ops::error::chain(&error)
            );
        }
    }
}
