//! The ranking index: a tantivy index beside the database (`<db>.ranking/`), or for a server's
//! store in this host's cache directory ([`super::ranking_server`]), that ranks word queries by
//! bm25 over the whole history without scoring every match.
//!
//! FTS5 ranks by computing bm25 for every text that matches, about a microsecond each, so
//! a word found in most texts took half a second at a million of them. Tantivy keeps
//! per-block score bounds in its postings (block-max WAND) and skips the blocks that cannot
//! reach the current top k: the same word answers in milliseconds.
//!
//! It is derived, never the source of truth, and follows the store by two watermarks kept in
//! its own commits ([`Mark`]): every text with an id up to `upto` is in it (texts are
//! never changed in place and their ids never reused), and every entry of the store's deletion
//! log (`ranking_deletions`, `schema/0012_ranking_index.sql`) up to `deletions` has been applied.
//! A tantivy commit is atomic (its `meta.json` is replaced whole, with the mark in it), so a
//! killed catch-up leaves the index at its last commit, whose mark says what it holds; the next
//! catch-up goes on from there. Catch-ups read the texts and the log in one snapshot, and take
//! tantivy's writer lock (a file lock, released when its process dies), so processes never mix
//! their work. An index whose mark names another store, or claims more than the store ever
//! held (the database was replaced or restored from an older copy), is emptied and rebuilt.
//! A server's writers commit texts out of the order of their ids: there the watermark is the
//! oldest transaction still running ([`super::ranking_server`] says how).
//!
//! The words are those of the word index exactly ([`super::word_tokens`]: FTS5's own
//! tokenizer), so that both indexes find the same texts for the queries both answer. Like the
//! word index, it holds each text once ([`super::texts`], schema 22); a search reaches the
//! messages saying a text through the store.
//! Nothing depends on this index being there: a search falls back to FTS5 (on a server, to its
//! word sets) when it is missing,
//! unusable or behind by more than a search should wait for ([`usable`]), and `doctor` checks
//! it and `doctor --reindex` rebuilds it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, EnableScoring, PhraseQuery, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use tantivy::{DocId, DocSet, TERMINATED};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use super::sql::Engine;
use super::{Connection, StoreError};

/// The name tantivy knows the word tokenizer by.
const TOKENIZER_NAME: &str = "sessiondb_words";

/// The most texts (added or deleted) a search catches up on itself before answering; past
/// that it answers from FTS5, and `sync`, `import` or `doctor --reindex` bring the index up.
pub const SEARCH_CATCH_UP: i64 = 50_000;

/// How long a search waits for another process's catch-up (its writer lock) before answering
/// from FTS5.
const WAIT_FOR_WRITER: std::time::Duration = std::time::Duration::from_secs(3);

/// How far the index follows the store: kept as the payload of each of its commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// `store_state['ranking_store_id']` of the store it belongs to (on a server, who the
    /// server, database and store are: [`super::ranking_server::identity`]).
    pub store: i64,
    /// Every text with an id up to this is in the index (unless deleted since). On a server,
    /// the highest text id it holds.
    pub upto: i64,
    /// Every entry of `ranking_deletions` up to this `seq` has been applied (SQLite).
    pub deletions: i64,
    /// On a server, how far its transactions are followed instead; `None` on SQLite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<super::ranking_server::Settled>,
}

/// The store as the index must follow it, read in one snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StoreState {
    store: i64,
    /// The highest text id ever handed out.
    text_seq: i64,
    /// The highest text id now (the last ones may have been deleted since).
    max_text: i64,
    /// The highest deletion log number ever handed out, and the highest still in the log.
    deletion_seq: i64,
    max_deletion: i64,
    /// The log is pruned up to here: an index whose mark is below it can never learn of the
    /// deletions it missed.
    pruned: i64,
}

