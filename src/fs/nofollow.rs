//! Link-safe filesystem primitives: every write, chmod, utime, truncate, lock and read inside a
//! conversation directory goes through a [`Dir`], an open directory handle.
//!
//! Invariant: beneath a [`Dir`], no symbolic link is ever resolved, and nothing but a directory
//! or a regular file is ever opened. A relative path is walked one component at a time with
//! `openat(O_DIRECTORY | O_NOFOLLOW)`; a file is opened with `O_NOFOLLOW | O_NONBLOCK` only
//! after `fstatat(AT_SYMLINK_NOFOLLOW)` shows a regular file, and the opened handle is checked
//! again with `fstat` (the name may have been replaced meanwhile) — so a FIFO, a device or a
//! socket is refused and never waited on; modes and times are set on handles (`fchmod`,
//! `futimens`) or with `AT_SYMLINK_NOFOLLOW`; files are replaced by `renameat`, which replaces a
//! link rather than writing through it. A link (or anything else) where a directory or a file
//! is needed is refused with a [`Refused`] error that names it.
//!
//! Only a path the user gives — the logs root, `export --to DIR`, the directory of
//! `export -o FILE` — is resolved as the system resolves it ([`Dir::open_given`]), so that a
//! root reached through a link (`/home -> /data/home`) works. A conversation directory is
//! opened with its last component not followed ([`Dir::open`]).
//!
//! Built on `rustix`: its `openat`/`mkdirat`/`renameat`/`linkat`/`unlinkat`/`fchmod`/
//! `futimens`/`utimensat`/`fstat` wrap the system calls one to one, on owned descriptors and
//! without `unsafe`, which is exactly this contract; `cap-std` sandboxes instead, resolving
//! links that stay inside its root, and does not set a link's own mtime.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, Timespec, Timestamps, CWD, UTIME_OMIT};
use rustix::io::Errno;

use super::atomic::TEMP_PREFIX;

/// Why a path was refused: what is there is not what may be opened. The path is that of the
/// offending entry, which may be a parent of the path asked for.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("{0} is a symbolic link: sessiondb never writes, reads or sets anything through a link (move the link away, then run the command again)")]
    Link(PathBuf),
    #[error("{path} is a {kind}, not a regular file: sessiondb never opens FIFOs, devices or sockets (move it away, then run the command again)")]
    Special { path: PathBuf, kind: &'static str },
    #[error("{0} is not a directory, where sessiondb needs one (move it away, then run the command again)")]
    NotADirectory(PathBuf),
    #[error("{0:?} is not a plain relative path")]
    NotRelative(PathBuf),
}

impl From<Refused> for io::Error {
    fn from(r: Refused) -> io::Error {
        io::Error::other(r)
    }
}

/// What kind of entry a name is, as `lstat` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, device or socket (named).
    Special(&'static str),
}

fn kind_of(st_mode: u32) -> Kind {
    match FileType::from_raw_mode(st_mode as _) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        FileType::Fifo => Kind::Special("FIFO"),
        FileType::Socket => Kind::Special("socket"),
        FileType::CharacterDevice => Kind::Special("character device"),
        FileType::BlockDevice => Kind::Special("block device"),
        FileType::Unknown => Kind::Special("file of unknown type"),
    }
}

/// An entry's attributes, as `lstat` (or `fstat` on a handle) reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    /// Permission bits (`& 0o7777`).
    pub mode: u32,
    pub size: u64,
    pub mtime_ns: i64,
    pub ino: u64,
    pub dev: u64,
}

impl Stat {
    // `struct stat`'s field types differ between targets: the casts are needed on some.
    #[allow(clippy::unnecessary_cast)]
    fn of(s: &rfs::Stat) -> Stat {
        Stat {
            kind: kind_of(s.st_mode as u32),
            mode: s.st_mode as u32 & 0o7777,
            size: s.st_size as u64,
            mtime_ns: (s.st_mtime as i64) * 1_000_000_000 + s.st_mtime_nsec as i64,
            ino: s.st_ino as u64,
            dev: s.st_dev as u64,
        }
    }
}

