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
use freecode_core::bundle::SourceShape;
use freecode_store::share::{self, ExportOptions, ImportOptions};
use freecode_store::{Home, SessionStore};
use freecode_sync::client::{
    Client, SessionShare, ShareLog, ShareOptions, SyncConfig, expires_at, share_session,
};

use crate::UserError;
use crate::render::{Style, local_time, plural, print_json, print_line};

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
    /// Send the seed's plain `{meta, messages}` JSON (unencrypted) to a server that expects it.
    #[arg(long, conflicts_with = "file")]
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
    /// Run the share server until Ctrl+C or SIGTERM.
    Serve(SyncServeArgs),
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
}

/// The longest server timeout taken: past a day a timeout no longer bounds anything.
const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// A server timeout: whole seconds, or a number with a unit
/// ([`parse_duration`](crate::duration::parse_duration)); never zero, at most a day.
fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = crate::duration::parse_duration(s, Some("s"))?;
    if d.is_zero() {
        return Err("a timeout must be positive".into());
    }
    if d > MAX_TIMEOUT {
        return Err(format!(
            "{:?} is longer than a day, the longest timeout",
            s.trim()
        ));
    }
    Ok(d)
}

/// How long a share lives: a number with a unit (`30m`, `12h`, `7d`); at least a second.
fn parse_expiry(s: &str) -> Result<Duration, String> {
    let d = crate::duration::parse_duration(s, None)?;
    if d < Duration::from_secs(1) {
        return Err("a share must live at least one second".into());
    }
    Ok(d)
}

/// Runs `session export`.
pub fn export(store: &SessionStore, a: ExportArgs) -> anyhow::Result<()> {
    let id = crate::commands::session::resolve_id(store, &a.id)?;
    if a.dry_run || a.file.is_some() {
        return export_locally(store, &id, a);
    }
    let steps = crate::progress::Steps::new("sharing", 1);
    steps.step("building, encrypting and sending the bundle");
    let shared = share_session(
        store,
        &id,
        &ShareOptions {
            to: a.to.clone(),
            plain: a.plain,
            expires_in: a.expires,
            include_rollout: a.include_rollout,
            include_memories: a.include_memories,
        },
    );
    steps.finish();
    let SessionShare {
        shared,
        bundle,
        logged,
    } = shared.with_context(|| format!("export of {id} failed"))?;
    if let Err(e) = logged {
        // The share is live: never lose its URL or the only way to revoke it.
        print_line(&shared.url)?;
        eprintln!(
            "delete token (revoke with: curl -X DELETE -H 'x-freecode-delete-token: <token>' {}): {}",
            shared.receipt.url,
            shared
                .receipt
                .delete_token
                .as_deref()
                .unwrap_or("(none given)")
        );
        return Err(e).context(format!(
            "the share is live but {} could not record it; keep the URL and delete token printed above",
            ShareLog::new(store.home()).path().display()
        ));
    }
    note_redactions(&bundle);
    if a.json {
        return print_json(&crate::ops::Exported {
            url: shared.url,
            expires_at: shared.receipt.expires_at,
            encrypted: shared.encrypted,
            redactions: bundle.redactions.len(),
            delete_token: None,
            warning: None,
        });
    }
    print_line(&shared.url)?;
    let expiry = shared
        .receipt
        .expires_at
        .map_or_else(|| "never (server gave no expiry)".to_owned(), local_time);
    eprintln!(
        "{} share; expires {expiry}; revoke with: freecode share revoke {}",
        if shared.encrypted {
            "encrypted (the key is only in the URL after '#')"
        } else {
            "PLAIN, unencrypted"
        },
        shared.receipt.url
    );
    Ok(())
}