impl StoreState {
    fn read(conn: &Connection) -> Result<StoreState, StoreError> {
        let seq = |name: &str| -> Result<i64, StoreError> {
            Ok(conn.prepare_cached("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?1), 0)")?.query_row([name], |r| r.get(0))?)
        };
        Ok(StoreState {
            store: conn.prepare_cached("SELECT value FROM store_state WHERE key = 'ranking_store_id'")?.query_row((), |r| r.get(0))?,
            text_seq: seq("texts")?,
            max_text: conn.prepare_cached("SELECT coalesce(max(id), 0) FROM texts")?.query_row((), |r| r.get(0))?,
            deletion_seq: seq("ranking_deletions")?,
            max_deletion: conn.prepare_cached("SELECT coalesce(max(seq), 0) FROM ranking_deletions")?.query_row((), |r| r.get(0))?,
            pruned: conn.prepare_cached("SELECT coalesce((SELECT value FROM store_state WHERE key = 'ranking_pruned_upto'), 0)")?.query_row((), |r| r.get(0))?,
        })
    }

    /// Whether an index at `mark` holds everything this snapshot does, and nothing deleted in it.
    fn covered_by(&self, mark: &Mark) -> bool {
        mark.store == self.store && mark.upto >= self.max_text && mark.deletions >= self.max_deletion
    }

    /// Whether `mark` may belong to this store at all, and the log still holds every deletion
    /// it has not applied (else the index is rebuilt: an older copy of the index put back).
    fn admits(&self, mark: &Mark) -> bool {
        mark.settled.is_none() && mark.store == self.store && mark.upto <= self.text_seq && mark.deletions <= self.deletion_seq && mark.deletions >= self.pruned
    }
}

/// Why the ranking index could not be used (a search then answers from FTS5).
#[derive(Debug, thiserror::Error)]
pub enum RankingError {
    #[error("{path}: {why}")]
    Unusable { path: PathBuf, why: String },
    #[error("ranking index {path}: {source}")]
    Tantivy { path: PathBuf, source: tantivy::TantivyError },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<r2d2::Error> for RankingError {
    fn from(e: r2d2::Error) -> Self {
        RankingError::Store(StoreError::from(e))
    }
}

/// The ranking index of one database, open.
pub struct RankingIndex {
    dir: PathBuf,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// Catch-ups of this process, one at a time (tantivy's lock keeps other processes out).
    writing: Mutex<()>,
}

#[derive(Clone, Copy)]
struct Fields {
    /// The text's id (`texts.id`).
    text: Field,
    body: Field,
}

/// What the index holds of a text: its id and its words. (Each text is indexed once, however
/// many messages say it; what a message is — its conversation, role, model — is the store's to
/// filter on, after.)
fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text = builder.add_u64_field("text", NumericOptions::default().set_indexed().set_fast());
    let indexing = TextFieldIndexing::default().set_tokenizer(TOKENIZER_NAME).set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let body = builder.add_text_field("body", TextOptions::default().set_indexing_options(indexing));
    (builder.build(), Fields { text, body })
}

/// A query of the ranking index: terms that must all match (a term of several words is a
/// phrase).
#[derive(Debug, Clone, Default)]
pub struct RankQuery {
    pub terms: Vec<Vec<String>>,
}

/// The file of the database `conn` is connected to; `None` for one in memory.
fn database_path(conn: &Connection) -> Option<PathBuf> {
    conn.sqlite()?.path().filter(|p| !p.is_empty()).map(PathBuf::from)
}

/// Where the ranking index of `conn`'s store lives: beside an SQLite file ([`dir_for`]), in
/// this host's cache for a server's ([`super::ranking_server::index_dir`]); `None` for a
/// database in memory, or a server's with no cache directory to be had.
fn index_dir(conn: &Connection) -> Result<Option<PathBuf>, StoreError> {
    match conn.engine() {
        Engine::Sqlite => Ok(database_path(conn).map(|db| dir_for(&db))),
        Engine::Postgres => super::ranking_server::index_dir(conn),
    }
}

/// Where the ranking index of the database at `db` lives.
pub fn dir_for(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".ranking");
    PathBuf::from(name)
}

