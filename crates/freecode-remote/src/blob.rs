//! Blob storage for the share server: where bundles and their records live.
//!
//! The server keeps no state of its own. Every share is two objects in a [`BlobStore`]:
//!
//! ```text
//! <prefix>/blobs/<code>        the uploaded bytes, opaque to the server
//! <prefix>/meta/<code>.json    the record: expiry, content type, delete-token hash, size, created
//! ```
//!
//! The blob is written first and the record last; the record is the commit point, and both are
//! written with create-if-absent semantics, so a share exists exactly when its record does.
//! Deleting removes the record first (revocation is immediate), then the blob. Because all of
//! this lives in the store, any number of replicas over one directory or bucket behave as one.
//!
//! Two backends: a directory ([`StoreSpec::File`]; directories 0700, files 0600, atomic writes
//! through a temporary file in the same directory) and an S3 bucket ([`StoreSpec::S3`], through
//! `object_store`'s `AmazonS3`, configured from the usual `AWS_*` environment variables and/or
//! explicit [`S3Options`]).
//!
//! Paths and keys are built only from a [`ShareCode`], which can only hold 32 lowercase hex
//! characters, or a [`SyncKey`] of lowercase letters and digits, so no request can address
//! anything outside the store's folders.
//!
//! Home sync (the `/sync/v1/` endpoints) keeps its objects under `<prefix>/sync/`: each
//! group's under `groups/<group>/` (its `group` object: the current credential's hash and the
//! revoked ones; `logs/<log>/<host>/<index>`: sealed records, created only if absent;
//! `claims/<log>/<chain>`: who extended a log from a point, created only if absent;
//! `rings/<key id>`), and `creds/<hash>`, the group each credential's hash names (see the
//! server's `group` module).

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore as _, ObjectStoreExt as _, PutMode, PutOptions, PutPayload};

/// Length of a share code in characters (128 bits as lowercase hex).
pub const CODE_LEN: usize = 32;

/// Folder (or key segment) holding the uploaded bytes.
const BLOBS_DIR: &str = "blobs";
/// Folder (or key segment) holding the records.
const META_DIR: &str = "meta";
/// Folder (or key segment) holding the sync endpoints' objects.
const SYNC_DIR: &str = "sync";
/// Suffix of a record's file or key name.
const RECORD_SUFFIX: &str = ".json";
/// Prefix of the file store's temporary files (never a valid code, so never listed as one).
const TEMP_PREFIX: &str = ".tmp-";

/// A validated share code: exactly [`CODE_LEN`] lowercase hex characters.
///
/// The only way to name a blob or record, so store paths can never be steered by a request.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ShareCode(String);

impl ShareCode {
    /// Parses a code, accepting only 32 lowercase hex characters.
    pub fn parse(s: &str) -> Option<Self> {
        is_valid_code(s).then(|| Self(s.to_owned()))
    }

    /// A fresh code: 128 bits from the operating system's random source.
    pub fn random() -> Result<Self, getrandom::Error> {
        Ok(Self(random_hex::<16>()?))
    }

    /// The code as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 6 characters: enough to correlate log lines, useless to fetch a share.
    pub fn short(&self) -> &str {
        &self.0[..6]
    }
}

impl fmt::Display for ShareCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ShareCode {
    // Never print a whole code in debug output: it is the capability to read the share.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ShareCode({}…)", self.short())
    }
}

/// Whether `s` is a well-formed share code (32 lowercase hex characters).
pub fn is_valid_code(s: &str) -> bool {
    s.len() == CODE_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `N` random bytes from getrandom, as lowercase hex.
pub(crate) fn random_hex<const N: usize>() -> Result<String, getrandom::Error> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf)?;
    Ok(hex::encode(buf))
}

/// Explicit S3 connection settings; each `None` falls back to the `AWS_*` environment.
///
/// The default (all `None`) is "configure from the environment": `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`,
/// `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT`), `AWS_ALLOW_HTTP=true`, as read by
/// `AmazonS3Builder::from_env()`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    /// Endpoint URL, e.g. `http://127.0.0.1:9000` for a local S3-compatible server.
    pub endpoint: Option<String>,
    /// Region (`us-east-1` when neither this nor the environment says).
    pub region: Option<String>,
    /// Access key id.
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Session token for temporary credentials.
    pub session_token: Option<String>,
    /// Permit plain-HTTP endpoints (needed for a loopback test server).
    pub allow_http: Option<bool>,
}

