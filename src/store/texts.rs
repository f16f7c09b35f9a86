//! Message texts, each stored once per source and compressed (schema 0020).
//!
//! gptme writes its whole system prompt into every conversation and tools print the same output
//! again and again, so most of a history's text is text it holds already. A message's content
//! is a row of `texts`, found by a hash of its bytes and shared by every message of the source
//! that says the same; the search indexes are keyed by text, so each text is indexed once.
//!
//! Invariants:
//! - A `texts` row holds exactly one text, its `hash` the first eight bytes (big-endian, as a
//!   signed integer) of the SHA-256 of its UTF-8 bytes. Two rows of one source never hold the
//!   same text: [`put`] looks a text up by hash and compares the text itself before sharing a
//!   row (a hash shared by two texts gives two rows), so no row is trusted by its hash alone.
//! - `data` is the text in the [`encode`] format: a codec byte, then the UTF-8 bytes as they are
//!   ([`PLAIN`]), a zstd frame ([`ZSTD`]), or the id of a dictionary of `text_dictionaries` and
//!   a zstd frame made with it ([`ZSTD_DICT`]); frames carry zstd's checksum of their content,
//!   so a damaged row fails to decode ([`StoreError::Corrupt`], with the text's id) rather than
//!   giving other text.
//! - A source's dictionaries are trained from that source's own texts ([`train`]; a dictionary
//!   holds pieces of them, so a reader of one source never needs another's) and never change or
//!   go: their ids are random (never one a rolled-back dictionary had, in practice), so a
//!   dictionary once read is cached for the life of the [`super::Store`] ([`Dictionaries`]).
//! - A text no message holds any more is removed when the write transaction that let go of it
//!   finishes ([`remove_unheld`]), not at once: a conversation read again whole lets go of its
//!   texts and takes them back a moment later, and keeps them (and their place in the indexes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::sql::{params, OptionalExtension};
use super::{Connection, StoreError};

/// The codec byte of a text stored as its UTF-8 bytes.
pub const PLAIN: u8 = 0;
/// The codec byte of a text stored as a zstd frame made without a dictionary.
pub const ZSTD: u8 = 1;
/// The codec byte of a text stored as a dictionary's id (4 bytes, little-endian) and a zstd
/// frame made with that dictionary.
pub const ZSTD_DICT: u8 = 2;

/// Texts shorter than this are kept plain: a frame's header and checksum cost more than
/// compression saves.
const MIN_COMPRESSED: usize = 64;

/// zstd's level: level 3 (zstd's default) compresses at several hundred megabytes a second.
const LEVEL: i32 = 3;

/// The largest dictionary trained, in bytes (zstd's own default).
const DICTIONARY_BYTES: usize = 112 << 10;

/// A store trains its dictionary once it holds this many texts worth compressing.
pub const TRAIN_AT: i64 = 1_000;

/// The most bytes of texts a dictionary is trained on.
const TRAINING_BYTES: usize = 8 << 20;

/// The hash a text is found by: the first eight bytes of its SHA-256.
pub fn hash(text: &str) -> i64 {
    let digest = Sha256::digest(text.as_bytes());
    i64::from_be_bytes(digest[..8].try_into().expect("eight bytes"))
}

/// A dictionary ready for both directions: zstd contexts with it loaded, kept for reuse
/// ([`Contexts`]).
pub struct Dictionary {
    pub id: i64,
    contexts: Contexts,
}

impl Dictionary {
    /// Dictionary `id` of bytes `data` (zstd's format, or raw content).
    pub fn new(id: i64, data: &[u8]) -> Dictionary {
        Dictionary { id, contexts: Contexts::new(Some(data.to_vec())) }
    }
}

/// zstd contexts for one dictionary (or none), made on demand and kept for the next text.
///
/// Making a context and loading a dictionary into it costs more than compressing or
/// decompressing a message's text (by `perf`, two fifths of an import's writing thread went
/// to it when each text had its own); a context taken from here has the dictionary loaded
/// already, and goes back when done. At most [`KEPT_CONTEXTS`] of each kind wait.
struct Contexts {
    dictionary: Option<Vec<u8>>,
    compressors: Mutex<Vec<zstd::bulk::Compressor<'static>>>,
    decompressors: Mutex<Vec<zstd::bulk::Decompressor<'static>>>,
}