/// The indexes this process has open, by directory: a long-running process (a server, `sync
/// --watch`) opens each once.
fn opened() -> &'static Mutex<HashMap<PathBuf, Arc<RankingIndex>>> {
    static OPENED: OnceLock<Mutex<HashMap<PathBuf, Arc<RankingIndex>>>> = OnceLock::new();
    OPENED.get_or_init(Default::default)
}

impl From<super::sql::Error> for RankingError {
    fn from(e: super::sql::Error) -> Self {
        RankingError::Store(StoreError::from(e))
    }
}

impl RankingIndex {
    /// The ranking index of the database `conn` is connected to, created empty when there is
    /// none. `None` for a database without a file (in memory).
    pub fn of(conn: &Connection) -> Result<Option<Arc<RankingIndex>>, RankingError> {
        let Some(dir) = index_dir(conn)? else { return Ok(None) };
        let mut open = opened().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(index) = open.get(&dir) {
            return Ok(Some(index.clone()));
        }
        let index = Arc::new(RankingIndex::open_dir(&dir)?);
        open.insert(dir, index.clone());
        Ok(Some(index))
    }

    fn open_dir(dir: &Path) -> Result<RankingIndex, RankingError> {
        let unusable = |why: String| RankingError::Unusable { path: dir.to_owned(), why };
        let tantivy = |source| RankingError::Tantivy { path: dir.to_owned(), source };
        // Never through a link: the index is written, and a planted link would aim that elsewhere.
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(unusable("is not a directory (move it away; sessiondb makes the index again)".into())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                use std::os::unix::fs::DirBuilderExt;
                // A server's index is the first in this host's cache: its folders are made too.
                match std::fs::DirBuilder::new().mode(0o700).recursive(true).create(dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(unusable(format!("cannot be created: {e}"))),
                }
            }
            Err(e) => return Err(unusable(e.to_string())),
        }
        // The words must be FTS5's; an index that cannot have them is not made at all.
        super::word_tokens::words("").map_err(|e| unusable(e.to_string()))?;
        let (schema, fields) = schema();
        let index = match Index::open_in_dir(dir) {
            Ok(index) if index.schema() == schema => index,
            // Of another layout (an older sessiondb's): derived, so made again, empty.
            Ok(_) => {
                set_aside(dir)?;
                return RankingIndex::open_dir(dir);
            }
            Err(tantivy::TantivyError::OpenDirectoryError(_)) | Err(tantivy::TantivyError::OpenReadError(_)) => match Index::create_in_dir(dir, schema.clone()) {
                Ok(index) => index,
                // Another process created it meanwhile.
                Err(_) => Index::open_in_dir(dir).map_err(tantivy)?,
            },
            Err(e) => return Err(tantivy(e)),
        };
        index.tokenizers().register(TOKENIZER_NAME, Words);
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().map_err(tantivy)?;
        Ok(RankingIndex { dir: dir.to_owned(), index, reader, fields, writing: Mutex::new(()) })
    }

    fn tantivy_error(&self, source: tantivy::TantivyError) -> RankingError {
        RankingError::Tantivy { path: self.dir.clone(), source }
    }

    /// The mark of the index's last commit; `None` for an index never committed to.
    pub fn mark(&self) -> Result<Option<Mark>, RankingError> {
        let metas = self.index.load_metas().map_err(|e| self.tantivy_error(e))?;
        Ok(metas.payload.as_deref().and_then(|p| serde_json::from_str(p).ok()))
    }

    /// The texts the index holds (deleted ones left out), as of its last commit.
    pub fn texts(&self) -> Result<u64, RankingError> {
        self.reader.reload().map_err(|e| self.tantivy_error(e))?;
        Ok(self.reader.searcher().num_docs())
    }

    /// Brings the index up to the store: applies the deletions logged since its mark and adds
    /// the texts past it, in one commit; empties it first when its mark does not belong to
    /// this store. Waits up to `wait` for another process's catch-up; returns `Ok(None)` when
    /// that is not enough, else how many texts were added. `progress` is told of each 10,000.
    /// Call outside any transaction of `conn`.
    pub fn catch_up(&self, conn: &Connection, wait: std::time::Duration, progress: &mut dyn FnMut(u64)) -> Result<Option<u64>, RankingError> {
        let _one = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let started = std::time::Instant::now();
        let mut writer: IndexWriter<TantivyDocument> = loop {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(2);
            match self.index.writer_with_num_threads(threads, threads * 64_000_000) {
                Ok(w) => break w,
                Err(tantivy::TantivyError::LockFailure(..)) if started.elapsed() < wait => std::thread::sleep(std::time::Duration::from_millis(25)),
                Err(tantivy::TantivyError::LockFailure(..)) => return Ok(None),
                Err(e) => return Err(self.tantivy_error(e)),
            }
        };
        conn.execute_batch("BEGIN")?;
        let caught = self.catch_up_in_snapshot(conn, &mut writer, progress);
        let _ = conn.execute_batch("COMMIT");
        let (added, mark) = caught?;
        let segments = self.index.searchable_segment_ids().map_err(|e| self.tantivy_error(e))?.len();
        // Many small commits leave many small segments, and each costs every search a
        // lookup: merge them now rather than leave it to merge threads a short process
        // would end before they finish. So too after a large catch-up (an import's), whose
        // commit starts merges: a writer dropped midway leaves their half-written files
        // (as large as the index again) until a later writer collects them.
        if segments > 8 || added >= 100_000 {
            writer.wait_merging_threads().map_err(|e| self.tantivy_error(e))?;
        } else {
            drop(writer);
        }
        if mark.settled.is_none() {
            prune_deletions(conn, mark.deletions);
        }
        Ok(Some(added))
    }

    fn catch_up_in_snapshot(
        &self,
        conn: &Connection,
        writer: &mut IndexWriter<TantivyDocument>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(u64, Mark), RankingError> {
        if conn.engine() == Engine::Postgres {
            return self.catch_up_server(conn, writer, progress);
        }
        let state = StoreState::read(conn)?;
        let mut mark = match self.mark()? {
            Some(mark) if state.admits(&mark) => {
                if state.covered_by(&mark) {
                    return Ok((0, mark));
                }
                mark
            }
            _ => {
                writer.delete_all_documents().map_err(|e| self.tantivy_error(e))?;
                // Everything deleted so far was deleted before any text is read below.
                Mark { store: state.store, upto: 0, deletions: state.deletion_seq, settled: None }
            }
        };
        {
            let mut log = conn.prepare_cached("SELECT text_id FROM ranking_deletions WHERE seq > ?1 AND text_id <= ?2")?;
            let mut rows = log.query([mark.deletions, mark.upto])?;
            while let Some(r) = rows.next()? {
                writer.delete_term(Term::from_field_u64(self.fields.text, r.get::<_, i64>(0)? as u64));
            }
        }
        let mut added = 0u64;
        {
            let mut texts = conn.prepare_cached("SELECT id, data FROM texts WHERE id > ?1 ORDER BY id")?;
            let mut rows = texts.query([mark.upto])?;
            while let Some(r) = rows.next()? {
                let id: i64 = r.get(0)?;
                let content = conn.decode_text(id, &r.get::<_, Vec<u8>>(1)?)?;
                let mut doc = TantivyDocument::default();
                doc.add_u64(self.fields.text, id as u64);
                doc.add_text(self.fields.body, content);
                writer.add_document(doc).map_err(|e| self.tantivy_error(e))?;
                added += 1;
                if added.is_multiple_of(10_000) {
                    progress(added);
                }
            }
        }
        mark = Mark { store: state.store, upto: mark.upto.max(state.text_seq), deletions: mark.deletions.max(state.deletion_seq), settled: None };
        self.commit(writer, &mark)?;
        Ok((added, mark))
    }

    /// [`Self::catch_up_in_snapshot`] on a server ([`super::ranking_server`]): the texts and
    /// deletions of the transactions since the mark's watermark, in one commit.
    fn catch_up_server(&self, conn: &Connection, writer: &mut IndexWriter<TantivyDocument>, progress: &mut dyn FnMut(u64)) -> Result<(u64, Mark), RankingError> {
        use super::ranking_server::{catch_up, ServerState};
        let state = ServerState::read(conn)?;
        let mark = self.mark()?.filter(|m| state.admits(m.store, m.settled.as_ref()));
        if mark.is_none() {
            writer.delete_all_documents().map_err(|e| self.tantivy_error(e))?;
        }
        let settled = mark.as_ref().and_then(|m| m.settled.as_ref());
        if settled.is_some() && super::ranking_server::behind(conn, settled)? == 0 {
            return Ok((0, mark.expect("a mark with a watermark")));
        }
        let field = self.fields.text;
        let body = self.fields.body;
        let mut added = 0u64;
        let writer_ref = &*writer;
        let (settled, highest) = catch_up(
            conn,
            settled,
            &mut |text| {
                writer_ref.delete_term(Term::from_field_u64(field, text as u64));
                Ok(())
            },
            &mut |text, content, replace| {
                if replace {
                    writer_ref.delete_term(Term::from_field_u64(field, text as u64));
                }
                let mut doc = TantivyDocument::default();
                doc.add_u64(field, text as u64);
                doc.add_text(body, content);
                writer_ref.add_document(doc).map_err(|e| self.tantivy_error(e))?;
                added += 1;
                if added.is_multiple_of(10_000) {
                    progress(added);
                }
                Ok(())
            },
        )?;
        let mark = Mark { store: state.store, upto: mark.map_or(0, |m| m.upto).max(highest), deletions: 0, settled: Some(settled) };
        self.commit(writer, &mark)?;
        Ok((added, mark))
    }

    /// Commits what `writer` holds, with `mark` as the commit's payload.
    fn commit(&self, writer: &mut IndexWriter<TantivyDocument>, mark: &Mark) -> Result<(), RankingError> {
        let mut commit = writer.prepare_commit().map_err(|e| self.tantivy_error(e))?;
        commit.set_payload(&serde_json::to_string(mark).expect("a mark serializes"));
        commit.commit().map_err(|e| self.tantivy_error(e))?;
        Ok(())
    }

    /// Makes the index again from the rows: the directory is set aside and removed (whatever
    /// state it was in, even unreadable), and a new index is filled with every text. For
    /// `doctor --reindex`. Returns how many texts it holds.
    pub fn rebuild(conn: &Connection, progress: &mut dyn FnMut(u64)) -> Result<u64, RankingError> {
        let Some(dir) = index_dir(conn)? else { return Ok(0) };
        opened().lock().unwrap_or_else(|e| e.into_inner()).remove(&dir);
        set_aside(&dir)?;
        let Some(index) = RankingIndex::of(conn)? else { return Ok(0) };
        index.catch_up(conn, std::time::Duration::from_secs(600), progress)?;
        index.texts()
    }

    /// The best `limit` texts for `query`, best first: (text id, bm25 score, higher is better).
    /// Ties come by text id, as two indexes of the same texts (two hosts', or one made again)
    /// give them whatever their segments' order (except at the window's end, where the
    /// index's order chooses which tied texts are in it).
    pub fn top(&self, query: &RankQuery, limit: usize) -> Result<Vec<(i64, f32)>, RankingError> {
        let searcher = self.reader.searcher();
        let top = searcher.search(&self.clauses(query, Vec::new()), &TopDocs::with_limit(limit.max(1)).order_by_score()).map_err(|e| self.tantivy_error(e))?;
        let mut ids = TextIds::new(self, &searcher);
        let mut out = Vec::with_capacity(top.len());
        for (score, address) in top {
            if let Some(id) = ids.of(address)? {
                out.push((id, score));
            }
        }
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(out)
    }

    /// Every text matching `query`, in no order, none scored, as of the index's last commit.
    pub fn all_matching(&self, query: &RankQuery) -> Result<Vec<i64>, RankingError> {
        self.reader.reload().map_err(|e| self.tantivy_error(e))?;
        let searcher = self.reader.searcher();
        let weight = self.clauses(query, Vec::new()).weight(EnableScoring::disabled_from_searcher(&searcher)).map_err(|e| self.tantivy_error(e))?;
        let mut out = Vec::new();
        for segment in searcher.segment_readers() {
            let ids = segment.fast_fields().u64("text").map_err(|e| self.tantivy_error(e))?;
            let mut matches = weight.scorer(segment, 1.0).map_err(|e| self.tantivy_error(e))?;
            while matches.doc() != TERMINATED {
                let doc = matches.doc();
                if segment.alive_bitset().is_none_or(|alive| alive.is_alive(doc)) {
                    out.extend(ids.first(doc).map(|id| id as i64));
                }
                matches.advance();
            }
        }
        Ok(out)
    }

    /// Which of `texts` (text ids) match `query`, in no order, without reading or splitting any
    /// text into words: in each segment, the documents of these texts (looked up by their id
    /// term) are sought in the query's own matches, in order, which skips through its postings
    /// rather than walking them. The same answer as checking each text
    /// ([`super::word_match`]), since the index holds the word index's words.
    pub fn matching_among(&self, query: &RankQuery, texts: &[i64]) -> Result<Vec<i64>, RankingError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        let weight = self.clauses(query, Vec::new()).weight(EnableScoring::disabled_from_searcher(&searcher)).map_err(|e| self.tantivy_error(e))?;
        let mut out = Vec::new();
        for segment in searcher.segment_readers() {
            let ids = segment.inverted_index(self.fields.text).map_err(|e| self.tantivy_error(e))?;
            let mut docs: Vec<(DocId, i64)> = Vec::new();
            for &text in texts {
                let Some(mut postings) =
                    ids.read_postings(&Term::from_field_u64(self.fields.text, text as u64), IndexRecordOption::Basic).map_err(|e| self.tantivy_error(e.into()))?
                else {
                    continue;
                };
                while postings.doc() != TERMINATED {
                    if segment.alive_bitset().is_none_or(|alive| alive.is_alive(postings.doc())) {
                        docs.push((postings.doc(), text));
                    }
                    postings.advance();
                }
            }
            if docs.is_empty() {
                continue;
            }
            docs.sort_unstable();
            let mut matches = weight.scorer(segment, 1.0).map_err(|e| self.tantivy_error(e))?;
            for (doc, text) in docs {
                let at = if matches.doc() < doc { matches.seek(doc) } else { matches.doc() };
                if at == doc {
                    out.push(text);
                }
            }
        }
        Ok(out)
    }

    /// `query` as tantivy's, every term required, with `more` clauses required too.
    fn clauses(&self, query: &RankQuery, more: Vec<Box<dyn Query>>) -> Box<dyn Query> {
        let f = self.fields;
        let mut clauses: Vec<Box<dyn Query>> = query
            .terms
            .iter()
            .map(|words| -> Box<dyn Query> {
                let mut terms: Vec<Term> = words.iter().map(|w| Term::from_field_text(f.body, w)).collect();
                if terms.len() == 1 {
                    Box::new(TermQuery::new(terms.remove(0), IndexRecordOption::WithFreqs))
                } else {
                    Box::new(PhraseQuery::new(terms))
                }
            })
            .chain(more)
            .collect();
        if clauses.len() == 1 {
            clauses.remove(0)
        } else {
            Box::new(BooleanQuery::intersection(clauses))
        }
    }
}

