//! Other agents' sessions brought into a home ([`freecode_import::importer`]): `import AGENT
//! [PATH …]` and `import --detect`, answered as [`ImportReport`] and [`DetectReport`]; the
//! agents' directories followed and imported as they change: [`watch`].

pub mod watch;

use std::path::PathBuf;

use freecode_import::importer::{self, Action, Options};
use freecode_import::source::Agent;
use freecode_store::Home;

use crate::error::{Error, Result};
use crate::types::{
    DetectReport, DetectedAgent, ImportIssue, ImportReport, ImportSummary, ImportedItem,
};

fn env_var(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name)
}

/// The agent named `name` (`claude-code`, `codex`, `gemini-cli`, `opencode`, `goose`).
pub fn agent(name: &str) -> Result<Agent> {
    Agent::from_name(name).ok_or_else(|| {
        // `claude`, `gemini`, `open`: the agent whose name it begins, or holds.
        let lower = name.to_ascii_lowercase();
        let near: Vec<&str> = Agent::ALL
            .iter()
            .map(|a| a.name())
            .filter(|n| !lower.is_empty() && (n.starts_with(&lower) || n.contains(&lower)))
            .collect();
        let hint = match near.as_slice() {
            [one] => format!(" (did you mean {one}?)"),
            _ => String::new(),
        };
        Error::Invalid(format!(
            "unknown agent {name:?}{hint}: one of {}",
            Agent::ALL.map(Agent::name).join(", ")
        ))
    })
}

/// The agents whose own locations exist on this machine (what `freecode import` with no agent
/// imports), found without reading a session.
pub fn agents_here() -> Vec<Agent> {
    Agent::ALL
        .into_iter()
        .filter(|a| !importer::roots_here(*a, &env_var).is_empty())
        .collect()
}

/// What an import of another agent's sessions reads.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// The agent.
    pub agent: Agent,
    /// Files or directories to read; empty: the agent's own locations that exist here.
    pub paths: Vec<PathBuf>,
    /// Only sessions active since then, ms.
    pub since: Option<i64>,
    /// Write nothing; say what would be done (and how many secrets an export would redact).
    pub dry_run: bool,
    /// The project of sessions whose source names none (a path made absolute by
    /// [`crate::scope::project_scope`]); without it they are skipped.
    pub project: Option<String>,
    /// The time of the import, ms.
    pub now: i64,
}

/// Imports what `req` names into `home`.
pub fn run(home: &Home, req: &ImportRequest) -> Result<ImportReport> {
    let agent = req.agent;
    let roots = if req.paths.is_empty() {
        let roots = freecode_import::default_roots(agent, &env_var);
        let found: Vec<PathBuf> = roots.iter().filter(|r| r.exists()).cloned().collect();
        if found.is_empty() {
            return Err(Error::NotFound(format!(
                "no {agent} sessions at {}: pass a PATH",
                roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        found
    } else {
        for p in &req.paths {
            if std::fs::symlink_metadata(p).is_err() {
                return Err(Error::NotFound(format!(
                    "{}: no such file or directory",
                    p.display()
                )));
            }
        }
        // Absolute, so `importedFrom.path` names the file from anywhere (links kept).
        req.paths
            .iter()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
            .collect()
    };
    run_roots(home, req, &roots)
}

/// Imports `req`'s agent from `roots` (paths that exist, absolute) into `home`.
pub(crate) fn run_roots(
    home: &Home,
    req: &ImportRequest,
    roots: &[PathBuf],
) -> Result<ImportReport> {
    let agent = req.agent;
    let store = crate::sessions::open(home)?;
    let report = importer::run(
        &store,
        agent,
        roots,
        &Options {
            since: req.since,
            dry_run: req.dry_run,
            now: req.now,
            // The user's `--project`, from where they stand, in normal form.
            fallback_project: req.project.as_deref().map(|p| {
                let abs = std::path::absolute(p).unwrap_or_else(|_| p.into());
                let abs = abs.to_string_lossy();
                freecode_core::project_key::normalize_absolute(&abs)
                    .unwrap_or_else(|| abs.into_owned())
            }),
            // A Gemini CLI chat's project named only by its hash is looked for among the
            // directories this machine works in: from here up, and the other agents' records.
            project_hints: Some(freecode_import::projects::ProjectHints::of_machine(
                std::env::current_dir().ok(),
                &env_var,
            )),
        },
    )
    .map_err(|e| Error::from(e).context("import failed"))?;
    Ok(report_of(agent, req.dry_run, &report))
}

fn report_of(agent: Agent, dry_run: bool, r: &importer::Report) -> ImportReport {
    let mut summary = ImportSummary {
        units: r.units,
        unchanged_units: r.unchanged_units,
        failed_units: r.failed_units,
        imported: 0,
        updated: 0,
        replaced: 0,
        unchanged: 0,
        skipped: 0,
        failed: 0,
        guessed: 0,
        unplaced: 0,
        messages: 0,
        bytes_read: r.bytes_read,
        redactions: 0,
        redactions_by_rule: Default::default(),
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
                Action::Failed => summary.failed += 1,
            }
            summary.messages += s.added_messages as u64;
            match s.placed.as_ref().map(|p| p.how) {
                Some("guess") => summary.guessed += 1,
                Some("unplaced") => summary.unplaced += 1,
                _ => {}
            }
            summary.redactions += s.redactions as u64;
            for (rule, n) in &s.redaction_rules {
                *summary.redactions_by_rule.entry(rule.clone()).or_default() += *n as u64;
            }
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
                redactions_by_rule: s.redaction_rules.clone(),
                findings: s.findings.clone(),
                last_activity: s.last_activity,
                reason: s.reason.clone(),
                placed: s.placed.as_ref().map(|p| crate::types::ImportPlacement {
                    project: p.project.clone(),
                    how: p.how.to_owned(),
                    why: p.why.clone(),
                }),
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

/// For each agent: where its sessions are on this machine and what an import would bring,
/// and what could not be read on the way (for a person: each issue's text).
pub fn detect() -> (DetectReport, Vec<String>) {
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
    (report, issues.iter().map(ToString::to_string).collect())
}