/// The handle's own attributes.
pub fn fstat(file: &File) -> io::Result<Stat> {
    Ok(Stat::of(&rfs::fstat(file)?))
}

const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// An open directory; every path given to its methods is relative to it and resolved without
/// following links (see the module documentation).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// Where the directory was found, for messages.
    path: PathBuf,
}

/// The components of a relative path, each a plain name.
fn names(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(Refused::NotRelative(rel.to_owned()).into()),
        })
        .collect()
}

fn mtime_only(mtime_ns: i64) -> Timestamps {
    Timestamps { last_access: Timespec { tv_sec: 0, tv_nsec: UTIME_OMIT }, last_modification: timespec(mtime_ns) }
}

fn timespec(ns: i64) -> Timespec {
    Timespec { tv_sec: ns.div_euclid(1_000_000_000), tv_nsec: ns.rem_euclid(1_000_000_000) as _ }
}

/// A fresh name for a temporary file (or directory), with [`TEMP_PREFIX`].
pub(crate) fn temp_name() -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{TEMP_PREFIX}{}-{}-{nanos:x}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)).into()
}

impl Dir {
    /// Opens a directory the user named (a logs root, an export target), resolving its path
    /// as the system does, links included.
    pub fn open_given(path: &Path) -> io::Result<Dir> {
        let fd = rfs::openat(CWD, path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(Dir { fd, path: path.to_owned() })
    }

    /// Opens a directory inside a given one (a conversation directory in its logs root): the
    /// parent path is resolved as given, the last component must be a directory, not a link.
    pub fn open(path: &Path) -> io::Result<Dir> {
        match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => {
                let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
                let mut dir = Dir::open_given(parent)?.child_dir(name)?;
                dir.path = path.to_owned();
                Ok(dir)
            }
            _ => Dir::open_given(path),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir { fd: self.fd.try_clone()?, path: self.path.clone() })
    }

    /// Why opening `name` failed, told precisely when it is a link or not a directory/file.
    fn open_error(&self, name: &OsStr, e: Errno, want_dir: bool) -> io::Error {
        if matches!(e, Errno::LOOP | Errno::NOTDIR | Errno::NXIO) {
            let path = self.path.join(name);
            match self.stat_name(name) {
                Ok(Some(Stat { kind: Kind::Symlink, .. })) => return Refused::Link(path).into(),
                Ok(Some(Stat { kind: Kind::Special(kind), .. })) => return Refused::Special { path, kind }.into(),
                Ok(Some(Stat { kind: Kind::File, .. })) if want_dir => return Refused::NotADirectory(path).into(),
                _ => {}
            }
        }
        e.into()
    }

    fn child_dir(&self, name: &OsStr) -> io::Result<Dir> {
        let fd = rfs::openat(&self.fd, name, DIR_FLAGS, Mode::empty()).map_err(|e| self.open_error(name, e, true))?;
        Ok(Dir { fd, path: self.path.join(name) })
    }

    /// Opens the directory `rel` below this one ("" is this one).
    pub fn open_dir(&self, rel: &Path) -> io::Result<Dir> {
        let mut dir = self.try_clone()?;
        for name in names(rel)? {
            dir = dir.child_dir(name)?;
        }
        Ok(dir)
    }

