//! The command line: a root [`Cli`] and one enum variant per command.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::commands;

/// freecode: sessions, rollout logs and traces of the freecode coding agent.
#[derive(Debug, Parser)]
#[command(name = "freecode", version, about)]
pub struct Cli {
    /// The data directory [default: $FREECODE_HOME, else ~/.freecode]
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List, show, fork, delete, restore and compact sessions.
    #[command(subcommand)]
    Session(commands::session::SessionCommand),
    /// Show where a session's time went: model calls, tools, hangs (from its rollout log).
    Trace(commands::trace::TraceArgs),
    /// Print a session's turns and tool calls from its rollout log.
    Replay(commands::trace::ReplayArgs),
    /// Full-text search over every message and tool output, ranked, with snippets.
    Search(commands::index::SearchArgs),
    /// Turns, tool calls by tool (total and p95 duration), model time and tokens.
    Stats(commands::index::StatsArgs),
    /// Maintain the session index (`state/freecode.db`), derived from the files.
    #[command(subcommand)]
    Index(commands::index::IndexCommand),
}

impl Cli {
    /// Runs the parsed command.
    pub fn run(self) -> anyhow::Result<()> {
        let home = freecode_store::Home::resolve(self.home).ok_or_else(|| {
            crate::UserError(
                "cannot find a home directory: set FREECODE_HOME or pass --home".into(),
            )
        })?;
        match self.command {
            Command::Session(cmd) => cmd.run(&home),
            Command::Trace(args) => args.run(&home),
            Command::Replay(args) => args.run(&home),
            Command::Search(args) => commands::index::search(&home, args),
            Command::Stats(args) => commands::index::stats(&home, args),
            Command::Index(cmd) => cmd.run(&home),
        }
    }
}
