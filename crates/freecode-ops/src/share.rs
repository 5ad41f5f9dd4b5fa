//! Sharing a session: export it (redacted, encrypted end to end, expiring) to a share server
//! ([`share`]), to a file ([`export_file`]) or nowhere, to see what would leave
//! ([`dry_run`]); bring a bundle back as a new session ([`fetch`] or [`read_bundle_file`],
//! then [`import`]); the shares this home made ([`list`]) and their revocation ([`revoke`]).
//!
//! Every share made is recorded in `shares.jsonl` with its delete token, so it can be revoked
//! even after the session is purged. An import validates everything before it writes, and
//! writes a new session of the project the caller names, never of the path the bundle names.

use std::path::{Path, PathBuf};
use std::time::Duration;

use freecode_core::SessionId;
use freecode_core::bundle::{Bundle, SourceShape};
use freecode_remote::share::{
    Client, ClientError, SessionShare, ShareLog, ShareOptions, SyncConfig, expires_at,
    share_session,
};
use freecode_store::share::{self as store_share, ExportOptions, ImportOptions};
use freecode_store::{Home, SessionStore};

use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::types::{DryRun, Exported, ExportedFile, Imported, Revoked, ShareItem};

/// What leaves with a session, wherever it goes.
#[derive(Debug, Clone, Default)]
pub struct ExportRequest {
    /// The share server [default: `syncEndpoint` of `config.json`].
    pub to: Option<String>,
    /// The share's lifetime [default: `syncUrlExpiryDays`, else 7 days].
    pub expires: Option<Duration>,
    /// The rollout log too (every model call and tool output).
    pub include_rollout: bool,
    /// The project's memory entries too.
    pub include_memories: bool,
    /// The seed's plain `{meta, messages}` JSON, unencrypted, for a server that expects it.
    pub plain: bool,
}

/// A share made on a server.
#[derive(Debug)]
pub struct Shared {
    /// What `session export --json` and `session.export` answer (with the delete token and a
    /// warning when `shares.jsonl` could not record it).
    pub exported: Exported,
    /// The share's public URL, without the key (what `share revoke` takes).
    pub revoke_url: String,
    /// Why `shares.jsonl` could not record the share, which is live anyway: the URL and the
    /// delete token are the only way left to revoke it.
    pub unrecorded: Option<Error>,
}

/// `shares.jsonl`, where this home records the shares it makes.
pub fn log_path(home: &Home) -> PathBuf {
    ShareLog::new(home).path().to_path_buf()
}

/// Shares session `id` as `req` says: redacted, encrypted unless `plain`, uploaded with the
/// configured API key, recorded with its delete token.
pub fn share(
    store: &SessionStore,
    id: &SessionId,
    req: &ExportRequest,
    progress: &mut dyn Progress,
) -> Result<Shared> {
    progress.steps(1);
    progress.step("building, encrypting and sending the bundle");
    let SessionShare {
        shared,
        bundle,
        logged,
    } = share_session(
        store,
        id,
        &ShareOptions {
            to: req.to.clone(),
            plain: req.plain,
            expires_in: req.expires,
            include_rollout: req.include_rollout,
            include_memories: req.include_memories,
        },
    )?;
    let mut exported = Exported {
        url: shared.url,
        expires_at: shared.receipt.expires_at,
        encrypted: shared.encrypted,
        redactions: bundle.redactions.len(),
        delete_token: None,
        warning: None,
    };
    let unrecorded = logged.err().map(|e| {
        // The share is live: hand the caller the only way to revoke it.
        exported.delete_token = shared.receipt.delete_token.clone();
        exported.warning = Some(format!("the share could not be recorded: {e}"));
        Error::from(e)
    });
    Ok(Shared {
        exported,
        revoke_url: shared.receipt.url,
        unrecorded,
    })
}

fn local_options(req: &ExportRequest, expires_at: Option<i64>) -> ExportOptions {
    ExportOptions {
        include_rollout: req.include_rollout,
        include_memories: req.include_memories,
        no_redact: false,
        expires_at,
    }
}

