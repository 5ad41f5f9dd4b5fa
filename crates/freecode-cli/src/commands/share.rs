//! Sharing: `freecode session export|import` and `freecode share list|revoke` (the server they
//! talk to is `freecode sync serve`, in [`super::sync`]).
//!
//! Export redacts known secret formats, then (by default) encrypts the bundle with a fresh key
//! that only the printed URL's fragment carries; `--dry-run` shows what would be redacted and
//! sends nothing. Every share made is recorded in `shares.jsonl` with its delete token, so it
//! can be revoked even after the session is purged. Import validates everything before it
//! writes, and writes a new session.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use freecode_core::SessionId;
use freecode_ops::human::clean_line;
use freecode_ops::scope::parse_expiry;
use freecode_ops::sessions::resolve_id;
use freecode_ops::share::{self, ExportRequest, ImportRequest};
use freecode_ops::types::DryRun;
use freecode_store::{Home, SessionStore};

use crate::progress::Feedback;
use crate::render::{Style, local_time, plural, print_json, print_line};
use freecode_ops::Progress as _;

/// `session export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Session id (or a unique prefix of one).
    id: String,
    /// Share server base URL [default: syncEndpoint of config.json].
    #[arg(long, value_name = "URL", conflicts_with = "file")]
    to: Option<String>,
    /// Write the bundle to a file instead (no value: remote/<id>.json in the home; `-`: stdout;
    /// a FIFO or device is written into, never replaced; the directory must exist). A name
    /// ending in `.zst` is written zstd-compressed.
    #[arg(long, value_name = "F", num_args = 0..=1)]
    file: Option<Option<PathBuf>>,
    /// Share lifetime: 30m, 12h, 7d … [default: syncUrlExpiryDays of config.json, else 7d].
    #[arg(long, value_name = "DURATION", value_parser = parse_expiry)]
    expires: Option<Duration>,
    /// Include the rollout log (every model call and tool output).
    #[arg(long)]
    include_rollout: bool,
    /// Include the project's memory entries.
    #[arg(long)]
    include_memories: bool,
    /// Send the seed's plain `{meta, messages}` JSON (unencrypted) to a server that expects it
    /// (a `--file` bundle is plain JSON always: taken, and changes nothing).
    #[arg(long)]
    plain: bool,
    /// Show what would be redacted, and where; send and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// `session import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A share URL (with its #key) or a bundle file.
    source: String,
    /// Also import the bundle's memory entries (never replacing an existing one).
    #[arg(long)]
    with_memories: bool,
    /// The local project the session belongs to (its tools work there) [default: the current
    /// directory]. The sender's project path is kept as provenance only.
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// `freecode share …`.
#[derive(Debug, Subcommand)]
pub enum ShareCommand {
    /// List the shares made from this home.
    List(ShareListArgs),
    /// Revoke a share: the server deletes it (works after the session is purged).
    Revoke(RevokeArgs),
}

/// `share list`.
#[derive(Debug, Args)]
pub struct ShareListArgs {
    /// Print JSON (delete tokens left out).
    #[arg(long)]
    json: bool,
}

/// `share revoke`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The share URL (the #key part is not needed).
    url: String,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

impl ExportArgs {
    fn request(&self) -> ExportRequest {
        ExportRequest {
            to: self.to.clone(),
            expires: self.expires,
            include_rollout: self.include_rollout,
            include_memories: self.include_memories,
            plain: self.plain,
        }
    }
}

/// Runs `session export`.
pub fn export(store: &SessionStore, a: ExportArgs) -> anyhow::Result<()> {
    let id = resolve_id(store, &a.id)?;
    if a.dry_run || a.file.is_some() {
        return export_locally(store, &id, a);
    }
    let mut feedback = Feedback::new("sharing");
    let shared = share::share(store, &id, &a.request(), &mut feedback);
    feedback.finish();
    let shared = shared.with_context(|| format!("export of {id} failed"))?;
    let exported = shared.exported;
    if let Some(e) = shared.unrecorded {
        // The share is live: never lose its URL or the only way to revoke it.
        print_line(&exported.url)?;
        eprintln!(
            "delete token (revoke with: curl -X DELETE -H 'x-freecode-delete-token: <token>' {}): {}",
            shared.revoke_url,
            exported.delete_token.as_deref().unwrap_or("(none given)")
        );
        return Err(anyhow::Error::from(e).context(format!(
            "the share is live but {} could not record it; keep the URL and delete token printed above",
            share::log_path(store.home()).display()
        )));
    }
    note_redactions(exported.redactions);
    if a.json {
        return print_json(&exported);
    }
    print_line(&exported.url)?;
    let expiry = exported
        .expires_at
        .map_or_else(|| "never (server gave no expiry)".to_owned(), local_time);
    eprintln!(
        "{} share; expires {expiry}; revoke with: freecode share revoke {}",
        if exported.encrypted {
            "encrypted (the key is only in the URL after '#')"
        } else {
            "PLAIN, unencrypted"
        },
        shared.revoke_url
    );
    Ok(())
}

