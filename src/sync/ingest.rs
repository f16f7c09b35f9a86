//! Ingest: reading gptme conversation directories into the store.
//!
//! A conversation directory is walked without following symbolic links (so nothing outside it
//! is ever read), checked whole, then written in one store transaction. Any problem with the
//! directory — an invalid chat id, a file name that is not UTF-8, a symlink leading outside the
//! conversation where gptme expects a regular file, an unreadable file — fails that conversation
//! alone, before or inside its transaction, so it is never half-imported and the others go on.

use std::fs::{self, File};
use std::io::BufReader;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::codec::config::parse_chat_config;
use crate::model::{ChatId, ChatIdError};
use crate::store::{ConversationWriter, DocumentKind, LineWarning, StoreError, WriteStats};

/// Why a conversation directory could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{dir}: invalid chat id: {reason}")]
    InvalidChatId { dir: PathBuf, reason: ChatIdError },
    #[error("{path}: file name is not valid UTF-8")]
    NotUtf8 { path: PathBuf },
    #[error("{path}: symbolic link to {target:?} leads outside the conversation, where a regular file is expected")]
    SymlinkOutside { path: PathBuf, target: PathBuf },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a conversation (no conversation.jsonl)")]
    NotAConversation { path: PathBuf },
    #[error("{path}: {source}")]
    Store { path: PathBuf, source: StoreError },
}

/// What importing one conversation did.
#[derive(Debug)]
pub enum Outcome {
    Imported(WriteStats),
    /// Nothing changed since the last import; nothing was written.
    Unchanged,
}

/// The conversation directories of a logs root: its subdirectories holding a
/// `conversation.jsonl`, sorted by name. Subdirectories without one are returned separately
/// (gptme does not list them either).
pub fn conversation_dirs(logs_root: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), IngestError> {
    let io = |source| IngestError::Io { path: logs_root.to_owned(), source };
    let mut conversations = Vec::new();
    let mut others = Vec::new();
    for entry in fs::read_dir(logs_root).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        if !entry.file_type().map_err(io)?.is_dir() {
            continue;
        }
        if fs::symlink_metadata(path.join("conversation.jsonl")).is_ok() {
            conversations.push(path);
        } else {
            others.push(path);
        }
    }
    conversations.sort();
    others.sort();
    Ok((conversations, others))
}

/// gptme's logs root: `$GPTME_LOGS_HOME`, else `$XDG_DATA_HOME/gptme/logs`, else
/// `~/.local/share/gptme/logs`.
pub fn default_logs_root() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("GPTME_LOGS_HOME")
        .or_else(|| var("XDG_DATA_HOME").map(|d| d.join("gptme/logs")))
        .or_else(|| var("HOME").map(|h| h.join(".local/share/gptme/logs")))
}

/// One filesystem entry found in a conversation directory.
#[derive(Debug)]
struct Found {
    /// Relative to the conversation directory, '/'-separated; "" is the directory itself.
    rel: String,
    meta: fs::Metadata,
}

impl Found {
    fn mode(&self) -> u32 {
        self.meta.mode() & 0o7777
    }

    fn mtime_ns(&self) -> i64 {
        self.meta.mtime() * 1_000_000_000 + self.meta.mtime_nsec()
    }
}

/// Names that are never imported: gptme's process lock holds a PID that means nothing once
/// copied, and sessiondb's own temporary files are debris of an interrupted write.
fn is_ignored(rel: &str) -> bool {
    rel == ".lock" || rel.rsplit('/').next().is_some_and(|n| n.starts_with(crate::sync::fsutil::TEMP_PREFIX))
}

/// Lists every entry below `dir`, parents first, without following symlinks.
fn walk(dir: &Path) -> Result<Vec<Found>, IngestError> {
    let io = |path: &Path| { let path = path.to_owned(); move |source| IngestError::Io { path, source } };
    let mut found = vec![Found { rel: String::new(), meta: fs::symlink_metadata(dir).map_err(io(dir))? }];
    let mut pending = vec![(dir.to_owned(), String::new())];
    while let Some((abs, rel)) = pending.pop() {
        let mut children: Vec<_> = fs::read_dir(&abs).map_err(io(&abs))?.collect::<Result<_, _>>().map_err(io(&abs))?;
        children.sort_by_key(|e| e.file_name());
        for child in children {
            let path = child.path();
            let name = child.file_name();
            let name = name.to_str().ok_or_else(|| IngestError::NotUtf8 { path: path.clone() })?;
            let child_rel = if rel.is_empty() { name.to_owned() } else { format!("{rel}/{name}") };
            if is_ignored(&child_rel) {
                continue;
            }
            let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
            if meta.is_dir() {
                pending.push((path, child_rel.clone()));
            }
            found.push(Found { rel: child_rel, meta });
        }
    }
    found.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(found)
}

