//! Durability, permission and link-safety primitives; every write in the store goes through these.
//!
//! - Directories are created 0700 and files 0600 (SPEC §19.4: transcripts hold secrets).
//! - [`write_atomic`] replaces a file so that after a crash at any instant it is the old or the
//!   new one: temp file in the same directory → fsync → rename → fsync the directory.
//! - Appends are one `write` of one whole line on a file opened with `O_APPEND`.
//! - [`busy`] / [`exit_when_idle`]: a forced exit waits for the write in progress to finish.
//!
//! **Nothing is written, truncated, renamed or deleted through a symbolic link.** A home's root
//! is registered ([`register_root`], done by [`crate::Home::new`]); every path below a registered
//! root is reached by an `openat` walk from the root's descriptor, one component at a time with
//! `O_NOFOLLOW | O_DIRECTORY`, and the last component is opened, created, renamed or unlinked
//! relative to its parent's descriptor (`O_NOFOLLOW`, `renameat`, `unlinkat`), so a link planted
//! anywhere below the home is an error naming it ([`StoreError::Symlink`]) instead of a
//! redirection. The root itself may be a link: where the home lives is the user's choice.
//!
//! **A home that someone else controls is refused**, as ssh's StrictModes does: a directory on
//! the walk (the root included) or a file opened for writing that is owned by another user or
//! writable by group or others is a [`StoreError::Unsafe`] naming the path and the fix. One of
//! ours that is merely readable by others (a home made by an older tool, a copied tree) is
//! tightened to 0700/0600 the first time it is written through, with a log line.
//!
//! Reads open with `O_NOFOLLOW` too, check that they got a regular file, and [`read_bounded`]
//! caps what they take.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{IoContext, Result, StoreError};
use crate::iotrace::{self, Op};

/// Mode of every directory the store creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file the store creates.
pub const FILE_MODE: u32 = 0o600;

/// The roots below which no link is followed (the homes this process has opened).
static ROOTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Registers `root` as a home: from now on every path below it is reached without following
/// links. [`crate::Home::new`] calls this; a library user building paths by hand need not.
pub fn register_root(root: &Path) {
    let mut roots = ROOTS.lock().unwrap_or_else(PoisonError::into_inner);
    if !roots.iter().any(|r| r == root) {
        roots.push(root.to_path_buf());
    }
}

/// The registered root `path` lies in (the longest one), and the components below it.
fn split_root(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let roots = ROOTS.lock().unwrap_or_else(PoisonError::into_inner);
    roots
        .iter()
        .filter_map(|r| path.strip_prefix(r).ok().map(|rest| (r, rest)))
        .max_by_key(|(r, _)| r.as_os_str().len())
        .map(|(r, rest)| (r.clone(), rest.to_path_buf()))
}

/// What a directory walk is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Only to reach it: modes are checked, nothing is changed.
    Reach,
    /// To write in it: loose modes of ours are tightened.
    Write,
    /// To write in it, creating what is missing (0700).
    Create,
}

fn errno_io(e: Errno) -> std::io::Error {
    std::io::Error::from(e)
}

fn type_name(ft: FileType) -> &'static str {
    match ft {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "an unknown kind of file",
    }
}

/// Checks a directory or file of the home: owned by us, not writable by group or others; with
/// `tighten`, one readable by others is made private (0700 or 0600), with a log line.
fn check_owned(fd: BorrowedFd<'_>, path: &Path, tighten: bool) -> Result<rustix::fs::Stat> {
    let st = rustix::fs::fstat(fd)
        .map_err(errno_io)
        .ctx("inspect", path)?;
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != me {
        return Err(StoreError::Unsafe {
            path: path.to_path_buf(),
            why: format!("it is owned by uid {}, not by you (uid {me})", st.st_uid),
            fix: format!("chown -R {me} {}", path.display()),
        });
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        return Err(StoreError::Unsafe {
            path: path.to_path_buf(),
            why: format!("it is writable by group or others (mode {mode:04o})"),
            fix: format!("chmod go-w {}", path.display()),
        });
    }
    if tighten && mode & 0o077 != 0 {
        // Take group's and others' bits away; the owner's stay as they are (a read-only state
        // directory stays read-only).
        let private = mode & !0o077;
        rustix::fs::fchmod(fd, Mode::from_raw_mode(private))
            .map_err(errno_io)
            .ctx("tighten the mode of", path)?;
        tracing::warn!(
            path = %path.display(),
            was = format_args!("{mode:04o}"),
            now = format_args!("{private:04o}"),
            "tightened a home entry readable by others"
        );
    }
    Ok(st)
}