/// Writes session `id`'s bundle (redacted, not encrypted) to `file` (`None`: `remote/<id>.json`
/// in the home; `-`: standard output; a FIFO or device is written into; a name ending in
/// `.zst` is compressed), as it is read and redacted, never holding it whole when it can.
pub fn export_file(
    store: &SessionStore,
    id: &SessionId,
    req: &ExportRequest,
    file: Option<&Path>,
    progress: &mut dyn Progress,
) -> Result<ExportedFile> {
    // Read (and so checked) as every export reads it, though a file needs no server.
    SyncConfig::load(store.home())?;
    let opts = local_options(req, None);
    // Written as the session is read and redacted: into the temp of a regular file, or
    // (stdout, a FIFO) into a temp copied out once it is whole.
    progress.steps(1);
    progress.step("reading, redacting and writing the session");
    if let Some((path, head)) = store_share::save_to_remote_streamed(store, id, &opts, file)? {
        return Ok(ExportedFile {
            file: path,
            redactions: head.redactions.len(),
            messages: head.counts.messages,
        });
    }
    progress.steps(2);
    progress.step("reading and redacting the session");
    let bundle = store_share::export_bundle(store, id, &opts)?;
    progress.step(&match file {
        Some(f) if f.as_os_str() != "-" => format!("writing {}", f.display()),
        Some(_) => "writing to standard output".to_owned(),
        None => "writing the bundle".to_owned(),
    });
    let path = store_share::save_to_remote(store.home(), &bundle, file)?;
    Ok(ExportedFile {
        file: path.to_path_buf(),
        redactions: bundle.redactions.len(),
        messages: bundle.counts.messages,
    })
}

/// A dry run's destination when no share server is named (`--to`, `syncEndpoint`).
pub const NO_DESTINATION: &str = "none configured";

/// What an export of session `id` would send (`to_file`: to a file, else to the share server),
/// and what it would redact; nothing is sent or written.
pub fn dry_run(
    store: &SessionStore,
    id: &SessionId,
    req: &ExportRequest,
    to_file: bool,
    progress: &mut dyn Progress,
) -> Result<DryRun> {
    let config = SyncConfig::load(store.home())?;
    let expiry =
        (!to_file).then(|| expires_at(freecode_store::now_ms(), config.lifetime(req.expires)));
    progress.steps(1);
    progress.step("reading and redacting the session");
    let bundle = store_share::export_bundle(store, id, &local_options(req, expiry))?;
    // A dry run sends nothing, so it needs no server: without one it says so and goes on.
    let destination = if to_file {
        "file".to_owned()
    } else {
        match config.endpoint_or(req.to.as_deref()) {
            Ok(url) => url,
            Err(freecode_remote::share::ClientError::NoEndpoint { .. }) => {
                NO_DESTINATION.to_owned()
            }
            Err(e) => return Err(e.into()),
        }
    };
    let mut redactions_by_rule = std::collections::BTreeMap::new();
    for r in &bundle.redactions {
        *redactions_by_rule.entry(r.kind.clone()).or_default() += 1;
    }
    Ok(DryRun {
        destination,
        encrypted: !to_file && !req.plain,
        counts: bundle.counts.clone(),
        redactions: bundle.redactions,
        redactions_by_rule,
    })
}

/// Downloads and decrypts the share at `url` (its key in the `#fragment`).
pub fn fetch(home: &Home, url: &str) -> Result<(Bundle, SourceShape)> {
    let config = SyncConfig::load(home)?;
    Ok(Client::new(config.api_key).fetch(url)?)
}