impl fmt::Debug for S3Options {
    // Credentials stay out of logs and panic messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("S3Options")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &redact(&self.access_key_id))
            .field("secret_access_key", &redact(&self.secret_access_key))
            .field("session_token", &redact(&self.session_token))
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

/// Where the share server keeps its blobs.
///
/// Parsed from `file:PATH`, `file:///abs/path`, a bare path, or `s3://BUCKET/PREFIX` (prefix
/// optional); see [`StoreSpec::from_str`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// A local directory (created 0700 if missing).
    File(PathBuf),
    /// An S3 bucket, with every key under `prefix` (no leading or trailing slash; may be empty).
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix, e.g. `freecode/shares`; empty for the bucket's root.
        prefix: String,
        /// Connection settings beyond the environment (default: environment only).
        options: S3Options,
    },
}

impl StoreSpec {
    /// An S3 spec configured from the environment only.
    pub fn s3(bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        Self::S3 {
            bucket: bucket.into(),
            prefix: prefix.into(),
            options: S3Options::default(),
        }
    }
}

impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "file:{}", path.display()),
            Self::S3 { bucket, prefix, .. } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Self::S3 { bucket, prefix, .. } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

/// Why a store spec string was rejected.
#[derive(Debug, thiserror::Error)]
pub enum StoreSpecError {
    /// The spec was empty.
    #[error("empty store spec: expected a directory, file:PATH or s3://BUCKET/PREFIX")]
    Empty,
    /// A URL scheme other than `file` or `s3`.
    #[error(
        "unsupported store {spec:?}: scheme {scheme:?} is not supported \
         (expected a directory, file:PATH, file:///abs/path or s3://BUCKET/PREFIX)"
    )]
    UnsupportedScheme {
        /// The spec as given.
        spec: String,
        /// Its scheme.
        scheme: String,
    },
    /// `file://host/...` with a host other than empty or `localhost`.
    #[error("unsupported store {spec:?}: file URLs must be file:///abs/path (no host)")]
    FileHost {
        /// The spec as given.
        spec: String,
    },
    /// `file:` with nothing after it.
    #[error("store {spec:?} names no path")]
    EmptyPath {
        /// The spec as given.
        spec: String,
    },
    /// `s3:` not followed by `//BUCKET`.
    #[error("invalid store {spec:?}: expected s3://BUCKET or s3://BUCKET/PREFIX")]
    MalformedS3 {
        /// The spec as given.
        spec: String,
    },
    /// A bucket name S3 would refuse.
    #[error(
        "invalid store {spec:?}: bucket {bucket:?} must be 3-63 characters of a-z, 0-9, '.' \
         and '-', starting and ending with a letter or digit"
    )]
    InvalidBucket {
        /// The spec as given.
        spec: String,
        /// The bucket part.
        bucket: String,
    },
    /// A prefix with empty, `.` or `..` segments or unusual characters.
    #[error(
        "invalid store {spec:?}: prefix {prefix:?} must be '/'-separated segments of \
         A-Z, a-z, 0-9, '.', '_' and '-' (no empty, '.' or '..' segments)"
    )]
    InvalidPrefix {
        /// The spec as given.
        spec: String,
        /// The prefix part.
        prefix: String,
    },
}

impl FromStr for StoreSpec {
    type Err = StoreSpecError;