/// The most idle contexts of each kind kept per dictionary: one per thread that compresses or
/// decompresses at once, in practice.
const KEPT_CONTEXTS: usize = 8;

/// The largest content a frame's header is taken at its word for (its buffer made that size
/// at once); a larger claim is checked against what the frame holds as it is read.
const TRUSTED_SIZE: usize = 16 << 20;

/// The contexts of texts compressed without a dictionary.
static WITHOUT_DICTIONARY: std::sync::LazyLock<Contexts> = std::sync::LazyLock::new(|| Contexts::new(None));

impl Contexts {
    fn new(dictionary: Option<Vec<u8>>) -> Contexts {
        Contexts { dictionary, compressors: Mutex::new(Vec::new()), decompressors: Mutex::new(Vec::new()) }
    }

    /// A zstd frame of `bytes`, with its content's checksum.
    fn compress(&self, bytes: &[u8]) -> std::io::Result<Vec<u8>> {
        let idle = self.compressors.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut c = match idle {
            Some(c) => c,
            None => {
                let mut c = match &self.dictionary {
                    Some(d) => zstd::bulk::Compressor::with_dictionary(LEVEL, d)?,
                    None => zstd::bulk::Compressor::new(LEVEL)?,
                };
                c.include_checksum(true)?;
                c
            }
        };
        let frame = c.compress(bytes);
        // A context that failed is dropped, not kept.
        if frame.is_ok() {
            keep(&self.compressors, c);
        }
        frame
    }

    /// The `size` bytes of zstd frame `frame`. A frame claiming more than [`TRUSTED_SIZE`]
    /// is read as a stream, so that memory follows what it holds, not what a damaged header
    /// says it holds.
    fn decompress(&self, frame: &[u8], size: usize) -> std::io::Result<Vec<u8>> {
        if size > TRUSTED_SIZE {
            use std::io::Read;
            let decoder = match &self.dictionary {
                Some(d) => zstd::stream::read::Decoder::with_dictionary(frame, d)?,
                None => zstd::stream::read::Decoder::with_buffer(frame)?,
            };
            let mut out = Vec::new();
            decoder.single_frame().take(size as u64 + 1).read_to_end(&mut out)?;
            if out.len() != size {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("it holds {} bytes where its header says {size}", out.len())));
            }
            return Ok(out);
        }
        let idle = self.decompressors.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut d = match idle {
            Some(d) => d,
            None => match &self.dictionary {
                Some(dictionary) => zstd::bulk::Decompressor::with_dictionary(dictionary)?,
                None => zstd::bulk::Decompressor::new()?,
            },
        };
        let bytes = d.decompress(frame, size);
        if bytes.is_ok() {
            keep(&self.decompressors, d);
        }
        bytes
    }
}

/// Puts `context` back among the idle ones, unless enough wait already.
fn keep<T>(idle: &Mutex<Vec<T>>, context: T) {
    let mut idle = idle.lock().unwrap_or_else(|p| p.into_inner());
    if idle.len() < KEPT_CONTEXTS {
        idle.push(context);
    }
}

/// The dictionaries of one store read so far, by id, and each source's newest (the one its new
/// texts are compressed with), shared by all the store's connections.
#[derive(Default)]
pub struct Dictionaries {
    by_id: Mutex<HashMap<i64, Arc<Dictionary>>>,
    /// Each source's newest dictionary, once found.
    newest: Mutex<HashMap<i64, Arc<Dictionary>>>,
    /// Texts stored without a dictionary since their source was last looked at for training,
    /// by source ([`Dictionaries::due`]).
    undictionaried: Mutex<HashMap<i64, i64>>,
}

impl Dictionaries {
    fn get(&self, conn: &Connection, id: i64) -> Result<Arc<Dictionary>, StoreError> {
        if let Some(d) = self.by_id.lock().unwrap_or_else(|p| p.into_inner()).get(&id) {
            return Ok(d.clone());
        }
        let data: Option<Vec<u8>> = conn.prepare_cached("SELECT data FROM text_dictionaries WHERE id = ?1")?.query_row([id], |r| r.get(0)).optional()?;
        let data = data.ok_or_else(|| StoreError::Corrupt(format!("a text refers to dictionary {id}, which the store does not have")))?;
        let d = Arc::new(Dictionary::new(id, &data));
        self.by_id.lock().unwrap_or_else(|p| p.into_inner()).insert(id, d.clone());
        Ok(d)
    }

