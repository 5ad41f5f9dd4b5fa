//! Project directory keys: the name of `sessions/<project-dir>/` for a project path (SPEC §7).
//!
//! Compatibility first: wherever the original can write a directory for a project path, we
//! write to the very same name ([`format_original`]), lossy or not, so that both programs find,
//! read and continue the same sessions in a shared home. Its transform is not injective
//! (`/a_/b` and `/a/_b` both become `a___b`, SPEC §7.4), so one directory may hold the sessions
//! of several projects: every reader tells them apart by `meta.json`'s `projectPath`, never by
//! the directory name.
//!
//! Only where the original cannot write at all, or its name would be unsafe, is another name
//! used: a name past 255 bytes (the usual file-name limit) becomes `h-<sha-256 prefix>` (the
//! store writes the full path beside it, a hash cannot be reversed); an empty name, `.`, `..`, a
//! dot-leading (hidden) name, or one holding a NUL becomes `esc-` followed by the path
//! percent-encoded (or the hash, when that is too long). The original never produces a name
//! containing `-` (it rewrites every hyphen to `_h_`), so these families cannot collide with
//! its names.
//!
//! Earlier versions of ours used `esc-`/`h-` for every path whose original name does not
//! round-trip; [`legacy_dir_names`] names those so that they keep being read, and the store
//! moves such a session to its new name the next time it writes to it.

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
    format!("{HASH_PREFIX}{}", hex::encode(&digest[..16]))
}

/// Whether `name`, a name of the original's, is one we write to: a valid directory name that
/// is not hidden (dot-leading) and holds no NUL.
pub fn is_safe_original_name(name: &str) -> bool {
    is_project_dir_name(name) && !name.starts_with('.')
}

/// The key (directory name under `sessions/`) of a project path: the original's name wherever
/// it is safe, else an escaped or hashed one; see the module docs.
pub fn project_key(project_path: &str) -> ProjectKey {
    let original = format_original(project_path);
    if is_safe_original_name(&original) {
        return ProjectKey::Original(original);
    }
    private_key(project_path)
}

/// The escaped name of a path, or its hashed name when the escaped one is too long.
fn private_key(project_path: &str) -> ProjectKey {
    let escaped = escape(project_path);
    if escaped.len() <= MAX_NAME_BYTES {
        return ProjectKey::Escaped(escaped);
    }
    ProjectKey::Hashed(hashed(project_path))
}

/// The names earlier versions of ours gave `project_path` where they differ from today's:
/// the escaped or hashed name used for every path whose original name does not round-trip.
pub fn legacy_dir_names(project_path: &str) -> Vec<String> {
    let now = project_dir_name(project_path);
    let mut v = Vec::new();
    let original = format_original(project_path);
    let round_trips = is_project_dir_name(&original) && parse_original(&original) == project_path;
    if !round_trips {
        let old = private_key(project_path).dir_name().to_owned();
        if old != now {
            v.push(old);
        }
    }
    v
}

/// Every directory under `sessions/` that can hold sessions of `project_path`, today's first:
/// today's name, the original's (when it is a valid name we don't write to, e.g. dot-leading),
/// and earlier versions' names. Readers filter what they find by `projectPath`.
pub fn candidate_dir_names(project_path: &str) -> Vec<String> {
    let mut v = vec![project_dir_name(project_path)];
    let original = format_original(project_path);
    if is_project_dir_name(&original) && !v.contains(&original) {
        v.push(original);
    }
    for old in legacy_dir_names(project_path) {
        if !v.contains(&old) {
            v.push(old);
        }
    }
    v
}

/// Whether a directory name is one of our own escaped or hashed families (never the
/// original's: it writes no `-`).
pub fn is_private_dir_name(name: &str) -> bool {
    name.starts_with(ESCAPE_PREFIX) || name.starts_with(HASH_PREFIX)
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
    /// An original name that does not round-trip (it may hold the sessions of several
    /// projects: their metas say which), or junk: the original's best guess, which may be wrong.
    Guess(String),
}

