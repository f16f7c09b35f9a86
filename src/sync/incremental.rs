//! Incremental ingest: bringing a stored conversation up to date with its directory by reading
//! only what gptme appended since the last read.
//!
//! [`plan`] compares the directory (one `lstat` per entry, no file contents) with the entries
//! the store recorded. When the only differences are transcripts and event logs that grew, the
//! conversation is extended in place ([`apply_growth`]): each grown file is read from its
//! watermark on, after checking with [`crate::fs::watermark::only_grew`] that the bytes before it
//! are still the ones read. Anything else — a rewritten file (edit, undo, compaction), a new or
//! removed branch, view, attachment or config — needs the conversation read again whole, by
//! the ordinary import.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::ingest::{self, IngestError, ReadMode};
use crate::fs::walk::{fingerprint, walk, Found, Listing};
use crate::fs::watermark::{only_grew, Watermark};
use crate::store::queries::{self, StoredEntry};
use crate::store::{modify, DocumentKind, ListingTotals, StoreError, WriteBatch, WriteStats};

/// A document that may only have grown since it was read.
#[derive(Debug, Clone)]
pub struct Grown {
    pub rel: String,
    pub kind: DocumentKind,
    mark: Watermark,
    /// Its size, inode and mtime when the directory was walked.
    walked: (u64, u64, i64),
}

/// What bringing one stored conversation up to date takes.
pub enum Plan {
    /// Nothing to read.
    Unchanged,
    /// Only these documents grew.
    Grow(Vec<Grown>),
    /// Something else changed: read the conversation again whole.
    Full,
}

/// What [`plan`] found.
pub struct Planned {
    pub plan: Plan,
    /// The directory's fingerprint now.
    pub fingerprint: Vec<u8>,
    /// Temporary files of an interrupted sessiondb write are lying in the directory.
    pub debris: bool,
    /// Directories whose mtime moved (files came and went in them), with the new mtime: not a
    /// change to read, but export restores directory mtimes, so the store records them.
    pub dir_mtimes: Vec<(String, i64)>,
}

impl Planned {
    /// Records the directories' new mtimes (see `dir_mtimes`).
    pub fn record_dir_mtimes(&self, conn: &crate::store::Connection, conversation_id: i64) -> Result<(), StoreError> {
        modify::set_dir_mtimes(conn, conversation_id, &self.dir_mtimes)
    }
}

/// What the caller has read already of a stored conversation: its fingerprint and its
/// directories' mtimes (a sync reads every conversation's at once: on a server each question is
/// a round trip, and an unchanged conversation then costs none).
#[derive(Clone, Copy)]
pub struct Known<'a> {
    pub fingerprint: &'a [u8],
    pub dir_mtimes: &'a HashMap<String, i64>,
}

/// Compares directory `dir` with what the store holds of conversation `conversation_id`, asking
/// the store what `known` does not give.
pub fn plan(conn: &crate::store::Connection, conversation_id: i64, dir: &Path, known: Option<Known<'_>>) -> Result<Planned, IngestError> {
    let dir = std::path::absolute(dir).map_err(|source| IngestError::Io { path: dir.to_owned(), source })?;
    let Listing { entries: found, debris } = walk(&dir)?;
    let mut dir_mtimes = Vec::new();
    let planned = |plan, fingerprint, dir_mtimes| Ok(Planned { plan, fingerprint, debris, dir_mtimes });
    let fingerprint = fingerprint(&dir, &found);
    let stored_fingerprint = match &known {
        Some(known) => known.fingerprint.to_vec(),
        None => queries::fingerprint(conn, conversation_id).map_err(|source| IngestError::Store { path: dir.clone(), source })?,
    };
    if stored_fingerprint == fingerprint {
        // Nothing to read; directories' mtimes are outside the fingerprint, so compare them.
        if !found.iter().any(|f| f.meta.is_dir()) {
            return planned(Plan::Unchanged, fingerprint, dir_mtimes);
        }
        let asked;
        let stored = match &known {
            Some(known) => known.dir_mtimes,
            None => {
                asked = queries::dir_mtimes(conn, conversation_id).map_err(|source| IngestError::Store { path: dir.clone(), source })?;
                &asked
            }
        };
        for f in found.iter().filter(|f| f.meta.is_dir()) {
            if stored.get(&f.rel).is_some_and(|&m| m != f.mtime_ns()) {
                dir_mtimes.push((f.rel.clone(), f.mtime_ns()));
            }
        }
        return planned(Plan::Unchanged, fingerprint, dir_mtimes);
    }
    let stored = queries::stored_entries(conn, conversation_id).map_err(|source| IngestError::Store { path: dir.clone(), source })?;
    let mut grown = Vec::new();
    let mut seen = 0;
    for f in &found {
        let Some(s) = stored.get(&f.rel) else { return planned(Plan::Full, fingerprint, Vec::new()) };
        seen += 1;
        if f.meta.is_dir() && s.mtime_ns != f.mtime_ns() {
            dir_mtimes.push((f.rel.clone(), f.mtime_ns()));
        }
        match compare(f, s) {
            Same::Yes => {}
            Same::Grew(mark) => match crate::layout::classify(&f.rel) {
                Some((kind, _)) => grown.push(Grown { rel: f.rel.clone(), kind, mark, walked: (f.meta.len(), f.meta.ino(), f.mtime_ns()) }),
                None => return planned(Plan::Full, fingerprint, Vec::new()),
            },
            Same::No => return planned(Plan::Full, fingerprint, Vec::new()),
        }
    }
    if seen != stored.len() {
        return planned(Plan::Full, fingerprint, Vec::new()); // something the store has is gone
    }
    planned(if grown.is_empty() { Plan::Unchanged } else { Plan::Grow(grown) }, fingerprint, dir_mtimes)
}

