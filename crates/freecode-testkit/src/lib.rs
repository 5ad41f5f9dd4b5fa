//! What the freecode crates' tests share (a dev-dependency only): where the TypeScript
//! original's reference fixtures are, and a writable, private copy of a fixture tree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// `../shared/fixtures/reference`, beside the repository: the original's data and what its
/// readers returned.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/reference")
}

/// Copies a tree, making the copy the owner's: directories 0700, files 0600 (the shared
/// fixtures have no write bits). Panics on any error: it is for tests.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
}

/// `../shared/fixtures/external`, beside the repository: files written by other tools (agents'
/// session files, the secret scanners' labelled strings).
pub fn external_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/external")
}
