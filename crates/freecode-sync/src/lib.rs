//! The share server and its client.
//!
//! - [`server`]: `freecode sync serve`, an axum app that stores opaque bundles in a [`blob`]
//!   store (a directory, or an S3 bucket through `object_store`) with their expiry and a hashed
//!   delete token beside them, so the server keeps no state of its own and replicas scale out.
//! - [`crypto`]: the end-to-end envelope (XChaCha20-Poly1305; the key travels in the URL fragment).
//! - [`client`]: upload, download and revoke over HTTPS (plain HTTP only to loopback).
//! - [`home`]: home sync's key, sealed records and claims, and its endpoints' client.
//!
//! The server is the default feature `server`; without it the crate is the client and the
//! envelope only (what `freecode-ops` links: no axum, hyper, object_store or tokio).

#[cfg(feature = "server")]
pub mod blob;
pub mod client;
pub mod crypto;
pub mod home;
#[cfg(feature = "server")]
pub mod server;