/// Which codec document a relative path is, by gptme's layout.
fn classify(rel: &str) -> Option<(DocumentKind, String)> {
    let parts: Vec<&str> = rel.split('/').collect();
    let jsonl_stem = |name: &str| name.strip_suffix(".jsonl").filter(|s| !s.is_empty()).map(str::to_owned);
    match parts.as_slice() {
        ["conversation.jsonl"] => Some((DocumentKind::Branch, "main".into())),
        ["events.jsonl"] => Some((DocumentKind::Events, "main".into())),
        ["lossless.jsonl"] => Some((DocumentKind::Lossless, "lossless".into())),
        ["conv-checkpoints.jsonl"] => Some((DocumentKind::ConvCheckpoints, "conv-checkpoints".into())),
        ["branches", name] => jsonl_stem(name).map(|n| (DocumentKind::Branch, n)),
        ["branches", branch, "events.jsonl"] => Some((DocumentKind::Events, (*branch).to_owned())),
        ["views", name] => jsonl_stem(name).map(|n| (DocumentKind::View, n)),
        _ => None,
    }
}

/// Where gptme expects a regular file, a symlink must stay inside the conversation.
fn expects_regular_file(rel: &str) -> bool {
    classify(rel).is_some() || rel == "config.toml" || rel.starts_with("files/")
}

