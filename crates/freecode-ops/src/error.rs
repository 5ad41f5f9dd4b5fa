//! The one error of the operations, and its [`ErrorKind`]: what each front end maps once.
//!
//! | kind | CLI exit | JSON-RPC code | MCP | HTTP |
//! |---|---|---|---|---|
//! | [`ErrorKind::Invalid`] | 1 | -32602 | `isError` | 400 |
//! | [`ErrorKind::NotFound`] | 1 | -32001 | `isError` | 404 |
//! | [`ErrorKind::Busy`] | 1 | -32002 | `isError` | 409 |
//! | [`ErrorKind::Failed`] | 1 | -32603 | `isError` | 500 |
//! | [`ErrorKind::Internal`] | 2 | -32603 | `isError` | 500 |
//!
//! An error of a lower layer (the store, a bundle, the share client) keeps its own type inside
//! [`Error`] (transparently: its message and its sources are the error's), and [`kind_of`]
//! classifies it wherever it turns up in a chain, so a front end that calls the store directly
//! maps the same way.

use std::path::Path;

use freecode_core::IdError;
use freecode_core::bundle::BundleError;
use freecode_import::importer::ImportError;
use freecode_remote::crypto::CryptoError;
use freecode_remote::share::ClientError;
use freecode_store::StoreError;
use freecode_store::share::ShareError;

/// What went wrong, as every front end tells it to its user (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is wrong: a bad id or prefix, flag, param, filter or file.
    Invalid,
    /// What it names does not exist: a session, its rollout log, a share in this home.
    NotFound,
    /// Another process holds the session.
    Busy,
    /// Refused or failed for a reason the user can act on: a damaged file, a bundle too large,
    /// an expired share, an unreachable server, a corrupt `config.json`.
    Failed,
    /// Anything unexpected: an I/O failure, a bug.
    Internal,
}

/// The result of an operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An operation's error. Its message is what the user reads; [`Error::kind`] is what a front
/// end maps (an exit status, a JSON-RPC code, an HTTP status).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request is wrong ([`ErrorKind::Invalid`]).
    #[error("{0}")]
    Invalid(String),
    /// What the request names does not exist ([`ErrorKind::NotFound`]).
    #[error("{0}")]
    NotFound(String),
    /// Refused for a reason the user can act on ([`ErrorKind::Failed`]).
    #[error("{0}")]
    Failed(String),
    /// Something that should not happen did ([`ErrorKind::Internal`]).
    #[error("{0}")]
    Internal(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An invalid session id.
    #[error(transparent)]
    Id(#[from] IdError),
    /// An export or an import of a bundle failed.
    #[error(transparent)]
    Share(#[from] ShareError),
    /// The share server or the envelope failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A bundle is invalid.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// Another agent's sessions could not be imported.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// An I/O failure, with what was being done (the path in it).
    #[error("{context}")]
    Io {
        /// What was being done: `read /path/…`.
        context: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// An I/O failure on a stream: an output (whose reader may have gone away), a provider's
    /// answer.
    #[error(transparent)]
    Stream(#[from] std::io::Error),
    /// A value could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// `source`, with what was being done when it happened.
    #[error("{context}")]
    Context {
        /// What was being done: `export of <id> failed`.
        context: String,
        /// What went wrong.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// An I/O failure while doing `op` on `path`: `op path` is its message.
    pub fn io(op: &str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let context = format!("{op} {}", path.display());
        move |source| Self::Io { context, source }
    }

    /// `self`, saying what was being done: `context: self` in a chain.
    pub fn context(self, context: impl Into<String>) -> Self {
        Self::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// What kind of failure this is (see the module docs).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_) => ErrorKind::Invalid,
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::Failed(_) => ErrorKind::Failed,
            Self::Internal(_) => ErrorKind::Internal,
            Self::Store(e) => store_kind(e),
            Self::Id(_) => ErrorKind::Invalid,
            Self::Share(e) => share_kind(e),
            Self::Client(e) => client_kind(e),
            Self::Bundle(_) => ErrorKind::Failed,
            Self::Import(ImportError::Store(e)) => store_kind(e),
            Self::Io { .. } | Self::Stream(_) | Self::Json(_) => ErrorKind::Internal,
            Self::Context { source, .. } => source.kind(),
        }
    }

    /// The store error inside, if this is one (for a front end's own wording of it).
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e)
            | Self::Share(ShareError::Store(e))
            | Self::Client(ClientError::Store(e) | ClientError::Export(ShareError::Store(e)))
            | Self::Import(ImportError::Store(e)) => Some(e),
            Self::Context { source, .. } => source.store_error(),
            _ => None,
        }
    }

    /// The kind of the I/O failure inside, if this is one: a front end ends quietly on a
    /// broken pipe.
    pub fn io_error_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Self::Io { source, .. } | Self::Stream(source) => Some(source.kind()),
            Self::Json(e) => e.io_error_kind(),
            Self::Context { source, .. } => source.io_error_kind(),
            _ => match self.store_error() {
                Some(StoreError::Io { source, .. }) => Some(source.kind()),
                _ => None,
            },
        }
    }
}

