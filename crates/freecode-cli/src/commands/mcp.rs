//! `freecode mcp`: the Model Context Protocol server over stdio ([`freecode_mcp`]): any agent
//! searches and reads these sessions, read-only, bounded and paged.

use clap::Args;
use freecode_store::Home;

/// `freecode mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {}

impl McpArgs {
    /// Serves MCP on stdin/stdout until the client closes stdin.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        Ok(freecode_mcp::serve_stdio(home)?)
    }
}