    /// Parses `file:PATH`, `file:///abs/path`, `s3://BUCKET[/PREFIX]`, or a bare path.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        if spec.trim().is_empty() {
            return Err(StoreSpecError::Empty);
        }
        if let Some(rest) = spec.strip_prefix("s3:") {
            let Some(rest) = rest.strip_prefix("//") else {
                return Err(StoreSpecError::MalformedS3 {
                    spec: spec.to_owned(),
                });
            };
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(StoreSpecError::MalformedS3 {
                    spec: spec.to_owned(),
                });
            }
            if !valid_bucket(bucket) {
                return Err(StoreSpecError::InvalidBucket {
                    spec: spec.to_owned(),
                    bucket: bucket.to_owned(),
                });
            }
            let trimmed = prefix.trim_matches('/');
            if !valid_prefix(trimmed) {
                return Err(StoreSpecError::InvalidPrefix {
                    spec: spec.to_owned(),
                    prefix: prefix.to_owned(),
                });
            }
            return Ok(Self::s3(bucket, trimmed));
        }
        if let Some(rest) = spec.strip_prefix("file:") {
            let path = match rest.strip_prefix("//") {
                Some(url) => {
                    // file://HOST/path: only the empty host (or localhost) is this machine.
                    let (host, path) = url.split_at(url.find('/').unwrap_or(url.len()));
                    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                        return Err(StoreSpecError::FileHost {
                            spec: spec.to_owned(),
                        });
                    }
                    path
                }
                None => rest,
            };
            if path.is_empty() {
                return Err(StoreSpecError::EmptyPath {
                    spec: spec.to_owned(),
                });
            }
            return Ok(Self::File(PathBuf::from(path)));
        }
        // Anything else that looks like `scheme://` is a URL we don't speak.
        if let Some((scheme, _)) = spec.split_once("://") {
            return Err(StoreSpecError::UnsupportedScheme {
                spec: spec.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
        Ok(Self::File(PathBuf::from(spec)))
    }
}

/// S3's bucket naming rules (the common subset: lowercase, digits, dots, hyphens).
fn valid_bucket(b: &str) -> bool {
    let ok_char = |c: u8| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-');
    let ok_edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (3..=63).contains(&b.len())
        && b.bytes().all(ok_char)
        && b.bytes().next().is_some_and(ok_edge)
        && b.bytes().last().is_some_and(ok_edge)
        && !b.contains("..")
}

/// A key prefix made of plain segments (empty prefix allowed).
fn valid_prefix(p: &str) -> bool {
    p.is_empty()
        || p.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        })
}