    /// Whether enough texts were stored without a dictionary that training one is due: a long
    /// import commits early then, so that most of its texts are compressed with it at once
    /// rather than rewritten after.
    pub fn due(&self) -> bool {
        self.undictionaried.lock().unwrap_or_else(|p| p.into_inner()).values().any(|&n| n >= TRAIN_AT)
    }

    /// The dictionary source `source_id`'s new texts are compressed with, if it has one.
    fn newest(&self, conn: &Connection, source_id: i64) -> Result<Option<Arc<Dictionary>>, StoreError> {
        if let Some(known) = self.newest.lock().unwrap_or_else(|p| p.into_inner()).get(&source_id) {
            return Ok(Some(known.clone()));
        }
        let id: Option<i64> = conn
            .prepare_cached("SELECT id FROM text_dictionaries WHERE source_id = ?1 ORDER BY created DESC, id LIMIT 1")?
            .query_row([source_id], |r| r.get(0))
            .optional()?;
        let found = id.map(|id| self.get(conn, id)).transpose()?;
        // Remembered only once there is one: until then every writer looks again (another
        // process may have trained it), which costs one indexed read.
        if let Some(d) = &found {
            self.newest.lock().unwrap_or_else(|p| p.into_inner()).insert(source_id, d.clone());
        }
        Ok(found)
    }
}

/// `text` in the stored format, compressed with `dictionary` when given and worth it.
pub fn encode(text: &str, dictionary: Option<&Dictionary>) -> Vec<u8> {
    let bytes = text.as_bytes();
    if bytes.len() >= MIN_COMPRESSED {
        let compressed = match dictionary {
            Some(d) => d.contexts.compress(bytes),
            None => WITHOUT_DICTIONARY.compress(bytes),
        };
        if let Ok(frame) = compressed {
            let header = if dictionary.is_some() { 5 } else { 1 };
            if frame.len() + header < bytes.len() {
                let mut out = Vec::with_capacity(frame.len() + header);
                match dictionary {
                    Some(d) => {
                        out.push(ZSTD_DICT);
                        out.extend_from_slice(&(d.id as u32).to_le_bytes());
                    }
                    None => out.push(ZSTD),
                }
                out.extend_from_slice(&frame);
                return out;
            }
        }
    }
    let mut out = Vec::with_capacity(bytes.len() + 1);
    out.push(PLAIN);
    out.extend_from_slice(bytes);
    out
}

/// The text of a `data` value, or why it cannot be read.
pub fn decode_with(data: &[u8], dictionary: impl FnOnce(i64) -> Result<Arc<Dictionary>, StoreError>) -> Result<String, String> {
    let (codec, rest) = data.split_first().ok_or("it is empty")?;
    let bytes = match *codec {
        PLAIN => rest.to_vec(),
        ZSTD => decompress(rest, None)?,
        ZSTD_DICT => {
            let (id, frame) = rest.split_at_checked(4).ok_or("its dictionary id is cut short")?;
            let id = i64::from(u32::from_le_bytes(id.try_into().expect("four bytes")));
            let d = dictionary(id).map_err(|e| crate::cause::chain(&e))?;
            decompress(frame, Some(&d))?
        }
        other => return Err(format!("its codec byte is {other}, which this sessiondb does not know")),
    };
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 once decoded".to_owned())
}

fn decompress(frame: &[u8], dictionary: Option<&Dictionary>) -> Result<Vec<u8>, String> {
    let size = zstd::zstd_safe::get_frame_content_size(frame).ok().flatten().ok_or("its zstd frame is damaged (no size)")?;
    let size = usize::try_from(size).map_err(|_| "its zstd frame claims an impossible size")?;
    match dictionary {
        Some(d) => d.contexts.decompress(frame, size),
        None => WITHOUT_DICTIONARY.decompress(frame, size),
    }
    .map_err(|e| format!("its zstd frame is damaged ({e})"))
}

