//! The command line: a root [`Cli`] and one enum variant per command.

use std::path::PathBuf;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};

use crate::commands;

/// freecode: sessions, rollout logs and traces of the freecode coding agent.
#[derive(Debug, Parser)]
#[command(name = "freecode", version, about)]
pub struct Cli {
    /// The data directory [default: $FREECODE_HOME, else ~/.freecode]
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,

    /// When to colour output: auto (a terminal, unless NO_COLOR is set; CLICOLOR_FORCE or
    /// FORCE_COLOR force it), always, or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,

    /// Fewer messages on stderr: errors only.
    #[arg(long, short = 'q', global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// More messages on stderr: -v info, -vv debug, -vvv trace (beats FREECODE_LOG).
    #[arg(long, short = 'v', global = true, action = ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// `--color`: when output is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set; `CLICOLOR_FORCE`/`FORCE_COLOR` force it on.
    Auto,
    /// Always, even into a pipe.
    Always,
    /// Never.
    Never,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List, show, fork, delete, restore, compact, export and import sessions.
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
    /// Tokens and cost of every agent's billed requests, by day, week, month, session,
    /// project, agent or model (prices: LiteLLM's table, embedded).
    Usage(commands::usage::UsageArgs),
    /// Maintain the session index (`state/freecode.db`), derived from the files.
    #[command(subcommand)]
    Index(commands::index::IndexCommand),
    /// Run the agent on one prompt: an OpenAI-compatible endpoint, or the built-in scripted one.
    Run(commands::run::RunArgs),
    /// JSON-RPC 2.0 over stdio for front ends: the `session.*` methods.
    Serve(commands::serve::ServeArgs),
    /// A Model Context Protocol server over stdio: any agent searches and reads these
    /// sessions (read-only).
    Mcp(commands::mcp::McpArgs),
    /// Private shares you made: list them, revoke one.
    #[command(subcommand)]
    Share(commands::share::ShareCommand),
    /// Sync this home with your other machines, end to end encrypted (init, key, join, status, push, pull, now), and run the server.
    #[command(subcommand)]
    Sync(commands::sync::SyncCommand),
    /// The settings of config.json: list, get, set, path (the known keys and their defaults).
    #[command(subcommand)]
    Config(commands::config::ConfigCommand),
    /// Import other agents' sessions (Claude Code, …): `import AGENT [PATH …]`, `import --detect`.
    Import(commands::import::ImportArgs),
    /// Report leftovers, damage, links and loose modes in the home; `--fix` repairs them.
    Doctor(commands::doctor::DoctorArgs),
    /// Everything offline in one go, in a fresh home: a scripted agent run, the session list,
    /// its trace, and a share through an embedded server imported back.
    Demo(commands::demo::DemoArgs),
    /// Writes the JSON Schemas of the `--json` outputs (docs/schemas) into DIR.
    #[command(hide = true)]
    Schema(commands::schema::SchemaArgs),
    /// A local web viewer: sessions, search, transcripts, traces as waterfalls, stats
    /// (loopback only, a per-run token).
    Ui(commands::ui::UiArgs),
    /// Print the tab-completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions(commands::shell::CompletionsArgs),
    /// Write the manual pages: one per command into --dir, or freecode(1) to stdout.
    Man(commands::shell::ManArgs),
}

impl Cli {
    /// The log level when `FREECODE_LOG`/`RUST_LOG` say nothing: `info` for the share server,
    /// whose request log is its output, `warn` for everything else.
    pub fn default_log_level(&self) -> &'static str {
        match self.command {
            Command::Sync(_) => "info",
            _ => "warn",
        }
    }

    /// Whether the command may start a new home: the agent (`run`, `serve`), an import (and
    /// `mcp --watch`, which imports), the
    /// share server, the doctor (which reports on any path) and the demo (its own home). Every
    /// other command reads or changes what a home holds, so a missing home is a user error
    /// (a mistyped `--home`), never an empty one created on the way.
    fn may_start_home(&self) -> bool {
        matches!(
            self.command,
            Command::Run(_)
                | Command::Serve(_)
                | Command::Sync(_)
                | Command::Doctor(_)
                | Command::Config(_)
                | Command::Demo(_)
                | Command::Session(commands::session::SessionCommand::Import(_))
                | Command::Import(_)
        ) || matches!(&self.command, Command::Mcp(args) if args.writes())
    }

    /// The log level `-q`/`-v` ask for, which beats the environment; `None` without either.
    pub fn flag_log_level(&self) -> Option<&'static str> {
        match (self.quiet, self.verbose) {
            (true, _) => Some("error"),
            (false, 0) => None,
            (false, 1) => Some("info"),
            (false, 2) => Some("debug"),
            (false, _) => Some("trace"),
        }
    }

    /// Runs the parsed command.
    pub fn run(self) -> anyhow::Result<()> {
        // Generated from the command definitions: no home is needed, none is read.
        match self.command {
            Command::Completions(args) => return commands::shell::completions(args),
            Command::Man(args) => return commands::shell::man(args),
            Command::Schema(args) => return args.run(),
            _ => {}
        }
        // The demo takes only an explicit --home: it never writes into a real ~/.freecode.
        let explicit_home = self.home.clone();
        let home = freecode_store::Home::resolve(self.home.clone()).ok_or_else(|| {
            crate::UserError(
                "cannot find a home directory: set FREECODE_HOME or pass --home".into(),
            )
        })?;
        // A home someone else controls is refused before anything reads or writes it.
        // (The doctor examines such a home: reporting it is its job.)
        if !matches!(self.command, Command::Demo(_) | Command::Doctor(_)) {
            home.check()?;
        }
        if !self.may_start_home() && !home.root().exists() {
            return Err(crate::UserError(format!(
                "no freecode home at {}: start one with `freecode run PROMPT`, or bring in \
                 your other agents' sessions with `freecode import`; or point --home or \
                 FREECODE_HOME at an existing one (`freecode demo` tries everything in a \
                 temporary home)",
                home.root().display()
            ))
            .into());
        }
        match self.command {
            Command::Session(cmd) => cmd.run(&home),
            Command::Trace(args) => args.run(&home),
            Command::Replay(args) => args.run(&home),
            Command::Search(args) => commands::index::search(&home, args),
            Command::Stats(args) => commands::index::stats(&home, args),
            Command::Usage(args) => commands::usage::usage(&home, args),
            Command::Index(cmd) => cmd.run(&home),
            Command::Run(args) => args.run(&home),
            Command::Serve(args) => args.run(&home),
            Command::Mcp(args) => args.run(&home),
            Command::Share(cmd) => cmd.run(&home),
            Command::Sync(cmd) => cmd.run(&home),
            Command::Config(cmd) => cmd.run(&home),
            Command::Doctor(args) => args.run(&home),
            Command::Import(args) => args.run(&home),
            Command::Demo(args) => args.run(explicit_home),
            Command::Ui(args) => args.run(&home),
            // Answered above, before any home is resolved.
            Command::Schema(_) | Command::Completions(_) | Command::Man(_) => Ok(()),
        }
    }
}