/// A blob-store failure, naming the path or key involved.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// A filesystem operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An S3 request failed.
    #[error("s3 {op} {key}: {source}")]
    S3 {
        /// What was being done.
        op: &'static str,
        /// The object key (or prefix).
        key: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// The S3 client could not be configured.
    #[error("configuring s3 bucket {bucket:?}: {source}")]
    S3Config {
        /// The bucket.
        bucket: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// A create-if-absent write found the object already there.
    #[error("{key} already exists")]
    AlreadyExists {
        /// The path or key.
        key: String,
    },
    /// A blocking filesystem task panicked or was cancelled.
    #[error("filesystem task for {path}: {source}")]
    Task {
        /// The path being worked on.
        path: PathBuf,
        /// The join error.
        #[source]
        source: tokio::task::JoinError,
    },
}

/// One stored blob, as seen by a listing (for the sweeper's orphan check).
#[derive(Debug, Clone)]
pub struct BlobEntry {
    /// The blob's share code.
    pub code: ShareCode,
    /// When it was last written.
    pub modified: SystemTime,
}

/// The share server's storage: a directory or an S3 bucket. Cheap to clone.
#[derive(Debug, Clone)]
pub enum BlobStore {
    /// Files under a local directory.
    File(FileStore),
    /// Objects in an S3 bucket.
    S3(S3Store),
}

impl BlobStore {
    /// Opens the store `spec` names: creates the directory (0700) for a file store, builds the
    /// S3 client (no request yet) for a bucket.
    pub fn open(spec: &StoreSpec) -> Result<Self, BlobError> {
        match spec {
            StoreSpec::File(dir) => FileStore::open(dir).map(Self::File),
            StoreSpec::S3 {
                bucket,
                prefix,
                options,
            } => S3Store::open(bucket, prefix, options).map(Self::S3),
        }
    }

    /// Writes a blob, failing with [`BlobError::AlreadyExists`] if `code` already has one.
    pub async fn put_blob(&self, code: &ShareCode, data: Bytes) -> Result<(), BlobError> {
        match self {
            Self::File(s) => s.create(s.blob_path(code), data).await,
            Self::S3(s) => s.create(s.blob_key(code), data).await,
        }
    }

    /// Writes a record (the commit point), failing with [`BlobError::AlreadyExists`] if one is
    /// already there.
    pub async fn put_record(&self, code: &ShareCode, record: Bytes) -> Result<(), BlobError> {
        match self {
            Self::File(s) => s.create(s.record_path(code), record).await,
            Self::S3(s) => s.create(s.record_key(code), record).await,
        }
    }

    /// Reads a blob; `None` if there is none.
    pub async fn get_blob(&self, code: &ShareCode) -> Result<Option<Bytes>, BlobError> {
        match self {
            Self::File(s) => s.read(s.blob_path(code)).await,
            Self::S3(s) => s.read(s.blob_key(code)).await,
        }
    }

    /// Reads a record; `None` if there is none.
    pub async fn get_record(&self, code: &ShareCode) -> Result<Option<Bytes>, BlobError> {
        match self {
            Self::File(s) => s.read(s.record_path(code)).await,
            Self::S3(s) => s.read(s.record_key(code)).await,
        }
    }

    /// Removes a share: the record first (so it is gone for readers at once), then the blob.
    /// Removing what is already gone is not an error, so replicas may race on it.
    pub async fn delete(&self, code: &ShareCode) -> Result<(), BlobError> {
        match self {
            Self::File(s) => {
                s.remove(s.record_path(code)).await?;
                s.remove(s.blob_path(code)).await
            }
            Self::S3(s) => {
                s.remove(s.record_key(code)).await?;
                s.remove(s.blob_key(code)).await
            }
        }
    }

    /// Removes a blob alone (an orphan whose upload never committed a record).
    pub async fn delete_blob(&self, code: &ShareCode) -> Result<(), BlobError> {
        match self {
            Self::File(s) => s.remove(s.blob_path(code)).await,
            Self::S3(s) => s.remove(s.blob_key(code)).await,
        }
    }

    /// The codes that have a record (in no particular order).
    pub async fn list_records(&self) -> Result<Vec<ShareCode>, BlobError> {
        match self {
            Self::File(s) => {
                let names = s.list_dir(s.root.join(META_DIR)).await?;
                Ok(names
                    .into_iter()
                    .filter_map(|(n, _)| record_code(&n))
                    .collect())
            }
            Self::S3(s) => {
                let names = s.list(&s.meta_prefix).await?;
                Ok(names
                    .into_iter()
                    .filter_map(|(n, _)| record_code(&n))
                    .collect())
            }
        }
    }

    /// Every blob, with its modification time (in no particular order).
    pub async fn list_blobs(&self) -> Result<Vec<BlobEntry>, BlobError> {
        let names = match self {
            Self::File(s) => s.list_dir(s.root.join(BLOBS_DIR)).await?,
            Self::S3(s) => s.list(&s.blobs_prefix).await?,
        };
        Ok(names
            .into_iter()
            .filter_map(|(n, modified)| {
                Some(BlobEntry {
                    code: ShareCode::parse(&n)?,
                    modified,
                })
            })
            .collect())
    }

    /// Housekeeping beyond records and blobs: the file store removes temporary files older than
    /// `grace` (left by a crash mid-write). Nothing to do on S3, whose writes are atomic.
    pub async fn sweep_garbage(&self, grace: Duration) -> Result<usize, BlobError> {
        match self {
            Self::File(s) => s.sweep_temp(grace).await,
            Self::S3(_) => Ok(0),
        }
    }

    /// Whether the store answers: the directory is readable, or the bucket lists (one cheap
    /// delimited listing of the prefix's top level).
    pub async fn health(&self) -> Result<(), BlobError> {
        match self {
            Self::File(s) => s.health().await,
            Self::S3(s) => s.health().await,
        }
    }
}

impl BlobStore {
    /// Creates the sync object `key` with `data`, failing with [`BlobError::AlreadyExists`]
    /// if it is there (a conditional put on S3: two replicas never both succeed).
    pub async fn sync_create(&self, key: &SyncKey, data: Bytes) -> Result<(), BlobError> {
        match self {
            Self::File(s) => {
                let path = s.sync_path(key);
                if let Some(dir) = path.parent() {
                    create_private_dir(dir)?;
                }
                s.create(path, data).await
            }
            Self::S3(s) => s.create(s.sync_key(key), data).await,
        }
    }

    /// Replaces the sync object `key` with `data` whole (a rename over it; an overwriting put
    /// on S3). Only for what may change in place: a record's key wrap after a key rotation.
    pub async fn sync_replace(&self, key: &SyncKey, data: Bytes) -> Result<(), BlobError> {
        match self {
            Self::File(s) => {
                let path = s.sync_path(key);
                let p = path.clone();
                blocking(&p, move || replace_atomic(&path, &data)).await
            }
            Self::S3(s) => s.replace(s.sync_key(key), data).await,
        }
    }

    /// Reads the sync object `key`; `None` if there is none.
    pub async fn sync_get(&self, key: &SyncKey) -> Result<Option<Bytes>, BlobError> {
        match self {
            Self::File(s) => s.read(s.sync_path(key)).await,
            Self::S3(s) => s.read(s.sync_key(key)).await,
        }
    }

    /// Whether the sync object `key` exists (without reading it).
    pub async fn sync_exists(&self, key: &SyncKey) -> Result<bool, BlobError> {
        match self {
            Self::File(s) => {
                let path = s.sync_path(key);
                let p = path.clone();
                blocking(&p, move || match std::fs::symlink_metadata(&path) {
                    Ok(m) => Ok(m.is_file()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                    Err(source) => Err(BlobError::Io {
                        op: "checking",
                        path,
                        source,
                    }),
                })
                .await
            }
            Self::S3(s) => {
                let k = s.sync_key(key);
                match s.s3.head(&k).await {
                    Ok(_) => Ok(true),
                    Err(object_store::Error::NotFound { .. }) => Ok(false),
                    Err(e) => Err(s.err("head", &k, e)),
                }
            }
        }
    }

    /// Every sync object under `under` (recursively), as keys, in no particular order.
    pub async fn sync_list(&self, under: &SyncKey) -> Result<Vec<SyncKey>, BlobError> {
        match self {
            Self::File(s) => {
                let root = s.root.join(SYNC_DIR);
                let dir = s.sync_path(under);
                let d = dir.clone();
                blocking(&d, move || list_tree(&root, &dir)).await
            }
            Self::S3(s) => {
                let objects = s.sync_objects(under).await?;
                let root: Vec<String> =
                    s.sync_root.parts().map(|p| p.as_ref().to_owned()).collect();
                Ok(objects
                    .into_iter()
                    .filter_map(|o| {
                        let parts: Vec<String> =
                            o.location.parts().map(|p| p.as_ref().to_owned()).collect();
                        let rel = parts.strip_prefix(root.as_slice())?;
                        SyncKey::new(rel.iter().map(String::as_str))
                    })
                    .collect())
            }
        }
    }

    /// How many sync objects are under `under` (recursively) and their bytes in all.
    pub async fn sync_usage(&self, under: &SyncKey) -> Result<(u64, u64), BlobError> {
        match self {
            Self::File(s) => {
                let root = s.root.join(SYNC_DIR);
                let dir = s.sync_path(under);
                let d = dir.clone();
                blocking(&d, move || {
                    let keys = list_tree(&root, &dir)?;
                    let mut bytes = 0u64;
                    for k in &keys {
                        let mut p = root.clone();
                        p.extend(k.segments());
                        // Gone since the listing (a purge): not counted.
                        if let Ok(m) = std::fs::symlink_metadata(&p) {
                            bytes = bytes.saturating_add(m.len());
                        }
                    }
                    Ok((keys.len() as u64, bytes))
                })
                .await
            }
            Self::S3(s) => {
                let objects = s.sync_objects(under).await?;
                let bytes = objects
                    .iter()
                    .map(|o| o.size)
                    .fold(0u64, u64::saturating_add);
                Ok((objects.len() as u64, bytes))
            }
        }
    }

    /// Removes the sync object `key` (already gone is not an error).
    pub async fn sync_remove(&self, key: &SyncKey) -> Result<(), BlobError> {
        match self {
            Self::File(s) => {
                let path = s.sync_path(key);
                s.remove(path.clone()).await?;
                // Empty folders left by a purge go too (best effort: a replica may be adding).
                let root = s.root.join(SYNC_DIR);
                let mut dir = path.parent().map(Path::to_path_buf);
                while let Some(d) = dir {
                    if d == root || !d.starts_with(&root) || std::fs::remove_dir(&d).is_err() {
                        break;
                    }
                    dir = d.parent().map(Path::to_path_buf);
                }
                Ok(())
            }
            Self::S3(s) => s.remove(s.sync_key(key)).await,
        }
    }
}

/// The name of a sync object: one to eight segments of 1 to 64 lowercase ASCII letters and
/// digits (hex ids, zero-padded indexes), so no request can name anything outside `sync/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SyncKey(Vec<String>);

impl SyncKey {
    /// The key of `segments`; `None` unless each is a valid segment.
    pub fn new<'a>(segments: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let v: Vec<String> = segments.into_iter().map(str::to_owned).collect();
        let ok = !v.is_empty()
            && v.len() <= 8
            && v.iter().all(|s| {
                !s.is_empty()
                    && s.len() <= 64
                    && s.bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            });
        ok.then_some(Self(v))
    }

    /// The segments.
    pub fn segments(&self) -> &[String] {
        &self.0
    }
}

/// Files below `dir` as keys relative to `root` (temporary files and links skipped).
fn list_tree(root: &Path, dir: &Path) -> Result<Vec<SyncKey>, BlobError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(BlobError::Io {
                    op: "listing",
                    path: d,
                    source,
                });
            }
        };
        for entry in entries {
            let entry = entry.map_err(|source| BlobError::Io {
                op: "listing",
                path: d.clone(),
                source,
            })?;
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && let Ok(rel) = path.strip_prefix(root)
                && let Some(key) = SyncKey::new(rel.iter().filter_map(|c| c.to_str()))
            {
                out.push(key);
            }
        }
    }
    Ok(out)
}