/// Opens the entry `name` of the directory `dir` as a directory, never following a link;
/// `path` is its full path, for errors.
fn open_child_dir(dir: BorrowedFd<'_>, name: &OsStr, path: &Path, walk: Walk) -> Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) if walk == Walk::Create => {
            match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(DIR_MODE)) {
                Ok(()) => {
                    iotrace::record(|| Op::Mkdir {
                        path: path.to_path_buf(),
                    });
                    // The new entry is durable before anything is written below it: a power
                    // cut must not lose a directory whose files were acknowledged.
                    let parent = path.parent().unwrap_or(Path::new("."));
                    rustix::fs::fsync(dir)
                        .map_err(errno_io)
                        .ctx("fsync directory", parent)?;
                    iotrace::record(|| Op::FsyncDir {
                        path: parent.to_path_buf(),
                    });
                }
                Err(Errno::EXIST) => {}
                Err(e) => return Err(errno_io(e)).ctx("create directory", path),
            }
            rustix::fs::openat(dir, name, flags, Mode::empty())
                .map_err(|e| classify(dir, name, path, e, "a directory"))
        }
        Err(e) => Err(classify(dir, name, path, e, "a directory")),
    }
}

/// Turns an `openat` failure into a clear error: a link or a wrong kind of file is named.
fn classify(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    path: &Path,
    e: Errno,
    expected: &'static str,
) -> StoreError {
    if matches!(e, Errno::LOOP | Errno::NOTDIR | Errno::ISDIR | Errno::NXIO)
        && let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
    {
        let ft = FileType::from_raw_mode(st.st_mode);
        return if ft == FileType::Symlink {
            StoreError::Symlink {
                path: path.to_path_buf(),
            }
        } else {
            StoreError::WrongType {
                path: path.to_path_buf(),
                found: type_name(ft),
                expected,
            }
        };
    }
    StoreError::Io {
        op: "open",
        path: path.to_path_buf(),
        source: errno_io(e),
    }
}

/// Opens the directory `dir`. Below a registered root, no component is followed if it is a
/// link, and each is checked ([`check_owned`]); outside any root, `dir` is opened as named.
fn open_dir(dir: &Path, walk: Walk) -> Result<OwnedFd> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Some((root, rest)) = split_root(dir) else {
        if walk == Walk::Create {
            create_dir_all_plain(dir)?;
        }
        return rustix::fs::openat(rustix::fs::CWD, dir, flags, Mode::empty())
            .map_err(errno_io)
            .ctx("open directory", dir);
    };
    if walk == Walk::Create {
        create_dir_all_plain(&root)?;
    }
    let mut fd = rustix::fs::openat(rustix::fs::CWD, &root, flags, Mode::empty())
        .map_err(errno_io)
        .ctx("open directory", &root)?;
    check_owned(fd.as_fd(), &root, walk != Walk::Reach)?;
    let mut path = root;
    for comp in rest.components() {
        let Component::Normal(name) = comp else {
            return Err(StoreError::Io {
                op: "walk to",
                path: dir.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a path below the home must not hold `.`, `..` or a root",
                ),
            });
        };
        path.push(name);
        let child = open_child_dir(fd.as_fd(), name, &path, walk)?;
        check_owned(child.as_fd(), &path, walk != Walk::Reach)?;
        fd = child;
    }
    Ok(fd)
}

fn create_dir_all_plain(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .ctx("create directory", dir)
}

