//! `freecode doctor [--fix] [--json]`: report what crashes and older tools left in the home
//! (leftover directories, torn tails, garbage journals, corrupt metas, links, loose modes, a
//! damaged index), then repair it on request. See `freecode_store::doctor`.

use clap::Args;
use freecode_ops::human::clean_line;
use freecode_store::Home;
use freecode_store::doctor::FindingKind;

use crate::UserError;
use crate::render::{Style, plural, print_json, print_line};

/// `freecode doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Repair what can be repaired safely (nothing a running process holds is touched).
    #[arg(long)]
    fix: bool,
    /// The report as JSON: `{"sessions", "findings": [{kind, path, detail, fixed}], "unresolved"}`.
    #[arg(long)]
    json: bool,
}

/// Loose-mode lines shown before the rest are counted.
const LOOSE_SHOWN: usize = 5;

fn kind_name(k: FindingKind) -> &'static str {
    match k {
        FindingKind::Leftover => "leftover",
        FindingKind::TornTail => "torn tail",
        FindingKind::BadJournal => "bad journal",
        FindingKind::StaleTemp => "stale temp",
        FindingKind::CorruptMeta => "corrupt meta",
        FindingKind::WrongType => "wrong type",
        FindingKind::Symlink => "link",
        FindingKind::LooseMode => "loose mode",
        FindingKind::Unsafe => "unsafe",
        FindingKind::InUse => "in use",
        FindingKind::Index => "index",
    }
}

impl DoctorArgs {
    /// Runs the examination (and the repairs with `--fix`). Exit 1 when a problem remains.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        let report = freecode_ops::doctor::examine(home, self.fix)?;
        let unresolved = report.unresolved;
        if self.json {
            print_json(&report)?;
        } else {
            let style = Style::stdout();
            // A copied tree has a loose mode on every entry: show a few, count the rest.
            let mut loose = 0usize;
            for f in &report.findings {
                if f.kind == FindingKind::LooseMode {
                    loose += 1;
                    if loose > LOOSE_SHOWN {
                        continue;
                    }
                }
                let mark = if f.fixed {
                    style.green("fixed")
                } else if f.kind == FindingKind::InUse {
                    style.dim("note ")
                } else {
                    style.red("found")
                };
                print_line(&format!(
                    "{mark} {:<12} {}: {}",
                    kind_name(f.kind),
                    clean_line(&f.path.display().to_string()),
                    clean_line(&f.detail)
                ))?;
            }
            if loose > LOOSE_SHOWN {
                print_line(&format!(
                    "      … and {} more loose modes (--json lists every one)",
                    loose - LOOSE_SHOWN
                ))?;
            }
            let examined = plural(report.sessions as u64, "session", "sessions");
            let summary = match (report.findings.len(), unresolved) {
                (0, _) => format!("{examined} examined; all well"),
                (_, 0) => format!("{examined} examined; nothing left to fix"),
                (_, n) => format!(
                    "{examined} examined; {}",
                    plural(n as u64, "problem", "problems")
                ),
            };
            print_line(&summary)?;
        }
        if unresolved > 0 {
            let hint = if self.fix {
                "what remains needs a hand (see the report)"
            } else {
                "run `freecode doctor --fix` to repair"
            };
            return Err(UserError(format!(
                "{} found; {hint}",
                plural(unresolved as u64, "problem", "problems")
            ))
            .into());
        }
        Ok(())
    }
}