/// Whether `target` (a symlink's contents), seen from the link at `rel`, stays inside the
/// conversation directory. Decided lexically: the link is never followed.
fn stays_inside(rel: &str, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: i64 = rel.matches('/').count() as i64; // components of the link's parent
    for component in target.components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            _ => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

/// A digest of every entry's identity and attributes: equal digests mean nothing changed.
fn fingerprint(dir: &Path, found: &[Found], links: &[(usize, Vec<u8>)]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(dir.as_os_str().as_bytes());
    for (i, f) in found.iter().enumerate() {
        let m = &f.meta;
        h.update(b"\n");
        h.update(f.rel.as_bytes());
        let fields = [m.mode() as i64, m.len() as i64, m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec(), m.ino() as i64];
        for v in fields {
            h.update(v.to_le_bytes());
        }
        if let Some((_, target)) = links.iter().find(|(j, _)| *j == i) {
            h.update(target);
        }
    }
    h.finalize().to_vec()
}

/// Imports one conversation directory (replacing any earlier copy), or reports it unchanged.
pub fn import_conversation(conn: &mut rusqlite::Connection, dir: &Path) -> Result<Outcome, IngestError> {
    let dir = std::path::absolute(dir).map_err(|source| IngestError::Io { path: dir.to_owned(), source })?;
    let name = dir.file_name().ok_or_else(|| IngestError::NotAConversation { path: dir.clone() })?;
    let name = name.to_str().ok_or_else(|| IngestError::NotUtf8 { path: dir.clone() })?;
    let chat_id = ChatId::new(name).map_err(|reason| IngestError::InvalidChatId { dir: dir.clone(), reason })?;

    let found = walk(&dir)?;
    if !found.iter().any(|f| f.rel == "conversation.jsonl") {
        return Err(IngestError::NotAConversation { path: dir });
    }
    let mut links = Vec::new();
    for (i, f) in found.iter().enumerate() {
        if f.meta.file_type().is_symlink() {
            let abs = dir.join(&f.rel);
            let target = fs::read_link(&abs).map_err(|source| IngestError::Io { path: abs.clone(), source })?;
            if expects_regular_file(&f.rel) && !stays_inside(&f.rel, &target) {
                return Err(IngestError::SymlinkOutside { path: abs, target });
            }
            links.push((i, target.as_os_str().as_bytes().to_vec()));
        }
    }
    let digest = fingerprint(&dir, &found, &links);
    let source_dir = dir.to_string_lossy().into_owned();
    let store_err = |source| IngestError::Store { path: dir.clone(), source };
    let previous: Option<Vec<u8>> = conn
        .query_row("SELECT fingerprint FROM conversations WHERE chat_id = ?1", [chat_id.as_str()], |r| r.get(0))
        .ok();
    if previous.as_deref() == Some(&digest[..]) {
        return Ok(Outcome::Unchanged);
    }

    let mut writer = ConversationWriter::begin(conn, chat_id.as_str(), &source_dir, &digest).map_err(store_err)?;
    let mut branch_count = 1;
    let mut has_config = false;
    for (i, f) in found.iter().enumerate() {
        let abs = dir.join(&f.rel);
        let io = |source| IngestError::Io { path: abs.clone(), source };
        let (mode, mtime_ns) = (f.mode(), f.mtime_ns());
        let kind = f.meta.file_type();
        let document = classify(&f.rel);
        if matches!(&document, Some((DocumentKind::Branch, n)) if n != "main") {
            branch_count += 1;
        }
        if kind.is_symlink() {
            let target = &links.iter().find(|(j, _)| *j == i).expect("link read above").1;
            writer.add_symlink(&f.rel, mode, mtime_ns, target).map_err(store_err)?;
        } else if kind.is_dir() {
            writer.add_dir(&f.rel, mode, mtime_ns).map_err(store_err)?;
        } else if kind.is_file() {
            let mut file = File::open(&abs).map_err(io)?;
            match document {
                Some((doc_kind, doc_name)) => writer
                    .add_document(&f.rel, doc_kind, &doc_name, mode, mtime_ns, BufReader::with_capacity(1 << 16, file))
                    .map_err(|e| match e {
                        StoreError::Io { source, .. } => IngestError::Io { path: abs.clone(), source },
                        other => store_err(other),
                    })?,
                None => {
                    writer.add_blob(&f.rel, mode, mtime_ns, &mut file, f.meta.len()).map_err(store_err)?;
                    if f.rel == "config.toml" {
                        has_config = true;
                        let text = fs::read(&abs).map_err(io)?;
                        match parse_chat_config(&String::from_utf8_lossy(&text)) {
                            Ok(config) => writer.set_config(&config).map_err(store_err)?,
                            Err(reason) => writer.warn_file(&f.rel, format!("invalid TOML: {reason}")),
                        }
                    }
                }
            }
        } else {
            return Err(IngestError::Io { path: abs, source: std::io::Error::other("not a regular file, directory or symlink") });
        }
    }
    if !has_config {
        // gptme's per-conversation default workspace.
        let workspace = fs::canonicalize(dir.join("workspace")).unwrap_or_else(|_| dir.join("workspace"));
        writer.set_workspace(&workspace.to_string_lossy()).map_err(store_err)?;
    }
    let stats = writer.finish(branch_count).map_err(store_err)?;
    Ok(Outcome::Imported(stats))
}

/// Formats a warning as `path:line: reason`, with the full path of the file.
pub fn format_warning(dir: &Path, warning: &LineWarning) -> String {
    if warning.line == 0 {
        format!("{}: {}", dir.join(&warning.path).display(), warning.reason)
    } else {
        format!("{}:{}: {}", dir.join(&warning.path).display(), warning.line, warning.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_gptme_layout() {
        assert_eq!(classify("conversation.jsonl"), Some((DocumentKind::Branch, "main".into())));
        assert_eq!(classify("branches/a.b.jsonl"), Some((DocumentKind::Branch, "a.b".into())));
        assert_eq!(classify("branches/x/events.jsonl"), Some((DocumentKind::Events, "x".into())));
        assert_eq!(classify("views/compacted-001.jsonl"), Some((DocumentKind::View, "compacted-001".into())));
        assert_eq!(classify("views/.current"), None);
        assert_eq!(classify("branches/.jsonl"), None);
        assert_eq!(classify("workspace/conversation.jsonl"), None);
    }

    #[test]
    fn symlink_containment_is_lexical() {
        assert!(stays_inside("files/a", Path::new("b")));
        assert!(stays_inside("branches/a.jsonl", Path::new("../conversation.jsonl")));
        assert!(!stays_inside("conversation.jsonl", Path::new("../other/conversation.jsonl")));
        assert!(!stays_inside("files/a", Path::new("/etc/passwd")));
        assert!(!stays_inside("files/a", Path::new("../../x")));
    }
}