/// [`open_parent`] for a removal: `None` when the parent does not exist (nothing to remove).
fn open_parent_to_remove(path: &Path) -> Result<Option<(OwnedFd, &OsStr)>> {
    match open_parent(path, Walk::Write) {
        Ok(p) => Ok(Some(p)),
        Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The parent directory of `path` (opened by [`open_dir`]) and `path`'s last component.
fn open_parent(path: &Path, walk: Walk) -> Result<(OwnedFd, &OsStr)> {
    let name = path.file_name().ok_or_else(|| StoreError::Io {
        op: "open",
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
    })?;
    let parent = path.parent().unwrap_or(Path::new("."));
    Ok((open_dir(parent, walk)?, name))
}

/// Opens `name` in `dir` with `flags` (plus `O_NOFOLLOW | O_CLOEXEC`), creating it 0600 where
/// `flags` says so, and checks that it is a regular file of ours (loose modes tightened).
fn open_file_at(dir: BorrowedFd<'_>, name: &OsStr, path: &Path, flags: OFlags) -> Result<File> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let creates = iotrace::active()
        && flags.contains(OFlags::CREATE)
        && rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_err();
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(FILE_MODE)).map_err(|e| {
        if e == Errno::EXIST {
            StoreError::Io {
                op: "create",
                path: path.to_path_buf(),
                source: errno_io(e),
            }
        } else if e == Errno::NOENT {
            StoreError::Io {
                op: "open",
                path: path.to_path_buf(),
                source: errno_io(e),
            }
        } else {
            classify(dir, name, path, e, "a regular file")
        }
    })?;
    if creates {
        iotrace::record(|| Op::Create {
            path: path.to_path_buf(),
        });
    }
    let st = check_owned(fd.as_fd(), path, true)?;
    let ft = FileType::from_raw_mode(st.st_mode);
    if ft != FileType::RegularFile {
        return Err(StoreError::WrongType {
            path: path.to_path_buf(),
            found: type_name(ft),
            expected: "a regular file",
        });
    }
    if st.st_nlink > 1 {
        return Err(StoreError::Unsafe {
            path: path.to_path_buf(),
            why: format!(
                "it has {} hard links: writing it would change another file",
                st.st_nlink
            ),
            fix: format!("cp {0} {0}.copy && mv {0}.copy {0}", path.display()),
        });
    }
    // O_NONBLOCK only mattered for refusing a FIFO without hanging; a regular file ignores it,
    // but clear it so the descriptor is an ordinary one.
    let fl = rustix::fs::fcntl_getfl(&fd)
        .map_err(errno_io)
        .ctx("open", path)?;
    rustix::fs::fcntl_setfl(&fd, fl - OFlags::NONBLOCK)
        .map_err(errno_io)
        .ctx("open", path)?;
    Ok(File::from(fd))
}

/// Checks the directory `dir` as a write would reach it (no link below the home, owned by us,
/// not writable by group or others), changing nothing.
pub fn check_dir(dir: &Path) -> Result<()> {
    open_dir(dir, Walk::Reach).map(drop)
}

/// [`check_dir`] for `dir` and for each of `children` (paths relative to it, parents listed
/// before their children) that exists, in one walk: each directory is opened once, from its
/// parent's descriptor. A missing child is skipped.
pub fn check_dirs(dir: &Path, children: &[&str]) -> Result<()> {
    let top = open_dir(dir, Walk::Reach)?;
    // The directories opened so far, by their path relative to `dir`.
    let mut opened: Vec<(PathBuf, OwnedFd)> = Vec::new();
    'children: for child in children {
        let mut at = PathBuf::new();
        for comp in Path::new(child).components() {
            let Component::Normal(name) = comp else {
                return Err(StoreError::Io {
                    op: "walk to",
                    path: dir.join(child),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "a path below the home must not hold `.`, `..` or a root",
                    ),
                });
            };
            let parent = at.clone();
            at.push(name);
            if opened.iter().any(|(p, _)| *p == at) {
                continue;
            }
            let parent_fd = opened
                .iter()
                .find(|(p, _)| *p == parent)
                .map_or(top.as_fd(), |(_, fd)| fd.as_fd());
            let path = dir.join(&at);
            let fd = match open_child_dir(parent_fd, name, &path, Walk::Reach) {
                Ok(fd) => fd,
                Err(StoreError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    continue 'children;
                }
                Err(e) => return Err(e),
            };
            check_owned(fd.as_fd(), &path, false)?;
            opened.push((at.clone(), fd));
        }
    }
    Ok(())
}

/// Fails with [`StoreError::Symlink`] if `path` is a link (for files opened by a library that
/// takes a path, such as SQLite's side files); a missing `path` passes.
pub fn refuse_link(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(StoreError::Symlink {
            path: path.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

/// Creates `dir` and its missing parents with mode 0700, following no link below the home.
pub fn create_dir_private(dir: &Path) -> Result<()> {
    open_dir(dir, Walk::Create).map(drop)
}

/// Creates `dir` (its parent must exist) with mode 0700; fails if it exists.
pub fn create_dir_exclusive(dir: &Path) -> std::io::Result<()> {
    let to_io = |e: StoreError| match e {
        StoreError::Io { source, .. } => source,
        other => std::io::Error::other(other.to_string()),
    };
    let (parent, name) = open_parent(dir, Walk::Write).map_err(to_io)?;
    rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(DIR_MODE)).map_err(errno_io)?;
    iotrace::record(|| Op::Mkdir {
        path: dir.to_path_buf(),
    });
    Ok(())
}

/// Flushes everything written on the file system holding `dir` to the disk (`syncfs`): one
/// call for a bulk of writes made without their own fsyncs.
pub fn sync_filesystem(dir: &Path) -> std::io::Result<()> {
    let d = File::open(dir)?;
    rustix::fs::syncfs(&d).map_err(std::io::Error::from)
}

/// Opens `path` for appending (and reading, to check its tail), creating it 0600 if missing.
pub fn open_append(path: &Path) -> Result<File> {
    let (dir, name) = open_parent(path, Walk::Write)?;
    open_file_at(
        dir.as_fd(),
        name,
        path,
        OFlags::RDWR | OFlags::APPEND | OFlags::CREATE,
    )
}

/// Opens `path` for reading and writing (creating it 0600, never truncating): a lock file.
pub fn open_rw(path: &Path) -> Result<File> {
    let (dir, name) = open_parent(path, Walk::Write)?;
    open_file_at(dir.as_fd(), name, path, OFlags::RDWR | OFlags::CREATE)
}

/// Creates an empty file 0600, open for reading and appending (`O_APPEND`); fails if it exists.
pub fn create_new_append(path: &Path) -> Result<File> {
    let (dir, name) = open_parent(path, Walk::Write)?;
    open_file_at(
        dir.as_fd(),
        name,
        path,
        OFlags::RDWR | OFlags::APPEND | OFlags::CREATE | OFlags::EXCL,
    )
}

/// Creates an empty file 0600, open for reading and writing; fails if it exists.
pub fn create_new(path: &Path) -> Result<File> {
    let (dir, name) = open_parent(path, Walk::Write)?;
    open_file_at(
        dir.as_fd(),
        name,
        path,
        OFlags::RDWR | OFlags::CREATE | OFlags::EXCL,
    )
}

/// Opens `path` for reading: never through a link (`O_NOFOLLOW`), and only a regular file
/// (a FIFO is refused without blocking). Not found is `ErrorKind::NotFound`.
pub fn open_read(path: &Path) -> std::io::Result<File> {
    open_read_sized(path).map(|(f, _)| f)
}

/// [`open_read`], also giving the file's size from the `fstat` that checked its type.
fn open_read_sized(path: &Path) -> std::io::Result<(File, u64)> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags(OFlags::NOFOLLOW | OFlags::NONBLOCK))
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(Errno::LOOP.raw_os_error()) {
                std::io::Error::other(format!(
                    "{} is a symbolic link, which freecode does not follow",
                    path.display()
                ))
            } else {
                e
            }
        })?;
    let meta = file.metadata()?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let found = if ft.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(std::io::Error::other(format!(
            "{} is {found}, where freecode expects a regular file",
            path.display()
        )));
    }
    let fd = OwnedFd::from(file);
    let fl = rustix::fs::fcntl_getfl(&fd).map_err(errno_io)?;
    rustix::fs::fcntl_setfl(&fd, fl - OFlags::NONBLOCK).map_err(errno_io)?;
    Ok((File::from(fd), meta.len()))
}