/// The text ids of documents found by one searcher: each segment's column of them read once.
struct TextIds<'i> {
    index: &'i RankingIndex,
    searcher: &'i tantivy::Searcher,
    columns: HashMap<u32, tantivy::columnar::Column<u64>>,
}

impl<'i> TextIds<'i> {
    fn new(index: &'i RankingIndex, searcher: &'i tantivy::Searcher) -> TextIds<'i> {
        TextIds { index, searcher, columns: HashMap::new() }
    }

    fn of(&mut self, address: tantivy::DocAddress) -> Result<Option<i64>, RankingError> {
        let ids = match self.columns.entry(address.segment_ord) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.searcher.segment_reader(address.segment_ord).fast_fields().u64("text").map_err(|e| self.index.tantivy_error(e))?)
            }
        };
        Ok(ids.first(address.doc_id).map(|id| id as i64))
    }
}

/// What `doctor` finds wrong with the ranking index of `conn`'s database, one line each; nothing
/// when there is none yet (it is made by the next import, sync or search) or it is only behind
/// (searches catch it up). Changes nothing.
pub fn check(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let Some(dir) = index_dir(conn)? else { return Ok(Vec::new()) };
    // Not made yet, or its making was cut short before its first file: nothing to check, and
    // opening it would make it.
    if std::fs::symlink_metadata(dir.join("meta.json")).is_err() {
        return Ok(Vec::new());
    }
    let found = (|| -> Result<Vec<String>, RankingError> {
        let index = RankingIndex::of(conn)?.expect("a database with a file");
        let Some(mark) = index.mark()? else { return Ok(Vec::new()) };
        if conn.engine() == Engine::Postgres {
            return check_server(conn, &index, &mark);
        }
        let state = StoreState::read(conn)?;
        if !state.admits(&mark) {
            return Ok(vec![format!("it belongs to another database, or to another state of this one (its mark: {mark:?})")]);
        }
        // What it should hold: every text up to its mark, and those deleted since that it
        // has not applied yet.
        let expected: i64 = conn.query_row(
            "SELECT (SELECT count(*) FROM texts WHERE id <= ?1)
                  + (SELECT count(DISTINCT text_id) FROM ranking_deletions WHERE seq > ?2 AND text_id <= ?1)",
            [mark.upto, mark.deletions],
            |r| r.get(0),
        )?;
        let held = index.texts()?;
        Ok(if held as i64 != expected { vec![format!("it holds {held} texts of the {expected} it should")] } else { Vec::new() })
    })();
    Ok(match found {
        Ok(problems) => problems,
        Err(RankingError::Store(e)) => return Err(e),
        Err(e) => vec![e.to_string()],
    })
}

