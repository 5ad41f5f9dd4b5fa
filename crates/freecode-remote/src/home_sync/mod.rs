//! Home sync: one end-to-end encrypted memory across machines, through the share server.
//!
//! The model is atuin's: every machine is a *host* with a random id, and each host appends
//! records only to its own logs, one log per session (and one control log for purges). The
//! server stores sealed records under `logs/<log>/<host>/<index>` and counts them; the client
//! diffs the counts against what it has seen to know what to download.
//!
//! - [`seal`]: the sync key (32 random bytes, carried as a 24-word phrase), the ids and chain
//!   it keys, and the sealed records and claims (XChaCha20-Poly1305 under a per-record key
//!   wrapped by the sync key; host, log, index and kind bound as associated data).
//! - [`remote`]: the blocking client of the server's `/sync/v1/` endpoints.
//! - [`notice`]: a rotation's notice for the machines it rotates out (who, when).
//!
//! What a record holds and how it is applied is the operations layer's (`freecode-ops`'s
//! `home_sync`): this module moves and protects bytes, it does not read a session.

pub mod notice;
pub mod remote;
pub mod seal;

pub use remote::{BatchAnswer, BatchItem, Claimed, LogCount, Put, Remote};
pub use seal::{Chain, HostId, Kind, LogId, Opened, SealError, SyncKey};
