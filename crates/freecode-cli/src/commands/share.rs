//! Sharing: `freecode session export|import`, `freecode share list|revoke`, and the share
//! server `freecode sync serve`.
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
use freecode_ops::scope::{parse_expiry, parse_timeout};
use freecode_ops::sessions::resolve_id;
use freecode_ops::share::{self, ExportRequest, ImportRequest};
use freecode_ops::types::DryRun;
use freecode_store::{Home, SessionStore};

use crate::UserError;
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

/// `freecode sync …`.
#[derive(Debug, Subcommand)]
pub enum SyncCommand {
    /// Run the share server (and sync server) until Ctrl+C or SIGTERM.
    Serve(SyncServeArgs),
    /// Start syncing this home: make the sync key and register with a server.
    Init(SyncInitArgs),
    /// Print the sync key as 24 words, to `sync join` another machine (last line of output).
    Key(SyncJsonArgs),
    /// Join the machines syncing with a server, with the phrase `sync key` printed there: read
    /// from standard input (`freecode sync key | ssh other freecode sync join --server URL`, or
    /// pasted when asked) or `--phrase-file`, never from the command line, where other users
    /// can read it.
    Join(SyncJoinArgs),
    /// What would move: sessions to push, records to pull.
    Status(SyncJsonArgs),
    /// Send this machine's changes.
    Push(SyncJsonArgs),
    /// Take the other machines' changes.
    Pull(SyncJsonArgs),
    /// Pull, then push.
    Now(SyncNowArgs),
    /// Make a new sync key: the server's records get new key wraps (their content is not
    /// sent again); the other machines `sync join` with the new phrase and keep their state.
    Rotate(SyncJsonArgs),
}

/// `sync now`.
#[derive(Debug, Args)]
pub struct SyncNowArgs {
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// The background sync `sync.auto` starts after a turn: waits for a running sync, does
    /// nothing when another is already waiting, and prints one line with the time to stderr.
    #[arg(long, hide = true)]
    auto: bool,
}

/// `sync init`.
#[derive(Debug, Args)]
pub struct SyncInitArgs {
    /// The sync server (`freecode sync serve`): https://…, or http:// to loopback.
    #[arg(long, value_name = "URL")]
    server: String,
    /// Set up again, with a new key, even if this machine already syncs.
    #[arg(long)]
    force: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

/// `sync join`.
#[derive(Debug, Args)]
pub struct SyncJoinArgs {
    /// The sync server the other machines use.
    #[arg(long, value_name = "URL")]
    server: String,
    /// The 24 words `freecode sync key` printed. Left out, they are read from standard input
    /// (asked for on a terminal). On the command line they still work, with a warning: every
    /// local user can read a command line (`ps`).
    #[arg(value_name = "PHRASE", num_args = 0..)]
    phrase: Vec<String>,
    /// Read the key (its words, or the 64 hex characters of `state/sync/key`) from a file.
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "phrase",
        alias = "key-file"
    )]
    phrase_file: Option<PathBuf>,
    /// Set up again even if this machine already syncs.
    #[arg(long)]
    force: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

/// `sync key|status|push|pull|now`.
#[derive(Debug, Args)]
pub struct SyncJsonArgs {
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

fn print_setup(setup: &freecode_ops::sync::SyncSetup, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(setup);
    }
    println!("syncing with {} as host {}", setup.server, setup.host);
    println!("sync key id {}", setup.key_id);
    Ok(())
}

fn run_sync(
    json: bool,
    f: impl FnOnce(&mut Feedback) -> freecode_ops::Result<freecode_ops::sync::SyncReport>,
) -> anyhow::Result<()> {
    // Asked for, and the first sync of a big home is long: the bar at once (as `index rebuild`).
    let mut feedback = Feedback::with_delay("syncing", std::time::Duration::ZERO);
    let report = f(&mut feedback);
    feedback.finish();
    print_report(&report?, json)
}

fn print_report(report: &freecode_ops::sync::SyncReport, json: bool) -> anyhow::Result<()> {
    // Warnings, with `--json` too. Each slot once (later pulls try it again quietly); a flood is summed up.
    const SKIPPED_SHOWN: usize = 10;
    for s in report.skipped.iter().take(SKIPPED_SHOWN) {
        eprintln!(
            "warning: record {} of machine {}'s log {} {}: passed over (tried again on later \
             pulls; the records after it still apply)",
            s.index, s.host, s.log, s.why
        );
    }
    if report.skipped.len() > SKIPPED_SHOWN {
        eprintln!(
            "warning: and {} more records that do not open were passed over (`--json` lists them)",
            report.skipped.len() - SKIPPED_SHOWN
        );
    }
    if json {
        return print_json(report);
    }
    for f in &report.forks {
        eprintln!(
            "session {} was continued on another machine too: this machine's changes are kept as {}",
            f.session_id, f.fork_id
        );
    }
    for id in &report.busy {
        eprintln!("session {id} is in use here; it syncs next time");
    }
    if report.refilled > 0 {
        eprintln!(
            "the server had lost {}: sent again from this machine's copies",
            plural(report.refilled, "record", "records")
        );
    }
    if report.mended > 0 {
        eprintln!(
            "mended the key wrap of {} another machine could not open, from this machine's copies",
            plural(report.mended, "record", "records")
        );
    }
    println!(
        "pushed {} ({} bytes sent), pulled {} ({} bytes received), {} purged",
        plural(report.sessions_pushed as u64, "session", "sessions"),
        report.bytes_sent,
        plural(report.sessions_pulled as u64, "session", "sessions"),
        report.bytes_received,
        report.purged.len()
    );
    Ok(())
}