/// The ranking index of `conn`'s database when it can answer for the store as `conn` sees it
/// now: caught up first when it is behind by at most [`SEARCH_CATCH_UP`] texts. `None` when
/// there is none to be had (a database in memory, a directory that cannot be used, a catch-up
/// too long for a search or held up by another process): the caller answers from FTS5.
pub fn usable(conn: &Connection) -> Option<Arc<RankingIndex>> {
    let attempt = || -> Result<Option<Arc<RankingIndex>>, RankingError> {
        let Some(index) = RankingIndex::of(conn)? else { return Ok(None) };
        // The mark is read before the reader reloads: the commit searched is then this one or
        // a later one, which covers at least as much.
        let mark = index.mark()?;
        let behind = behind(conn, mark.as_ref())?;
        if behind > 0 && (behind > SEARCH_CATCH_UP || index.catch_up(conn, WAIT_FOR_WRITER, &mut |_| {})?.is_none()) {
            return Ok(None);
        }
        index.reader.reload().map_err(|e| index.tantivy_error(e))?;
        Ok(Some(index))
    };
    attempt().ok().flatten()
}

/// How many texts (added or deleted) an index at `mark` is behind the store: all of them when
/// it does not belong to it.
fn behind(conn: &Connection, mark: Option<&Mark>) -> Result<i64, StoreError> {
    if conn.engine() == Engine::Postgres {
        let state = super::ranking_server::ServerState::read(conn)?;
        let settled = mark.filter(|m| state.admits(m.store, m.settled.as_ref())).and_then(|m| m.settled.as_ref());
        return super::ranking_server::behind(conn, settled);
    }
    let state = StoreState::read(conn)?;
    Ok(match mark {
        Some(m) if state.covered_by(m) => 0,
        Some(m) if state.admits(m) => (state.max_text - m.upto).max(0) + (state.max_deletion - m.deletions).max(0),
        _ => state.max_text,
    })
}

