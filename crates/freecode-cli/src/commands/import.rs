//! `freecode import <agent> [PATH …]` and `freecode import --detect`: other agents' sessions
//! brought into this home ([`freecode_import::importer`]).
//!
//! Human output: one line per session on stdout (`imported`, `updated`, `replaced`,
//! `unchanged`, `skipped`, then the id and title), a summary and every issue as
//! `file:line: message` on stderr. `--json`: [`crate::ops::ImportReport`] /
//! [`crate::ops::DetectReport`].

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use freecode_import::importer::{self, Action, Options};
use freecode_import::source::Agent;
use freecode_store::{Home, SessionStore};

use crate::UserError;
use crate::ops::{
    DetectReport, DetectedAgent, ImportIssue, ImportReport, ImportSummary, ImportedItem,
};
use crate::render::{plural, print_json};
use crate::sanitize::clean_line;

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

fn env_var(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name)
}

impl ImportArgs {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        if self.detect {
            return detect(self.json);
        }
        let name = self.agent.clone().unwrap_or_default();
        let agent = Agent::from_name(&name).ok_or_else(|| {
            UserError(format!(
                "unknown agent {name:?}: one of {}",
                Agent::ALL.map(Agent::name).join(", ")
            ))
        })?;
        let now = freecode_store::now_ms();
        let since = match &self.since {
            Some(s) => Some(crate::commands::index::parse_since(s, now)?),
            None => None,
        };
        let roots = if self.paths.is_empty() {
            let roots = freecode_import::default_roots(agent, &env_var);
            let found: Vec<PathBuf> = roots.iter().filter(|r| r.exists()).cloned().collect();
            if found.is_empty() {
                return Err(UserError(format!(
                    "no {agent} sessions at {}: pass a PATH",
                    roots
                        .iter()
                        .map(|r| r.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .into());
            }
            found
        } else {
            for p in &self.paths {
                if std::fs::symlink_metadata(p).is_err() {
                    return Err(
                        UserError(format!("{}: no such file or directory", p.display())).into(),
                    );
                }
            }
            // Absolute, so `importedFrom.path` names the file from anywhere (links kept).
            self.paths
                .iter()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
                .collect()
        };
        let store = SessionStore::open(home.clone())?;
        let report = importer::run(
            &store,
            agent,
            &roots,
            &Options {
                since,
                dry_run: self.dry_run,
                now,
                fallback_project: match &self.project {
                    Some(dir) => Some(crate::commands::index::project_scope(
                        &dir.to_string_lossy(),
                    )?),
                    None => None,
                },
            },
        )
        .context("import failed")?;
        let out = to_ops(agent, self.dry_run, &report);
        if self.json {
            print_json(&out)?;
        } else {
            let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
            for s in &out.sessions {
                let would = if self.dry_run && s.action != "unchanged" && s.action != "skipped" {
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
                "{}{} of {agent}: {} imported, {} updated, {} replaced, {} unchanged, {} skipped; {} written; {} read",
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
                plural(s.messages, "message", "messages"),
                bytes(s.bytes_read),
            );
            if self.dry_run {
                summary.push_str(&format!(
                    "; {} an export would redact",
                    plural(s.redactions, "secret", "secrets")
                ));
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

fn to_ops(agent: Agent, dry_run: bool, r: &importer::Report) -> ImportReport {
    let mut summary = ImportSummary {
        units: r.units,
        unchanged_units: r.unchanged_units,
        imported: 0,
        updated: 0,
        replaced: 0,
        unchanged: 0,
        skipped: 0,
        messages: 0,
        bytes_read: r.bytes_read,
        redactions: 0,
    };
    let sessions = r
        .sessions
        .iter()
        .map(|s| {
            match s.action {
                Action::Imported => summary.imported += 1,
                Action::Updated => summary.updated += 1,
                Action::Replaced => summary.replaced += 1,
                Action::Unchanged => summary.unchanged += 1,
                Action::Skipped => summary.skipped += 1,
            }
            summary.messages += s.added_messages as u64;
            summary.redactions += s.redactions as u64;
            ImportedItem {
                session_id: s.id.clone(),
                source_id: s.source_id.clone(),
                path: s.path.clone(),
                action: s.action.name().to_owned(),
                title: s.title.clone(),
                parent_id: s.parent_id.clone(),
                messages: s.messages,
                added_messages: s.added_messages,
                events: s.events,
                redactions: s.redactions,
                last_activity: s.last_activity,
                reason: s.reason.clone(),
            }
        })
        .collect();
    ImportReport {
        agent: agent.name().to_owned(),
        dry_run,
        sessions,
        summary,
        issues: r
            .issues
            .iter()
            .map(|i| ImportIssue {
                path: i.path.clone(),
                line: i.line,
                message: i.message.clone(),
            })
            .collect(),
    }
}

fn detect(json: bool) -> anyhow::Result<()> {
    let mut issues = Vec::new();
    let found = importer::detect(&env_var, &mut issues);
    let report = DetectReport {
        agents: found
            .into_iter()
            .map(|d| DetectedAgent {
                agent: d.agent.name().to_owned(),
                roots: d.roots,
                sessions: d.sessions,
                messages: d.messages,
                bytes: d.bytes,
            })
            .collect(),
    };
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
        eprintln!("{}", clean_line(&issue.to_string()));
    }
    Ok(())
}