fn libc_flags(f: OFlags) -> i32 {
    // `OFlags` bits are the kernel's `O_*` values; they fit an `i32`.
    i32::try_from(f.bits()).unwrap_or(0)
}

/// Reads a whole file of at most `cap` bytes (`what` names it in the error past that):
/// `Ok(None)` when it does not exist. Never through a link; a FIFO or device is refused.
pub fn read_bounded(path: &Path, cap: u64, what: &'static str) -> Result<Option<Vec<u8>>> {
    let (file, size) = match open_read_sized(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("read", path),
    };
    // Refuse by the size first: a 2 GB meta.json must cost one fstat, not 2 GB of reading.
    if size > cap {
        return Err(StoreError::TooLarge {
            path: path.to_path_buf(),
            cap,
            what,
        });
    }
    read_capped(file, path, cap, what).map(Some)
}

/// Reads at most `cap` bytes from `r` (a file, a pipe, a device), failing past them.
pub fn read_capped(r: impl Read, path: &Path, cap: u64, what: &'static str) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    r.take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .ctx("read", path)?;
    if buf.len() as u64 > cap {
        return Err(StoreError::TooLarge {
            path: path.to_path_buf(),
            cap,
            what,
        });
    }
    Ok(buf)
}

/// fsyncs a directory, making a rename or create in it durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let fd = open_dir(dir, Walk::Reach)?;
    rustix::fs::fsync(&fd)
        .map_err(errno_io)
        .ctx("fsync directory", dir)?;
    iotrace::record(|| Op::FsyncDir {
        path: dir.to_path_buf(),
    });
    Ok(())
}

/// Appends `bytes` to `file` (opened `O_APPEND`) as one `write`: every append of the store
/// goes through here, so that a trace sees it.
pub fn append_bytes(file: &mut File, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if !iotrace::active() {
        return file.write_all(bytes);
    }
    let offset = file.metadata()?.len();
    file.write_all(bytes)?;
    iotrace::record(|| Op::Write {
        path: path.to_path_buf(),
        offset,
        data: bytes.to_vec(),
    });
    Ok(())
}

/// Makes `file`'s data durable (`fdatasync`; with `all`, `fsync`).
pub fn sync_file(file: &File, path: &Path, all: bool) -> std::io::Result<()> {
    if all {
        file.sync_all()?;
    } else {
        file.sync_data()?;
    }
    iotrace::record(|| Op::Fsync {
        path: path.to_path_buf(),
    });
    Ok(())
}

/// Cuts (or extends) `file` to `len`.
pub fn set_len(file: &File, path: &Path, len: u64) -> std::io::Result<()> {
    file.set_len(len)?;
    iotrace::record(|| Op::SetLen {
        path: path.to_path_buf(),
        len,
    });
    Ok(())
}

