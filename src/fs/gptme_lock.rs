//! gptme's per-conversation process lock (`<conversation>/.lock`), which sessiondb honours.
//!
//! gptme holds an exclusive `flock` on `.lock` for as long as a process has the conversation
//! loaded, with its PID written inside. While gptme holds it, it may rewrite the conversation
//! from memory at any moment (its next append checks the file size it remembers and rewrites
//! when another writer changed it), so writing into a held conversation loses data. sessiondb
//! therefore takes the same lock, by the same rules, before writing a conversation directory:
//! a lock held by a live process is refused, naming the process; a lock whose holder is dead is
//! stale and is taken over, as gptme does. Holding the lock while writing also keeps a gptme
//! that starts meanwhile from loading a half-written conversation.
//!
//! The lock file is opened through the conversation directory's handle ([`Dir`]): a `.lock`
//! that is a symbolic link (or a FIFO, device or socket) is refused, never opened, truncated,
//! stamped or locked through.

use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::nofollow::{self, Dir};
use crate::layout::LOCK;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{dir}: in use by gptme (process {pid}); close that gptme session first")]
    HeldBy { dir: PathBuf, pid: u32 },
    #[error("{dir}: in use by another process (its .lock is held and names no process)")]
    Held { dir: PathBuf },
    /// Another sessiondb's operations on the conversation kept it past [`SESSIONDB_WAIT`].
    #[error("{dir}: in use by another sessiondb (process {pid}) for {} s; try again", SESSIONDB_WAIT.as_secs())]
    Busy { dir: PathBuf, pid: u32 },
    #[error("{path}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// The lock on one conversation directory; released when dropped.
pub struct ConversationLock {
    _file: File,
    /// The directory it locks (see [`let_waiters_go_first`]).
    dir: PathBuf,
}

impl Drop for ConversationLock {
    fn drop(&mut self) {
        // The file's lock goes with it, just after this.
        *LAST_RELEASE.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), std::mem::take(&mut self.dir)));
    }
}

/// When this process last released a conversation's lock, and which (see
/// [`let_waiters_go_first`]).
static LAST_RELEASE: std::sync::Mutex<Option<(Instant, PathBuf)>> = std::sync::Mutex::new(None);

/// How long a process that has just released a lock waits before taking one again: more than
/// a waiter's poll ([`acquire`] tries every millisecond).
const YIELD: Duration = Duration::from_millis(3);

/// A process that released a conversation's lock a moment ago — one running operation after
/// operation on it (a server, a library loop) — lets the processes waiting for that lock go
/// first: they poll, and it would otherwise take the lock again before any of them looks, each
/// time, until they give up ([`SESSIONDB_WAIT`]). Another conversation's lock is taken at once
/// (an archive of a thousand conversations waited 3 ms before each), and a command run once (a
/// fresh process) never waits here.
fn let_waiters_go_first(dir: &Path) {
    let since = match &*LAST_RELEASE.lock().unwrap_or_else(|e| e.into_inner()) {
        Some((at, released)) if released == dir => at.elapsed(),
        _ => return,
    };
    if since < YIELD {
        std::thread::sleep(YIELD - since);
    }
}

fn lock_path(dir: &Path) -> PathBuf {
    dir.join(LOCK)
}

/// Opens conversation directory `path` (not following a link there) and takes its lock.
pub fn acquire_path(path: &Path) -> Result<(Dir, ConversationLock), LockError> {
    let dir = Dir::open(path).map_err(|source| LockError::Io { path: path.to_owned(), source })?;
    let lock = acquire(&dir)?;
    Ok((dir, lock))
}

