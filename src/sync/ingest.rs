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
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::codec::bookmarks::{decode_bookmark_line, BookmarkLine};
use crate::codec::config::{parse_chat_config, ChatConfig};
use crate::codec::events::{decode_event_line, EventLine};
use crate::codec::lines::LineReader;
use crate::codec::message_line::{decode_line, encode_message, DecodedLine};
use crate::fs::meta::mtime_seconds;
use crate::fs::nofollow::{open_regular, read_regular};
use crate::fs::walk::{fingerprint, walk, WalkError};
use crate::fs::watermark::{tail_digest, Watermark};
use crate::layout::{self, classify};
use crate::model::{ChatId, ChatIdError};
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
    #[error("{path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: a directory where gptme keeps a file; the conversation was not read (the store keeps its last good copy). Move the directory away and put the file back")]
    DirectoryForFile { path: PathBuf },
    #[error("{path}: not a conversation (no conversation.jsonl)")]
    NotAConversation { path: PathBuf },
    #[error("{path}")]
    Store { path: PathBuf, source: StoreError },
}

impl From<WalkError> for IngestError {
    fn from(e: WalkError) -> Self {
        match e {
            WalkError::Io { path, source } => IngestError::Io { path, source },
            WalkError::NotUtf8 { path } => IngestError::NotUtf8 { path },
        }
    }
}

/// How much of a transcript or event log an import takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// Every byte, an unterminated last line included (kept as written): `sessiondb import`,
    /// which takes a directory as it is.
    Whole,
    /// Whole lines only: a last line without its newline may be gptme writing it right now, so
    /// it is read once complete (`sessiondb sync`, which follows live directories) — or once
    /// its file has not changed for [`CUT_LINE_SETTLE`]: then it is a line cut short (a
    /// crash mid-write) and is taken as it is, as `import` takes it.
    CompleteLines,
}

/// How long a file must stay unchanged before its unterminated last line counts as cut short
/// rather than being written (gptme writes a line in one call, so a write in progress lasts
/// far less). Misjudging costs nothing: when the rest of the line arrives, the stored copy no
/// longer only grew and the conversation is read again whole.
pub const CUT_LINE_SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

/// What importing one conversation did.
#[derive(Debug)]
pub enum Outcome {
    Imported(WriteStats),
    /// Nothing changed since the last import; nothing was written.
    Unchanged,
}

/// The conversation directories of a logs root and, separately, its other subdirectories
/// (see [`layout::conversation_dirs`]).
pub fn conversation_dirs(logs_root: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), IngestError> {
    layout::conversation_dirs(logs_root).map_err(|source| IngestError::Io { path: logs_root.to_owned(), source })
}