/// Copies `input` to `out` at its position (the kernel's copy where it can); a trace sees the
/// bytes.
pub fn copy_into(input: &mut impl Read, out: &mut File, path: &Path) -> std::io::Result<u64> {
    use std::io::Seek;
    use std::os::unix::fs::FileExt;
    // An O_APPEND file writes at its end whatever its position says.
    let appends = rustix::fs::fcntl_getfl(&*out).is_ok_and(|f| f.contains(OFlags::APPEND));
    let offset = if appends {
        out.metadata()?.len()
    } else {
        out.stream_position()?
    };
    let n = std::io::copy(input, out)?;
    if iotrace::active() {
        let mut data = vec![0u8; usize::try_from(n).unwrap_or(0)];
        out.read_exact_at(&mut data, offset)?;
        iotrace::record(|| Op::Write {
            path: path.to_path_buf(),
            offset,
            data,
        });
    }
    Ok(n)
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temp-file path beside `path`, unique within this process and across processes.
pub fn temp_path_for(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Writes `bytes` to a fresh temp file in `dir` (0600); with `sync` its data is on disk first.
fn write_temp_at(dir: BorrowedFd<'_>, tmp: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let name = tmp.file_name().unwrap_or_default();
    let mut f = open_file_at(
        dir,
        name,
        tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
    )?;
    let res = f.write_all(bytes).and_then(|()| {
        iotrace::record(|| Op::Write {
            path: tmp.to_path_buf(),
            offset: 0,
            data: bytes.to_vec(),
        });
        if sync {
            sync_file(&f, tmp, true)
        } else {
            Ok(())
        }
    });
    if let Err(e) = res {
        if rustix::fs::unlinkat(dir, name, AtFlags::empty()).is_ok() {
            iotrace::record(|| Op::Unlink {
                path: tmp.to_path_buf(),
            });
        }
        return Err(e).ctx("write", tmp);
    }
    Ok(())
}

/// Writes `bytes` to a fresh temp file beside `path` (0600) and returns its path; with `sync`
/// its data is on disk before this returns.
pub fn write_temp(path: &Path, bytes: &[u8], sync: bool) -> Result<PathBuf> {
    let tmp = temp_path_for(path);
    let (dir, _) = open_parent(path, Walk::Write)?;
    write_temp_at(dir.as_fd(), &tmp, bytes, sync)?;
    Ok(tmp)
}

fn replace_at(path: &Path, bytes: &[u8], sync_data: bool, sync_dir: bool) -> Result<()> {
    let _busy = busy();
    let (dir, name) = open_parent(path, Walk::Write)?;
    let tmp = temp_path_for(path);
    let tmp_name = tmp.file_name().unwrap_or_default();
    write_temp_at(dir.as_fd(), &tmp, bytes, sync_data)?;
    // `renameat` replaces whatever `name` is (a planted link included) and never follows it.
    if let Err(e) = rustix::fs::renameat(&dir, tmp_name, &dir, name) {
        if rustix::fs::unlinkat(&dir, tmp_name, AtFlags::empty()).is_ok() {
            iotrace::record(|| Op::Unlink { path: tmp.clone() });
        }
        return Err(errno_io(e)).ctx("rename into", path);
    }
    iotrace::record(|| Op::Rename {
        from: tmp.clone(),
        to: path.to_path_buf(),
    });
    if sync_dir {
        let parent = path.parent().unwrap_or(Path::new("."));
        rustix::fs::fsync(&dir)
            .map_err(errno_io)
            .ctx("fsync directory", parent)?;
        iotrace::record(|| Op::FsyncDir {
            path: parent.to_path_buf(),
        });
    }
    Ok(())
}

/// Atomically replaces `path` with `bytes`. With `sync`, the data and the rename are durable
/// when this returns; without it the replacement is still all-or-nothing for a process crash.
pub fn write_atomic(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    replace_at(path, bytes, sync, sync)
}

/// Like [`write_atomic`] with `sync`, but without the directory fsync: after a crash the file is
/// still the old one or the new one (the new data is on disk before the rename), but the rename
/// itself may be lost. For frequent updates whose latest value can be rebuilt (turn counters).
pub fn write_atomic_relaxed(path: &Path, bytes: &[u8]) -> Result<()> {
    replace_at(path, bytes, true, false)
}

/// Like [`write_atomic`], but the contents are written by `write` into the temp (through a
/// buffer) as it produces them, so a large file is never held in memory. When `write` fails
/// the temp is removed and `path` is left as it was.
pub fn write_atomic_with<E: From<StoreError>>(
    path: &Path,
    sync: bool,
    write: impl FnOnce(&mut dyn Write) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let _busy = busy();
    let (dir, name) = open_parent(path, Walk::Write)?;
    let tmp = temp_path_for(path);
    let tmp_name = tmp.file_name().unwrap_or_default().to_owned();
    let f = open_file_at(
        dir.as_fd(),
        &tmp_name,
        &tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
    )?;
    let remove_tmp = || {
        if rustix::fs::unlinkat(&dir, &tmp_name, AtFlags::empty()).is_ok() {
            iotrace::record(|| Op::Unlink { path: tmp.clone() });
        }
    };
    let mut out = std::io::BufWriter::with_capacity(
        256 * 1024,
        TracedFile {
            file: f,
            path: &tmp,
            offset: 0,
        },
    );
    if let Err(e) = write(&mut out) {
        drop(out);
        remove_tmp();
        return Err(e);
    }
    let flushed = out
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)
        .and_then(|t| {
            if sync {
                sync_file(&t.file, &tmp, true)
            } else {
                Ok(())
            }
        });
    if let Err(e) = flushed.ctx("write", &tmp) {
        remove_tmp();
        return Err(e.into());
    }
    if let Err(e) = rustix::fs::renameat(&dir, &tmp_name, &dir, name) {
        remove_tmp();
        return Err(StoreError::Io {
            op: "rename into",
            path: path.to_path_buf(),
            source: errno_io(e),
        }
        .into());
    }
    iotrace::record(|| Op::Rename {
        from: tmp.clone(),
        to: path.to_path_buf(),
    });
    if sync {
        let parent = path.parent().unwrap_or(Path::new("."));
        rustix::fs::fsync(&dir)
            .map_err(errno_io)
            .ctx("fsync directory", parent)?;
        iotrace::record(|| Op::FsyncDir {
            path: parent.to_path_buf(),
        });
    }
    Ok(())
}

/// A file whose writes are reported to [`iotrace`] with their offsets.
struct TracedFile<'a> {
    file: File,
    path: &'a Path,
    offset: u64,
}