impl Connection {
    /// The text of `data` (a `texts.data` value) of text `id`; a value that cannot be read is
    /// [`StoreError::Corrupt`], naming the text.
    pub(in crate::store) fn decode_text(&self, id: i64, data: &[u8]) -> Result<String, StoreError> {
        decode_with(data, |d| self.dictionaries().get(self, d)).map_err(|why| StoreError::Corrupt(format!("text {id} cannot be read: {why}")))
    }
}

/// The id of the row holding `text` in source `source_id`, stored now if none does.
pub fn put(conn: &Connection, source_id: i64, text: &str) -> Result<i64, StoreError> {
    Ok(put_all(conn, source_id, &[text])?[0])
}

/// The ids of the rows holding `texts` in source `source_id`, in order, each stored now if
/// none does: equal texts get one row. The rows are looked up and written in few statements
/// ([`super::rowsets`]), in the order the texts first appear.
pub fn put_all(conn: &Connection, source_id: i64, texts: &[&str]) -> Result<Vec<i64>, StoreError> {
    let hashes: Vec<i64> = texts.iter().map(|t| hash(t)).collect();
    let mut ids: Vec<Option<i64>> = vec![None; texts.len()];
    // The stored rows of every hash, compared by their text: a row that cannot be read is not
    // this text (it gets a sound row of its own, and the damaged one goes once nothing holds
    // it; `doctor` names it meanwhile).
    let mut distinct: Vec<i64> = hashes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let mut stored: HashMap<i64, Vec<(i64, Vec<u8>)>> = HashMap::new();
    for range in super::rowsets::chunks(distinct.len()) {
        let mut same =
            conn.prepare_cached(&format!("SELECT id, hash, data FROM texts WHERE source_id = ?1 AND hash IN ({})", super::rowsets::parameters(2, range.len())))?;
        let mut values: Vec<&dyn super::sql::ToSql> = vec![&source_id];
        values.extend(distinct[range].iter().map(|h| h as &dyn super::sql::ToSql));
        let mut rows = same.query(values.as_slice())?;
        while let Some(r) = rows.next()? {
            stored.entry(r.get(1)?).or_default().push((r.get(0)?, r.get(2)?));
        }
    }
    // Texts to store: the first of each, unless a text new here has its hash already (two
    // texts, one hash): that one is stored after, on its own.
    let mut new: Vec<usize> = Vec::new();
    let mut first_of: HashMap<&str, usize> = HashMap::new();
    let mut new_hashes: std::collections::HashSet<i64> = std::collections::HashSet::new();
    let mut later: Vec<usize> = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let found = stored.get(&hashes[i]).into_iter().flatten().find(|(id, data)| conn.decode_text(*id, data).is_ok_and(|s| s == *text));
        if let Some((id, _)) = found {
            ids[i] = Some(*id);
        } else if first_of.contains_key(text) {
            // Said again: shares its first's row (below).
        } else if !new_hashes.insert(hashes[i]) {
            later.push(i);
        } else {
            first_of.insert(text, i);
            new.push(i);
        }
    }
    if !new.is_empty() {
        let dictionary = conn.dictionaries().newest(conn, source_id)?;
        let rows: Vec<(i64, Vec<u8>)> = new.iter().map(|&i| (hashes[i], encode(texts[i], dictionary.as_deref()))).collect();
        if dictionary.is_none() {
            let compressible = new.iter().filter(|&&i| texts[i].len() >= MIN_COMPRESSED).count() as i64;
            *conn.dictionaries().undictionaried.lock().unwrap_or_else(|p| p.into_inner()).entry(source_id).or_default() += compressible;
        }
        let mut inserted: HashMap<i64, i64> = HashMap::with_capacity(rows.len());
        NEW_TEXTS.run(
            conn,
            &rows,
            |(h, data), out| out.extend_from_slice(&[&source_id as &dyn super::sql::ToSql, h, data]),
            |r| {
                inserted.insert(r.get(1)?, r.get(0)?);
                Ok(())
            },
        )?;
        for &i in &new {
            ids[i] = Some(*inserted.get(&hashes[i]).ok_or_else(|| StoreError::Corrupt("a text written was not returned".into()))?);
        }
    }
    for i in later {
        ids[i] = Some(put(conn, source_id, texts[i])?);
    }
    // A text said again within `texts` shares the row of its first.
    (0..texts.len()).map(|i| ids[i].or_else(|| ids[first_of[texts[i]]]).ok_or_else(|| StoreError::Corrupt("a text was given no row".into()))).collect()
}

