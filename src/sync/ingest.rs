//! Ingest: reading gptme conversation directories into the store.
//!
//! A conversation directory is walked without following symbolic links (so nothing outside it
//! is ever read; files are opened with `O_NOFOLLOW | O_NONBLOCK` and checked on the handle to be
//! regular, so a FIFO or device put there meanwhile is refused, never waited on), checked whole, then written in one store transaction. Any problem with the
//! directory — an invalid chat id, a file name that is not UTF-8, a symlink leading outside the
//! conversation where gptme expects a regular file, an unreadable file — fails that conversation
//! alone, before or inside its transaction, so it is never half-imported and the others go on.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::codec::config::{parse_chat_config, ChatConfig};
use crate::codec::conv_checkpoints::{decode_checkpoint_line, CheckpointLine};
use crate::codec::events::{decode_event_line, EventLine, Payload};
use crate::codec::lines::LineReader;
use crate::sync::safe_fs::{open_regular, read_regular};
use crate::sync::watermark::{tail_digest, Watermark};
use crate::codec::message_line::{decode_line, encode_message, DecodedLine};
use crate::model::{ChatId, ChatIdError, Message};
use crate::store::{ConversationWriter, DocumentId, DocumentKind, LineDigest, LineWarning, ListingTotals, StoreError, WriteBatch, WriteStats};

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
    #[error("{path}: a directory where gptme keeps a file; the conversation was not read (the store keeps its last good copy). Move the directory away and put the file back")]
    DirectoryForFile { path: PathBuf },
    #[error("{path}: not a conversation (no conversation.jsonl)")]
    NotAConversation { path: PathBuf },
    #[error("{path}: {source}")]
    Store { path: PathBuf, source: StoreError },
}

/// How much of a transcript or event log an import takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// Every byte, an unterminated last line included (kept as written): `sessiondb import`,
    /// which takes a directory as it is.
    Whole,
    /// Whole lines only: a last line without its newline may be gptme writing it right now, so
    /// it is read once complete (`sessiondb sync`, which follows live directories).
    CompleteLines,
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
pub(crate) struct Found {
    /// Relative to the conversation directory, '/'-separated; "" is the directory itself.
    pub(crate) rel: String,
    pub(crate) meta: fs::Metadata,
}

impl Found {
    fn mode(&self) -> u32 {
        self.meta.mode() & 0o7777
    }

    pub(crate) fn mtime_ns(&self) -> i64 {
        self.meta.mtime() * 1_000_000_000 + self.meta.mtime_nsec()
    }
}

/// Names that are never imported: gptme's process lock holds a PID that means nothing once
/// copied, and sessiondb's own temporary files are debris of an interrupted write.
fn is_ignored(rel: &str) -> bool {
    rel == ".lock" || rel.rsplit('/').next().is_some_and(|n| n.starts_with(crate::sync::fsutil::TEMP_PREFIX))
}

/// Lists every entry below `dir`, parents first, without following symlinks.
pub(crate) fn walk(dir: &Path) -> Result<Vec<Found>, IngestError> {
    walk_noting_debris(dir).map(|(found, _)| found)
}

/// [`walk`], also telling whether an interrupted sessiondb write left temporary files.
pub(crate) fn walk_noting_debris(dir: &Path) -> Result<(Vec<Found>, bool), IngestError> {
    let mut debris = false;
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
                debris |= name.starts_with(crate::sync::fsutil::TEMP_PREFIX);
                continue;
            }
            let meta = match fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                // Gone since it was listed (gptme renamed its temporary file into place).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(&path)(e)),
            };
            if meta.is_dir() {
                pending.push((path, child_rel.clone()));
            }
            found.push(Found { rel: child_rel, meta });
        }
    }
    found.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok((found, debris))
}