impl Write for TracedFile<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        let offset = self.offset;
        iotrace::record(|| Op::Write {
            path: self.path.to_path_buf(),
            offset,
            data: buf[..n].to_vec(),
        });
        self.offset += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Renames `from` to `to` (both reached without following links; a link at either end is
/// moved or replaced itself, never followed).
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    let (src, src_name) = open_parent(from, Walk::Write)?;
    // Within one directory (a temp into place, a file set aside) its walk is made once.
    let dst_owned;
    let (dst, dst_name) = if from.parent() == to.parent()
        && let Some(name) = to.file_name()
    {
        (src.as_fd(), name)
    } else {
        let (fd, name) = open_parent(to, Walk::Write)?;
        dst_owned = fd;
        (dst_owned.as_fd(), name)
    };
    rustix::fs::renameat(&src, src_name, dst, dst_name)
        .map_err(errno_io)
        .ctx("rename into", to)?;
    iotrace::record(|| Op::Rename {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
    });
    Ok(())
}

/// Removes the file (or link) `path`; `Ok(false)` when it was not there.
pub fn remove_file(path: &Path) -> Result<bool> {
    let Some((dir, name)) = open_parent_to_remove(path)? else {
        return Ok(false);
    };
    match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
        Ok(()) => {
            iotrace::record(|| Op::Unlink {
                path: path.to_path_buf(),
            });
            Ok(true)
        }
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(errno_io(e)).ctx("remove", path),
    }
}

/// Sets the permission bits of the file or directory `path` (never through a link) to `mode`:
/// `freecode doctor --fix` taking group's and others' bits away.
pub fn tighten(path: &Path, mode: u32) -> Result<()> {
    let (dir, name) = open_parent(path, Walk::Reach)?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&dir, name, flags, Mode::empty())
        .map_err(|e| classify(dir.as_fd(), name, path, e, "a file or directory"))?;
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
        .map_err(errno_io)
        .ctx("change the mode of", path)
}

/// Removes the directory `dir` if it is empty; `Ok(false)` when it is not there or not empty.
pub fn remove_empty_dir(dir: &Path) -> Result<bool> {
    let Some((parent, name)) = open_parent_to_remove(dir)? else {
        return Ok(false);
    };
    match rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR) {
        Ok(()) => {
            iotrace::record(|| Op::Rmdir {
                path: dir.to_path_buf(),
            });
            Ok(true)
        }
        Err(Errno::NOENT | Errno::NOTEMPTY | Errno::EXIST) => Ok(false),
        Err(e) => Err(errno_io(e)).ctx("remove", dir),
    }
}

/// Appends one line (`line` plus `\n`) to a small append-only log, as one `write`, then makes it
/// durable. A torn last line left by a crash is fenced with a newline first, never glued onto.
pub fn append_line(path: &Path, line: &[u8]) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut f = open_append(path)?;
    let len = f.metadata().ctx("inspect", path)?.len();
    let mut last = [b'\n'];
    if len > 0 {
        f.read_exact_at(&mut last, len - 1).ctx("read", path)?;
    }
    let mut buf = Vec::with_capacity(line.len() + 2);
    if last[0] != b'\n' {
        buf.push(b'\n');
    }
    buf.extend_from_slice(line);
    buf.push(b'\n');
    let _busy = busy();
    append_bytes(&mut f, path, &buf)
        .and_then(|()| sync_file(&f, path, false))
        .ctx("append to", path)
}