/// `--dry-run` (what would leave, and what would be redacted) and `--file` (the local bundle).
fn export_locally(store: &SessionStore, id: &SessionId, a: ExportArgs) -> anyhow::Result<()> {
    let to_file = a.file.is_some();
    let mut feedback = Feedback::new("exporting");
    if a.dry_run {
        let dry = share::dry_run(store, id, &a.request(), to_file, &mut feedback);
        feedback.finish();
        return print_dry_run(&dry?, a.json);
    }
    let file = a.file.clone().flatten();
    let written = share::export_file(store, id, &a.request(), file.as_deref(), &mut feedback);
    feedback.finish();
    let written = written?;
    note_redactions(written.redactions);
    if written.file.as_os_str() == "-" {
        // The bundle itself went to stdout: nothing else goes there.
        return Ok(());
    }
    if a.json {
        return print_json(&written);
    }
    print_line(&written.file.display().to_string())?;
    Ok(())
}

fn note_redactions(n: usize) {
    if n > 0 {
        eprintln!(
            "redacted {}; see them with --dry-run",
            plural(n as u64, "secret", "secrets")
        );
    }
}

/// `github-pat 2, secret-assignment 1`: most first, then by name.
pub fn by_rule<N: Copy + Ord + std::fmt::Display>(
    counts: &std::collections::BTreeMap<String, N>,
) -> String {
    let mut v: Vec<(&String, N)> = counts.iter().map(|(k, n)| (k, *n)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, n)| format!("{} {n}", clean_line(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_dry_run(dry: &DryRun, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(dry);
    }
    let to_file = dry.destination == "file";
    let nowhere = dry.destination == freecode_ops::share::NO_DESTINATION;
    let mut out = std::io::stdout().lock();
    let st = Style::stdout();
    writeln!(
        out,
        "would export {}, {}, {} to {}{}",
        plural(dry.counts.messages, "message", "messages"),
        plural(dry.counts.events, "event", "events"),
        plural(dry.counts.memories, "memory", "memories"),
        if to_file {
            "a file"
        } else if nowhere {
            "a share server (none is configured yet: --to URL, or --file)"
        } else {
            &dry.destination
        },
        if dry.encrypted {
            " (encrypted)"
        } else {
            " (unencrypted)"
        }
    )?;
    if dry.redactions.is_empty() {
        writeln!(out, "nothing to redact")?;
    } else {
        writeln!(
            out,
            "would redact {}:",
            plural(dry.redactions.len() as u64, "secret", "secrets")
        )?;
        for r in &dry.redactions {
            writeln!(
                out,
                "  {}  {}  {}",
                st.yellow(&r.kind),
                r.location,
                st.dim(&clean_line(&r.preview))
            )?;
        }
        writeln!(out, "by rule: {}", by_rule(&dry.redactions_by_rule))?;
    }
    Ok(())
}

/// Runs `session import`.
pub fn import(store: &SessionStore, a: ImportArgs) -> anyhow::Result<()> {
    let project_path = freecode_ops::scope::project_directory(a.project.as_deref())?;
    let is_url = a.source.starts_with("http://") || a.source.starts_with("https://");
    let mut feedback = Feedback::new("importing");
    feedback.steps(if is_url { 2 } else { 3 });
    let ((bundle, shape), source) = if is_url {
        feedback.step("downloading and decrypting");
        let fetched = share::fetch(store.home(), &a.source)
            .with_context(|| "import failed; nothing was written".to_owned())?;
        (fetched, a.source.split('#').next().unwrap_or("").to_owned())
    } else {
        let path = PathBuf::from(&a.source);
        let read = share::read_bundle_file(&path, &mut feedback)?;
        (read, path.display().to_string())
    };
    feedback.step("writing the new session");
    let imported = share::import(
        store,
        bundle,
        shape,
        &ImportRequest {
            source,
            project_path,
            with_memories: a.with_memories,
        },
    );
    feedback.finish();
    let imported = imported?;
    if a.json {
        return print_json(&imported);
    }
    print_line(&imported.session_id)?;
    eprintln!(
        "imported {} as {} ({}) into {}",
        plural(imported.messages as u64, "message", "messages"),
        imported.session_id,
        imported.title,
        imported.project_path
    );
    if !imported.memories_skipped.is_empty() {
        eprintln!(
            "memory entries not imported: {}{}",
            imported.memories_skipped.join(", "),
            if a.with_memories {
                " (a local entry has that name)"
            } else {
                " (pass --with-memories to import them)"
            }
        );
    }
    Ok(())
}

impl ShareCommand {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        match self {
            Self::List(a) => {
                let shares = share::list(home)?;
                if a.json {
                    return print_json(&shares);
                }
                let mut out = std::io::stdout().lock();
                if shares.is_empty() {
                    writeln!(out, "No shares made from this home.")?;
                    return Ok(());
                }
                let now = freecode_store::now_ms();
                for r in shares.iter().rev() {
                    let state = if r.revoked_at.is_some() {
                        "revoked".to_owned()
                    } else {
                        match r.expires_at {
                            Some(t) if t <= now => "expired".to_owned(),
                            Some(t) => format!("expires {}", local_time(t)),
                            None => "no expiry".to_owned(),
                        }
                    };
                    writeln!(
                        out,
                        "{}  {}  {}  {}  {}",
                        local_time(r.created_at),
                        r.session_id,
                        state,
                        r.url,
                        r.title
                    )?;
                }
                Ok(())
            }
            Self::Revoke(a) => {
                let revoked = share::revoke(home, &a.url)?;
                if revoked.already_gone {
                    eprintln!("{} was already gone from the server", revoked.url);
                } else {
                    eprintln!("revoked {}", revoked.url);
                }
                if a.json {
                    return print_json(&revoked);
                }
                Ok(())
            }
        }
    }
}