/// Which codec document a relative path is, by gptme's layout.
pub(crate) fn classify(rel: &str) -> Option<(DocumentKind, String)> {
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
///
/// Files count by mode, size, mtime and inode (an atomic rewrite is a new inode); symlinks by
/// target and mtime; directories by mode only, since what they contain is listed itself and
/// their mtimes move whenever a temporary file comes and goes. ctime is left out for the same
/// reason: sessiondb's own hard-linked backups touch it without changing anything.
pub(crate) fn fingerprint(dir: &Path, found: &[Found], links: &[(usize, Vec<u8>)]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(dir.as_os_str().as_bytes());
    for (i, f) in found.iter().enumerate() {
        let m = &f.meta;
        h.update(b"\n");
        h.update(f.rel.as_bytes());
        let fields: Vec<i64> = if m.is_dir() {
            vec![m.mode() as i64]
        } else {
            vec![m.mode() as i64, m.len() as i64, m.mtime(), m.mtime_nsec(), m.ino() as i64]
        };
        for v in fields {
            h.update(v.to_le_bytes());
        }
        if let Some((_, target)) = links.iter().find(|(j, _)| *j == i) {
            h.update(target);
        }
    }
    h.finalize().to_vec()
}

/// The fingerprint of a conversation directory as it is now (see [`fingerprint`]).
pub fn directory_fingerprint(dir: &Path) -> Result<Vec<u8>, IngestError> {
    let dir = std::path::absolute(dir).map_err(|source| IngestError::Io { path: dir.to_owned(), source })?;
    let found = walk(&dir)?;
    let mut links = Vec::new();
    for (i, f) in found.iter().enumerate() {
        if f.meta.file_type().is_symlink() {
            let abs = dir.join(&f.rel);
            let target = fs::read_link(&abs).map_err(|source| IngestError::Io { path: abs.clone(), source })?;
            links.push((i, target.as_os_str().as_bytes().to_vec()));
        }
    }
    Ok(fingerprint(&dir, &found, &links))
}

/// How a conversation directory reaches the store: the producer ([`prepare`]) turns the
/// directory into these items, the consumer ([`apply`]) writes them. Items carry decoded lines,
/// so all parsing happens on the producer's thread.
pub(crate) enum Item {
    Unchanged,
    Begin { chat_id: ChatId, source_dir: String, fingerprint: Vec<u8> },
    Dir { rel: String, mode: u32, mtime_ns: i64 },
    Symlink { rel: String, mode: u32, mtime_ns: i64, target: Vec<u8> },
    Blob { rel: String, mode: u32, mtime_ns: i64, sha256: [u8; 32], data: Vec<u8> },
    /// A file too large to pass in memory: the consumer streams it from `path`.
    LargeBlob { rel: String, mode: u32, mtime_ns: i64, sha256: [u8; 32], size: u64, path: PathBuf },
    Config(Result<ChatConfig, String>),
    Workspace(String),
    StartDocument { rel: String, kind: DocumentKind, name: String, mode: u32, mtime_ns: i64 },
    /// `decoded` is `None` for a line whose digest was already sent in this conversation.
    MessageLine { line_no: i64, digest: LineDigest, line: Vec<u8>, decoded: Option<DecodedLine> },
    EventLine { line_no: i64, line: Vec<u8>, decoded: EventLine, nested: Vec<LineDigest> },
    CheckpointLine { line_no: i64, line: Vec<u8>, decoded: CheckpointLine },
    /// `read` is what was read of the file: where the next incremental read starts.
    EndDocument { line_count: i64, ends_with_newline: bool, read: Watermark },
    /// `complete`: everything the fingerprint describes was read (else the fingerprint must not
    /// be kept, or the rest would never be read).
    End { totals: Box<ListingTotals>, modified: f64, branch_count: i64, complete: bool },
    Failed(IngestError),
}

impl Item {
    /// Roughly how many bytes of file content the item holds.
    fn size(&self) -> usize {
        match self {
            Item::Blob { data, .. } => data.len(),
            Item::MessageLine { line, .. } | Item::EventLine { line, .. } | Item::CheckpointLine { line, .. } => line.len(),
            _ => 64,
        }
    }
}

/// Files up to this size travel to the writer in memory; larger ones are streamed.
const IN_MEMORY_BLOB: u64 = 1 << 20;

/// Items travel in chunks of this many, or of about [`CHUNK_BYTES`], whichever comes first, so
/// that the two threads hand over rarely.
const CHUNK_ITEMS: usize = 512;
const CHUNK_BYTES: usize = 4 << 20;

/// Chunks in flight between the producer and the writer. With the chunk limits, memory held
/// between the threads stays below about `(CHANNEL_CHUNKS + 2) * (CHUNK_BYTES + longest line)`.
const CHANNEL_CHUNKS: usize = 4;

/// Modification time → epoch seconds, computed as CPython computes `st_mtime`
/// (`sec + nsec * 1e-9`), so listings agree with gptme's to the last bit.
pub(crate) fn mtime_seconds(meta: &fs::Metadata) -> f64 {
    meta.mtime() as f64 + meta.mtime_nsec() as f64 * 1e-9
}

/// Produces the items of one conversation directory. `known` is the fingerprint the store has
/// for it, if any. Returns false when the consumer has gone away.
fn prepare(dir: &Path, known: Option<&[u8]>, read: ReadMode, send: &mut dyn FnMut(Item) -> bool) -> bool {
    match prepare_inner(dir, known, read, send) {
        Ok(alive) => alive,
        Err(e) => send(Item::Failed(e)),
    }
}

fn prepare_inner(dir: &Path, known: Option<&[u8]>, read: ReadMode, send: &mut dyn FnMut(Item) -> bool) -> Result<bool, IngestError> {
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
        if f.meta.is_dir() && (classify(&f.rel).is_some() || f.rel == "config.toml") {
            // Read as an empty directory it would silently drop the whole document.
            return Err(IngestError::DirectoryForFile { path: dir.join(&f.rel) });
        }
        if f.meta.file_type().is_symlink() {
            let abs = dir.join(&f.rel);
            let target = fs::read_link(&abs).map_err(|source| IngestError::Io { path: abs.clone(), source })?;
            if expects_regular_file(&f.rel) && !stays_inside(&f.rel, &target) {
                return Err(IngestError::SymlinkOutside { path: abs, target });
            }
            links.push((i, target.as_os_str().as_bytes().to_vec()));
        }
    }
    let fingerprint = fingerprint(&dir, &found, &links);
    if known == Some(&fingerprint[..]) {
        return Ok(send(Item::Unchanged));
    }
    let source_dir = dir.to_string_lossy().into_owned();
    if !send(Item::Begin { chat_id, source_dir, fingerprint }) {
        return Ok(false);
    }
    let mut branch_count = 1;
    let mut has_config = false;
    let mut totals = ListingTotals::default();
    let mut modified = 0.0;
    let mut sent_digests: HashSet<LineDigest> = HashSet::new();
    let mut complete = true;
    for (i, f) in found.iter().enumerate() {
        let abs = dir.join(&f.rel);
        let io = |source| IngestError::Io { path: abs.clone(), source };
        let (rel, mode, mtime_ns) = (f.rel.clone(), f.mode(), f.mtime_ns());
        let kind = f.meta.file_type();
        let document = classify(&f.rel);
        if matches!(&document, Some((DocumentKind::Branch, n)) if n != "main") {
            branch_count += 1;
        }
        let alive = if kind.is_symlink() {
            let target = links.iter().find(|(j, _)| *j == i).expect("link read above").1.clone();
            send(Item::Symlink { rel, mode, mtime_ns, target })
        } else if kind.is_dir() {
            send(Item::Dir { rel, mode, mtime_ns })
        } else if kind.is_file() {
            match document {
                Some((doc_kind, doc_name)) => {
                    let is_main = doc_kind == DocumentKind::Branch && doc_name == "main";
                    if is_main {
                        modified = mtime_seconds(&f.meta);
                    }
                    // One descriptor for everything about the file, and no more bytes than it
                    // had when it was opened: a writer appending meanwhile is read next time.
                    let file = open_regular(&abs).map_err(io)?;
                    let meta = file.metadata().map_err(io)?;
                    let (mode, mtime_ns) = (meta.mode() & 0o7777, meta.mtime() * 1_000_000_000 + meta.mtime_nsec());
                    if is_main {
                        modified = mtime_seconds(&meta);
                    }
                    if !send(Item::StartDocument { rel, kind: doc_kind, name: doc_name, mode, mtime_ns }) {
                        return Ok(false);
                    }
                    let main_totals = if is_main { Some(&mut totals) } else { None };
                    let limit = meta.len();
                    let Some(consumed) = send_lines(file, limit, meta.ino(), read, doc_kind, main_totals, &mut sent_digests, send).map_err(io)? else {
                        return Ok(false);
                    };
                    // What was read is what the fingerprint describes only when the file was
                    // neither replaced since the walk nor left with a line for later.
                    complete &= consumed == f.meta.len() && meta.ino() == f.meta.ino() && mtime_ns == f.mtime_ns();
                    true
                }
                None => {
                    let size = f.meta.len();
                    let item = if size <= IN_MEMORY_BLOB {
                        let data = read_regular(&abs).map_err(io)?;
                        let sha256: [u8; 32] = Sha256::digest(&data).into();
                        if f.rel == "config.toml" {
                            has_config = true;
                            let config = parse_chat_config(&String::from_utf8_lossy(&data));
                            let workspace = configured_workspace(&dir, &config);
                            if !send(Item::Config(config)) || !send(Item::Workspace(workspace)) {
                                return Ok(false);
                            }
                        }
                        Item::Blob { rel, mode, mtime_ns, sha256, data }
                    } else {
                        let mut hasher = Sha256::new();
                        std::io::copy(&mut open_regular(&abs).map_err(io)?, &mut hasher).map_err(io)?;
                        Item::LargeBlob { rel, mode, mtime_ns, sha256: hasher.finalize().into(), size, path: abs.clone() }
                    };
                    send(item)
                }
            }
        } else {
            return Err(IngestError::Io { path: abs, source: std::io::Error::other("not a regular file, directory or symlink") });
        };
        if !alive {
            return Ok(false);
        }
    }
    if !has_config && !send(Item::Workspace(resolve(&dir.join("workspace")))) {
        // gptme's per-conversation default workspace.
        return Ok(false);
    }
    Ok(send(Item::End { totals: Box::new(totals), modified, branch_count, complete }))
}

