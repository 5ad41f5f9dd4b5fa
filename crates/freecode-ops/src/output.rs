//! Files the user names for an operation's output (`--file`, `--otlp FILE`, `--html FILE`):
//! `-` is standard output; a FIFO, terminal or device is written into; a regular file is
//! replaced atomically, 0600, and left as it was when the writing fails.

use std::io::Write;
use std::path::Path;

use freecode_store::fsutil::{self, UserTarget};

use crate::error::{Error, Result};

/// Writes the output `write` produces to `path` as the module docs say, as it is produced,
/// never holding it whole.
pub fn write_user_stream(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    match fsutil::user_target(path)? {
        UserTarget::Stdout => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            write(&mut out)
        }
        UserTarget::Stream(p) => {
            // No O_CREAT, no O_TRUNC: a stream is written into as it is.
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(Error::io("open", &p))?;
            let mut out = std::io::BufWriter::new(f);
            write(&mut out)
        }
        UserTarget::File { replace, .. } => fsutil::write_atomic_with(&replace, true, write),
    }
}

/// Writes `bytes` to `path` as the module docs say.
pub fn write_user_file(path: &Path, bytes: &[u8]) -> Result<()> {
    fsutil::write_user_file(path, bytes)?;
    Ok(())
}
