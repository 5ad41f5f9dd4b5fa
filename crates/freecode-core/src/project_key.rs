//! Project directory keys: the name of `sessions/<project-dir>/` for a project path (SPEC §7).
//!
//! Compatibility first: for every path on which the original's transform round-trips (and whose
//! name is a safe directory name), [`project_dir_name`] returns exactly the original's name, so
//! both programs find the same sessions. For every other path — the collisions and lossy cases of
//! SPEC §7.4 — it returns an *escaped* name, `esc-` followed by the path percent-encoded. The
//! original never produces a name containing `-` (it rewrites every hyphen to `_h_`), so the two
//! families cannot collide, and the whole mapping is injective and exactly reversible
//! ([`parse_project_dir_name`]). A name over 255 bytes (the usual file-name limit) becomes
//! `h-<sha-256 prefix>` instead; the store writes the full path beside it, because a hash cannot be
//! reversed. `.`, `..` and the empty name are never produced.

use sha2::{Digest, Sha256};

/// The longest directory name produced, in bytes (ext4, XFS, APFS, NTFS limit).
pub const MAX_NAME_BYTES: usize = 255;
/// Prefix of escaped names.
pub const ESCAPE_PREFIX: &str = "esc-";
/// Prefix of hashed names.
pub const HASH_PREFIX: &str = "h-";

/// The original's `formatSessionDirName`, bit for bit (SPEC §7.1), flaws included.
pub fn format_original(project_path: &str) -> String {
    let unified = project_path.replace('\\', "/");
    let trimmed = unified.trim_matches('/');
    if trimmed.is_empty() {
        return String::new();
    }
    trimmed
        .split('/')
        .map(|seg| {
            seg.replace('-', "_h_")
                .chars()
                .filter(|c| !matches!(c, '<' | '>' | ':' | '"' | '|' | '?' | '*'))
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("__")
}

/// The original's `parseSessionDirName` (SPEC §7.2).
pub fn parse_original(dir_name: &str) -> String {
    if dir_name.is_empty() {
        return String::new();
    }
    let segs: Vec<String> = dir_name
        .split("__")
        .map(|s| s.replace("_h_", "-"))
        .collect();
    format!("/{}", segs.join("/"))
}

/// The original's `isSessionDirName` (SPEC §7.3).
pub fn is_original_dir_name(s: &str) -> bool {
    !s.is_empty() && s.contains("__")
}

/// How a project directory name was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectKey {
    /// The original's name (it round-trips).
    Original(String),
    /// `esc-<percent-encoded path>`.
    Escaped(String),
    /// `h-<hash>`: the path is too long for one name; the store keeps it in a side file.
    Hashed(String),
}

impl ProjectKey {
    /// The directory name.
    pub fn dir_name(&self) -> &str {
        match self {
            Self::Original(s) | Self::Escaped(s) | Self::Hashed(s) => s,
        }
    }
}

/// Whether `name` can be a directory under `sessions/`: every name [`project_dir_name`]
/// produces passes, and listings accept exactly these (a leading dot included: the original
/// names `/.hidden/p` `.hidden__p`, so dot-leading names are projects, not hidden files).
pub fn is_project_dir_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0'])
        && name.len() <= MAX_NAME_BYTES
}

fn keep_literally(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'_'
}

fn escape(path: &str) -> String {
    let mut out = String::with_capacity(ESCAPE_PREFIX.len() + path.len() * 3);
    out.push_str(ESCAPE_PREFIX);
    for &b in path.as_bytes() {
        if keep_literally(b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b & 15)]));
        }
    }
    out
}