/// The workspace gptme's `ChatConfig.from_logdir` reports for a conversation with a
/// config.toml: `@log` means `<dir>/workspace`; another value is expanded (`~`) and resolved
/// (relative to the current directory, as gptme does); without one, `<dir>/workspace` when it
/// exists, else the conversation directory itself, which is also the fallback for a config.toml
/// that does not parse.
fn configured_workspace(dir: &Path, config: &Result<ChatConfig, String>) -> String {
    match config {
        Ok(ChatConfig { workspace: Some(w), .. }) if w == "@log" => resolve(&dir.join("workspace")),
        Ok(ChatConfig { workspace: Some(w), .. }) => {
            let expanded = match (w.strip_prefix('~'), std::env::var_os("HOME")) {
                (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
                    PathBuf::from(format!("{}{rest}", home.to_string_lossy()))
                }
                _ => PathBuf::from(w),
            };
            resolve(&std::path::absolute(&expanded).unwrap_or(expanded))
        }
        Ok(_) if fs::symlink_metadata(dir.join("workspace")).is_ok() && dir.join("workspace").exists() => {
            resolve(&dir.join("workspace"))
        }
        _ => resolve(dir),
    }
}

/// Python's `Path.resolve()` (not strict): symlinks followed as far as the path exists, `.`
/// and `..` removed, the rest appended as written. Only metadata is read, never contents.
fn resolve(path: &Path) -> String {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    let base = loop {
        if let Ok(real) = fs::canonicalize(&existing) {
            break real;
        }
        match (existing.file_name().map(|n| n.to_owned()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => break existing,
        }
    };
    let mut out = base;
    for name in rest.into_iter().rev() {
        match name.to_str() {
            Some("..") => {
                out.pop();
            }
            Some(".") => {}
            _ => out.push(name),
        }
    }
    out.to_string_lossy().into_owned()
}

/// Reads and decodes the first `limit` bytes of one document (inode `ino`), sending one item
/// per line. With [`ReadMode::CompleteLines`] an unterminated last line is left for later,
/// unless it is a whole record ([`is_whole_record`]).
#[allow(clippy::too_many_arguments)]
fn send_lines(
    file: File,
    limit: u64,
    ino: u64,
    read: ReadMode,
    kind: DocumentKind,
    mut totals: Option<&mut ListingTotals>,
    sent_digests: &mut HashSet<LineDigest>,
    send: &mut dyn FnMut(Item) -> bool,
) -> std::io::Result<Option<u64>> {
    let mut lines = LineReader::new(BufReader::with_capacity(1 << 16, (&file).take(limit)));
    let mut line_no: i64 = 0;
    let mut consumed: u64 = 0;
    let mut unterminated = false;
    while let Some(line) = lines.next_line()? {
        let line = line.to_vec();
        let terminated = lines.ends_with_newline();
        if !terminated && read == ReadMode::CompleteLines && !is_whole_record(kind, &line) {
            break; // possibly a write in progress
        }
        consumed += line.len() as u64 + u64::from(terminated);
        unterminated = !terminated;
        let item = line_item(kind, line_no, line, totals.as_deref_mut(), sent_digests);
        if !send(item) {
            return Ok(None);
        }
        line_no += 1;
    }
    let ends_with_newline = !unterminated;
    let mark = Watermark { size: consumed, ino, tail: tail_digest(&file, consumed)? };
    Ok(send(Item::EndDocument { line_count: line_no, ends_with_newline, read: mark }).then_some(consumed))
}

/// Whether a last line without its newline is nonetheless a whole record of a document of
/// `kind` (a message, an event, a bookmark), as gptme would load it. Such a line cannot be a
/// write in progress that ends differently — a JSON object is complete at its closing brace —
/// so it is taken in; if its newline arrives later, the file no longer only grew from what was
/// read (the stored last line lacks it) and the conversation is read again whole.
pub(crate) fn is_whole_record(kind: DocumentKind, line: &[u8]) -> bool {
    use crate::codec::message_line::LineContent;
    match kind {
        DocumentKind::Branch | DocumentKind::View | DocumentKind::Lossless => matches!(decode_line(line).content, LineContent::Message(_)),
        DocumentKind::Events => matches!(decode_event_line(line), EventLine::Event { .. }),
        DocumentKind::ConvCheckpoints => matches!(decode_checkpoint_line(line), CheckpointLine::Checkpoint { .. }),
    }
}

/// Decodes one line of a document of `kind` into the item that carries it to the writer.
pub(crate) fn line_item(kind: DocumentKind, line_no: i64, line: Vec<u8>, totals: Option<&mut ListingTotals>, sent_digests: &mut HashSet<LineDigest>) -> Item {
    match kind {
        DocumentKind::Branch | DocumentKind::View | DocumentKind::Lossless => {
            let digest: LineDigest = Sha256::digest(&line).into();
            let first = sent_digests.insert(digest);
            let decoded = (first || totals.is_some()).then(|| decode_line(&line));
            if let Some(t) = totals {
                t.feed(&line, decoded.as_ref().map(|d| &d.content));
            }
            Item::MessageLine { line_no, digest, decoded: if first { decoded } else { None }, line }
        }
        DocumentKind::Events => {
            let decoded = decode_event_line(&line);
            let nested = match &decoded {
                EventLine::Event { event, canonical: true } => nested_messages(&event.payload)
                    .map(|m| Sha256::digest(encode_message(m).as_bytes()).into())
                    .collect(),
                _ => Vec::new(),
            };
            Item::EventLine { line_no, line, decoded, nested }
        }
        DocumentKind::ConvCheckpoints => Item::CheckpointLine { line_no, decoded: decode_checkpoint_line(&line), line },
    }
}

fn nested_messages(payload: &Payload) -> Box<dyn Iterator<Item = &Message> + '_> {
    match payload {
        Payload::Message(m) => Box::new(std::iter::once(m)),
        Payload::Messages(ms) => Box::new(ms.iter()),
        Payload::Other(_) => Box::new(std::iter::empty()),
    }
}

