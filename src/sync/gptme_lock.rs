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

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{dir}: in use by gptme (process {pid}); close that gptme session first")]
    HeldBy { dir: PathBuf, pid: u32 },
    #[error("{dir}: in use by another process (its .lock is held and names no process)")]
    Held { dir: PathBuf },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// The lock on one conversation directory; released when dropped.
pub struct ConversationLock {
    _file: File,
}

fn lock_path(dir: &Path) -> PathBuf {
    dir.join(".lock")
}

/// Takes `<dir>/.lock` (creating it when missing) and writes this process's PID into it, as
/// gptme does. Fails when a live process holds it — unless that process is another sessiondb,
/// whose hold lasts one operation: then this waits its turn (up to [`SESSIONDB_WAIT`]).
pub fn acquire(dir: &Path) -> Result<ConversationLock, LockError> {
    let path = lock_path(dir);
    let io = |source| LockError::Io { path: path.clone(), source };
    let open = || OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path);
    let mut file = open().map_err(io)?;
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        let waited = started.elapsed();
        match holder_pid(&mut file) {
            Some(pid) if pid != std::process::id() && is_alive(pid) && is_sessiondb(pid) && waited < SESSIONDB_WAIT => {}
            Some(pid) if is_alive(pid) => return Err(LockError::HeldBy { dir: dir.to_owned(), pid }),
            Some(_) => {
                // Stale: the process that wrote its PID is gone (the lock survives in some
                // descendant that inherited the descriptor). Take over as gptme does.
                drop(file);
                std::fs::remove_file(&path).map_err(io)?;
                file = open().map_err(io)?;
                file.try_lock().map_err(|_| LockError::Held { dir: dir.to_owned() })?;
                break;
            }
            // Locked but no PID yet: a holder between taking the lock and writing its PID.
            None if waited < NO_PID_WAIT => {}
            None => return Err(LockError::Held { dir: dir.to_owned() }),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    write!(file, "{}", std::process::id()).map_err(io)?;
    Ok(ConversationLock { _file: file })
}

/// Takes the lock only if it is free right now (a stale one included), never waiting.
pub fn try_acquire(dir: &Path) -> Result<ConversationLock, LockError> {
    let path = lock_path(dir);
    let io = |source| LockError::Io { path: path.clone(), source };
    let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(LockError::Held { dir: dir.to_owned() }),
        Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    write!(file, "{}", std::process::id()).map_err(io)?;
    Ok(ConversationLock { _file: file })
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
    let mut file = File::open(lock_path(dir)).ok()?;
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
        let held = acquire(dir.path()).unwrap();
        // flock locks belong to the open file description: a second open in this process
        // conflicts just as another process would.
        match acquire(dir.path()) {
            Err(LockError::HeldBy { pid, .. }) => assert_eq!(pid, std::process::id()),
            other => panic!("{:?}", other.err()),
        }
        assert_eq!(holder(dir.path()), Some(std::process::id()));
        drop(held);
        assert!(acquire(dir.path()).is_ok());
    }

    #[test]
    fn a_dead_holders_lock_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".lock");
        std::fs::write(&path, "999999999").unwrap();
        let file = File::open(&path).unwrap();
        file.lock().unwrap(); // held, but by a "process" whose PID is dead
        let taken = acquire(dir.path());
        assert!(taken.is_ok(), "{:?}", taken.err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), std::process::id().to_string());
    }
}
