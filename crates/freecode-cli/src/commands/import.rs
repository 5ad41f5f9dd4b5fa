//! `freecode import <agent> [PATH …]` and `freecode import --detect`: other agents' sessions
//! brought into this home ([`freecode_import::importer`]).
//!
//! Human output: one line per session on stdout (`imported`, `updated`, `replaced`,
//! `unchanged`, `skipped`, `failed`, then the id, the title and why it was skipped or failed), a summary and every issue as
//! `file:line: message` on stderr. `--json`: [`freecode_ops::types::ImportReport`] /
//! [`freecode_ops::types::DetectReport`] ([`freecode_ops::import`]).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use freecode_ops::human::clean_line;
use freecode_ops::import::ImportRequest;
use freecode_ops::scope::{parse_since, project_scope};
use freecode_store::Home;

use crate::render::{plural, print_json};

/// `freecode import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The agent whose sessions to import: claude-code, codex, gemini-cli, opencode, goose.
    #[arg(value_name = "AGENT", required_unless_present = "detect")]
    pub agent: Option<String>,
    /// Files or directories to import from [default: the agent's own locations].
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
}

impl ImportArgs {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        if self.detect {
            return detect(self.json);
        }
        let agent = freecode_ops::import::agent(&self.agent.clone().unwrap_or_default())?;
        let now = freecode_store::now_ms();
        let since = match &self.since {
            Some(s) => Some(parse_since(s, now)?),
            None => None,
        };
        let project = match &self.project {
            Some(dir) => Some(project_scope(&dir.to_string_lossy())?),
            None => None,
        };
        let out = freecode_ops::import::run(
            home,
            &ImportRequest {
                agent,
                paths: self.paths.clone(),
                since,
                dry_run: self.dry_run,
                project,
                now,
            },
        )?;
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
                "{}{} of {agent}: {} imported, {} updated, {} replaced, {} unchanged, {} skipped{}; {} written; {} read{}",
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
