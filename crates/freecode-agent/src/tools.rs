//! The agent's tools — `read_file`, `list_dir`, `write_file` — confined to the project
//! directory, and the permission mode that decides which of them may run.
//!
//! Paths are relative to the project directory; a path that resolves outside it (through `..`,
//! an absolute path or a symlink) is refused. Reads and listings are bounded. `write_file` only
//! runs in `workspace-write` mode; in the default `read-only` mode it is denied before it runs
//! (the loop records `function.denied` and hands the refusal text to the model).

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use freecode_core::rollout::DenySource;
use serde_json::{Value, json};

/// The most bytes `read_file` returns.
pub const MAX_READ_BYTES: u64 = 64 * 1024;
/// The most entries `list_dir` returns.
pub const MAX_LIST_ENTRIES: usize = 500;
/// The most bytes `write_file` writes.
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;

/// What the agent may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionMode {
    /// Read and list only: every write is denied.
    #[default]
    ReadOnly,
    /// Also write files inside the project directory.
    WorkspaceWrite,
}

impl PermissionMode {
    /// The mode's name as the flag spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
        }
    }
}

/// Whether a call may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Refuse it: who refused and the text handed back to the model.
    Deny {
        /// The gate.
        source: DenySource,
        /// The refusal text.
        reason: String,
    },
}

/// The tools of one project directory.
#[derive(Debug, Clone)]
pub struct Tools {
    root: PathBuf,
    mode: PermissionMode,
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

impl Tools {
    /// Tools confined to `project` (made canonical; it must exist).
    pub fn new(project: &Path, mode: PermissionMode) -> std::io::Result<Self> {
        Ok(Self {
            root: project.canonicalize()?,
            mode,
        })
    }

    /// The canonical project directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The OpenAI `tools` array.
    pub fn definitions(&self) -> Value {
        let function = |name: &str, description: &str, params: Value| {
            json!({"type": "function", "function": {
                "name": name, "description": description, "parameters": params}})
        };
        json!([
            function(
                "read_file",
                "Read a text file of the project (at most 64 KiB).",
                json!({"type": "object", "properties": {
                    "path": {"type": "string", "description": "Path relative to the project directory"}},
                    "required": ["path"]}),
            ),
            function(
                "list_dir",
                "List a directory of the project; directories end in '/'.",
                json!({"type": "object", "properties": {
                    "path": {"type": "string", "description": "Path relative to the project directory (default '.')"}},
                    "required": []}),
            ),
            function(
                "write_file",
                "Write a text file of the project (needs the workspace-write permission).",
                json!({"type": "object", "properties": {
                    "path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["path", "content"]}),
            ),
        ])
    }

    /// How many tools are offered.
    pub fn count(&self) -> u64 {
        3
    }

    /// Whether the permission mode lets the call run.
    pub fn check(&self, name: &str, _args: &Value) -> Decision {
        match (name, self.mode) {
            ("write_file", PermissionMode::ReadOnly) => Decision::Deny {
                source: DenySource::Mode,
                reason: "write_file is not allowed in read-only mode \
                         (run with --permission workspace-write to allow writes)"
                    .to_owned(),
            },
            _ => Decision::Allow,
        }
    }

    /// Runs an allowed call: the output for the model, or the error text.
    pub fn run(&self, name: &str, args: &Value) -> Result<String, String> {
        match name {
            "read_file" => self.read_file(str_arg(args, "path").ok_or("missing \"path\"")?),
            "list_dir" => self.list_dir(str_arg(args, "path").unwrap_or(".")),
            "write_file" => self.write_file(
                str_arg(args, "path").ok_or("missing \"path\"")?,
                str_arg(args, "content").ok_or("missing \"content\"")?,
            ),
            other => Err(format!("unknown tool {other:?}")),
        }
    }

    /// `path` inside the project, canonical (it must exist).
    fn resolve_existing(&self, path: &str) -> Result<PathBuf, String> {
        let joined = self.root.join(if path.is_empty() { "." } else { path });
        let real = joined.canonicalize().map_err(|e| format!("{path}: {e}"))?;
        if !real.starts_with(&self.root) {
            return Err(format!("{path}: outside the project directory"));
        }
        Ok(real)
    }

    fn read_file(&self, path: &str) -> Result<String, String> {
        let real = self.resolve_existing(path)?;
        if real.is_dir() {
            return Err(format!("{path}: is a directory (use list_dir)"));
        }
        let file = std::fs::File::open(&real).map_err(|e| format!("{path}: {e}"))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut buf = Vec::new();
        file.take(MAX_READ_BYTES)
            .read_to_end(&mut buf)
            .map_err(|e| format!("{path}: {e}"))?;
        let mut text = String::from_utf8_lossy(&buf).into_owned();
        if size > MAX_READ_BYTES {
            text.push_str(&format!(
                "\n[truncated: showing {MAX_READ_BYTES} of {size} bytes]"
            ));
        }
        Ok(text)
    }

    fn list_dir(&self, path: &str) -> Result<String, String> {
        let real = self.resolve_existing(path)?;
        let rd = std::fs::read_dir(&real).map_err(|e| format!("{path}: {e}"))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| {
                let mut n = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    n.push('/');
                }
                n
            })
            .collect();
        names.sort();
        let total = names.len();
        names.truncate(MAX_LIST_ENTRIES);
        let mut out = names.join("\n");
        if total > MAX_LIST_ENTRIES {
            out.push_str(&format!(
                "\n[truncated: {MAX_LIST_ENTRIES} of {total} entries]"
            ));
        }
        Ok(out)
    }

    fn write_file(&self, path: &str, content: &str) -> Result<String, String> {
        if content.len() > MAX_WRITE_BYTES {
            return Err(format!("content larger than {MAX_WRITE_BYTES} bytes"));
        }
        let rel = Path::new(path);
        let name = rel.file_name().ok_or(format!("{path}: not a file path"))?;
        if rel
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::RootDir))
        {
            return Err(format!("{path}: outside the project directory"));
        }
        let parent = rel.parent().map_or(".", |p| p.to_str().unwrap_or("."));
        let dir = self.resolve_existing(parent)?;
        let target = dir.join(name);
        if target.is_symlink() {
            return Err(format!("{path}: is a symlink"));
        }
        std::fs::write(&target, content).map_err(|e| format!("{path}: {e}"))?;
        Ok(format!("wrote {} bytes to {path}", content.len()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn project() -> (tempfile::TempDir, Tools) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("README.md"), "hello\n").unwrap();
        std::fs::write(tmp.path().join("secret"), "s").unwrap();
        let tools = Tools::new(&root, PermissionMode::ReadOnly).unwrap();
        (tmp, tools)
    }