/// `--dry-run` (what would leave, and what would be redacted) and `--file` (the local bundle).
fn export_locally(store: &SessionStore, id: &SessionId, a: ExportArgs) -> anyhow::Result<()> {
    let config = SyncConfig::load(store.home())?;
    let to_file = a.file.is_some();
    let opts = ExportOptions {
        include_rollout: a.include_rollout,
        include_memories: a.include_memories,
        no_redact: false,
        expires_at: (!to_file)
            .then(|| expires_at(freecode_store::now_ms(), config.lifetime(a.expires))),
    };
    if !a.dry_run {
        // Written as the session is read and redacted, never holding it whole: into the temp
        // of a regular file, or (stdout, a FIFO) into a temp copied out once it is whole.
        let file = a.file.clone().flatten();
        let steps = crate::progress::Steps::new("exporting", 1);
        steps.step("reading, redacting and writing the session");
        let streamed = share::save_to_remote_streamed(store, id, &opts, file.as_deref());
        steps.finish();
        if let Some((path, head)) = streamed? {
            note_redactions(&head);
            if path.as_os_str() == "-" {
                // The bundle itself went to stdout: nothing else goes there.
                return Ok(());
            }
            if a.json {
                return print_json(&crate::ops::ExportedFile {
                    file: path,
                    redactions: head.redactions.len(),
                    messages: head.counts.messages,
                });
            }
            print_line(&path.display().to_string())?;
            return Ok(());
        }
    }
    let steps = crate::progress::Steps::new("exporting", if a.dry_run { 1 } else { 2 });
    steps.step("reading and redacting the session");
    let bundle = share::export_bundle(store, id, &opts)?;
    if a.dry_run {
        steps.finish();
        let endpoint = if to_file {
            String::new()
        } else {
            config.endpoint_or(a.to.as_deref())?
        };
        return dry_run(&bundle, to_file, &endpoint, a.plain, a.json);
    }
    let file = a.file.flatten();
    steps.step(match &file {
        Some(f) if f.as_os_str() != "-" => format!("writing {}", f.display()),
        Some(_) => "writing to standard output".to_owned(),
        None => "writing the bundle".to_owned(),
    });
    let path = share::save_to_remote(store.home(), &bundle, file.as_deref());
    steps.finish();
    let path = path?;
    note_redactions(&bundle);
    if path.as_os_str() == "-" {
        // The bundle itself went to stdout: nothing else goes there.
        return Ok(());
    }
    if a.json {
        return print_json(&crate::ops::ExportedFile {
            file: path.to_path_buf(),
            redactions: bundle.redactions.len(),
            messages: bundle.counts.messages,
        });
    }
    print_line(&path.display().to_string())?;
    Ok(())
}

fn note_redactions(bundle: &freecode_core::bundle::Bundle) {
    if !bundle.redactions.is_empty() {
        eprintln!(
            "redacted {}; see them with --dry-run",
            plural(bundle.redactions.len() as u64, "secret", "secrets")
        );
    }
}

fn dry_run(
    bundle: &freecode_core::bundle::Bundle,
    to_file: bool,
    endpoint: &str,
    plain: bool,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        return print_json(&crate::ops::DryRun {
            destination: if to_file { "file" } else { endpoint }.to_owned(),
            encrypted: !to_file && !plain,
            counts: bundle.counts.clone(),
            redactions: bundle.redactions.clone(),
        });
    }
    let mut out = std::io::stdout().lock();
    let st = Style::stdout();
    writeln!(
        out,
        "would export {}, {}, {} to {}{}",
        plural(bundle.counts.messages, "message", "messages"),
        plural(bundle.counts.events, "event", "events"),
        plural(bundle.counts.memories, "memory", "memories"),
        if to_file { "a file" } else { endpoint },
        if to_file || plain {
            " (unencrypted)"
        } else {
            " (encrypted)"
        }
    )?;
    if bundle.redactions.is_empty() {
        writeln!(out, "nothing to redact")?;
    } else {
        writeln!(
            out,
            "would redact {}:",
            plural(bundle.redactions.len() as u64, "secret", "secrets")
        )?;
        for r in &bundle.redactions {
            writeln!(out, "  {}  {}", st.yellow(&r.kind), r.location)?;
        }
    }
    Ok(())
}

