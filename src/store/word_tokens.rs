//! The words of a text exactly as the word index (`texts_fts`) splits and folds them, from
//! SQLite's own FTS5 tokenizer.
//!
//! The word index tokenizes `fts::fts_text(content)` with FTS5's `unicode61 remove_diacritics 2`.
//! The ranking index (`store::ranking`) must hold the very same words, or a word search would
//! find other messages there than in the word index: so rather than a second tokenizer written
//! from unicode61's rules (its categories, its diacritic table, its view of emoji), this module
//! calls the one SQLite runs, through FTS5's C interface (`fts5_api`, `xFindTokenizer`,
//! `xCreate`, `xTokenize`) on a private in-memory connection.
//!
//! Invariant: for every text, [`WordTokens::words`] returns, in order, the tokens FTS5 stores for
//! that text's row in `texts_fts` (a unit test checks it against `fts5vocab` of a real
//! table); query terms are split by the same call. Safety rests on three facts, each kept here:
//! the tokenizer instance is created from, used with, and deleted before the connection that
//! owns it; it is used by one thread at a time (`&mut self`); the callback gets a pointer to a
//! `Vec` that outlives the `xTokenize` call and copies each token out before returning.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use rusqlite::ffi;

use super::fts::fts_text;

/// The word index's tokenizer (`schema/0003_fts_cjk.sql`), its name and arguments.
const TOKENIZER: &CStr = c"unicode61";
const ARGS: [&CStr; 2] = [c"remove_diacritics", c"2"];

/// An FTS5 tokenizer of the word index's kind, with the in-memory connection it belongs to.
pub struct WordTokens {
    tokenizer: *mut ffi::Fts5Tokenizer,
    methods: ffi::fts5_tokenizer,
    // Dropped after `tokenizer` is deleted (see Drop): the tokenizer's module lives in it.
    _conn: rusqlite::Connection,
}

// The raw tokenizer is owned by this value alone and only used through `&mut self`.
unsafe impl Send for WordTokens {}

/// Why FTS5's tokenizer could not be had (SQLite built without FTS5, out of memory).
#[derive(Debug, thiserror::Error)]
#[error("FTS5's word tokenizer is not available: {0}")]
pub struct TokenizerError(String);

impl WordTokens {
    pub fn new() -> Result<WordTokens, TokenizerError> {
        let conn = rusqlite::Connection::open_in_memory().map_err(|e| TokenizerError(e.to_string()))?;
        let api = fts5_api(&conn).map_err(|e| TokenizerError(e.to_string()))?;
        // SAFETY: `api` is `conn`'s FTS5 API, alive as long as `conn`, which this value keeps.
        unsafe {
            let Some(find) = (*api).xFindTokenizer else {
                return Err(TokenizerError("fts5() gave no API".into()));
            };
            let mut user_data: *mut c_void = ptr::null_mut();
            let mut methods: ffi::fts5_tokenizer = std::mem::zeroed();
            if find(api, TOKENIZER.as_ptr(), &mut user_data, &mut methods) != ffi::SQLITE_OK {
                return Err(TokenizerError("no unicode61 tokenizer".into()));
            }
            let (Some(create), Some(_)) = (methods.xCreate, methods.xTokenize) else {
                return Err(TokenizerError("the unicode61 tokenizer has no xCreate or xTokenize".into()));
            };
            let mut args: Vec<*const c_char> = ARGS.iter().map(|a| a.as_ptr()).collect();
            let mut tokenizer: *mut ffi::Fts5Tokenizer = ptr::null_mut();
            if create(user_data, args.as_mut_ptr(), args.len() as c_int, &mut tokenizer) != ffi::SQLITE_OK || tokenizer.is_null() {
                return Err(TokenizerError("unicode61 refused its arguments".into()));
            }
            Ok(WordTokens { tokenizer, methods, _conn: conn })
        }
    }

    /// The words of `content` as the word index holds them (each CJK character set apart by
    /// [`fts_text`] first), in order: a word's position is its index in the list.
    pub fn words(&mut self, content: &str) -> Vec<String> {
        let text = fts_text(content);
        let mut out: Vec<String> = Vec::new();
        // FTS5 takes an int length; SQLite's own limit on a value is 1 GB, so a stored message
        // never comes near it.
        let bytes = text.as_bytes();
        let Ok(len) = c_int::try_from(bytes.len()) else { return out };
        // SAFETY: see the module's invariant. `out` outlives the call; the callback reads
        // exactly `n` bytes at `token`, which FTS5 guarantees valid during the callback.
        unsafe {
            let tokenize = self.methods.xTokenize.expect("checked in new");
            tokenize(
                self.tokenizer,
                (&mut out as *mut Vec<String>).cast::<c_void>(),
                ffi::FTS5_TOKENIZE_DOCUMENT,
                bytes.as_ptr().cast::<c_char>(),
                len,
                Some(push_token),
            );
        }
        out
    }
}