/// Reads a whole file; `Ok(None)` when it does not exist. Never through a link.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    read_bounded(path, u64::MAX, "a file")
}

/// Removes a directory tree if present. Nothing is followed: a link (at `path` or anywhere
/// inside) is removed itself, and a link among `path`'s parents below the home is an error.
pub fn remove_tree(path: &Path) -> Result<bool> {
    let Some((dir, name)) = open_parent_to_remove(path)? else {
        return Ok(false);
    };
    remove_entry(dir.as_fd(), name, path)
}

fn remove_entry(dir: BorrowedFd<'_>, name: &OsStr, path: &Path) -> Result<bool> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(errno_io(e)).ctx("inspect", path),
    };
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let sub = rustix::fs::openat(dir, name, flags, Mode::empty())
            .map_err(|e| classify(dir, name, path, e, "a directory"))?;
        let entries = rustix::fs::Dir::read_from(&sub)
            .map_err(errno_io)
            .ctx("list", path)?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(errno_io).ctx("list", path)?;
            let n = entry.file_name().to_bytes();
            if n != b"." && n != b".." {
                names.push(std::ffi::OsString::from(
                    <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(n),
                ));
            }
        }
        for n in names {
            remove_entry(sub.as_fd(), &n, &path.join(&n))?;
        }
        match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
            Ok(()) => iotrace::record(|| Op::Rmdir {
                path: path.to_path_buf(),
            }),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(errno_io(e)).ctx("remove", path),
        }
    } else {
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) => iotrace::record(|| Op::Unlink {
                path: path.to_path_buf(),
            }),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(errno_io(e)).ctx("remove", path),
        }
    }
    Ok(true)
}

/// The entries of the directory `dir` that are not links (a link is skipped with a warning):
/// `(name, is_dir)`. `Ok(None)` when `dir` does not exist.
pub fn list_dir(dir: &Path) -> Result<Option<Vec<(std::ffi::OsString, bool)>>> {
    let rd = match fs::symlink_metadata(dir) {
        Ok(m)
            if m.file_type().is_symlink()
                && split_root(dir).is_some_and(|(_, r)| !r.as_os_str().is_empty()) =>
        {
            return Err(StoreError::Symlink {
                path: dir.to_path_buf(),
            });
        }
        Ok(_) => fs::read_dir(dir).ctx("list", dir)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("inspect", dir),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.ctx("list", dir)?;
        let ft = entry.file_type().ctx("inspect", entry.path())?;
        if ft.is_symlink() {
            tracing::warn!(path = %entry.path().display(), "skipped a symbolic link in the home");
            continue;
        }
        out.push((entry.file_name(), ft.is_dir()));
    }
    Ok(Some(out))
}

/// Where [`write_user_file`] put the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// `-`: standard output.
    Stdout,
    /// Something that is not a regular file (a FIFO, a terminal, `/dev/stdout`, a device): the
    /// bytes were written into it as a stream; it was not replaced.
    Stream(PathBuf),
    /// A regular file, replaced atomically (at this path: the target of a link the user named).
    File(PathBuf),
}

/// Writes `bytes` to an output the user named (`--file F`, `--otlp F`): `-` is standard
/// output; a FIFO, a terminal or a device is written into as a stream and never replaced; a
/// regular file (or the file a link the user named points to) is replaced atomically, 0600. A
/// missing parent directory is an error, not created.
pub fn write_user_file(path: &Path, bytes: &[u8]) -> Result<Written> {
    match user_target(path)? {
        UserTarget::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)
                .and_then(|()| out.flush())
                .ctx("write", "standard output")?;
            Ok(Written::Stdout)
        }
        UserTarget::Stream(p) => {
            // No O_CREAT, no O_TRUNC: a stream is written into as it is.
            let mut f = fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .ctx("open", &p)?;
            f.write_all(bytes)
                .and_then(|()| f.flush())
                .ctx("write", &p)?;
            Ok(Written::Stream(p))
        }
        UserTarget::File { replace, shown } => {
            write_atomic(&replace, bytes, true)?;
            Ok(Written::File(shown))
        }
    }
}

/// Where [`write_user_file`] would write `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserTarget {
    /// `-`: standard output.
    Stdout,
    /// Not a regular file (a FIFO, a terminal, a device): written into as a stream.
    Stream(PathBuf),
    /// A regular file, existing or new, to be replaced atomically.
    File {
        /// The path to replace ([`write_atomic`], [`write_atomic_with`]): the target of a link
        /// the user named, `./name` for a bare name.
        replace: PathBuf,
        /// The path to report.
        shown: PathBuf,
    },
}

