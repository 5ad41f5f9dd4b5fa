//! `freecode import <agent> [PATH …]` and `freecode import --detect`: other agents' sessions
//! brought into this home ([`freecode_import::importer`]).
//!
//! Human output: one line per session on stdout (`imported`, `updated`, `replaced`,
//! `unchanged`, `skipped`, `failed`, then the id, the title and why it was skipped or failed), a summary and every issue as
//! `file:line: message` on stderr. `--json`: [`freecode_ops::types::ImportReport`] /
//! [`freecode_ops::types::DetectReport`] ([`freecode_ops::import`]). `import --watch [AGENT …]`
//! follows the agents' directories ([`freecode_ops::import::watch`]) until SIGINT or SIGTERM
//! (exit 0): one line per batch that changed something on stdout (`--json`: one
//! [`freecode_ops::types::ImportReport`] per line), issues and failures on stderr.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use freecode_import::source::Agent;
use freecode_ops::human::clean_line;
use freecode_ops::import::ImportRequest;
use freecode_ops::import::watch::{WatchEvent, WatchRequest};
use freecode_ops::scope::{parse_since, project_scope};
use freecode_store::Home;

use crate::render::{plural, print_json};

/// `freecode import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The agent whose sessions to import: claude-code, codex, gemini-cli, opencode, goose
    /// [default: every agent whose sessions are on this machine, as `--detect` lists them].
    #[arg(value_name = "AGENT")]
    pub agent: Option<String>,
    /// Files or directories to import from [default: the agent's own locations]; with
    /// `--watch`, more agents.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Only sessions active since then: a duration (`3d`, `12h`) or a date (`2026-01-31`).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Show what would be imported (and how many secrets an export would redact); write
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The project directory of sessions whose source names none (Gemini CLI chats without a
    /// projects.json entry, goose sessions without a working_dir); without it they are skipped.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// For each agent: where its sessions are on this machine and what an import would bring.
    #[arg(long, conflicts_with_all = ["agent", "paths", "since", "dry_run", "project"])]
    pub detect: bool,
    /// Follow the agents' directories (`import --watch [AGENT …]`, default every agent) and
    /// import each change as it is written, until Ctrl+C or SIGTERM: one line per batch that
    /// changed something (with `--json`, one JSON object per line).
    #[arg(long, conflicts_with_all = ["detect", "since", "dry_run"])]
    pub watch: bool,
}