/// The FTS5 API of `conn` (`SELECT fts5(?1)` with a bound pointer, as FTS5's documentation
/// shows); the pointer lives as long as `conn`. Fails with SQLite's own error when the statement
/// cannot be prepared (a file that is not a database), or when SQLite was built without FTS5.
pub(super) fn fts5_api(conn: &rusqlite::Connection) -> rusqlite::Result<*mut ffi::fts5_api> {
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    // SAFETY: `db` is the live handle of `conn`; the statement is finalized before returning;
    // SQLite writes `api` through the bound pointer while the statement steps; the error message
    // is copied out before any other call on the handle.
    unsafe {
        let db = conn.handle();
        let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
        let rc = ffi::sqlite3_prepare_v2(db, c"SELECT fts5(?1)".as_ptr(), -1, &mut stmt, ptr::null_mut());
        if rc != ffi::SQLITE_OK {
            let message = CStr::from_ptr(ffi::sqlite3_errmsg(db)).to_string_lossy().into_owned();
            return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(message)));
        }
        ffi::sqlite3_bind_pointer(stmt, 1, (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(), c"fts5_api_ptr".as_ptr(), None);
        ffi::sqlite3_step(stmt);
        ffi::sqlite3_finalize(stmt);
    }
    if api.is_null() {
        return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_ERROR), Some("SQLite was built without FTS5".into())));
    }
    Ok(api)
}

thread_local! {
    /// This thread's tokenizer, made on first use ([`words`]).
    static TOKENS: std::cell::RefCell<Option<WordTokens>> = const { std::cell::RefCell::new(None) };
}

/// [`WordTokens::words`] from this thread's tokenizer, made on its first use and kept: every
/// search tokenizes its terms, and each of tantivy's indexing threads every message, while
/// making a tokenizer opens a connection.
pub fn words(content: &str) -> Result<Vec<String>, TokenizerError> {
    TOKENS.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = Some(WordTokens::new()?);
        }
        Ok(slot.as_mut().expect("made above").words(content))
    })
}

/// FTS5's callback for each token: appends it to the `Vec<String>` behind `ctx`.
unsafe extern "C" fn push_token(ctx: *mut c_void, _flags: c_int, token: *const c_char, n: c_int, _start: c_int, _end: c_int) -> c_int {
    // SAFETY: `ctx` is the `&mut Vec<String>` given to xTokenize in `words`, alive for the call.
    let out = unsafe { &mut *ctx.cast::<Vec<String>>() };
    if n > 0 && !token.is_null() {
        // SAFETY: FTS5 passes `n` readable bytes at `token` for the duration of the callback.
        let bytes = unsafe { std::slice::from_raw_parts(token.cast::<u8>(), n as usize) };
        out.push(String::from_utf8_lossy(bytes).into_owned());
    }
    ffi::SQLITE_OK
}

impl Drop for WordTokens {
    fn drop(&mut self) {
        if let Some(delete) = self.methods.xDelete {
            // SAFETY: created by this value's xCreate, deleted once, before its connection.
            unsafe { delete(self.tokenizer) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words are FTS5's: the same as a real `texts_fts`-like table stores for each
    /// text (read back through `fts5vocab`, which lists (term, row, position)).
    #[test]
    fn the_words_are_what_the_word_index_stores() {
        let texts = [
            "Hello, World! the borrow-checker's error_code E0502 at 12:30",
            "Café crème ÀÉÎÕÜ Straße ΟΔΟΣ σς İstanbul",
            "e\u{301}cole combining marks, ǅ ǻ Ǻ ﬁ",
            "emoji 😀 🦀 🎉 and ✓ ★ symbols → ∑",
            "中文数据库 和 日本語のテキスト 한국어",
            "tab\tnew\nline\u{0}nul",
            "",
            "!!! ... ---",
            "x\u{2028}y\u{00a0}z",
        ];
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::store::fts::register_functions(&conn).unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(content, tokenize = 'unicode61 remove_diacritics 2');
             CREATE VIRTUAL TABLE v USING fts5vocab(t, instance);",
        )
        .unwrap();
        for (i, text) in texts.iter().enumerate() {
            conn.execute("INSERT INTO t (rowid, content) VALUES (?1, sessiondb_fts_text(?2))", rusqlite::params![i as i64, text]).unwrap();
        }
        let mut tokens = WordTokens::new().unwrap();
        for (i, text) in texts.iter().enumerate() {
            let mut stmt = conn.prepare("SELECT term FROM v WHERE doc = ?1 ORDER BY offset").unwrap();
            let stored: Vec<String> = stmt.query_map([i as i64], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap();
            assert_eq!(tokens.words(text), stored, "{text:?}");
        }
    }
}