/// `sync serve`.
#[derive(Debug, Args)]
pub struct SyncServeArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    listen: std::net::SocketAddr,
    /// Where blobs live: file:PATH or s3://BUCKET/PREFIX (S3 settings from AWS_* variables)
    /// [default: file:<home>/share-server].
    #[arg(long, value_name = "STORE")]
    store: Option<String>,
    /// Require this bearer token on uploads.
    #[arg(long, env = "FREECODE_SYNC_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// The base of the URLs handed out [default: http://<Host header>].
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// Largest upload, bytes (clients read it from `GET /limits` before they build a share).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    max_body: usize,
    /// Longest share lifetime, days.
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    max_expiry_days: u64,
    /// Seconds between sweeps of expired shares.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    sweep_interval: u64,
    /// Close a connection whose request head has not arrived in full this long after the
    /// accept (or after its first byte, on a reused connection): seconds, or 500ms, 10s, 2m
    /// [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    header_timeout: Option<Duration>,
    /// Close a keep-alive connection with no request (or a response its client stops
    /// reading) after this long [default: 60s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    idle_timeout: Option<Duration>,
    /// Answer 408 and close the connection when a request's body has not fully arrived this
    /// long after the request got its slot [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    body_timeout: Option<Duration>,
    /// Most connections open at once; past it a new one evicts the oldest idle connection,
    /// or is closed at once when all are busy [default: 512].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// Most connections open at once from one client address, enforced the same way
    /// [default: 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_ip: Option<u32>,
    /// Most bytes one home-sync group may store (past it, 413 naming the limit)
    /// [default: 10 GiB].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    group_max_bytes: Option<u64>,
    /// Most objects (records, claims, key rings) one home-sync group may store
    /// [default: 1000000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    group_max_objects: Option<u64>,
    /// Most requests a minute from one home-sync group, per server process (past it, 429
    /// with Retry-After) [default: 6000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    group_requests_per_minute: Option<u32>,
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

/// The sync key's text from `source` (a file or standard input), bounded: a key file is 64
/// hex characters and a line per older key, a phrase 24 words.
fn read_phrase(
    source: std::io::Result<impl std::io::Read>,
    what: impl std::fmt::Display,
) -> anyhow::Result<String> {
    use std::io::Read as _;
    const MAX: u64 = 64 * 1024;
    let user = |m: String| anyhow::Error::new(UserError(m));
    let mut text = String::new();
    source
        .and_then(|r| r.take(MAX + 1).read_to_string(&mut text))
        .map_err(|e| user(format!("reading the sync key from {what}: {e}")))?;
    if text.len() as u64 > MAX {
        return Err(user(format!(
            "{what} holds more than {MAX} bytes: not a sync key"
        )));
    }
    if text.trim().is_empty() {
        return Err(user(format!(
            "no sync key on {what}: pipe in the 24 words `freecode sync key` printed on the \
             other machine, or pass --phrase-file"
        )));
    }
    Ok(text)
}