enum Same {
    Yes,
    /// A document that may have grown from this watermark.
    Grew(Watermark),
    No,
}

fn compare(f: &Found, s: &StoredEntry) -> Same {
    let mode = f.mode();
    let ft = f.meta.file_type();
    if ft.is_dir() {
        return if s.kind == "dir" && s.mode == mode { Same::Yes } else { Same::No };
    }
    if ft.is_symlink() {
        let same = s.kind == "symlink" && s.link_target == f.link && s.mtime_ns == f.mtime_ns();
        return if same { Same::Yes } else { Same::No };
    }
    let unchanged = s.mode == mode && s.mtime_ns == f.mtime_ns() && s.size == Some(f.meta.len());
    match s.kind.as_str() {
        "blob" if unchanged => Same::Yes,
        "document" => match s.mark {
            Some(mark) if unchanged && mark.ino == f.meta.ino() => Same::Yes,
            // A document read up to a line without its newline cannot be extended: that line
            // would be split in two. Nor can one that was given other permissions.
            Some(mark) if s.mode == mode && s.ends_with_newline && mark.ino == f.meta.ino() && f.meta.len() >= mark.size => Same::Grew(mark),
            _ => Same::No,
        },
        _ => Same::No,
    }
}

/// Whether all that the documents in `grown` gained is part of a last line with no newline yet:
/// bytes past the watermark, none of them a newline. [`apply_growth`] takes in whole lines
/// only, so a pass finds nothing to read in such a directory until gptme ends the line (or, for
/// a line cut off for good, until `sessiondb import` reads the conversation whole).
pub fn only_unfinished_lines(dir: &Path, grown: &[Grown]) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut gained = false;
    for g in grown {
        let mut file = crate::fs::nofollow::open_regular(&dir.join(&g.rel))?;
        file.seek(SeekFrom::Start(g.mark.size))?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail)?;
        if tail.contains(&b'\n') {
            return Ok(false);
        }
        gained |= !tail.is_empty();
    }
    Ok(gained)
}

/// Extends stored conversation `conversation_id` with the lines its grown documents gained, in
/// a savepoint of `batch`. Returns `None` (having written nothing) when a file turns out not to
/// have only grown after all: the caller then reads the conversation whole.
pub fn apply_growth(batch: &mut WriteBatch, conversation_id: i64, dir: &Path, grown: &[Grown], fingerprint: &[u8]) -> Result<Option<WriteStats>, IngestError> {
    let store_err = |source| IngestError::Store { path: dir.to_owned(), source };
    let mut main_totals: Option<(ListingTotals, f64)> = None;
    let mut writer = batch.resume_conversation(conversation_id).map_err(store_err)?;
    let mut complete = true;
    for g in grown {
        let abs = dir.join(&g.rel);
        let io = |source| IngestError::Io { path: abs.clone(), source };
        let file = crate::fs::nofollow::open_regular(&abs).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !only_grew(&file, meta.ino(), meta.len(), &g.mark).map_err(io)? {
            return Ok(None); // dropping the writer rolls its savepoint back
        }
        let is_main = g.kind == DocumentKind::Branch && g.rel == crate::layout::MAIN_TRANSCRIPT;
        let mut totals = if is_main { Some(crate::store::totals::load(writer.conn(), conversation_id).map_err(store_err)?) } else { None };
        let (doc, lines_before, first_line) = writer.existing_document(&g.rel).map_err(store_err)?;
        let mut digests = std::collections::HashSet::new();
        // From the watermark on, whole lines only: the rest of a line gptme is still writing is
        // left for next time.
        let read = ingest::read_lines(&file, meta.ino(), g.mark.size, meta.len(), ReadMode::CompleteLines, g.kind, io, |i, line| {
            let item = ingest::line_item(g.kind, first_line + i, line, totals.as_mut(), &mut digests);
            ingest::write_line(&mut writer, doc, &g.rel, item).map_err(|e| ingest::store_at(dir, e))?;
            Ok(true)
        })?
        .expect("writing never stops the read");
        let size = read.mark.size;
        writer.end_document(doc, &g.rel, lines_before + read.count, read.ends_with_newline, &read.mark).map_err(store_err)?;
        let mtime_ns = crate::fs::meta::mtime_ns(&meta);
        writer.touch_document(&g.rel, crate::fs::meta::mode_bits(&meta), mtime_ns).map_err(store_err)?;
        complete &= (meta.len(), meta.ino(), mtime_ns) == g.walked && size == meta.len();
        if let Some(t) = totals {
            main_totals = Some((t, crate::fs::meta::mtime_seconds(&meta)));
        }
    }
    let fingerprint: &[u8] = if complete { fingerprint } else { &[] };
    let main = main_totals.as_ref().map(|(t, m)| (t, *m));
    writer.finish_resumed(main, fingerprint).map(Some).map_err(store_err)
}