/// `<code>.json` → the code.
fn record_code(name: &str) -> Option<ShareCode> {
    ShareCode::parse(name.strip_suffix(RECORD_SUFFIX)?)
}

/// Runs blocking filesystem work off the async threads.
async fn blocking<T: Send + 'static>(
    path: &Path,
    f: impl FnOnce() -> Result<T, BlobError> + Send + 'static,
) -> Result<T, BlobError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|source| BlobError::Task {
            path: path.to_owned(),
            source,
        })?
}

/// A store in a local directory: `<root>/blobs/<code>`, `<root>/meta/<code>.json`.
#[derive(Debug, Clone)]
pub struct FileStore {
    root: Arc<PathBuf>,
}

impl FileStore {
    /// Opens (creating, 0700) `root` and its `blobs/` and `meta/` folders.
    pub fn open(root: &Path) -> Result<Self, BlobError> {
        create_private_dir(root)?;
        create_private_dir(&root.join(BLOBS_DIR))?;
        create_private_dir(&root.join(META_DIR))?;
        Ok(Self {
            root: Arc::new(root.to_owned()),
        })
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where a code's blob lives.
    pub fn blob_path(&self, code: &ShareCode) -> PathBuf {
        self.root.join(BLOBS_DIR).join(code.as_str())
    }

    /// Where a sync object lives.
    pub fn sync_path(&self, key: &SyncKey) -> PathBuf {
        let mut p = self.root.join(SYNC_DIR);
        p.extend(key.segments());
        p
    }

    /// Where a code's record lives.
    pub fn record_path(&self, code: &ShareCode) -> PathBuf {
        self.root
            .join(META_DIR)
            .join(format!("{code}{RECORD_SUFFIX}"))
    }

    /// Atomically creates `path` with `data` (0600): temp file in the same directory, fsync,
    /// then a hard link to the final name, which fails if the name exists (create-if-absent).
    async fn create(&self, path: PathBuf, data: Bytes) -> Result<(), BlobError> {
        let p = path.clone();
        blocking(&p, move || create_atomic(&path, &data)).await
    }

    async fn read(&self, path: PathBuf) -> Result<Option<Bytes>, BlobError> {
        let p = path.clone();
        blocking(&p, move || match std::fs::read(&path) {
            Ok(data) => Ok(Some(Bytes::from(data))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(BlobError::Io {
                op: "reading",
                path,
                source,
            }),
        })
        .await
    }

    async fn remove(&self, path: PathBuf) -> Result<(), BlobError> {
        let p = path.clone();
        blocking(&p, move || match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(BlobError::Io {
                op: "removing",
                path,
                source,
            }),
        })
        .await
    }

    /// File names in `dir` with their modification times.
    async fn list_dir(&self, dir: PathBuf) -> Result<Vec<(String, SystemTime)>, BlobError> {
        let p = dir.clone();
        blocking(&p, move || {
            let io = |source| BlobError::Io {
                op: "listing",
                path: dir.clone(),
                source,
            };
            let mut out = Vec::new();
            for entry in std::fs::read_dir(&dir).map_err(io)? {
                let entry = entry.map_err(io)?;
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                // A file removed between listing and stat is simply skipped.
                let Ok(meta) = entry.metadata() else { continue };
                if meta.is_file() {
                    out.push((name, meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
                }
            }
            Ok(out)
        })
        .await
    }

    async fn sweep_temp(&self, grace: Duration) -> Result<usize, BlobError> {
        let mut removed = 0;
        for sub in [BLOBS_DIR, META_DIR] {
            let dir = self.root.join(sub);
            for (name, modified) in self.list_dir(dir.clone()).await? {
                let stale = SystemTime::now()
                    .duration_since(modified)
                    .is_ok_and(|age| age > grace);
                if name.starts_with(TEMP_PREFIX) && stale {
                    self.remove(dir.join(&name)).await?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    async fn health(&self) -> Result<(), BlobError> {
        let dir = self.root.join(META_DIR);
        let p = dir.clone();
        blocking(&p, move || {
            std::fs::read_dir(&dir)
                .map(drop)
                .map_err(|source| BlobError::Io {
                    op: "listing",
                    path: dir,
                    source,
                })
        })
        .await
    }
}

/// Creates `dir` (and parents) if missing; the directories this creates are 0700.
fn create_private_dir(dir: &Path) -> Result<(), BlobError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|source| BlobError::Io {
        op: "creating directory",
        path: dir.to_owned(),
        source,
    })
}

/// Writes `data` to a fresh temp file (0600) in `path`'s directory and fsyncs it: its name.
fn write_temp(path: &Path, data: &[u8]) -> Result<PathBuf, BlobError> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let suffix = random_hex::<8>().map_err(|e| BlobError::Io {
        op: "naming temp file for",
        path: path.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let tmp = dir.join(format!("{TEMP_PREFIX}{suffix}"));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&tmp)
        .map_err(io("creating", &tmp))
        .and_then(|mut file| {
            file.write_all(data).map_err(io("writing", &tmp))?;
            file.sync_all().map_err(io("syncing", &tmp))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|()| tmp)
}

/// Writes `data` to a fresh temp file beside `path`, fsyncs it, links it to `path` (failing if
/// `path` exists), removes the temp name, and fsyncs the directory.
fn create_atomic(path: &Path, data: &[u8]) -> Result<(), BlobError> {
    let tmp = write_temp(path, data)?;
    let linked = match std::fs::hard_link(&tmp, path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(BlobError::AlreadyExists {
            key: path.display().to_string(),
        }),
        Err(source) => Err(BlobError::Io {
            op: "linking",
            path: path.to_owned(),
            source,
        }),
    };
    // The temp name goes whatever happened; a failure here only leaves garbage for the sweeper.
    let _ = std::fs::remove_file(&tmp);
    linked?;
    sync_dir(path.parent().unwrap_or_else(|| Path::new(".")))
}

/// Atomically replaces `path` with `data` (0600): temp file in the same directory, fsync,
/// rename over it, fsync the directory.
fn replace_atomic(path: &Path, data: &[u8]) -> Result<(), BlobError> {
    let tmp = write_temp(path, data)?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("renaming", path)(e));
    }
    sync_dir(path.parent().unwrap_or_else(|| Path::new(".")))
}

/// Maps an I/O error on `path` while doing `op`.
fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BlobError + 'a {
    move |source| BlobError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Makes a directory's entries durable (a no-op where directories cannot be opened).
fn sync_dir(dir: &Path) -> Result<(), BlobError> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|source| BlobError::Io {
                op: "syncing directory",
                path: dir.to_owned(),
                source,
            })?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// A store in an S3 bucket: `<prefix>/blobs/<code>`, `<prefix>/meta/<code>.json`.
#[derive(Clone)]
pub struct S3Store {
    s3: Arc<AmazonS3>,
    bucket: String,
    prefix: ObjectPath,
    blobs_prefix: ObjectPath,
    meta_prefix: ObjectPath,
    sync_root: ObjectPath,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix.as_ref())
            .finish_non_exhaustive()
    }
}

impl S3Store {
    /// Builds the client: `AmazonS3Builder::from_env()`, then `options` on top, conditional
    /// puts (`If-None-Match: *`) for create-if-absent, and a bounded retry budget.
    pub fn open(bucket: &str, prefix: &str, options: &S3Options) -> Result<Self, BlobError> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if let Some(v) = &options.endpoint {
            builder = builder.with_endpoint(v);
        }
        if let Some(v) = &options.region {
            builder = builder.with_region(v);
        }
        if let Some(v) = &options.access_key_id {
            builder = builder.with_access_key_id(v);
        }
        if let Some(v) = &options.secret_access_key {
            builder = builder.with_secret_access_key(v);
        }
        if let Some(v) = &options.session_token {
            builder = builder.with_token(v);
        }
        if let Some(v) = options.allow_http {
            builder = builder.with_allow_http(v);
        }
        let retry = object_store::RetryConfig {
            backoff: object_store::BackoffConfig::default(),
            max_retries: 3,
            retry_timeout: Duration::from_secs(30),
        };
        let s3 = builder
            .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
            .with_retry(retry)
            .build()
            .map_err(|source| BlobError::S3Config {
                bucket: bucket.to_owned(),
                source,
            })?;
        let prefix = ObjectPath::from_iter(prefix.split('/').filter(|s| !s.is_empty()));
        Ok(Self {
            s3: Arc::new(s3),
            bucket: bucket.to_owned(),
            blobs_prefix: prefix.clone().join(BLOBS_DIR),
            meta_prefix: prefix.clone().join(META_DIR),
            sync_root: prefix.clone().join(SYNC_DIR),
            prefix,
        })
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// A code's blob key.
    pub fn blob_key(&self, code: &ShareCode) -> ObjectPath {
        self.blobs_prefix.clone().join(code.as_str())
    }