/// Runs `session import`.
pub fn import(store: &SessionStore, a: ImportArgs) -> anyhow::Result<()> {
    let project_path = crate::commands::run::project_directory(a.project.as_deref())?;
    let is_url = a.source.starts_with("http://") || a.source.starts_with("https://");
    let steps = crate::progress::Steps::new("importing", if is_url { 2 } else { 3 });
    let (bundle, shape, source) = if is_url {
        let config = SyncConfig::load(store.home())?;
        steps.step("downloading and decrypting");
        let (b, shape) = Client::new(config.api_key)
            .fetch(&a.source)
            .with_context(|| "import failed; nothing was written".to_owned())?;
        let public = a.source.split('#').next().unwrap_or("").to_owned();
        (b, shape, public)
    } else {
        let path = PathBuf::from(&a.source);
        // What the largest bundle export makes can take, compressed or not.
        let limit = freecode_store::codec::max_bundle_bytes();
        let max_file = freecode_store::codec::max_encoded_bytes(limit);
        let too_big = || {
            UserError(format!(
                "{} is larger than any bundle export makes ({limit} bytes of JSON at most, \
                 {max_file} bytes of file); nothing was written",
                path.display()
            ))
        };
        let len = std::fs::metadata(&path)
            .map_err(|e| UserError(format!("cannot read {}: {e}", path.display())))?
            .len();
        if len > max_file {
            return Err(too_big().into());
        }
        // Bounded read: the length checked above can change (or lie, for a device file).
        steps.step(format!("reading {}", path.display()));
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(
                std::fs::File::open(&path)
                    .map_err(|e| UserError(format!("cannot read {}: {e}", path.display())))?,
                max_file + 1,
            ),
            &mut bytes,
        )
        .with_context(|| format!("cannot read {}", path.display()))?;
        if bytes.len() as u64 > max_file {
            return Err(too_big().into());
        }
        steps.step("checking the bundle");
        let (b, shape) = freecode_sync::client::decode_body(&bytes, None)
            .with_context(|| format!("cannot import {}; nothing was written", path.display()))?;
        (b, shape, path.display().to_string())
    };
    steps.step("writing the new session");
    let imported = share::import_bundle(
        store,
        bundle,
        &ImportOptions {
            source,
            project_path,
            with_memories: a.with_memories,
        },
    );
    steps.finish();
    let imported = imported?;
    if a.json {
        return print_json(&crate::ops::Imported {
            session_id: imported.id.to_string(),
            title: imported.meta.title.clone(),
            project_path: imported.meta.project_path.clone(),
            messages: imported.messages,
            events: imported.events,
            memories_written: imported.memories_written.clone(),
            memories_skipped: imported.memories_skipped.clone(),
            shape: shape_name(shape).to_owned(),
        });
    }
    print_line(imported.id.as_str())?;
    eprintln!(
        "imported {} as {} ({}) into {}",
        plural(imported.messages as u64, "message", "messages"),
        imported.id,
        imported.meta.title,
        imported.meta.project_path
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

fn shape_name(s: SourceShape) -> &'static str {
    match s {
        SourceShape::Bundle => "bundle",
        SourceShape::SeedPlain => "meta+messages",
        SourceShape::Metadata => "metadata+messages",
        SourceShape::LegacyFlat => "legacy-flat",
    }
}

impl ShareCommand {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        let log = ShareLog::new(home);
        match self {
            Self::List(a) => {
                let records = log.list()?;
                if a.json {
                    let shown: Vec<crate::ops::ShareItem> =
                        records.iter().map(crate::ops::ShareItem::from).collect();
                    return print_json(&shown);
                }
                let mut out = std::io::stdout().lock();
                if records.is_empty() {
                    writeln!(out, "No shares made from this home.")?;
                    return Ok(());
                }
                let now = freecode_store::now_ms();
                for r in records.iter().rev() {
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
                let public = a.url.split('#').next().unwrap_or("").to_owned();
                let record = log
                    .list()?
                    .into_iter()
                    .rev()
                    .find(|r| r.public_url() == public)
                    .ok_or_else(|| {
                        UserError(format!(
                            "no share {public} in this home's share log (shares.jsonl): only the home that made a share holds its delete token"
                        ))
                    })?;
                let token = record.delete_token.clone().ok_or_else(|| {
                    UserError(format!(
                        "the server gave no delete token for {public}; it cannot be revoked"
                    ))
                })?;
                let config = SyncConfig::load(home)?;
                let already_gone = match Client::new(config.api_key).revoke(&public, &token) {
                    Ok(()) => false,
                    Err(freecode_sync::client::ClientError::NotFound(_)) => true,
                    Err(e) => return Err(e).context(format!("cannot revoke {public}")),
                };
                if already_gone {
                    eprintln!("{public} was already gone from the server");
                } else {
                    eprintln!("revoked {public}");
                }
                let revoked_at = freecode_store::now_ms();
                log.mark_revoked(&public, revoked_at)?;
                if a.json {
                    return print_json(&crate::ops::Revoked {
                        url: public,
                        session_id: record.session_id,
                        already_gone,
                        revoked_at,
                    });
                }
                Ok(())
            }
        }
    }
}

impl SyncCommand {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        match self {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn server_timeouts_take_seconds_or_a_unit() {
        for (text, ms) in [
            ("10", 10_000),
            ("10s", 10_000),
            (" 500ms ", 500),
            ("2m", 120_000),
            ("1h", 3_600_000),
        ] {
            assert_eq!(parse_timeout(text), Ok(Duration::from_millis(ms)), "{text}");
        }
        for text in [
            "0",
            "0s",
            "",
            "s",
            "10d",
            "25h",
            "10x",
            "1.5s",
            "-1",
            "99999999999999999999h",
        ] {
            assert!(parse_timeout(text).is_err(), "{text}");
        }
    }

    #[test]
    fn expiries_need_a_unit_and_a_second() {
        assert_eq!(parse_expiry("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_expiry("30m"), Ok(Duration::from_secs(1800)));
        for text in ["7", "0s", "500ms", "1x"] {
            assert!(parse_expiry(text).is_err(), "{text}");
        }
    }
}