/// Recovers the project path from a directory name, exactly for every name we produce.
pub fn parse_project_dir_name(dir_name: &str) -> ParsedKey {
    if let Some(body) = dir_name.strip_prefix(ESCAPE_PREFIX) {
        if let Some(p) = unescape(body) {
            // Only the canonical spelling: the name must be what we produce (or produced) for `p`.
            if private_key(&p).dir_name() == dir_name {
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

/// `path` in lexically normal form if it is absolute, `None` if it is not. Absolute is a Unix
/// path from `/`, or one of the original's Windows paths from a drive (`C:\` or `C:/`) or a
/// share (`\\host\share`). Empty and `.` components go, `..` takes away the component before it
/// and never climbs above the root (`/.x/../../etc` is `/etc`), and no separator trails. Only
/// Windows paths split at `\` too: on Unix it is a character of a name. Nothing is looked up on
/// disk (the directory may be another machine's).
pub fn normalize_absolute(path: &str) -> Option<String> {
    let b = path.as_bytes();
    let (root, rest, sep, is_sep): (String, &str, char, fn(char) -> bool) =
        if let Some(rest) = path.strip_prefix('/') {
            (String::new(), rest, '/', |c| c == '/')
        } else if b.len() >= 3
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && matches!(b[2], b'\\' | b'/')
        {
            (path[..2].to_owned(), &path[3..], '\\', |c| {
                c == '/' || c == '\\'
            })
        } else if let Some(unc) = path.strip_prefix("\\\\") {
            let mut parts = unc.splitn(3, ['\\', '/']);
            let (host, share) = (parts.next()?, parts.next()?);
            if host.is_empty()
                || share.is_empty()
                || [host, share].iter().any(|p| *p == "." || *p == "..")
            {
                return None;
            }
            (
                format!("\\\\{host}\\{share}"),
                parts.next().unwrap_or(""),
                '\\',
                |c| c == '/' || c == '\\',
            )
        } else {
            return None;
        };
    let mut kept: Vec<&str> = Vec::new();
    for part in rest.split(is_sep) {
        match part {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            name => kept.push(name),
        }
    }
    let mut out = root;
    if kept.is_empty() {
        out.push(sep);
    }
    for name in kept {
        out.push(sep);
        out.push_str(name);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn absolute_paths_are_normalised_lexically_and_relative_ones_refused() {
        use super::normalize_absolute as n;
        assert_eq!(n("/home/dev/proj").as_deref(), Some("/home/dev/proj"));
        assert_eq!(n("/home//dev/./proj/").as_deref(), Some("/home/dev/proj"));
        assert_eq!(n("/.x/../../etc").as_deref(), Some("/etc"));
        assert_eq!(n("/../..").as_deref(), Some("/"));
        assert_eq!(n("/").as_deref(), Some("/"));
        assert_eq!(n("/tmp/a\\..\\b").as_deref(), Some("/tmp/a\\..\\b"));
        assert_eq!(
            n("/srv/projets/café/../thé").as_deref(),
            Some("/srv/projets/thé")
        );
        assert_eq!(
            n(r"C:\Users\john\..\jane\app").as_deref(),
            Some(r"C:\Users\jane\app")
        );
        assert_eq!(
            n("C:/Users/john/./app").as_deref(),
            Some(r"C:\Users\john\app")
        );
        assert_eq!(n(r"C:\..").as_deref(), Some(r"C:\"));
        assert_eq!(
            n(r"\\host\share\x\..\..\y").as_deref(),
            Some(r"\\host\share\y")
        );
        for relative in [
            "",
            "relative/../../etc",
            "./proj",
            "../proj",
            "proj",
            "[trimmed for fixture]",
            "C:relative",
            r"\\host",
            r"\\..\share",
            "~/proj",
        ] {
            assert_eq!(n(relative), None, "{relative:?}");
        }
    }

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
        // Dot-leading names are the original's, and valid directory names we read, but we
        // write hidden paths escaped.
        for (p, name) in [
            ("/.hidden/p", ".hidden__p"),
            ("/./tmp", ".__tmp"),
            ("/.x", ".x"),
        ] {
            assert_eq!(format_original(p), name);
            assert!(is_project_dir_name(name));
            assert!(candidate_dir_names(p).contains(&name.to_owned()));
        }
        for bad in ["", ".", "..", "a/b", "a\0b"] {
            assert!(!is_project_dir_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn lossy_paths_get_the_originals_name_and_unsafe_ones_are_escaped() {
        // Where the original can write, we write to its name, lossy or not: it finds them.
        for (p, name) in [
            ("/a_/b", "a___b"),
            ("/a/_b", "a___b"),
            ("/a-/b", "a_h___b"),
            ("/a/b:c", "a__bc"),
            ("/a/bc", "a__bc"),
            ("C:\\x", "C__x"),
            ("/C/x", "C__x"),
            ("relative", "relative"),
            ("/p__q", "p__q"),
            ("/x_h_y", "x_h_y"),
        ] {
            assert_eq!(project_dir_name(p), name, "{p:?}");
            assert!(matches!(
                parse_project_dir_name(name),
                ParsedKey::Path(_) | ParsedKey::Guess(_)
            ));
        }
        // Where its name is unsafe (empty, `.`, `..`, hidden, NUL), ours is escaped.
        for p in ["/", "", ".", "..", "/..", "/.", "/.hidden/p", "/x\0y"] {
            let name = project_dir_name(p);
            assert!(name.starts_with(ESCAPE_PREFIX), "{p:?} -> {name:?}");
            assert!(is_project_dir_name(&name), "{p:?} -> {name:?}");
            assert_eq!(parse_project_dir_name(&name), ParsedKey::Path(p.to_owned()));
        }
    }

    #[test]
    fn earlier_versions_names_stay_candidates() {
        // Earlier versions escaped every path that does not round-trip.
        assert_eq!(legacy_dir_names("/a_/b"), vec!["esc-%2Fa_%2Fb".to_owned()]);
        assert_eq!(
            parse_project_dir_name("esc-%2Fa_%2Fb"),
            ParsedKey::Path("/a_/b".to_owned())
        );
        assert_eq!(
            candidate_dir_names("/a_/b"),
            vec!["a___b".to_owned(), "esc-%2Fa_%2Fb".to_owned()]
        );
        // A path that round-trips had no other name.
        assert!(legacy_dir_names("/home/dev/app").is_empty());
        // The original's hidden name is read though not written.
        assert_eq!(
            candidate_dir_names("/.hidden/p"),
            vec!["esc-%2F.hidden%2Fp".to_owned(), ".hidden__p".to_owned()]
        );
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
        fn every_key_is_a_valid_name_and_the_originals_where_safe(p in path_strategy()) {
            let name = project_dir_name(&p);
            prop_assert!(is_project_dir_name(&name));
            let original = format_original(&p);
            if is_safe_original_name(&original) {
                prop_assert_eq!(&name, &original);
            } else {
                prop_assert!(is_private_dir_name(&name));
                prop_assert!(matches!(
                    parse_project_dir_name(&name),
                    ParsedKey::Path(_) | ParsedKey::Hashed
                ));
            }
            prop_assert_eq!(&candidate_dir_names(&p)[0], &name);
        }

        #[test]
        fn private_names_never_collide(a in path_strategy(), b in path_strategy()) {
            prop_assume!(a != b);
            let (ka, kb) = (project_dir_name(&a), project_dir_name(&b));
            if is_private_dir_name(&ka) || is_private_dir_name(&kb) {
                prop_assert_ne!(ka, kb);
            }
        }
    }
}