fn store_kind(e: &StoreError) -> ErrorKind {
    match e {
        StoreError::NotFound { .. } => ErrorKind::NotFound,
        StoreError::InvalidId(_)
        | StoreError::AmbiguousId { .. }
        | StoreError::InvalidProjectPath { .. }
        | StoreError::Compaction(_) => ErrorKind::Invalid,
        StoreError::Locked { .. } => ErrorKind::Busy,
        // A file that does not parse is named for the user to repair (`freecode doctor`); an
        // I/O failure is unexpected.
        StoreError::Io { .. } => ErrorKind::Internal,
        _ => ErrorKind::Failed,
    }
}

fn share_kind(e: &ShareError) -> ErrorKind {
    match e {
        ShareError::Store(e) => store_kind(e),
        _ => ErrorKind::Failed,
    }
}

fn client_kind(e: &ClientError) -> ErrorKind {
    match e {
        ClientError::Store(e) => store_kind(e),
        ClientError::Export(e) => share_kind(e),
        // The caller's URL or key is bad.
        ClientError::BadUrl { .. }
        | ClientError::Insecure { .. }
        | ClientError::MissingKey
        | ClientError::Crypto(CryptoError::BadKey) => ErrorKind::Invalid,
        _ => ErrorKind::Failed,
    }
}

/// The kind of `e` when it is an error of the operations or of a layer under them (the store,
/// an id, a bundle, a share, the share client); `None` for anything else. A front end walks
/// an error's chain and maps the first kind it finds.
pub fn kind_of(e: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    if let Some(e) = e.downcast_ref::<Error>() {
        return Some(e.kind());
    }
    if let Some(e) = e.downcast_ref::<StoreError>() {
        return Some(store_kind(e));
    }
    if e.downcast_ref::<IdError>().is_some() {
        return Some(ErrorKind::Invalid);
    }
    if let Some(e) = e.downcast_ref::<ShareError>() {
        return Some(share_kind(e));
    }
    if let Some(e) = e.downcast_ref::<ClientError>() {
        return Some(client_kind(e));
    }
    if e.downcast_ref::<BundleError>().is_some() {
        return Some(ErrorKind::Failed);
    }
    if let Some(ImportError::Store(e)) = e.downcast_ref::<ImportError>() {
        return Some(store_kind(e));
    }
    None
}

/// `e` and its causes, `what: why: cause` (as `anyhow` prints an error with `{:#}`): what a
/// front end without a chain of its own (JSON-RPC, MCP) shows.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_keeps_the_kind_and_reads_as_a_chain() {
        let e = Error::NotFound("no such share".into()).context("cannot revoke x");
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(e.to_string(), "cannot revoke x");
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("no such share"));
        assert_eq!(chain(&e), "cannot revoke x: no such share");
    }

    #[test]
    fn store_errors_are_classified_inside_and_outside_an_error() {
        let locked = StoreError::Locked {
            id: "s".into(),
            pid: Some(1),
        };
        assert_eq!(kind_of(&locked), Some(ErrorKind::Busy));
        let wrapped = Error::from(locked);
        assert_eq!(kind_of(&wrapped), Some(ErrorKind::Busy));
        assert!(wrapped.store_error().is_some());
        let io = Error::Stream(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert_eq!(io.kind(), ErrorKind::Internal);
        assert_eq!(io.io_error_kind(), Some(std::io::ErrorKind::BrokenPipe));
        let plain = std::io::Error::other("x");
        assert_eq!(kind_of(&plain), None);
    }
}