/// Classifies an output the user named as [`write_user_file`] does, writing nothing: a
/// directory, a dangling link or a missing parent directory is an error.
pub fn user_target(path: &Path) -> Result<UserTarget> {
    if path.as_os_str() == "-" {
        return Ok(UserTarget::Stdout);
    }
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(StoreError::WrongType {
            path: path.to_path_buf(),
            found: "a directory",
            expected: "a file to write",
        }),
        Ok(m) if !m.is_file() => Ok(UserTarget::Stream(path.to_path_buf())),
        Ok(_) => {
            // A link the user named is their choice: replace the file it points to.
            let target = if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
                fs::canonicalize(path).ctx("resolve", path)?
            } else {
                path.to_path_buf()
            };
            Ok(UserTarget::File {
                replace: bare_to_relative(&target),
                shown: target,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if fs::symlink_metadata(path).is_ok() {
                return Err(StoreError::WrongType {
                    path: path.to_path_buf(),
                    found: "a dangling symbolic link",
                    expected: "a file to write",
                });
            }
            let parent = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !parent.is_dir() {
                return Err(StoreError::Io {
                    op: "write",
                    path: path.to_path_buf(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("directory {} does not exist", parent.display()),
                    ),
                });
            }
            Ok(UserTarget::File {
                replace: bare_to_relative(path),
                shown: path.to_path_buf(),
            })
        }
        Err(e) => Err(e).ctx("inspect", path),
    }
}

/// `./name` for a bare `name`, so that its directory can be opened and synced.
fn bare_to_relative(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new(".").join(path),
        _ => path.to_path_buf(),
    }
}

/// Writes in progress in this process (appends and whole-file rewrites), for [`exit_when_idle`].
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Set once the process has decided to exit: no new write starts after it.
static EXITING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// How many [`Busy`] guards this thread holds: an inner write of an outer one (the log
    /// rewrite inside an interrupt mark) must never park.
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Held for the length of one write to the home (see [`busy`]); dropping it ends the write.
/// Not `Send`: it counts a write of the thread that made it.
#[must_use = "the write is only covered while the guard lives"]
pub struct Busy(std::marker::PhantomData<*const ()>);

impl Drop for Busy {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Marks a write as in progress until the guard drops. Once [`exit_when_idle`] has started, a
/// new write never starts: the calling thread parks until the process exits, so a forced exit
/// (a second Ctrl+C) never leaves a half-written temp file renamed, or a line half appended.
/// Re-entrant: a write that starts inside another on the same thread (a rewrite inside an
/// interrupt mark or a compaction) goes on, so the outer one finishes whole.
pub fn busy() -> Busy {
    enter(&EXITING)
}

fn enter(exiting: &AtomicBool) -> Busy {
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    let nested = DEPTH.with(std::cell::Cell::get) > 0;
    if !nested && exiting.load(Ordering::SeqCst) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        loop {
            std::thread::park();
        }
    }
    DEPTH.with(|d| d.set(d.get() + 1));
    Busy(std::marker::PhantomData)
}

/// Exits the process with `code` once no write is in progress (waiting at most `max_wait`):
/// the forced exit of a second Ctrl+C (SPEC §19.23), which must not tear a file.
pub fn exit_when_idle(code: i32, max_wait: std::time::Duration) -> ! {
    EXITING.store(true, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + max_wait;
    while IN_FLIGHT.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    std::process::exit(code)
}

/// Reads bytes `pos..end` of an open file at offsets (`pread`), so several threads can read one
/// descriptor without sharing a position. `F` is `&File` or an owned `File` (a handle of its
/// own, for a reader that moves to another thread).
pub struct RangeReader<F = &'static File> {
    file: F,
    pos: u64,
    end: u64,
}

impl<F: std::borrow::Borrow<File>> RangeReader<F> {
    /// Bytes `from..to` of `file`.
    pub fn new(file: F, from: u64, to: u64) -> Self {
        Self {
            file,
            pos: from,
            end: to,
        }
    }
}

impl<F: std::borrow::Borrow<File>> Read for RangeReader<F> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let left = usize::try_from(self.end.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.borrow().read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The second Ctrl+C lands while an interrupt mark is between its log rewrite and its meta
    /// rewrite: the inner write must not park (which would hold the exit for its whole wait and
    /// leave the mark half done).
    #[test]
    fn nested_writes_go_on_while_an_exit_waits() {
        // A local flag stands for `exit_when_idle` having started (the global one would park
        // the other tests' writes).
        let exiting = AtomicBool::new(false);
        let outer = enter(&exiting);
        assert_eq!(DEPTH.with(std::cell::Cell::get), 1);
        exiting.store(true, Ordering::SeqCst);
        let inner = enter(&exiting); // returns: nested
        assert_eq!(DEPTH.with(std::cell::Cell::get), 2);
        drop(inner);
        drop(outer);
        assert_eq!(DEPTH.with(std::cell::Cell::get), 0);
        // A fresh write on another thread parks once the exit has started.
        let (tx, rx) = std::sync::mpsc::channel();
        let exiting = std::sync::Arc::new(exiting);
        let e2 = exiting.clone();
        std::thread::spawn(move || {
            let _g = enter(&e2);
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "a new write must not start during an exit"
        );
    }
}