/// Reads and checks the bundle file `path` (ours, compressed or not, or the original's shape),
/// bounded by what the largest export makes; two steps for `progress`.
pub fn read_bundle_file(path: &Path, progress: &mut dyn Progress) -> Result<(Bundle, SourceShape)> {
    // What the largest bundle export makes can take, compressed or not.
    let limit = freecode_store::codec::max_bundle_bytes();
    let max_file = freecode_store::codec::max_encoded_bytes(limit);
    let too_big = || {
        Error::Invalid(format!(
            "{} is larger than any bundle export makes ({limit} bytes of JSON at most, \
             {max_file} bytes of file); nothing was written",
            path.display()
        ))
    };
    let cannot_read =
        |e: std::io::Error| Error::NotFound(format!("cannot read {}: {e}", path.display()));
    let len = std::fs::metadata(path).map_err(cannot_read)?.len();
    if len > max_file {
        return Err(too_big());
    }
    // Bounded read: the length checked above can change (or lie, for a device file).
    progress.step(&format!("reading {}", path.display()));
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(
            std::fs::File::open(path).map_err(cannot_read)?,
            max_file + 1,
        ),
        &mut bytes,
    )
    .map_err(|source| Error::Io {
        context: format!("cannot read {}", path.display()),
        source,
    })?;
    if bytes.len() as u64 > max_file {
        return Err(too_big());
    }
    progress.step("checking the bundle");
    freecode_remote::share::decode_body(&bytes, None).map_err(|e| {
        Error::from(e).context(format!(
            "cannot import {}; nothing was written",
            path.display()
        ))
    })
}

/// Where a bundle came from, as the new session records it, and where it goes.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// The share's public URL (without the key) or the file's path.
    pub source: String,
    /// The local project the session belongs to (its tools work there): a canonical
    /// directory ([`crate::scope::project_directory`]).
    pub project_path: String,
    /// The bundle's memory entries too (never replacing an existing one).
    pub with_memories: bool,
}

/// Writes `bundle` (of `shape`) as a new session, as `req` says.
pub fn import(
    store: &SessionStore,
    bundle: Bundle,
    shape: SourceShape,
    req: &ImportRequest,
) -> Result<Imported> {
    let imported = store_share::import_bundle(
        store,
        bundle,
        &ImportOptions {
            source: req.source.clone(),
            project_path: req.project_path.clone(),
            with_memories: req.with_memories,
        },
    )?;
    Ok(Imported {
        session_id: imported.id.to_string(),
        title: imported.meta.title.clone(),
        project_path: imported.meta.project_path.clone(),
        messages: imported.messages,
        events: imported.events,
        memories_written: imported.memories_written.clone(),
        memories_skipped: imported.memories_skipped.clone(),
        shape: shape_name(shape).to_owned(),
    })
}

fn shape_name(s: SourceShape) -> &'static str {
    match s {
        SourceShape::Bundle => "bundle",
        SourceShape::SeedPlain => "meta+messages",
        SourceShape::Metadata => "metadata+messages",
        SourceShape::LegacyFlat => "legacy-flat",
    }
}

/// The shares made from `home`, oldest first (delete tokens left out).
pub fn list(home: &Home) -> Result<Vec<ShareItem>> {
    Ok(ShareLog::new(home)
        .list()?
        .iter()
        .map(ShareItem::from)
        .collect())
}

/// Revokes the share at `url` (its `#key` not needed): the server deletes it, and
/// `shares.jsonl` records when. Works after the session is purged; only the home that made a
/// share holds its delete token.
pub fn revoke(home: &Home, url: &str) -> Result<Revoked> {
    let log = ShareLog::new(home);
    let public = url.split('#').next().unwrap_or("").to_owned();
    let record = log
        .list()?
        .into_iter()
        .rev()
        .find(|r| r.public_url() == public)
        .ok_or_else(|| {
            Error::NotFound(format!(
                "no share {public} in this home's share log (shares.jsonl): only the home that made a share holds its delete token"
            ))
        })?;
    let token = record.delete_token.clone().ok_or_else(|| {
        Error::Failed(format!(
            "the server gave no delete token for {public}; it cannot be revoked"
        ))
    })?;
    let config = SyncConfig::load(home)?;
    let already_gone = match Client::new(config.api_key).revoke(&public, &token) {
        Ok(()) => false,
        Err(ClientError::NotFound(_)) => true,
        Err(e) => return Err(Error::from(e).context(format!("cannot revoke {public}"))),
    };
    let revoked_at = freecode_store::now_ms();
    log.mark_revoked(&public, revoked_at)?;
    Ok(Revoked {
        url: public,
        session_id: record.session_id,
        already_gone,
        revoked_at,
    })
}
