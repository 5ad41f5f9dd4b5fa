//! `freecode schema` (hidden): writes the JSON Schemas of the `--json` outputs, generated from
//! the result types in [`freecode_ops::types`], as `docs/schemas/*.json` holds them.

use std::path::PathBuf;

use crate::render::print_line;
use freecode_ops::types::{SCHEMA_FILES, schema_text};

/// `freecode schema`.
#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// The directory to write the schema files into (an existing one); without it, each file's
    /// name and the outputs it describes are printed.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

impl SchemaArgs {
    /// Writes (or lists) the schema files.
    pub fn run(self) -> anyhow::Result<()> {
        for f in SCHEMA_FILES {
            match &self.out {
                Some(dir) => {
                    let path = dir.join(f.name);
                    freecode_store::fsutil::write_user_file(&path, schema_text(f)?.as_bytes())?;
                    print_line(&path.display().to_string())?;
                }
                None => print_line(&format!("{}\t{}", f.name, f.used_by))?,
            }
        }
        Ok(())
    }
}