const NEW_TEXTS: super::rowsets::Insert =
    super::rowsets::Insert { head: "INSERT INTO texts (source_id, hash, data) VALUES", columns: 3, tail: "RETURNING id, hash" };

/// The text of row `id`.
pub fn get(conn: &Connection, id: i64) -> Result<String, StoreError> {
    let data: Vec<u8> = conn.prepare_cached("SELECT data FROM texts WHERE id = ?1")?.query_row([id], |r| r.get(0))?;
    conn.decode_text(id, &data)
}

/// Removes the texts no message holds any more among those a deletion of messages may have
/// let go of (recorded by the store in `texts_let_go`), then forgets the ids it has settled
/// (the text gone, or held again). Call before a write transaction commits. On a server, a
/// writer removes only texts of the sources it writes (row-level security, 0017), and leaves
/// the others' ids for their writers.
pub fn remove_unheld(conn: &Connection) -> Result<(), StoreError> {
    conn.execute(
        "DELETE FROM texts WHERE id IN (SELECT text_id FROM texts_let_go)
           AND NOT EXISTS (SELECT 1 FROM messages WHERE text_id = texts.id)",
        (),
    )?;
    conn.execute(
        "DELETE FROM texts_let_go
          WHERE NOT EXISTS (SELECT 1 FROM texts WHERE id = texts_let_go.text_id)
             OR EXISTS (SELECT 1 FROM messages WHERE text_id = texts_let_go.text_id)",
        (),
    )?;
    Ok(())
}

/// The SQL functions migration 21 fills `texts` with: a text's [`hash`], and its bytes in the
/// plain form of [`encode`].
pub fn register_functions(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("sessiondb_text_hash", 1, flags, |ctx| Ok(ctx.get::<Option<String>>(0)?.map(|t| hash(&t))))?;
    conn.create_scalar_function("sessiondb_text_plain", 1, flags, |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|t| {
            let mut out = Vec::with_capacity(t.len() + 1);
            out.push(PLAIN);
            out.extend_from_slice(t.as_bytes());
            out
        }))
    })
}

/// Trains the dictionary of each source that has none and holds at least [`TRAIN_AT`] texts
/// worth compressing (the connection's source only, when it is scoped to one), then compresses
/// with it every text of that source stored without it, each source in a write transaction of
/// its own (so that no dictionary is ever remembered that a rollback took back). Returns how
/// many it trained. Call outside any transaction.
pub fn train(conn: &Connection) -> Result<u64, StoreError> {
    let sources: Vec<i64> = match conn.scope() {
        Some(source) => vec![source],
        None => conn.prepare_cached("SELECT id FROM sources ORDER BY id")?.query_map((), |r| r.get(0))?.collect::<Result<_, _>>()?,
    };
    let mut trained = 0;
    for source in sources {
        conn.dictionaries().undictionaried.lock().unwrap_or_else(|p| p.into_inner()).remove(&source);
        if conn.dictionaries().newest(conn, source)?.is_some() {
            continue;
        }
        trained += u64::from(conn.in_transaction(|| train_in_transaction(conn, source))?);
    }
    Ok(trained)
}