impl SyncCommand {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        use freecode_ops::sync;
        match self {
            Self::Init(a) => {
                let setup = sync::init(home, &a.server, a.force)?;
                print_setup(&setup, a.json)?;
                if !a.json {
                    println!(
                        "on another machine: freecode sync join --server {} (and paste the words `freecode sync key` prints here)",
                        setup.server
                    );
                }
                Ok(())
            }
            Self::Join(a) => {
                let text = match &a.phrase_file {
                    Some(p) => read_phrase(std::fs::File::open(p), p.display())?,
                    None if a.phrase.is_empty() => {
                        use std::io::{BufRead as _, IsTerminal as _, Read as _};
                        if std::io::stdin().is_terminal() {
                            // Pasted: the words end with the line (no Ctrl+D to type).
                            eprint!(
                                "the 24 words `freecode sync key` printed on the other machine: "
                            );
                            let mut line = Vec::new();
                            std::io::stdin()
                                .lock()
                                .take(64 * 1024)
                                .read_until(b'\n', &mut line)
                                .context("reading the sync key from the terminal")?;
                            read_phrase(Ok(&line[..]), "the terminal")?
                        } else {
                            read_phrase(Ok(std::io::stdin()), "standard input")?
                        }
                    }
                    None => {
                        tracing::warn!(
                            "the phrase on the command line can be read by every user of this \
                             machine (ps, /proc): pipe it in instead (`freecode sync key | \
                             freecode sync join --server URL`) or use --phrase-file"
                        );
                        a.phrase.join(" ")
                    }
                };
                let setup = sync::join(home, &a.server, &text, a.force)?;
                print_setup(&setup, a.json)
            }
            Self::Key(a) => {
                let phrase = sync::key_phrase(home)?;
                if a.json {
                    return print_json(&sync::SyncPhrase { phrase });
                }
                eprintln!(
                    "the sync key: anyone with these words can read this home's synced sessions"
                );
                println!("{phrase}");
                Ok(())
            }
            Self::Status(a) => {
                let st = sync::status(home)?;
                if a.json {
                    return print_json(&st);
                }
                println!("server {}  host {}  key {}", st.server, st.host, st.key_id);
                println!(
                    "{} on the server; {} synced here, {} to push, {} to pull",
                    plural(st.hosts as u64, "machine", "machines"),
                    plural(st.synced as u64, "session", "sessions"),
                    plural(st.to_push as u64, "session", "sessions"),
                    plural(st.to_pull, "record", "records"),
                );
                Ok(())
            }
            Self::Push(a) => run_sync(a.json, |p| sync::push(home, p)),
            Self::Pull(a) => run_sync(a.json, |p| sync::pull(home, p)),
            Self::Rotate(a) => {
                let r = sync::rotate(home)?;
                if a.json {
                    return print_json(&r);
                }
                println!(
                    "new sync key id {}: {} on the server rewrapped ({} bytes of key wraps sent, no content), {} kept here",
                    r.key_id,
                    plural(r.rewrapped, "record", "records"),
                    r.bytes_sent,
                    r.kept_rewrapped
                );
                if r.skipped > 0 {
                    eprintln!(
                        "warning: {} on the server do not open and no copy here mends them: left as they are",
                        plural(r.skipped, "record", "records")
                    );
                }
                println!(
                    "on the other machines: freecode sync join --server {} (and paste the new words `freecode sync key` prints here)",
                    r.server
                );
                Ok(())
            }
            Self::Now(a) if a.auto => {
                let when = freecode_ops::human::local_time(freecode_store::now_ms());
                match sync::auto(home) {
                    Ok(Some(r)) => eprintln!(
                        "{when} sync.auto: pushed {} ({} bytes), pulled {} ({} bytes), {} forks, {} busy",
                        plural(r.sessions_pushed as u64, "session", "sessions"),
                        r.bytes_sent,
                        plural(r.sessions_pulled as u64, "session", "sessions"),
                        r.bytes_received,
                        r.forks.len(),
                        r.busy.len()
                    ),
                    Ok(None) => eprintln!("{when} sync.auto: another sync was already waiting"),
                    Err(e) => {
                        eprintln!("{when} sync.auto: error: {e}");
                        return Err(e.into());
                    }
                }
                Ok(())
            }
            Self::Now(a) => run_sync(a.json, |p| sync::now(home, p)),
            Self::Serve(a) => {
                let store = match a.store {
                    Some(s) => s
                        .parse::<freecode_sync::blob::StoreSpec>()
                        .map_err(|e| UserError(format!("--store {s:?}: {e}")))?,
                    None => freecode_sync::blob::StoreSpec::File(home.root().join("share-server")),
                };
                let defaults = freecode_sync::server::ServerConfig::default();
                let count = |n: Option<u32>, default: usize| {
                    n.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
                };
                let config = freecode_sync::server::ServerConfig {
                    listen: a.listen,
                    store,
                    api_key: a.api_key.filter(|k| !k.is_empty()),
                    public_url: a.public_url,
                    max_body: a.max_body,
                    max_ttl: Duration::from_secs(a.max_expiry_days.max(1).saturating_mul(86_400)),
                    sweep_interval: Duration::from_secs(a.sweep_interval.max(1)),
                    header_timeout: a.header_timeout.unwrap_or(defaults.header_timeout),
                    idle_timeout: a.idle_timeout.unwrap_or(defaults.idle_timeout),
                    body_timeout: a.body_timeout.unwrap_or(defaults.body_timeout),
                    max_connections: count(a.max_connections, defaults.max_connections),
                    max_connections_per_ip: count(
                        a.max_connections_per_ip,
                        defaults.max_connections_per_ip,
                    ),
                    group_limits: freecode_sync::server::GroupLimits {
                        max_bytes: a.group_max_bytes.unwrap_or(defaults.group_limits.max_bytes),
                        max_objects: a
                            .group_max_objects
                            .unwrap_or(defaults.group_limits.max_objects),
                        requests_per_minute: a
                            .group_requests_per_minute
                            .unwrap_or(defaults.group_limits.requests_per_minute),
                    },
                    ..defaults
                };
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime")?;
                rt.block_on(freecode_sync::server::serve(config, shutdown_signal()))?;
                Ok(())
            }
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}