/// Writes one line item of document `id` (at `rel`).
pub(crate) fn write_line(writer: &mut ConversationWriter, id: DocumentId, rel: &str, item: Item) -> Result<(), StoreError> {
    match item {
        Item::MessageLine { line_no, digest, line, decoded } => writer.add_message_line(id, rel, line_no, &digest, &line, decoded.as_ref()),
        Item::EventLine { line_no, line, decoded, nested } => writer.add_event_line(id, rel, line_no, &line, &decoded, &nested),
        Item::CheckpointLine { line_no, line, decoded } => writer.add_checkpoint_line(id, rel, line_no, &line, &decoded),
        _ => unreachable!("only line items are written as lines"),
    }
}

/// Why [`apply`] stopped early: the error, and whether the conversation's items were all
/// consumed (true when the producer itself reported the failure).
struct ApplyError {
    error: IngestError,
    consumed: bool,
}

/// Writes the items of one conversation (everything up to its `End` or `Failed`) into the
/// batch. `first` is the item that started it.
fn apply(batch: &mut WriteBatch, dir: &Path, first: Item, next: &mut dyn FnMut() -> Option<Item>) -> Result<Outcome, ApplyError> {
    let failed = |error| ApplyError { error, consumed: false };
    let (chat_id, source_dir, fingerprint) = match first {
        Item::Unchanged => return Ok(Outcome::Unchanged),
        Item::Failed(error) => return Err(ApplyError { error, consumed: true }),
        Item::Begin { chat_id, source_dir, fingerprint } => (chat_id, source_dir, fingerprint),
        _ => unreachable!("a conversation starts with Begin, Unchanged or Failed"),
    };
    let store_err = |source| IngestError::Store { path: dir.to_owned(), source };
    let mut writer = batch.conversation(chat_id.as_str(), &source_dir, &fingerprint).map_err(store_err).map_err(failed)?;
    let mut document: Option<(DocumentId, String)> = None;
    loop {
        let Some(item) = next() else {
            let error = IngestError::Io { path: dir.to_owned(), source: std::io::Error::other("reader stopped") };
            return Err(ApplyError { error, consumed: true });
        };
        let doc = || document.as_ref().expect("a line belongs to a started document");
        match item {
            Item::Dir { rel, mode, mtime_ns } => writer.add_dir(&rel, mode, mtime_ns),
            Item::Symlink { rel, mode, mtime_ns, target } => writer.add_symlink(&rel, mode, mtime_ns, &target),
            Item::Blob { rel, mode, mtime_ns, sha256, data } => writer.add_blob(&rel, mode, mtime_ns, &sha256, &data),
            Item::LargeBlob { rel, mode, mtime_ns, sha256, size, path } => {
                let file = open_regular(&path).map_err(|source| failed(IngestError::Io { path: path.clone(), source }))?;
                writer.add_blob_stream(&rel, mode, mtime_ns, &sha256, size, BufReader::new(file))
            }
            Item::Config(Ok(config)) => writer.set_config(&config),
            Item::Config(Err(reason)) => {
                writer.warn_file("config.toml", format!("invalid TOML: {reason}"));
                Ok(())
            }
            Item::Workspace(w) => writer.set_workspace(&w),
            Item::StartDocument { rel, kind, name, mode, mtime_ns } => {
                let id = writer.start_document(&rel, kind, &name, mode, mtime_ns).map_err(store_err).map_err(failed)?;
                document = Some((id, rel));
                Ok(())
            }
            line @ (Item::MessageLine { .. } | Item::EventLine { .. } | Item::CheckpointLine { .. }) => {
                let (id, rel) = doc();
                write_line(&mut writer, *id, rel, line)
            }
            Item::EndDocument { line_count, ends_with_newline, read } => {
                let (id, rel) = document.take().expect("a started document");
                writer.end_document(id, &rel, line_count, ends_with_newline, &read)
            }
            Item::End { totals, modified, branch_count, complete } => {
                let outcome = writer.finish(&totals, modified, branch_count, complete).map(Outcome::Imported);
                return outcome.map_err(|e| ApplyError { error: store_err(e), consumed: true });
            }
            Item::Failed(error) => return Err(ApplyError { error, consumed: true }),
            Item::Unchanged | Item::Begin { .. } => unreachable!("one conversation at a time"),
        }
        .map_err(|e| match e {
            StoreError::Io { path, source } => IngestError::Io { path: dir.join(path), source },
            other => store_err(other),
        })
        .map_err(failed)?;
    }
}