fn unescape(body: &str) -> Option<String> {
    let bytes = body.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'A'..=b'F' => Some(c - b'A' + 10),
                _ => None,
            };
            let hi = hex(*bytes.get(i + 1)?)?;
            let lo = hex(*bytes.get(i + 2)?)?;
            let v = (hi << 4) | lo;
            // Canonical form only: a byte that is kept literally must not be encoded.
            if keep_literally(v) {
                return None;
            }
            out.push(v);
            i += 3;
        } else if keep_literally(b) {
            out.push(b);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

fn hashed(path: &str) -> String {
    let digest = Sha256::digest(path.as_bytes());
    let mut out = String::from(HASH_PREFIX);
    for b in &digest[..16] {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The key (directory name under `sessions/`) of a project path.
pub fn project_key(project_path: &str) -> ProjectKey {
    let original = format_original(project_path);
    if is_project_dir_name(&original) && parse_original(&original) == project_path {
        return ProjectKey::Original(original);
    }
    let escaped = escape(project_path);
    if escaped.len() <= MAX_NAME_BYTES {
        return ProjectKey::Escaped(escaped);
    }
    ProjectKey::Hashed(hashed(project_path))
}

/// The directory name of a project path; see [`project_key`].
pub fn project_dir_name(project_path: &str) -> String {
    project_key(project_path).dir_name().to_owned()
}

/// What a directory name under `sessions/` says about its project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedKey {
    /// The exact project path.
    Path(String),
    /// A hashed name: the path is in the side file.
    Hashed,
    /// A name we would never produce (an original name that does not round-trip, or junk): the
    /// original's best guess, which may be wrong.
    Guess(String),
}

/// Recovers the project path from a directory name, exactly for every name we produce.
pub fn parse_project_dir_name(dir_name: &str) -> ParsedKey {
    if let Some(body) = dir_name.strip_prefix(ESCAPE_PREFIX) {
        if let Some(p) = unescape(body) {
            // Only the canonical spelling: the name must be what we would produce for `p`.
            if project_dir_name(&p) == dir_name {
                return ParsedKey::Path(p);
            }
        }
        return ParsedKey::Guess(parse_original(dir_name));
    }
    if dir_name.starts_with(HASH_PREFIX) && dir_name.len() == HASH_PREFIX.len() + 32 {
        return ParsedKey::Hashed;
    }
    let guess = parse_original(dir_name);
    if format_original(&guess) == dir_name && project_dir_name(&guess) == dir_name {
        ParsedKey::Path(guess)
    } else {
        ParsedKey::Guess(guess)
    }
}

/// `project` without trailing separators: the form [`within_project`] compares (`/` and `\`
/// both separate, so the original's Windows paths match too; the root becomes empty).
pub fn trim_separators(project: &str) -> &str {
    project.trim_end_matches(['/', '\\'])
}

/// Whether `path` is `project` or below it, by whole path components: `--project
/// /home/dev/proj1` takes `/home/dev/proj1` and `/home/dev/proj1/api`, never
/// `/home/dev/proj10`. A trailing separator on `project` changes nothing.
pub fn within_project(path: &str, project: &str) -> bool {
    match path.strip_prefix(trim_separators(project)) {
        Some("") => true,
        Some(rest) => rest.starts_with(['/', '\\']),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn within_project_is_by_whole_components() {
        use super::within_project;
        assert!(within_project("/home/dev/proj1", "/home/dev/proj1"));
        assert!(within_project("/home/dev/proj1", "/home/dev/proj1/"));
        assert!(within_project("/home/dev/proj1/api", "/home/dev/proj1"));
        assert!(within_project("/home/dev/proj1", "/home/dev"));
        assert!(!within_project("/home/dev/proj10", "/home/dev/proj1"));
        assert!(!within_project("/home/dev", "/home/dev/proj1"));
        assert!(within_project("/anything", "/"));
        assert!(within_project(r"C:\Users\john\app", r"C:\Users\john"));
        assert!(!within_project(r"C:\Users\johnny", r"C:\Users\john"));
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_tripping_paths_keep_the_original_name() {
        assert_eq!(
            project_dir_name("/home/ayan/Project/my-project"),
            "home__ayan__Project__my_h_project"
        );
        assert_eq!(project_dir_name("/a/../b"), "a__..__b");
        assert_eq!(project_dir_name("/home/josé/项目"), "home__josé__项目");
        // Dot-leading names are the original's too, and valid project directory names.
        for (p, name) in [
            ("/.hidden/p", ".hidden__p"),
            ("/./tmp", ".__tmp"),
            ("/.x", ".x"),
        ] {
            assert_eq!(project_dir_name(p), name);
            assert!(is_project_dir_name(name));
            assert_eq!(parse_project_dir_name(name), ParsedKey::Path(p.to_owned()));
        }
        for bad in ["", ".", "..", "a/b", "a\0b"] {
            assert!(!is_project_dir_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn lossy_paths_are_escaped_and_reversible() {
        for p in [
            "/a_/b", "/a/_b", "/a-/b", "/a_h/_b", "C:\\x", "/C/x", "/", "", ".", "..", "/..", "/.",
            "relative", "/a/b:c", "/a/bc", "/x\0y",
        ] {
            let name = project_dir_name(p);
            assert!(is_project_dir_name(&name), "{p:?} -> {name:?}");
            assert_eq!(
                parse_project_dir_name(&name),
                ParsedKey::Path(p.to_owned()),
                "{p:?} -> {name:?}"
            );
        }
        assert_ne!(project_dir_name("/a_/b"), project_dir_name("/a/_b"));
        assert_ne!(project_dir_name("/a-/b"), project_dir_name("/a_h/_b"));
    }

    #[test]
    fn long_paths_get_a_hashed_name_that_fits() {
        let p = format!("/{}", "x".repeat(400));
        let name = project_dir_name(&p);
        assert!(name.starts_with(HASH_PREFIX) && name.len() <= MAX_NAME_BYTES);
        assert_eq!(parse_project_dir_name(&name), ParsedKey::Hashed);
        let p2 = format!("/{}", "é".repeat(200));
        assert!(project_dir_name(&p2).len() <= MAX_NAME_BYTES);
    }

    fn path_strategy() -> impl Strategy<Value = String> {
        // Paths built from the characters that stress the transform.
        proptest::collection::vec(
            prop_oneof![
                Just("/".to_owned()),
                Just("\\".to_owned()),
                Just("-".to_owned()),
                Just("_".to_owned()),
                Just("_h_".to_owned()),
                Just("__".to_owned()),
                Just(".".to_owned()),
                Just(":".to_owned()),
                Just("é".to_owned()),
                Just("%".to_owned()),
                Just("\0".to_owned()),
                "[a-c]{1,3}",
            ],
            0..12,
        )
        .prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn parse_after_format_is_identity(p in path_strategy()) {
            let name = project_dir_name(&p);
            prop_assert!(is_project_dir_name(&name));
            prop_assert_eq!(parse_project_dir_name(&name), ParsedKey::Path(p));
        }

        #[test]
        fn injective(a in path_strategy(), b in path_strategy()) {
            prop_assume!(a != b);
            prop_assert_ne!(project_dir_name(&a), project_dir_name(&b));
        }
    }
}