/// [`check`] of a server's index: when it has caught up with every text, it holds each once.
fn check_server(conn: &Connection, index: &RankingIndex, mark: &Mark) -> Result<Vec<String>, RankingError> {
    let state = super::ranking_server::ServerState::read(conn)?;
    if !state.admits(mark.store, mark.settled.as_ref()) {
        return Ok(vec![format!("it belongs to another database, or to another state of this one (its mark: {mark:?})")]);
    }
    if super::ranking_server::behind(conn, mark.settled.as_ref())? > 0 {
        return Ok(Vec::new());
    }
    let expected: i64 = conn.query_row("SELECT count(*) FROM texts", (), |r| r.get(0))?;
    let held = index.texts()?;
    Ok(if held as i64 != expected { vec![format!("it holds {held} texts of the {expected} it should")] } else { Vec::new() })
}

/// Removes the index directory `dir`, whatever is there (a link planted in its place is removed,
/// never followed): renamed first, so that no process opens a half-removed index.
fn set_aside(dir: &Path) -> Result<(), RankingError> {
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    let mut aside = dir.to_owned().into_os_string();
    aside.push(format!(".old-{}", std::process::id()));
    let aside = PathBuf::from(aside);
    let unusable = |e: std::io::Error| RankingError::Unusable { path: dir.to_owned(), why: format!("cannot be set aside: {e}") };
    std::fs::rename(dir, &aside).map_err(unusable)?;
    let removed = if std::fs::symlink_metadata(&aside).is_ok_and(|m| m.is_dir()) { std::fs::remove_dir_all(&aside) } else { std::fs::remove_file(&aside) };
    removed.map_err(unusable)
}