/// Where gptme expects a regular file, a symlink must stay inside the conversation.
fn expects_regular_file(rel: &str) -> bool {
    classify(rel).is_some() || rel == layout::CONFIG || layout::is_attachment(rel)
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

/// How a conversation directory reaches the store: the producer ([`prepare`]) turns the
/// directory into these items, the consumer ([`apply`]) writes them. Items carry decoded lines,
/// so all parsing happens on the producer's thread.
pub(crate) enum Item {
    Unchanged,
    Begin {
        chat_id: ChatId,
        source_dir: String,
        fingerprint: Vec<u8>,
    },
    Dir {
        rel: String,
        mode: u32,
        mtime_ns: i64,
    },
    Symlink {
        rel: String,
        mode: u32,
        mtime_ns: i64,
        target: Vec<u8>,
    },
    Blob {
        rel: String,
        mode: u32,
        mtime_ns: i64,
        sha256: [u8; 32],
        data: Vec<u8>,
    },
    /// A file too large to pass in memory: the consumer streams it from `path`.
    LargeBlob {
        rel: String,
        mode: u32,
        mtime_ns: i64,
        sha256: [u8; 32],
        size: u64,
        path: PathBuf,
    },
    Config(Result<ChatConfig, String>),
    Workspace(String),
    StartDocument {
        rel: String,
        kind: DocumentKind,
        name: String,
        mode: u32,
        mtime_ns: i64,
    },
    /// `decoded` is `None` for a line whose digest was already sent in this conversation.
    MessageLine {
        line_no: i64,
        digest: LineDigest,
        line: Vec<u8>,
        decoded: Option<DecodedLine>,
    },
    EventLine {
        line_no: i64,
        line: Vec<u8>,
        decoded: EventLine,
        nested: Vec<LineDigest>,
    },
    BookmarkLine {
        line_no: i64,
        line: Vec<u8>,
        decoded: BookmarkLine,
    },
    /// `read` is what was read of the file: where the next incremental read starts.
    EndDocument {
        line_count: i64,
        ends_with_newline: bool,
        read: Watermark,
    },
    /// `complete`: everything the fingerprint describes was read (else the fingerprint must not
    /// be kept, or the rest would never be read).
    End {
        totals: Box<ListingTotals>,
        modified: f64,
        branch_count: i64,
        complete: bool,
    },
    Failed(IngestError),
}

impl Item {
    /// Roughly how many bytes of file content the item holds.
    fn size(&self) -> usize {
        match self {
            Item::Blob { data, .. } => data.len(),
            Item::MessageLine { line, .. } | Item::EventLine { line, .. } | Item::BookmarkLine { line, .. } => line.len(),
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

    let found = walk(&dir)?.entries;
    if !found.iter().any(|f| f.rel == layout::MAIN_TRANSCRIPT) {
        return Err(IngestError::NotAConversation { path: dir });
    }
    for f in &found {
        if f.meta.is_dir() && (classify(&f.rel).is_some() || f.rel == layout::CONFIG) {
            // Read as an empty directory it would silently drop the whole document.
            return Err(IngestError::DirectoryForFile { path: dir.join(&f.rel) });
        }
        if let Some(target) = f.link_target() {
            if expects_regular_file(&f.rel) && !stays_inside(&f.rel, target) {
                return Err(IngestError::SymlinkOutside { path: dir.join(&f.rel), target: target.to_owned() });
            }
        }
    }
    let fingerprint = fingerprint(&dir, &found);
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
    for f in &found {
        let abs = dir.join(&f.rel);
        let io = |source| IngestError::Io { path: abs.clone(), source };
        let (rel, mode, mtime_ns) = (f.rel.clone(), f.mode(), f.mtime_ns());
        let kind = f.meta.file_type();
        let document = classify(&f.rel);
        if layout::counts_as_branch(&f.rel) {
            branch_count += 1;
        }
        let alive = if let Some(target) = f.link.clone() {
            send(Item::Symlink { rel, mode, mtime_ns, target })
        } else if kind.is_dir() {
            send(Item::Dir { rel, mode, mtime_ns })
        } else if kind.is_file() {
            match document {
                Some((doc_kind, doc_name)) => {
                    let is_main = doc_kind == DocumentKind::Branch && doc_name == layout::MAIN;
                    if is_main {
                        modified = mtime_seconds(&f.meta);
                    }
                    // One descriptor for everything about the file, and no more bytes than it
                    // had when it was opened: a writer appending meanwhile is read next time.
                    let file = open_regular(&abs).map_err(io)?;
                    let meta = file.metadata().map_err(io)?;
                    let (mode, mtime_ns) = (crate::fs::meta::mode_bits(&meta), crate::fs::meta::mtime_ns(&meta));
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
                        if f.rel == layout::CONFIG {
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
    if !has_config && !send(Item::Workspace(resolve(&dir.join(layout::WORKSPACE)))) {
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
        Ok(ChatConfig { workspace: Some(w), .. }) if w == "@log" => resolve(&dir.join(layout::WORKSPACE)),
        Ok(ChatConfig { workspace: Some(w), .. }) => {
            let expanded = match (w.strip_prefix('~'), std::env::var_os("HOME")) {
                (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => PathBuf::from(format!("{}{rest}", home.to_string_lossy())),
                _ => PathBuf::from(w),
            };
            resolve(&std::path::absolute(&expanded).unwrap_or(expanded))
        }
        Ok(_) if fs::symlink_metadata(dir.join(layout::WORKSPACE)).is_ok() && dir.join(layout::WORKSPACE).exists() => resolve(&dir.join(layout::WORKSPACE)),
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
/// per line (see [`read_lines`]). Returns how many bytes it took, or `None` when the consumer
/// has gone away.
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
    let each = |line_no, line| Ok(send(line_item(kind, line_no, line, totals.as_deref_mut(), sent_digests)));
    let Some(done) = read_lines(&file, ino, 0, limit, read, kind, |e| e, each)? else { return Ok(None) };
    let consumed = done.mark.size;
    Ok(send(Item::EndDocument { line_count: done.count, ends_with_newline: done.ends_with_newline, read: done.mark }).then_some(consumed))
}

/// What [`read_lines`] took of a document.
pub(crate) struct LinesRead {
    /// How many lines it passed on.
    pub count: i64,
    /// Whether what it took ends with a newline (true when it took nothing).
    pub ends_with_newline: bool,
    /// Where the store's copy of the file now ends: the next read starts here.
    pub mark: Watermark,
}

/// Reads the lines of a document of `kind` (`file`, inode `ino`) from byte `from` — 0, or a
/// watermark, which is always the start of a line — up to byte `limit`, passing each to `each`
/// with its index from 0. With [`ReadMode::CompleteLines`] an unterminated last line is left for
/// later, unless it is a whole record ([`is_whole_record`]) or its file has settled ([`CUT_LINE_SETTLE`]). The one reader of new lines: a whole
/// import reads from 0, an incremental one from the watermark on. `None`: `each` said stop.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_lines<E>(
    file: &File,
    ino: u64,
    from: u64,
    limit: u64,
    read: ReadMode,
    kind: DocumentKind,
    io: impl Fn(std::io::Error) -> E,
    mut each: impl FnMut(i64, Vec<u8>) -> Result<bool, E>,
) -> Result<Option<LinesRead>, E> {
    let mut reader = file;
    reader.seek(SeekFrom::Start(from)).map_err(&io)?;
    let mut lines = LineReader::new(BufReader::with_capacity(1 << 16, reader.take(limit.saturating_sub(from))));
    let mut count: i64 = 0;
    let mut consumed: u64 = 0;
    let mut ends_with_newline = true;
    while let Some(line) = lines.next_line().map_err(&io)? {
        let line = line.to_vec();
        let terminated = lines.ends_with_newline();
        if !terminated && read == ReadMode::CompleteLines && !is_whole_record(kind, &line) && !settled(file).map_err(&io)? {
            break; // possibly a write in progress: left for next time
        }
        consumed += line.len() as u64 + u64::from(terminated);
        ends_with_newline = terminated;
        if !each(count, line)? {
            return Ok(None);
        }
        count += 1;
    }
    let size = from + consumed;
    let mark = Watermark { size, ino, tail: tail_digest(file, size).map_err(&io)? };
    Ok(Some(LinesRead { count, ends_with_newline, mark }))
}

/// Whether `file` has not changed for [`CUT_LINE_SETTLE`] (a last line it leaves unterminated
/// is cut short, not being written).
fn settled(file: &File) -> std::io::Result<bool> {
    let modified = file.metadata()?.modified()?;
    Ok(std::time::SystemTime::now().duration_since(modified).is_ok_and(|age| age >= CUT_LINE_SETTLE))
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
        DocumentKind::Bookmarks => matches!(decode_bookmark_line(line), BookmarkLine::Bookmark { .. }),
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
                EventLine::Event { event, canonical: true } => {
                    event.payload.messages().iter().map(|m| Sha256::digest(encode_message(m).as_bytes()).into()).collect()
                }
                _ => Vec::new(),
            };
            Item::EventLine { line_no, line, decoded, nested }
        }
        DocumentKind::Bookmarks => Item::BookmarkLine { line_no, decoded: decode_bookmark_line(&line), line },
    }
}

/// Writes one line item of document `id` (at `rel`).
pub(crate) fn write_line(writer: &mut ConversationWriter, id: DocumentId, rel: &str, item: Item) -> Result<(), StoreError> {
    match item {
        Item::MessageLine { line_no, digest, line, decoded } => writer.add_message_line(id, rel, line_no, &digest, &line, decoded.as_ref()),
        Item::EventLine { line_no, line, decoded, nested } => writer.add_event_line(id, rel, line_no, &line, &decoded, &nested),
        Item::BookmarkLine { line_no, line, decoded } => writer.add_bookmark_line(id, rel, line_no, &line, &decoded),
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
                writer.warn_file(layout::CONFIG, format!("invalid TOML: {reason}"));
                Ok(())
            }
            Item::Workspace(w) => writer.set_workspace(&w),
            Item::StartDocument { rel, kind, name, mode, mtime_ns } => {
                let id = writer.start_document(&rel, kind, &name, mode, mtime_ns).map_err(store_err).map_err(failed)?;
                document = Some((id, rel));
                Ok(())
            }
            line @ (Item::MessageLine { .. } | Item::EventLine { .. } | Item::BookmarkLine { .. }) => {
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
        .map_err(|e| store_at(dir, e))
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

    /// Whether writing failed only for meeting another writer ([`StoreError::is_transient`]):
    /// the same write again usually succeeds.
    pub fn is_transient(&self) -> bool {
        matches!(self, IngestError::Store { source, .. } if source.is_transient())
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

/// A store failure while writing conversation `dir`: one reading a file names the file.
pub(crate) fn store_at(dir: &Path, e: StoreError) -> IngestError {
    match e {
        StoreError::Io { path, source } => IngestError::Io { path: dir.join(path), source },
        other => IngestError::Store { path: dir.to_owned(), source: other },
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
    fn symlink_containment_is_lexical() {
        assert!(stays_inside("files/a", Path::new("b")));
        assert!(stays_inside("branches/a.jsonl", Path::new("../conversation.jsonl")));
        assert!(!stays_inside("conversation.jsonl", Path::new("../other/conversation.jsonl")));
        assert!(!stays_inside("files/a", Path::new("/etc/passwd")));
        assert!(!stays_inside("files/a", Path::new("../../x")));
    }
}