/// Called by [`import_dirs`] after each conversation directory.
pub type OnImported<'a> = dyn FnMut(&mut WriteBatch, &Path, Result<Outcome, IngestError>) -> Result<(), StoreError> + 'a;

/// Imports the conversation directories `dirs` into `batch`, reading and decoding them on a
/// second thread while this one writes. `on_done` is called once per directory, in order, with
/// its outcome, and may commit the batch (it is given the batch between conversations).
///
/// Before a stored conversation is read again, messages sessiondb appended that the directory
/// dropped are kept as a new branch ([`super::acknowledged::rescue`]; not in a `dry_run`); a
/// conversation whose rescue fails is not read (its outcome is the error).
pub fn import_dirs(batch: &mut WriteBatch, dirs: &[PathBuf], read: ReadMode, dry_run: bool, on_done: &mut OnImported) -> Result<(), StoreError> {
    let known = crate::store::queries::fingerprints(batch.conn())?;
    let acknowledged = if dry_run { HashSet::new() } else { crate::store::acknowledged::chat_ids(batch.conn())? };
    let mut rescued: HashMap<&Path, Result<Vec<super::acknowledged::Displaced>, IngestError>> = HashMap::new();
    for dir in dirs {
        let key = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if known.contains_key(key) && acknowledged.contains(key) {
            rescued.insert(dir, super::acknowledged::rescue(batch.conn(), key, dir));
        }
    }
    let readable: Vec<&PathBuf> = dirs.iter().filter(|d| !matches!(rescued.get(d.as_path()), Some(Err(_)))).collect();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Item>>(CHANNEL_CHUNKS);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut chunk = Vec::with_capacity(CHUNK_ITEMS);
            let mut chunk_bytes = 0;
            for dir in readable {
                let key = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let known = known.get(key).map(Vec::as_slice);
                let alive = prepare(dir, known, read, &mut |item| {
                    chunk_bytes += item.size();
                    chunk.push(item);
                    if chunk.len() < CHUNK_ITEMS && chunk_bytes < CHUNK_BYTES {
                        return true;
                    }
                    chunk_bytes = 0;
                    tx.send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_ITEMS))).is_ok()
                });
                if !alive {
                    return;
                }
            }
            let _ = tx.send(chunk);
        });
        // Dropping the receiver (on error) stops the producer at its next send.
        let mut items = ChunkedReceiver { rx, chunk: Vec::new().into_iter() };
        for dir in dirs {
            let kept = match rescued.remove(dir.as_path()) {
                Some(Err(e)) => {
                    on_done(batch, dir, Err(e))?;
                    continue;
                }
                Some(Ok(kept)) => kept,
                None => Vec::new(),
            };
            let Some(first) = items.next() else { break };
            let outcome = apply(batch, dir, first, &mut || items.next()).map_err(|e| {
                if !e.consumed {
                    items.drain_conversation();
                }
                e.error
            });
            let outcome = outcome.map(|o| match o {
                Outcome::Imported(mut stats) => {
                    stats.rescued = kept.into_iter().map(|d| (d.path, d.messages, d.kept_as.unwrap_or_default())).collect();
                    Outcome::Imported(stats)
                }
                unchanged => unchanged,
            });
            on_done(batch, dir, outcome)?;
        }
        Ok(())
    })
}

