//! The HTTP connection layer of freecode's two servers, the share server (`freecode sync
//! serve`) and the web viewer (`freecode ui`): one accept loop ([`serve`]) that caps open
//! connections and closes the ones that hold a slot without a request in the handlers (a
//! request head sent too slowly, a keep-alive connection left idle, a response nobody reads),
//! and one body wrapper ([`OnEnd`]) that says when a body has been read to its end.
//!
//! What a handler does with a request (its own time and body limits) stays with each server;
//! this crate only bounds what happens around the handlers. See [`conn`] for the deadlines.

mod body;
pub mod conn;

pub use body::OnEnd;
pub use conn::{ConnLimits, serve};