impl ImportArgs {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        if self.detect {
            return detect(self.json);
        }
        if self.watch {
            return self.watch(home);
        }
        let Some(name) = self.agent.clone() else {
            return self.every_agent(home);
        };
        let agent = freecode_ops::import::agent(&name)?;
        self.one_agent(home, agent)
    }

    /// `freecode import` with no agent: every agent whose sessions are on this machine.
    fn every_agent(&self, home: &Home) -> anyhow::Result<()> {
        // Where each agent keeps its sessions, not what they hold: the imports read them.
        let agents = freecode_ops::import::agents_here();
        if agents.is_empty() {
            return Err(crate::UserError(
                "no other agent's sessions were found on this machine (`freecode import \
                 --detect` says where each is looked for); name an agent and a path to import \
                 from elsewhere: `freecode import claude-code PATH`"
                    .into(),
            )
            .into());
        }
        if self.json {
            // One JSON document: the reports, an agent each.
            let mut reports = Vec::new();
            for agent in agents {
                reports.push(freecode_ops::import::run(home, &self.request(agent)?)?);
            }
            return print_json(&reports);
        }
        for agent in agents {
            self.one_agent(home, agent)?;
        }
        Ok(())
    }

    /// What to import of `agent`.
    fn request(&self, agent: Agent) -> anyhow::Result<ImportRequest> {
        let now = freecode_store::now_ms();
        let since = match &self.since {
            Some(s) => Some(parse_since(s, now)?),
            None => None,
        };
        let project = match &self.project {
            Some(dir) => Some(project_scope(&dir.to_string_lossy())?),
            None => None,
        };
        Ok(ImportRequest {
            agent,
            paths: self.paths.clone(),
            since,
            dry_run: self.dry_run,
            project,
            now,
        })
    }

    /// Imports `agent`'s sessions (from `paths`, else its own locations).
    fn one_agent(&self, home: &Home, agent: Agent) -> anyhow::Result<()> {
        let out = freecode_ops::import::run(home, &self.request(agent)?)?;
        if self.json {
            print_json(&out)?;
        } else {
            let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
            for s in &out.sessions {
                let would = if self.dry_run
                    && !["unchanged", "skipped", "failed"].contains(&s.action.as_str())
                {
                    "would be "
                } else {
                    ""
                };
                let mut line = format!("{would}{:<9} {}", s.action, s.session_id);
                if !s.title.is_empty() {
                    line.push_str(&format!("  {}", clean_line(&s.title)));
                }
                if s.added_messages > 0 {
                    line.push_str(&format!(
                        "  (+{})",
                        plural(s.added_messages as u64, "message", "messages")
                    ));
                }
                if let Some(reason) = &s.reason {
                    line.push_str(&format!("  [{}]", clean_line(reason)));
                }
                writeln!(stdout, "{line}")?;
                for f in &s.findings {
                    writeln!(
                        stdout,
                        "    {}  {}  {}",
                        clean_line(&f.kind),
                        clean_line(&f.location),
                        clean_line(&f.preview)
                    )?;
                }
                if s.redactions > s.findings.len() {
                    writeln!(stdout, "    … and {} more", s.redactions - s.findings.len())?;
                }
            }
            stdout.flush()?;
            drop(stdout);
            // A line per session whose project needed a guess (or had no evidence at all).
            for s in &out.sessions {
                let Some(p) = s.placed.as_ref().filter(|p| p.how != "hash") else {
                    continue;
                };
                let what = if p.how == "unplaced" {
                    "no project found: placed in"
                } else {
                    "project guessed:"
                };
                eprintln!(
                    "{}: {what} {} ({}); `freecode session move {} --project DIR` places it elsewhere",
                    s.path.display(),
                    clean_line(&p.project),
                    clean_line(&p.why),
                    s.session_id
                );
            }
            for issue in &out.issues {
                match issue.line {
                    Some(line) => eprintln!(
                        "{}:{line}: {}",
                        issue.path.display(),
                        clean_line(&issue.message)
                    ),
                    None => eprintln!("{}: {}", issue.path.display(), clean_line(&issue.message)),
                }
            }
            let s = &out.summary;
            let mut summary = format!(
                "{}{} of {agent}: {} imported, {} updated, {} replaced, {} unchanged, {} skipped{}; {} {}; {} read{}",
                if self.dry_run {
                    "dry run, nothing written: "
                } else {
                    ""
                },
                plural(s.units as u64, "source file", "source files"),
                s.imported,
                s.updated,
                s.replaced,
                s.unchanged,
                s.skipped,
                if s.failed > 0 {
                    format!(", {} failed", s.failed)
                } else {
                    String::new()
                },
                plural(s.messages, "message", "messages"),
                if self.dry_run {
                    "would be written"
                } else {
                    "written"
                },
                bytes(s.bytes_read),
                if s.failed_units > 0 {
                    format!(
                        "; {} could not be read",
                        plural(s.failed_units as u64, "source file", "source files")
                    )
                } else {
                    String::new()
                },
            );
            if self.dry_run {
                summary.push_str(&format!(
                    "; {} an export would redact",
                    plural(s.redactions, "secret", "secrets")
                ));
                if !s.redactions_by_rule.is_empty() {
                    summary.push_str(&format!(
                        " ({})",
                        crate::commands::share::by_rule(&s.redactions_by_rule)
                    ));
                }
            }
            if s.guessed > 0 {
                summary.push_str(&format!(
                    "; {} placed by a guess",
                    plural(s.guessed, "session", "sessions")
                ));
            }
            if s.unplaced > 0 {
                summary.push_str(&format!("; {} unplaced", s.unplaced));
            }
            if !out.issues.is_empty() {
                summary.push_str(&format!(
                    "; {}",
                    plural(out.issues.len() as u64, "issue", "issues")
                ));
            }
            eprintln!("{summary}");
        }
        Ok(())
    }
}