/// Takes `<dir>/.lock` (creating it when missing) and writes this process's PID into it, as
/// gptme does. Fails when a live process holds it — unless that process is another sessiondb,
/// whose hold lasts one operation: then this waits its turn (up to [`SESSIONDB_WAIT`]).
///
/// Reading the holder's PID races with a new holder stamping its own, so each verdict must
/// hold for a moment before it is acted on: a dead PID before taking over, an empty file before
/// giving up. A lock file replaced by a takeover meanwhile is reopened, so that two processes
/// never hold locks on two different files.
pub fn acquire(handle: &Dir) -> Result<ConversationLock, LockError> {
    let dir = handle.path();
    let_waiters_go_first(dir);
    let path = lock_path(dir);
    let io = |source| LockError::Io { path: path.clone(), source };
    let open = || handle.open_lock_file(Path::new(LOCK));
    let started = Instant::now();
    let (mut no_pid_since, mut dead_since, mut stranger_since) = (None, None, None);
    let mut file = open().map_err(io)?;
    loop {
        match file.try_lock() {
            Ok(()) if is_current(&file, handle) => break,
            Ok(()) => {
                file = open().map_err(io)?; // taken over and replaced meanwhile
                continue;
            }
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        let now = Instant::now();
        let lasted = |since: &mut Option<Instant>, limit: Duration| now.duration_since(*since.get_or_insert(now)) >= limit;
        match holder_pid(&mut file) {
            // Our own PID: left from our previous hold by a new holder not yet stamped, unless
            // it lasts (this process holds the lock elsewhere).
            Some(pid) if pid == std::process::id() => {
                (no_pid_since, dead_since) = (None, None);
                if lasted(&mut stranger_since, SETTLE) {
                    return Err(LockError::HeldBy { dir: dir.to_owned(), pid });
                }
            }
            Some(pid) if is_alive(pid) && is_sessiondb(pid) => {
                (no_pid_since, dead_since, stranger_since) = (None, None, None);
                if now.duration_since(started) >= SESSIONDB_WAIT {
                    return Err(LockError::Busy { dir: dir.to_owned(), pid });
                }
            }
            Some(pid) if is_alive(pid) => {
                (no_pid_since, dead_since) = (None, None);
                if lasted(&mut stranger_since, SETTLE) {
                    return Err(LockError::HeldBy { dir: dir.to_owned(), pid });
                }
            }
            Some(_) => {
                (no_pid_since, stranger_since) = (None, None);
                if lasted(&mut dead_since, SETTLE) {
                    // Stale: the process that wrote its PID is gone (the lock survives in some
                    // descendant that inherited the descriptor). Take over as gptme does.
                    drop(file);
                    handle.remove_file(Path::new(LOCK)).map_err(io)?;
                    file = open().map_err(io)?;
                    file.try_lock().map_err(|_| LockError::Held { dir: dir.to_owned() })?;
                    break;
                }
            }
            None => {
                (dead_since, stranger_since) = (None, None);
                if lasted(&mut no_pid_since, NO_PID_WAIT) {
                    return Err(LockError::Held { dir: dir.to_owned() });
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    stamp(&file).map_err(io)?;
    Ok(ConversationLock { _file: file, dir: dir.to_owned() })
}

/// Whether the open lock file is still the directory's `.lock` (not removed by a takeover).
fn is_current(file: &File, dir: &Dir) -> bool {
    match (nofollow::fstat(file), dir.stat(Path::new(LOCK))) {
        (Ok(a), Ok(Some(b))) => a.ino == b.ino && a.dev == b.dev,
        _ => false,
    }
}

/// Writes this process's PID into the held lock file, as gptme does, without ever leaving it
/// empty (a reader would take an empty file for a holder that names no process).
fn stamp(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let pid = std::process::id().to_string();
    file.write_all_at(pid.as_bytes(), 0)?;
    file.set_len(pid.len() as u64)
}

/// How long a dead or foreign PID must be seen before it is acted on.
const SETTLE: Duration = Duration::from_millis(50);

/// Takes the lock only if it is free right now (a stale one included), never waiting.
pub fn try_acquire(handle: &Dir) -> Result<ConversationLock, LockError> {
    let path = lock_path(handle.path());
    let io = |source| LockError::Io { path: path.clone(), source };
    let file = handle.open_lock_file(Path::new(LOCK)).map_err(io)?;
    match file.try_lock() {
        Ok(()) if is_current(&file, handle) => {}
        Ok(()) | Err(std::fs::TryLockError::WouldBlock) => return Err(LockError::Held { dir: handle.path().to_owned() }),
        Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
    }
    stamp(&file).map_err(io)?;
    Ok(ConversationLock { _file: file, dir: handle.path().to_owned() })
}

/// How long to wait for another sessiondb process's operation on the same conversation.
pub const SESSIONDB_WAIT: Duration = Duration::from_secs(30);
/// How long a lock may be held without a PID in it before it counts as held by a stranger.
const NO_PID_WAIT: Duration = Duration::from_secs(1);

/// Whether process `pid` is a sessiondb (this program, or one named so): its hold on a
/// conversation lasts one operation, so it is worth waiting for, unlike gptme's.
fn is_sessiondb(pid: u32) -> bool {
    let exe = |p: &str| std::fs::read_link(format!("/proc/{p}/exe")).ok();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    comm.trim() == "sessiondb" || exe(&pid.to_string()).is_some_and(|e| Some(e) == exe("self"))
}

/// Whether a live process other than this one holds the lock (without taking it).
pub fn holder(dir: &Path) -> Option<u32> {
    let mut file = nofollow::open_regular(&lock_path(dir)).ok()?;
    match file.try_lock_shared() {
        Ok(()) => None,
        Err(_) => holder_pid(&mut file).filter(|&pid| is_alive(pid)),
    }
}

fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// `kill(pid, 0)`: whether a process with this id exists (as gptme checks).
fn is_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists; nothing is delivered.
    unsafe { libc::kill(pid, 0) == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let handle = Dir::open(dir.path()).unwrap();
        let held = acquire(&handle).unwrap();
        // flock locks belong to the open file description: a second open in this process
        // conflicts just as another process would.
        match acquire(&handle) {
            Err(LockError::HeldBy { pid, .. }) => assert_eq!(pid, std::process::id()),
            other => panic!("{:?}", other.err()),
        }
        assert_eq!(holder(dir.path()), Some(std::process::id()));
        drop(held);
        assert!(acquire(&handle).is_ok());
    }

    #[test]
    fn a_dead_holders_lock_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".lock");
        std::fs::write(&path, "999999999").unwrap();
        let file = File::open(&path).unwrap();
        file.lock().unwrap(); // held, but by a "process" whose PID is dead
        let taken = acquire(&Dir::open(dir.path()).unwrap());
        assert!(taken.is_ok(), "{:?}", taken.err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), std::process::id().to_string());
    }
}
