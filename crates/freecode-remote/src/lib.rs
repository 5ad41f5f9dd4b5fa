//! What crosses machines: shares, home sync's client side, and the server of both.
//!
//! - [`share`]: a share's upload, download and revoke over HTTPS (plain HTTP only to
//!   loopback), the server's address and key (`syncEndpoint`, `syncApiKey`), `shares.jsonl`.
//! - [`crypto`]: a share's end-to-end envelope (XChaCha20-Poly1305; the key travels in the URL
//!   fragment).
//! - [`home_sync`]: home sync's key, sealed records and claims, and its endpoints' client (the
//!   engine that decides what to push and apply is `freecode-ops`'s `home_sync`).
//! - [`server`]: `freecode sync serve`, an axum app that stores opaque shares in a [`blob`]
//!   store (a directory, or an S3 bucket through `object_store`) with their expiry and a hashed
//!   delete token beside them, and each sync group's sealed records behind its credential;
//!   replicas over one store serve as one (what each keeps in memory: [`server`]'s "State").
//!
//! The server is the default feature `server`; without it the crate is the client and the
//! envelope only (what `freecode-ops` links: no axum, hyper, object_store or tokio).

#[cfg(feature = "server")]
pub mod blob;
pub mod crypto;
pub mod home_sync;
#[cfg(feature = "server")]
pub mod server;
pub mod share;