fn train_in_transaction(conn: &Connection, source: i64) -> Result<bool, StoreError> {
    // Another writer may have trained one while this one waited for the lock.
    if conn.dictionaries().newest(conn, source)?.is_some() {
        return Ok(false);
    }
    let worth: i64 = conn
        .prepare_cached("SELECT count(*) FROM (SELECT 1 FROM texts WHERE source_id = ?1 AND length(data) > ?2 LIMIT ?3) AS worth")?
        .query_row(params![source, MIN_COMPRESSED as i64, TRAIN_AT], |r| r.get(0))?;
    if worth < TRAIN_AT {
        return Ok(false);
    }
    // The newest texts first: a source's texts change with time (models, tools), and those
    // to come are more like the recent ones.
    let mut samples: Vec<Vec<u8>> = Vec::new();
    let mut bytes = 0;
    {
        let mut stmt = conn.prepare_cached("SELECT id, data FROM texts WHERE source_id = ?1 AND length(data) > ?2 ORDER BY id DESC")?;
        let mut rows = stmt.query(params![source, MIN_COMPRESSED as i64])?;
        while let Some(r) = rows.next()? {
            let text = conn.decode_text(r.get(0)?, &r.get::<_, Vec<u8>>(1)?)?;
            // A long text teaches no more than its beginning.
            let sample = text.as_bytes()[..text.len().min(16 << 10)].to_vec();
            bytes += sample.len();
            samples.push(sample);
            if bytes >= TRAINING_BYTES {
                break;
            }
        }
    }
    let Ok(dictionary) = zstd::dict::from_samples(&samples, DICTIONARY_BYTES) else {
        // Too little variety to train on: texts stay compressed without one.
        return Ok(false);
    };
    let id = random_id()?;
    conn.execute(
        "INSERT INTO text_dictionaries (id, source_id, data, created) VALUES (?1, ?2, ?3, ?4)",
        params![id, source, dictionary, chrono::Utc::now().timestamp()],
    )?;
    // Used here only, until the transaction commits: no other connection meets it before.
    recompress_with(conn, source, &Dictionary::new(id, &dictionary), i64::MAX)?;
    Ok(true)
}

/// Compresses with source `source_id`'s newest dictionary up to `limit` of its texts stored
/// otherwise (plain or without it), where that makes them smaller; returns how many it rewrote.
pub fn recompress(conn: &Connection, source_id: i64, limit: i64) -> Result<u64, StoreError> {
    match conn.dictionaries().newest(conn, source_id)? {
        Some(dictionary) => recompress_with(conn, source_id, &dictionary, limit),
        None => Ok(0),
    }
}