    /// The directory holding `rel`, and `rel`'s last component.
    fn locate<'a>(&self, rel: &'a Path) -> io::Result<(Dir, &'a OsStr)> {
        let names = names(rel)?;
        let Some((name, parents)) = names.split_last() else { return Err(Refused::NotRelative(rel.to_owned()).into()) };
        let mut dir = self.try_clone()?;
        for parent in parents {
            dir = dir.child_dir(parent)?;
        }
        Ok((dir, name))
    }

    fn stat_name(&self, name: &OsStr) -> io::Result<Option<Stat>> {
        match rfs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => Ok(Some(Stat::of(&s))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// `rel`'s attributes (a link's own), or `None` when nothing is there. A parent that is a
    /// link or not a directory is an error, not an absence.
    pub fn stat(&self, rel: &Path) -> io::Result<Option<Stat>> {
        match self.locate(rel) {
            Ok((parent, name)) => parent.stat_name(name),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// This directory's own attributes.
    pub fn metadata(&self) -> io::Result<Stat> {
        Ok(Stat::of(&rfs::fstat(&self.fd)?))
    }

    /// Opens regular file `name` with `flags` (creating it with `create_mode` when given and
    /// missing). Anything else is refused before it is opened, and checked again after.
    fn open_file(&self, name: &OsStr, flags: OFlags, create_mode: Option<u32>) -> io::Result<File> {
        let path = || self.path.join(name);
        let check = |kind| match kind {
            Kind::File => Ok(()),
            Kind::Symlink => Err(io::Error::from(Refused::Link(path()))),
            Kind::Dir => Err(io::Error::from(Refused::Special { path: path(), kind: "directory" })),
            Kind::Special(kind) => Err(io::Error::from(Refused::Special { path: path(), kind })),
        };
        if let Some(stat) = self.stat_name(name)? {
            check(stat.kind)?;
        }
        let mut flags = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        if create_mode.is_some() {
            flags |= OFlags::CREATE;
        }
        let mode = Mode::from_raw_mode(create_mode.unwrap_or(0) as _);
        let fd = rfs::openat(&self.fd, name, flags, mode).map_err(|e| self.open_error(name, e, false))?;
        check(Stat::of(&rfs::fstat(&fd)?).kind)?;
        Ok(File::from(fd))
    }

    /// Opens regular file `rel` for reading.
    pub fn open_read(&self, rel: &Path) -> io::Result<File> {
        let (parent, name) = self.locate(rel)?;
        parent.open_file(name, OFlags::RDONLY, None)
    }

    /// Sets the permission bits and the modification time of regular file `rel`, on its handle.
    pub fn set_file_attributes(&self, rel: &Path, mode: u32, mtime_ns: i64) -> io::Result<()> {
        let file = self.open_read(rel)?;
        rfs::fchmod(&file, Mode::from_raw_mode(mode as _))?;
        Ok(rfs::futimens(&file, &mtime_only(mtime_ns))?)
    }

    /// Reads regular file `rel`, at most `limit` bytes of it.
    pub fn read(&self, rel: &Path, limit: u64) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open_read(rel)?.take(limit).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// Opens regular file `rel` for appending, creating it with `create_mode` (under the
    /// umask) when given and missing.
    pub fn open_append(&self, rel: &Path, create_mode: Option<u32>) -> io::Result<File> {
        let (parent, name) = self.locate(rel)?;
        parent.open_file(name, OFlags::WRONLY | OFlags::APPEND, create_mode)
    }

    /// Opens regular file `rel` for reading and writing (a lock file), creating it when
    /// missing as `open(…, O_CREAT)` does (mode 0666 under the umask). Never truncates.
    pub fn open_lock_file(&self, rel: &Path) -> io::Result<File> {
        let (parent, name) = self.locate(rel)?;
        parent.open_file(name, OFlags::RDWR, Some(0o666))
    }

    /// The target of symbolic link `rel`.
    pub fn read_link(&self, rel: &Path) -> io::Result<PathBuf> {
        let (parent, name) = self.locate(rel)?;
        let target = rfs::readlinkat(&parent.fd, name, Vec::new())?;
        Ok(PathBuf::from(OsString::from_vec(target.into_bytes())))
    }

    /// Creates directory `rel` (its parent must exist) with `mode` under the umask. Returns
    /// false when a directory is there already; anything else there is refused.
    pub fn create_dir(&self, rel: &Path, mode: u32) -> io::Result<bool> {
        let (parent, name) = self.locate(rel)?;
        match rfs::mkdirat(&parent.fd, name, Mode::from_raw_mode(mode as _)) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => match parent.stat_name(name)?.map(|s| s.kind) {
                Some(Kind::Dir) => Ok(false),
                Some(Kind::Symlink) => Err(Refused::Link(parent.path.join(name)).into()),
                _ => Err(Refused::NotADirectory(parent.path.join(name)).into()),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// Atomically replaces (or creates) file `rel` with what `fill` writes, with permission
    /// bits `mode` and modification time `mtime_ns`: written to a temporary file beside it,
    /// fsynced, then renamed over it. A link at `rel` is replaced, never written through.
    pub fn write_atomic(&self, rel: &Path, mode: u32, mtime_ns: i64, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
        self.replace_file(rel, mode, mtime_ns, |file| {
            let mut out = BufWriter::with_capacity(1 << 16, file);
            fill(&mut out)?;
            out.flush()
        })
    }

    /// [`Self::write_atomic`] with the first `len` bytes of `source` as the contents, copied
    /// inside the kernel (`copy_file_range`; on a filesystem that shares extents — btrfs, XFS,
    /// bcachefs — no data is copied at all), or by reads and writes where the kernel cannot.
    /// A `source` shorter than `len` is an error, and `rel` is then left as it was.
    pub fn write_atomic_copy(&self, rel: &Path, mode: u32, mtime_ns: i64, source: &File, len: u64) -> io::Result<()> {
        self.replace_file(rel, mode, mtime_ns, |file| copy_prefix(source, file, len, true))
    }

    fn replace_file(&self, rel: &Path, mode: u32, mtime_ns: i64, fill: impl FnOnce(&File) -> io::Result<()>) -> io::Result<()> {
        let (parent, name) = self.locate(rel)?;
        let (temp, file) = parent.create_temp()?;
        let result = (|| {
            fill(&file)?;
            rfs::fchmod(&file, Mode::from_raw_mode(mode as _))?;
            file.sync_all()?;
            rfs::futimens(&file, &mtime_only(mtime_ns))?;
            rfs::renameat(&parent.fd, &temp, &parent.fd, name)?;
            Ok(())
        })();
        if result.is_err() {
            let _ = rfs::unlinkat(&parent.fd, &temp, AtFlags::empty());
        }
        result
    }

    /// Makes `rel` a new file of the first `len` bytes of `source` (permission bits `mode`,
    /// mtime `mtime_ns`), and the file `rel` was until then `kept` (which must not exist): the
    /// old file is never copied. The new file is written under a temporary name, linked as
    /// `kept`, and then the two names are exchanged in one atomic step (`RENAME_EXCHANGE`), so
    /// `kept` never names the file a writer appending to `rel` could change: killed at any
    /// moment, `kept` is absent, or a copy of the new bytes (before the exchange), or the old
    /// file; the temporary name left over is debris. `Unsupported` when the filesystem cannot
    /// exchange names (nothing is changed then).
    pub fn replace_copy_keeping_old(&self, rel: &Path, mode: u32, mtime_ns: i64, source: &File, len: u64, kept: &Path) -> io::Result<()> {
        let (parent, name) = self.locate(rel)?;
        let (kept_parent, kept_name) = self.locate(kept)?;
        let (temp, file) = parent.create_temp()?;
        let written = (|| {
            copy_prefix(source, &file, len, true)?;
            rfs::fchmod(&file, Mode::from_raw_mode(mode as _))?;
            file.sync_all()?;
            rfs::futimens(&file, &mtime_only(mtime_ns))?;
            rfs::linkat(&parent.fd, &temp, &kept_parent.fd, kept_name, AtFlags::empty())?;
            Ok::<_, io::Error>(())
        })();
        if let Err(e) = written {
            let _ = rfs::unlinkat(&parent.fd, &temp, AtFlags::empty());
            return Err(e);
        }
        if let Err(e) = rfs::renameat_with(&kept_parent.fd, kept_name, &parent.fd, name, rfs::RenameFlags::EXCHANGE) {
            let _ = rfs::unlinkat(&kept_parent.fd, kept_name, AtFlags::empty());
            let _ = rfs::unlinkat(&parent.fd, &temp, AtFlags::empty());
            return Err(if e == Errno::INVAL || e == Errno::NOSYS || e == Errno::NOTSUP { io::ErrorKind::Unsupported.into() } else { e.into() });
        }
        let _ = rfs::unlinkat(&parent.fd, &temp, AtFlags::empty());
        Ok(())
    }

    /// Exchanges the files named `a` and `b`, atomically.
    pub fn exchange(&self, a: &Path, b: &Path) -> io::Result<()> {
        let (a_parent, a_name) = self.locate(a)?;
        let (b_parent, b_name) = self.locate(b)?;
        Ok(rfs::renameat_with(&a_parent.fd, a_name, &b_parent.fd, b_name, rfs::RenameFlags::EXCHANGE)?)
    }

    fn create_temp(&self) -> io::Result<(OsString, File)> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        loop {
            let temp = temp_name();
            match rfs::openat(&self.fd, &temp, flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => return Ok((temp, File::from(fd))),
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Atomically replaces `rel` with a symbolic link to `target`, with modification time
    /// `mtime_ns` on the link itself.
    pub fn symlink_atomic(&self, rel: &Path, target: &Path, mtime_ns: i64) -> io::Result<()> {
        let (parent, name) = self.locate(rel)?;
        let temp = loop {
            let temp = temp_name();
            match rfs::symlinkat(target, &parent.fd, &temp) {
                Ok(()) => break temp,
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        let times = Timestamps { last_access: timespec(mtime_ns), last_modification: timespec(mtime_ns) };
        let result = rfs::utimensat(&parent.fd, &temp, &times, AtFlags::SYMLINK_NOFOLLOW).and_then(|()| rfs::renameat(&parent.fd, &temp, &parent.fd, name));
        if result.is_err() {
            let _ = rfs::unlinkat(&parent.fd, &temp, AtFlags::empty());
        }
        Ok(result?)
    }

    /// Sets this directory's permission bits and modification time.
    pub fn set_attributes(&self, mode: u32, mtime_ns: i64) -> io::Result<()> {
        rfs::fchmod(&self.fd, Mode::from_raw_mode(mode as _))?;
        self.set_mtime(mtime_ns)
    }

    /// Sets this directory's permission bits.
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        Ok(rfs::fchmod(&self.fd, Mode::from_raw_mode(mode as _))?)
    }

    /// Sets this directory's modification time.
    pub fn set_mtime(&self, mtime_ns: i64) -> io::Result<()> {
        Ok(rfs::futimens(&self.fd, &mtime_only(mtime_ns))?)
    }

    /// Removes the file (or link) `rel`.
    pub fn remove_file(&self, rel: &Path) -> io::Result<()> {
        let (parent, name) = self.locate(rel)?;
        Ok(rfs::unlinkat(&parent.fd, name, AtFlags::empty())?)
    }

    /// Removes the empty directory `rel`.
    pub fn remove_dir(&self, rel: &Path) -> io::Result<()> {
        let (parent, name) = self.locate(rel)?;
        Ok(rfs::unlinkat(&parent.fd, name, AtFlags::REMOVEDIR)?)
    }

    /// Renames `from` to `to` (replacing what is there; a link is replaced, not followed).
    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_parent, from_name) = self.locate(from)?;
        let (to_parent, to_name) = self.locate(to)?;
        Ok(rfs::renameat(&from_parent.fd, from_name, &to_parent.fd, to_name)?)
    }

    /// Renames `from` to `to`, refused (`AlreadyExists`) when anything is at `to`: a directory
    /// moved into place never replaces one that appeared there meanwhile.
    pub fn rename_no_replace(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_parent, from_name) = self.locate(from)?;
        let (to_parent, to_name) = self.locate(to)?;
        Ok(rfs::renameat_with(&from_parent.fd, from_name, &to_parent.fd, to_name, rfs::RenameFlags::NOREPLACE)?)
    }

    /// Makes `new` a hard link to the entry `existing` (a link itself, if it is one).
    pub fn hard_link(&self, existing: &Path, new: &Path) -> io::Result<()> {
        let (from_parent, from_name) = self.locate(existing)?;
        let (to_parent, to_name) = self.locate(new)?;
        Ok(rfs::linkat(&from_parent.fd, from_name, &to_parent.fd, to_name, AtFlags::empty())?)
    }

    /// The names in this directory, with what each is.
    pub fn entries(&self) -> io::Result<Vec<(OsString, Kind)>> {
        let mut out = Vec::new();
        for entry in rfs::Dir::read_from(&self.fd)? {
            let name = OsString::from_vec(entry?.file_name().to_bytes().to_vec());
            if name == "." || name == ".." {
                continue;
            }
            if let Some(stat) = self.stat_name(&name)? {
                out.push((name, stat.kind));
            }
        }
        Ok(out)
    }

    /// Flushes the directory's entries (renames into it) to disk.
    pub fn sync(&self) -> io::Result<()> {
        Ok(rfs::fsync(&self.fd)?)
    }
}

/// Copies the first `len` bytes of `source` (from its start, whatever its position) to `out`
/// at `out`'s position: by `copy_file_range`, falling back to reads and writes when the
/// kernel cannot copy between these files (or at once, when `in_kernel` is false). Fewer than
/// `len` bytes in `source` is an error.
fn copy_prefix(source: &File, out: &File, len: u64, mut in_kernel: bool) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let short = || io::Error::other("the file changed while it was being copied (it is shorter than expected)");
    let mut done = 0u64;
    while done < len {
        let chunk = (len - done).min(1 << 30) as usize;
        if in_kernel {
            let mut offset = done;
            match rfs::copy_file_range(source, Some(&mut offset), out, None, chunk) {
                Ok(0) => return Err(short()),
                Ok(n) => done += n as u64,
                Err(Errno::XDEV | Errno::NOSYS | Errno::INVAL | Errno::OPNOTSUPP | Errno::PERM) => in_kernel = false,
                Err(e) => return Err(e.into()),
            }
        } else {
            let mut buf = vec![0u8; chunk.min(1 << 20)];
            let n = source.read_at(&mut buf, done)?;
            if n == 0 {
                return Err(short());
            }
            (&*out).write_all(&buf[..n])?;
            done += n as u64;
        }
    }
    Ok(())
}

/// Opens the regular file at `path` for reading without following a link at its last
/// component and without ever opening a FIFO, device or socket (see the module documentation).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| Refused::NotRelative(path.to_owned()))?;
    let dir = Dir { fd: rfs::openat(CWD, parent, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?, path: parent.to_owned() };
    dir.open_file(name, OFlags::RDONLY, None)
}

/// Reads the regular file at `path` whole, as [`open_regular`] opens it.
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads the regular file at `path`, a path the user named, following links as the system
/// does (a transcript may be a link to a sibling) but never opening a FIFO, device or socket:
/// checked before it is opened (non-blocking) and again on the handle.
pub fn read_user_file(path: &Path) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let check = |kind| match kind {
        Kind::Special(kind) => Err(io::Error::from(Refused::Special { path: path.to_owned(), kind })),
        _ => Ok(()),
    };
    check(kind_of(std::fs::metadata(path)?.mode()))?;
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    check(fstat(&file)?.kind)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    fn refused(e: &io::Error) -> Option<&Refused> {
        e.get_ref().and_then(|r| r.downcast_ref::<Refused>())
    }

    #[test]
    fn nothing_is_written_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "keep").unwrap();
        let dir = root.path().join("c");
        std::fs::create_dir(&dir).unwrap();
        symlink(outside.path(), dir.join("sub")).unwrap();
        symlink(outside.path().join("victim"), dir.join("f")).unwrap();
        let d = Dir::open(&dir).unwrap();
        let e = d.write_atomic(Path::new("sub/x"), 0o600, 0, |w| w.write_all(b"x")).unwrap_err();
        assert!(matches!(refused(&e), Some(Refused::Link(p)) if p == &dir.join("sub")), "{e}");
        assert!(matches!(refused(&d.open_append(Path::new("f"), Some(0o600)).unwrap_err()), Some(Refused::Link(_))));
        assert!(matches!(refused(&d.open_lock_file(Path::new("f")).unwrap_err()), Some(Refused::Link(_))));
        assert!(matches!(refused(&d.create_dir(Path::new("sub"), 0o755).unwrap_err()), Some(Refused::Link(_))));
        assert!(matches!(refused(&d.stat(Path::new("sub/victim")).unwrap_err()), Some(Refused::Link(_))));
        // Replacing the link replaces the link.
        d.write_atomic(Path::new("f"), 0o640, 1_000_000_007, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read(outside.path().join("victim")).unwrap(), b"keep");
        let meta = std::fs::symlink_metadata(dir.join("f")).unwrap();
        assert!(meta.is_file());
        assert_eq!((meta.mode() & 0o7777, meta.mtime(), meta.mtime_nsec()), (0o640, 1, 7));
        // A conversation directory that is itself a link is refused.
        symlink(&dir, root.path().join("l")).unwrap();
        assert!(matches!(refused(&Dir::open(&root.path().join("l")).unwrap_err()), Some(Refused::Link(_))));
    }

    #[test]
    fn a_prefix_copy_replaces_atomically_and_a_short_source_changes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let d = Dir::open_given(root.path()).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(root.path().join("src"), &data).unwrap();
        std::fs::write(root.path().join("dst"), b"old").unwrap();
        let source = d.open_read(Path::new("src")).unwrap();
        for len in [0, 1, 4096, 299_999, 300_000] {
            d.write_atomic_copy(Path::new("dst"), 0o600, 5, &source, len).unwrap();
            assert_eq!(std::fs::read(root.path().join("dst")).unwrap(), &data[..len as usize]);
        }
        // The plain fallback copies the same bytes.
        for len in [0, 1, 300_000] {
            let out = std::fs::File::create(root.path().join("plain")).unwrap();
            copy_prefix(&source, &out, len, false).unwrap();
            assert_eq!(std::fs::read(root.path().join("plain")).unwrap(), &data[..len as usize]);
        }
        std::fs::remove_file(root.path().join("plain")).unwrap();
        let out = std::fs::File::create(root.path().join("plain")).unwrap();
        assert!(copy_prefix(&source, &out, 300_001, false).is_err());
        std::fs::remove_file(root.path().join("plain")).unwrap();
        let e = d.write_atomic_copy(Path::new("dst"), 0o600, 5, &source, 300_001).unwrap_err();
        assert!(e.to_string().contains("shorter than expected"), "{e}");
        assert_eq!(std::fs::read(root.path().join("dst")).unwrap(), &data[..]);
        let names: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let root = tempfile::tempdir().unwrap();
        let fifo = root.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let d = Dir::open_given(root.path()).unwrap();
        let e = d.read(Path::new("fifo"), 10).unwrap_err();
        assert!(matches!(refused(&e), Some(Refused::Special { kind: "FIFO", .. })), "{e}");
        assert!(matches!(refused(&open_regular(&fifo).unwrap_err()), Some(Refused::Special { .. })));
        assert!(matches!(refused(&read_user_file(&fifo).unwrap_err()), Some(Refused::Special { .. })));
        // A path the user names may lead through a link to a regular file.
        std::fs::write(root.path().join("file"), "text").unwrap();
        symlink("file", root.path().join("to-file")).unwrap();
        assert_eq!(read_user_file(&root.path().join("to-file")).unwrap(), b"text");
        symlink("/dev/zero", root.path().join("zero")).unwrap();
        assert!(matches!(refused(&d.read(Path::new("zero"), 10).unwrap_err()), Some(Refused::Link(_))));
        assert!(matches!(refused(&Dir::open_given(Path::new("/dev")).unwrap().read(Path::new("null"), 1).unwrap_err()), Some(Refused::Special { .. })));
    }

    #[test]
    fn links_are_made_with_their_own_mtime() {
        let root = tempfile::tempdir().unwrap();
        let d = Dir::open_given(root.path()).unwrap();
        d.symlink_atomic(Path::new("l"), Path::new("/nowhere"), 1_000_000_000).unwrap();
        d.symlink_atomic(Path::new("l"), Path::new("../x"), 2_000_000_000).unwrap();
        assert_eq!(d.read_link(Path::new("l")).unwrap(), Path::new("../x"));
        assert_eq!(std::fs::symlink_metadata(root.path().join("l")).unwrap().mtime(), 2);
        assert_eq!(d.entries().unwrap(), vec![(OsString::from("l"), Kind::Symlink)]);
    }
}