    #[test]
    fn reads_and_lists_inside_the_project() {
        let (_tmp, t) = project();
        assert_eq!(
            t.run("read_file", &json!({"path": "README.md"})).unwrap(),
            "hello\n"
        );
        assert_eq!(t.run("list_dir", &json!({})).unwrap(), "README.md\nsrc/");
        assert!(
            t.run("read_file", &json!({"path": "src"}))
                .unwrap_err()
                .contains("directory")
        );
    }

    #[test]
    fn paths_escaping_the_project_are_refused() {
        let (tmp, t) = project();
        for p in ["../secret", "/etc/hostname", "src/../../secret"] {
            let err = t.run("read_file", &json!({"path": p})).unwrap_err();
            assert!(
                err.contains("outside") || err.contains("No such file"),
                "{p}: {err}"
            );
        }
        std::os::unix::fs::symlink(tmp.path().join("secret"), t.root().join("link")).unwrap();
        assert!(
            t.run("read_file", &json!({"path": "link"}))
                .unwrap_err()
                .contains("outside")
        );
    }

    #[test]
    fn read_only_denies_writes_and_workspace_write_confines_them() {
        let (tmp, t) = project();
        assert!(matches!(
            t.check("write_file", &json!({})),
            Decision::Deny {
                source: DenySource::Mode,
                ..
            }
        ));
        assert_eq!(t.check("read_file", &json!({})), Decision::Allow);
        let w = Tools::new(t.root(), PermissionMode::WorkspaceWrite).unwrap();
        assert_eq!(w.check("write_file", &json!({})), Decision::Allow);
        w.run("write_file", &json!({"path": "src/a.txt", "content": "x"}))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(t.root().join("src/a.txt")).unwrap(),
            "x"
        );
        assert!(
            w.run("write_file", &json!({"path": "../escape", "content": "x"}))
                .is_err()
        );
        assert!(!tmp.path().join("escape").exists());
    }

    #[test]
    fn reads_are_bounded() {
        let (_tmp, t) = project();
        std::fs::write(t.root().join("big"), vec![b'a'; 70 * 1024]).unwrap();
        let out = t.run("read_file", &json!({"path": "big"})).unwrap();
        assert!(out.ends_with("[truncated: showing 65536 of 71680 bytes]"));
    }
}