/// Removes the deletion log's entries up to `upto`, which the index has applied and committed,
/// when the write lock is to be had at once; otherwise a later catch-up does it (entries the
/// index has applied are skipped by their number, so leaving them is harmless).
fn prune_deletions(conn: &Connection, upto: i64) {
    let Some(sql) = conn.sqlite() else { return };
    let _ = sql.busy_timeout(std::time::Duration::from_millis(10));
    let pruned = (|| -> rusqlite::Result<()> {
        sql.execute_batch("BEGIN IMMEDIATE")?;
        let done = sql.execute("DELETE FROM ranking_deletions WHERE seq <= ?1", [upto]).and_then(|_| {
            sql.execute(
                "INSERT INTO store_state (key, value) VALUES ('ranking_pruned_upto', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
                [upto],
            )
        });
        sql.execute_batch(if done.is_ok() { "COMMIT" } else { "ROLLBACK" })?;
        done.map(|_| ())
    })();
    if pruned.is_err() {
        let _ = sql.execute_batch("ROLLBACK");
    }
    let _ = sql.busy_timeout(std::time::Duration::from_millis(super::BUSY_TIMEOUT_MS as u64));
}

/// The word tokenizer as tantivy calls it: FTS5's ([`super::word_tokens::words`], one per
/// thread). `open_dir` has checked it can be had, so a text it cannot split does not occur.
#[derive(Clone)]
struct Words;

impl Tokenizer for Words {
    type TokenStream<'a> = WordStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream {
        let words = super::word_tokens::words(text).unwrap_or_default();
        let tokens = words.into_iter().enumerate().map(|(position, text)| Token { offset_from: 0, offset_to: 0, position, text, position_length: 1 }).collect();
        WordStream { tokens, next: 0 }
    }
}

/// The words of one text, in order.
struct WordStream {
    tokens: Vec<Token>,
    next: usize,
}

impl TokenStream for WordStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}
