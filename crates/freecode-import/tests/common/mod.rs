//! Helpers the SQLite readers' tests share: a directory nobody can write, and a snapshot of a
//! directory's bytes and mtimes to show a read left it as it was.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A directory nobody can write while this lives, root included: mode 0555 and, where the file
/// system and our capabilities allow, the immutable attribute (`chattr +i`).
pub struct Unwritable(PathBuf, bool);

impl Unwritable {
    pub fn new(dir: &Path) -> Self {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
        let frozen = std::process::Command::new("chattr")
            .arg("+i")
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        Self(dir.to_owned(), frozen)
    }

    /// Whether a file can still be created in it (as root without `chattr`, it can).
    pub fn is_writable(&self) -> bool {
        let probe = self.0.join(".probe");
        let created = fs::write(&probe, b"").is_ok();
        let _ = fs::remove_file(&probe);
        created
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        }
        let _ = fs::set_permissions(&self.0, fs::Permissions::from_mode(0o700));
    }
}

pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let meta = fs::metadata(&path).unwrap();
            (
                path.clone(),
                (fs::read(&path).unwrap(), meta.modified().unwrap()),
            )
        })
        .collect()
}