impl ImportArgs {
    /// `import --watch [AGENT …]`: the positionals are agents.
    fn watch(self, home: &Home) -> anyhow::Result<()> {
        let names: Vec<String> = self
            .agent
            .iter()
            .cloned()
            .chain(self.paths.iter().map(|p| p.to_string_lossy().into_owned()))
            .collect();
        let agents = watched_agents(&names)?;
        let project = match &self.project {
            Some(dir) => Some(project_scope(&dir.to_string_lossy())?),
            None => None,
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // A second signal while a batch is still being written ends the process at once.
            signal_hook::flag::register_conditional_shutdown(signal, 1, stop.clone())?;
            signal_hook::flag::register(signal, stop.clone())?;
        }
        let json = self.json;
        let mut failed = None;
        freecode_ops::import::watch::watch(
            home,
            &WatchRequest::new(agents, project),
            &stop,
            &mut |event| {
                if let Err(e) = show_watch_event(event, json) {
                    // stdout closed (a pipe whose reader left): nothing more to say to anyone.
                    failed = Some(e);
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            },
        )?;
        match failed {
            Some(e) if !is_broken_pipe(&e) => Err(e),
            _ => Ok(()),
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

/// The agents `names` name; none: every agent.
pub fn watched_agents(names: &[String]) -> anyhow::Result<Vec<Agent>> {
    if names.is_empty() {
        return Ok(Agent::ALL.to_vec());
    }
    let mut agents = Vec::new();
    for name in names {
        let agent = freecode_ops::import::agent(name).map_err(|e| {
            freecode_ops::Error::Invalid(format!(
                "{e} (with --watch, name agents only: each is followed at its own locations, \
                 set by CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME, XDG_DATA_HOME or HOME)"
            ))
        })?;
        if !agents.contains(&agent) {
            agents.push(agent);
        }
    }
    Ok(agents)
}

/// Prints what the watcher did: a batch that changed something on stdout (one line, or one
/// JSON object with `--json`), the rest on stderr.
fn show_watch_event(event: WatchEvent, json: bool) -> anyhow::Result<()> {
    match event {
        WatchEvent::Watching {
            agent,
            root,
            watched,
            waiting,
        } => {
            if waiting {
                tracing::info!(
                    "{agent}: {} does not exist yet; watching {} for it",
                    root.display(),
                    watched.display()
                );
            } else {
                tracing::info!("{agent}: watching {}", root.display());
            }
        }
        WatchEvent::Failed { agent, error } => {
            eprintln!(
                "{agent}: import failed: {}",
                clean_line(&freecode_ops::error::chain(&error))
            );
        }
        WatchEvent::Imported(report) => {
            let Some(line) = batch_line(&report) else {
                tracing::debug!("{}: nothing new", report.agent);
                return Ok(());
            };
            let mut stdout = std::io::stdout().lock();
            if json {
                serde_json::to_writer(&mut stdout, &report)?;
                writeln!(stdout)?;
            } else {
                writeln!(stdout, "{line}")?;
            }
            stdout.flush()?;
            for issue in &report.issues {
                match issue.line {
                    Some(n) => eprintln!(
                        "{}:{n}: {}",
                        issue.path.display(),
                        clean_line(&issue.message)
                    ),
                    None => eprintln!("{}: {}", issue.path.display(), clean_line(&issue.message)),
                }
            }
        }
    }
    Ok(())
}

/// One line for a watched batch that changed something (`codex: 1 imported, 2 updated; +5
/// messages`), `None` when nothing did.
pub fn batch_line(report: &freecode_ops::types::ImportReport) -> Option<String> {
    let s = &report.summary;
    let counts: Vec<String> = [
        (s.imported, "imported"),
        (s.updated, "updated"),
        (s.replaced, "replaced"),
        (s.skipped, "skipped"),
        (s.failed, "failed"),
        (s.failed_units as u64, "unreadable"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if counts.is_empty() {
        return None;
    }
    let titles: Vec<String> = report
        .sessions
        .iter()
        .filter(|x| x.action != "unchanged")
        .take(3)
        .map(|x| {
            let short: String = x.session_id.chars().take(8).collect();
            if x.title.is_empty() {
                short
            } else {
                format!("{short} {}", clean_line(&x.title))
            }
        })
        .collect();
    Some(format!(
        "{}: {}; {} written: {}",
        report.agent,
        counts.join(", "),
        plural(s.messages, "message", "messages"),
        titles.join(", ")
    ))
}

fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1 << 20))
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / f64::from(1 << 10))
    } else {
        plural(n, "byte", "bytes")
    }
}

fn detect(json: bool) -> anyhow::Result<()> {
    let (report, issues) = freecode_ops::import::detect();
    if json {
        return print_json(&report);
    }
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    for a in &report.agents {
        let line = if a.roots.is_empty() {
            format!("{:<12} nothing found", a.agent)
        } else {
            format!(
                "{:<12} {}, {}, {} in {}",
                a.agent,
                plural(a.sessions as u64, "session", "sessions"),
                plural(a.messages as u64, "message", "messages"),
                bytes(a.bytes),
                a.roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        writeln!(stdout, "{line}")?;
    }
    stdout.flush()?;
    for issue in &issues {
        eprintln!("{}", clean_line(issue));
    }
    Ok(())
}