    /// A sync object's key.
    pub fn sync_key(&self, key: &SyncKey) -> ObjectPath {
        key.segments()
            .iter()
            .fold(self.sync_root.clone(), |p, s| p.join(s.as_str()))
    }

    /// A code's record key.
    pub fn record_key(&self, code: &ShareCode) -> ObjectPath {
        self.meta_prefix
            .clone()
            .join(format!("{code}{RECORD_SUFFIX}"))
    }

    fn err(&self, op: &'static str, key: &ObjectPath, source: object_store::Error) -> BlobError {
        BlobError::S3 {
            op,
            key: format!("s3://{}/{key}", self.bucket),
            source,
        }
    }

    async fn create(&self, key: ObjectPath, data: Bytes) -> Result<(), BlobError> {
        let opts = PutOptions::from(PutMode::Create);
        match self.s3.put_opts(&key, PutPayload::from(data), opts).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => Err(BlobError::AlreadyExists {
                key: format!("s3://{}/{key}", self.bucket),
            }),
            Err(e) => Err(self.err("put", &key, e)),
        }
    }

    async fn replace(&self, key: ObjectPath, data: Bytes) -> Result<(), BlobError> {
        let opts = PutOptions::from(PutMode::Overwrite);
        match self.s3.put_opts(&key, PutPayload::from(data), opts).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.err("put", &key, e)),
        }
    }

    /// Every object below the sync key `under`, with its metadata.
    async fn sync_objects(
        &self,
        under: &SyncKey,
    ) -> Result<Vec<object_store::ObjectMeta>, BlobError> {
        use futures_util::TryStreamExt as _;
        let prefix = self.sync_key(under);
        self.s3
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| self.err("list", &prefix, e))
    }

    async fn read(&self, key: ObjectPath) -> Result<Option<Bytes>, BlobError> {
        let got = match self.s3.get(&key).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.err("get", &key, e)),
        };
        match got.bytes().await {
            Ok(data) => Ok(Some(data)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("get", &key, e)),
        }
    }

    async fn remove(&self, key: ObjectPath) -> Result<(), BlobError> {
        match self.s3.delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err("delete", &key, e)),
        }
    }

    /// Object names directly under `prefix`, with their modification times.
    async fn list(&self, prefix: &ObjectPath) -> Result<Vec<(String, SystemTime)>, BlobError> {
        let listed = self
            .s3
            .list_with_delimiter(Some(prefix))
            .await
            .map_err(|e| self.err("list", prefix, e))?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|o| {
                let name = o.location.filename()?.to_owned();
                Some((name, SystemTime::from(o.last_modified)))
            })
            .collect())
    }

    async fn health(&self) -> Result<(), BlobError> {
        // Delimited: returns the prefix's top level (`blobs/`, `meta/`), not every share.
        let prefix = (!self.prefix.as_ref().is_empty()).then_some(&self.prefix);
        self.s3
            .list_with_delimiter(prefix)
            .await
            .map(drop)
            .map_err(|e| self.err("list", &self.prefix, e))
    }
}

#[cfg(test)]
mod tests;