fn recompress_with(conn: &Connection, source_id: i64, dictionary: &Dictionary, limit: i64) -> Result<u64, StoreError> {
    let current = {
        let mut prefix = vec![ZSTD_DICT];
        prefix.extend_from_slice(&(dictionary.id as u32).to_le_bytes());
        prefix
    };
    let stale: Vec<(i64, Vec<u8>)> = conn
        .prepare_cached("SELECT id, data FROM texts WHERE source_id = ?1 AND length(data) > ?2 AND substr(data, 1, 5) != ?3 LIMIT ?4")?
        .query_map(params![source_id, MIN_COMPRESSED as i64, current, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut update = conn.prepare_cached("UPDATE texts SET data = ?2 WHERE id = ?1")?;
    let mut rewritten = 0;
    for (id, data) in stale {
        let text = conn.decode_text(id, &data)?;
        let again = encode(&text, Some(dictionary));
        if again.len() < data.len() {
            update.execute(params![id, again])?;
            rewritten += 1;
        }
    }
    Ok(rewritten)
}

/// A dictionary id: random, 31 bits, never 0.
fn random_id() -> Result<i64, StoreError> {
    use std::io::Read;
    let mut bytes = [0u8; 4];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).map_err(|source| StoreError::Io { path: "/dev/urandom".into(), source })?;
    Ok(i64::from(u32::from_le_bytes(bytes) & 0x7fff_ffff).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dictionary() -> Dictionary {
        let samples: Vec<Vec<u8>> = (0..2000)
            .map(|i| {
                format!("You are gptme, a general-purpose assistant. Tool {i} ran `cargo test --package p{i}` and printed {} lines of output.", i * 7).into_bytes()
            })
            .collect();
        Dictionary::new(42, &zstd::dict::from_samples(&samples, 16 << 10).unwrap())
    }

    #[test]
    fn every_form_decodes_to_the_text() {
        let d = Arc::new(dictionary());
        let long = "You are gptme, a general-purpose assistant. Tool 9 ran `cargo test --package p9` and printed 63 lines of output. ".repeat(20);
        for text in ["", "short", "ünïcödé 日本語 🚀", &long] {
            for dict in [None, Some(&*d)] {
                let data = encode(text, dict);
                let back = decode_with(&data, |id| if id == 42 { Ok(d.clone()) } else { Err(StoreError::Corrupt("no such".into())) }).unwrap();
                assert_eq!(back, text);
            }
        }
        assert_eq!(encode("short", Some(&d))[0], PLAIN);
        assert_eq!(encode(&long, None)[0], ZSTD);
        let with = encode(&long, Some(&d));
        assert_eq!(with[0], ZSTD_DICT);
        assert!(with.len() < encode(&long, None).len(), "the dictionary helps");
    }

    #[test]
    fn damage_is_an_error_never_other_text() {
        let long = "The quick brown fox jumps over the lazy dog, again and again. ".repeat(40);
        let data = encode(&long, None);
        let no_dict = |_| -> Result<Arc<Dictionary>, StoreError> { Err(StoreError::Corrupt("none".into())) };
        for at in 1..data.len() {
            let mut bad = data.clone();
            bad[at] ^= 0x40;
            if let Ok(text) = decode_with(&bad, no_dict) {
                assert_eq!(text, long, "byte {at} changed and another text came back");
            }
        }
        assert!(decode_with(&[], no_dict).is_err());
        assert!(decode_with(&[9, 1, 2], no_dict).is_err());
        assert!(decode_with(&[ZSTD_DICT, 1, 2], no_dict).is_err());
        assert!(decode_with(&[PLAIN, 0xff], no_dict).is_err());
    }

    /// A frame whose header claims far more than it holds is refused without a buffer of the
    /// claimed size; one larger than [`TRUSTED_SIZE`] that holds it all reads back whole.
    #[test]
    fn a_frame_claiming_more_than_it_holds_is_refused_as_read() {
        let no_dict = |_| -> Result<Arc<Dictionary>, StoreError> { Err(StoreError::Corrupt("none".into())) };
        let big = "0123456789abcdef".repeat((TRUSTED_SIZE / 16) + 1000);
        let data = encode(&big, None);
        assert_eq!(data[0], ZSTD);
        assert_eq!(decode_with(&data, no_dict).unwrap(), big);
        // The same frame with its content size field claiming 2^40 bytes (single-segment
        // frames write it last in the header: here, 8 bytes after the descriptor and window).
        let small = encode(&"a small text, compressed all the same. ".repeat(10), None);
        let mut frame = zstd::bulk::Compressor::new(LEVEL).unwrap();
        frame.include_checksum(true).unwrap();
        frame.include_contentsize(true).unwrap();
        let plain = "a small text, compressed all the same. ".repeat(10);
        let mut lying = frame.compress(plain.as_bytes()).unwrap();
        // Frame header descriptor: its top two bits give the size field's width; make it 8.
        let descriptor = lying[4];
        let width = [if descriptor & 0x20 != 0 { 1 } else { 0 }, 2, 4, 8][usize::from(descriptor >> 6)];
        let start = 5 + usize::from(descriptor & 0x20 == 0) + if descriptor & 0x03 != 0 { [0, 1, 2, 4][usize::from(descriptor & 0x03)] } else { 0 };
        let claimed = (1u64 << 40).to_le_bytes();
        let mut header = lying[..5].to_vec();
        header[4] = (descriptor & 0x3f) | 0xc0;
        header.extend_from_slice(&lying[5..start]);
        header.extend_from_slice(&claimed);
        header.extend_from_slice(&lying[start + width..]);
        lying = header;
        let mut data = vec![ZSTD];
        data.extend_from_slice(&lying);
        assert_eq!(zstd::zstd_safe::get_frame_content_size(&lying).unwrap(), Some(1 << 40));
        let err = decode_with(&data, no_dict).unwrap_err();
        assert!(err.contains("damaged"), "{err}");
        assert_eq!(decode_with(&small, no_dict).unwrap(), plain);
    }

    proptest::proptest! {
        #[test]
        fn any_text_round_trips(text in ".{0,400}", repeat in 1usize..20) {
            let text = text.repeat(repeat);
            let d = Arc::new(dictionary());
            for dict in [None, Some(&*d)] {
                let data = encode(&text, dict);
                proptest::prop_assert_eq!(decode_with(&data, |_| Ok(d.clone())).unwrap(), text.clone());
            }
        }
    }
}