/// The consumer's end of the channel, one item at a time.
struct ChunkedReceiver {
    rx: std::sync::mpsc::Receiver<Vec<Item>>,
    chunk: std::vec::IntoIter<Item>,
}

impl ChunkedReceiver {
    fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.chunk.next() {
                return Some(item);
            }
            self.chunk = self.rx.recv().ok()?.into_iter();
        }
    }

    /// After the writer failed partway through a conversation, discards the producer's
    /// remaining items for it: everything up to its `End` (or a late `Failed`).
    fn drain_conversation(&mut self) {
        while let Some(item) = self.next() {
            if matches!(item, Item::End { .. } | Item::Failed(_)) {
                return;
            }
        }
    }
}

impl IngestError {
    /// Whether reading failed because a file disappeared between being listed and being read:
    /// gptme writes through temporary files that it renames into place, so reading again
    /// usually succeeds.
    pub fn vanished(&self) -> bool {
        matches!(self, IngestError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// How often [`import_conversation`] reads a directory whose files keep vanishing under it.
const VANISHED_ATTEMPTS: u32 = 20;

/// Imports one conversation directory into `batch` (replacing any earlier copy), or reports it
/// unchanged. A file that vanishes while it is read (gptme renaming a temporary file into
/// place) has the directory read again, a few times. On error nothing of this conversation is
/// left in the batch.
pub fn import_conversation(batch: &mut WriteBatch, dir: &Path, read: ReadMode) -> Result<Outcome, IngestError> {
    let mut attempt = 0;
    loop {
        let mut result = None;
        import_dirs(batch, &[dir.to_owned()], read, false, &mut |_, _, outcome| {
            result = Some(outcome);
            Ok(())
        })
        .map_err(|source| IngestError::Store { path: dir.to_owned(), source })?;
        match result.expect("one outcome per directory") {
            Err(e) if e.vanished() && attempt + 1 < VANISHED_ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(u64::from(attempt)));
            }
            other => return other,
        }
    }
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
