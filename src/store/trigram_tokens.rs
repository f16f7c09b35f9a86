//! The substring index's tokenizer, `sessiondb_trigram`: the distinct three-character
//! sequences of a text, each once, each behind two bytes of its own hash.
//!
//! The substring index (`texts_substring`, `schema/0022_search_by_text.sql`) is
//! `detail = 'none'`: it records which messages hold a trigram, never where or how often. FTS5's
//! own `trigram` tokenizer hands it every trigram of a text, repeats included, and FTS5 looks
//! each one up in its pending-terms hash; that was half of an import's time, for two reasons
//! this tokenizer removes:
//! - in gptme's logs three trigrams in four repeat one already seen in the same message (tool
//!   output, code, the system prompt): they are dropped here, in a small hash set, so FTS5 sees
//!   each distinct trigram of a message once;
//! - FTS5's term hash (`fts5HashKey2`) spreads keys of three or four bytes over a few thousand
//!   of its slots, so each lookup walked chains of eight entries on average: each token here
//!   starts with two bytes from a strong hash of its trigram ([`salt`]), which brings that to
//!   1.4, as a fair hash would.
//!
//! Invariant: for every text, the tokens are exactly `salt(t) + t` for each trigram `t` of the
//! set FTS5's `trigram case_sensitive 1` emits (every window of three consecutive characters,
//! NULs skipped, no folding: the text is lowercased before it is indexed, see `store::fts`); a
//! unit test compares them on hostile text. Queries (the quoted trigrams `store::search` builds)
//! are tokenized by the same rule, so a query trigram is found wherever the text holds it.
//! Changing the tokens' form needs a new tokenizer name and a migration that rebuilds the index.
//! The tokenizer is stateless: its instance is a constant and `xTokenize` keeps its scratch set
//! per thread.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void};
use std::hash::{BuildHasherDefault, Hasher};

use rusqlite::ffi;

/// The name the substring index's schema gives its tokenizer.
pub const NAME: &std::ffi::CStr = c"sessiondb_trigram";

/// Registers [`NAME`] on `conn`; every connection that opens the substring index needs it.
pub fn register(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let unavailable = |why: &str| rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_ERROR), Some(format!("the sessiondb_trigram tokenizer: {why}")));
    let api = super::word_tokens::fts5_api(conn)?;
    let mut methods = ffi::fts5_tokenizer { xCreate: Some(create), xDelete: Some(delete), xTokenize: Some(tokenize) };
    // SAFETY: `api` is the live FTS5 API of `conn` (see `fts5_api`); FTS5 copies `methods`;
    // the user data is unused and nothing needs destroying.
    let rc = unsafe {
        let create_tokenizer = (*api).xCreateTokenizer.ok_or_else(|| unavailable("FTS5 cannot register tokenizers"))?;
        create_tokenizer(api, NAME.as_ptr(), std::ptr::null_mut(), &mut methods, None)
    };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some("the sessiondb_trigram tokenizer could not be registered".into())))
    }
}

/// The instance every `xCreate` returns: the tokenizer has no state of its own.
static INSTANCE: u8 = 0;

unsafe extern "C" fn create(_user: *mut c_void, _args: *mut *const c_char, n_args: c_int, out: *mut *mut ffi::Fts5Tokenizer) -> c_int {
    if n_args != 0 || out.is_null() {
        return ffi::SQLITE_ERROR;
    }
    // SAFETY: FTS5 passes a valid place for the instance.
    unsafe { *out = (&INSTANCE as *const u8).cast_mut().cast::<ffi::Fts5Tokenizer>() };
    ffi::SQLITE_OK
}

unsafe extern "C" fn delete(_tokenizer: *mut ffi::Fts5Tokenizer) {}

/// A fast hash for packed trigrams (three 21-bit code points in a `u64`).
#[derive(Default)]
struct PackedHasher(u64);

/// splitmix64's finaliser: every input bit reaches every output bit.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The two bytes a trigram's token starts with (see the module's doc): seven bits each of a
/// hash of the packed trigram, never NUL, so that the token stays valid UTF-8.
fn salt(packed: u64) -> [u8; 2] {
    let h = mix(packed ^ 0x5e55_10bd);
    [(h & 0x7f) as u8 | 1, ((h >> 7) & 0x7f) as u8 | 1]
}

impl Hasher for PackedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = mix(self.0 ^ x);
    }
}

type Seen = HashSet<u64, BuildHasherDefault<PackedHasher>>;

thread_local! {
    /// The trigrams of the text being tokenized on this thread (kept between calls, emptied).
    static SEEN: RefCell<Seen> = RefCell::new(Seen::default());
}

/// A scratch set that grew past this many entries (a very long message) is given back.
const KEEP_CAPACITY: usize = 1 << 16;

/// The FTS5 callback a token is handed to.
type TokenCallback = unsafe extern "C" fn(*mut c_void, c_int, *const c_char, c_int, c_int, c_int) -> c_int;

unsafe extern "C" fn tokenize(
    _tokenizer: *mut ffi::Fts5Tokenizer,
    ctx: *mut c_void,
    _flags: c_int,
    text: *const c_char,
    n_text: c_int,
    token: Option<TokenCallback>,
) -> c_int {
    let Some(token) = token else { return ffi::SQLITE_ERROR };
    if text.is_null() || n_text < 3 {
        return ffi::SQLITE_OK;
    }
    // SAFETY: FTS5 passes `n_text` readable bytes at `text` for the duration of the call.
    let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), n_text as usize) };
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        seen.clear();
        let rc = distinct_trigrams(bytes, &mut seen, &mut |trigram, start, end| {
            // SAFETY: `trigram` is readable for the call; `ctx` is FTS5's, passed back unchanged.
            unsafe { token(ctx, 0, trigram.as_ptr().cast::<c_char>(), trigram.len() as c_int, start as c_int, end as c_int) }
        });
        if seen.capacity() > KEEP_CAPACITY {
            *seen = Seen::default();
        }
        rc
    })
}

/// The distinct trigrams of `text` (every window of three consecutive characters, NULs skipped,
/// in order of first appearance), without the salt, each handed to `f` as it is found: what
/// PostgreSQL's substring index holds ([`super::text_terms`]), by the rule of this tokenizer.
pub fn each_trigram(text: &str, f: &mut dyn FnMut(&str)) {
    let mut seen = Seen::default();
    distinct_trigrams(text.as_bytes(), &mut seen, &mut |token, _, _| {
        match std::str::from_utf8(&token[2..]) {
            Ok(t) => f(t),
            Err(_) => f(&String::from_utf8_lossy(&token[2..])),
        }
        ffi::SQLITE_OK
    });
}

/// Calls `emit(token, start, end)` with the token of each distinct window of three consecutive
/// characters of `bytes` (its [`salt`], then the three characters in UTF-8) and the byte range
/// it came from, in order of first appearance, until
/// it returns other than `SQLITE_OK` (which is returned). As FTS5's own trigram tokenizer does,
/// NUL characters are skipped, as if not there. A text that is not valid UTF-8 (never stored
/// by sessiondb) is read as `String::from_utf8_lossy` reads it.
fn distinct_trigrams(bytes: &[u8], seen: &mut Seen, emit: &mut dyn FnMut(&[u8], usize, usize) -> c_int) -> c_int {
    let text = String::from_utf8_lossy(bytes);
    // The last three characters and where each starts, oldest first.
    let mut window = [(0usize, '\0'); 3];
    let mut count = 0usize;
    for (at, c) in text.char_indices().filter(|&(_, c)| c != '\0') {
        window = [window[1], window[2], (at, c)];
        count += 1;
        if count < 3 {
            continue;
        }
        let [(start, a), (_, b), (_, c)] = window;
        let packed = (u64::from(a) << 42) | (u64::from(b) << 21) | u64::from(c);
        if seen.insert(packed) {
            let mut token = [0u8; 14];
            token[..2].copy_from_slice(&salt(packed));
            let mut len = 2 + a.encode_utf8(&mut token[2..]).len();
            len += b.encode_utf8(&mut token[len..]).len();
            len += c.encode_utf8(&mut token[len..]).len();
            let end = (at + c.len_utf8()).min(bytes.len());
            let rc = emit(&token[..len], start.min(end), end);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
    }
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens_of(conn: &rusqlite::Connection, table: &str) -> Vec<(i64, Vec<String>)> {
        conn.execute_batch(&format!("DROP TABLE IF EXISTS v; CREATE VIRTUAL TABLE v USING fts5vocab({table}, instance);")).unwrap();
        let mut stmt = conn.prepare("SELECT doc, term FROM v ORDER BY doc, term").unwrap();
        let rows: Vec<(i64, String)> = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().collect::<Result<_, _>>().unwrap();
        let mut out: Vec<(i64, Vec<String>)> = Vec::new();
        for (doc, term) in rows {
            match out.last_mut() {
                Some((d, terms)) if *d == doc => terms.push(term),
                _ => out.push((doc, vec![term])),
            }
        }
        for (_, terms) in &mut out {
            terms.dedup();
        }
        out
    }

    /// A table of each tokenizer, holding `texts`.
    fn both_tables(texts: &[String]) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE builtin USING fts5(content, tokenize = 'trigram case_sensitive 1');
             CREATE VIRTUAL TABLE ours USING fts5(content, content = '', contentless_delete = 1, detail = 'none', tokenize = 'sessiondb_trigram');",
        )
        .unwrap();
        for (i, text) in texts.iter().enumerate() {
            for table in ["builtin", "ours"] {
                conn.execute(&format!("INSERT INTO {table} (rowid, content) VALUES (?1, ?2)"), rusqlite::params![i as i64, text]).unwrap();
            }
        }
        conn
    }

    /// Our tokens without their salts (each checked), per document, sorted.
    fn unsalted(conn: &rusqlite::Connection) -> Vec<(i64, Vec<String>)> {
        tokens_of(conn, "ours")
            .into_iter()
            .map(|(doc, terms)| {
                let mut terms: Vec<String> = terms
                    .into_iter()
                    .map(|t| {
                        let (salted, trigram) = t.split_at(2);
                        let packed = trigram.chars().fold(0u64, |k, c| (k << 21) | u64::from(c));
                        assert_eq!(salted.as_bytes(), salt(packed), "{t:?}");
                        trigram.to_owned()
                    })
                    .collect();
                terms.sort();
                (doc, terms)
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Any texts: the same trigrams as FTS5's own tokenizer, per document.
        #[test]
        fn any_text_gives_the_builtin_trigrams(texts in proptest::collection::vec(proptest::prelude::any::<String>(), 1..6)) {
            let conn = both_tables(&texts);
            proptest::prop_assert_eq!(unsalted(&conn), tokens_of(&conn, "builtin"));
        }
    }

    /// The index holds, for every text, the same trigrams FTS5's own tokenizer gives.
    #[test]
    fn the_trigrams_are_the_builtin_tokenizers_without_repeats() {
        let texts = [
            "hello hello hello, world! the borrow-checker's error_code e0502 at 12:30",
            "café crème àéîõü straße οδος σς i̇stanbul",
            "e\u{301}cole combining marks, ǆ ǻ ﬁ",
            "emoji 😀 🦀 🎉 and ✓ ★ symbols → ∑ 😀😀😀😀",
            "中文数据库 和 日本語のテキスト 한국어",
            "tab\tnew\nline\u{0}nul\u{0}\u{0}\u{0}",
            "",
            "ab",
            "abc",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "x\u{2028}y\u{00a0}z",
            "c:\\users\\(x) is_locally() \"quoted\" ''",
        ];
        let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
        let conn = both_tables(&texts);
        assert_eq!(unsalted(&conn), tokens_of(&conn, "builtin"));
        // And a quoted trigram query finds exactly the texts that hold it.
        for (i, text) in texts.iter().enumerate() {
            let chars: Vec<char> = text.chars().collect();
            for w in chars.windows(3).filter(|w| !w.contains(&'\0')) {
                let t: String = w.iter().collect();
                let q = format!("\"{}\"", t.replace('"', "\"\""));
                let found: Vec<i64> = conn
                    .prepare("SELECT rowid FROM ours WHERE ours MATCH ?1 ORDER BY rowid")
                    .unwrap()
                    .query_map([&q], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                let want: Vec<i64> = texts.iter().enumerate().filter(|(_, x)| x.contains(&t)).map(|(j, _)| j as i64).collect();
                assert_eq!(found, want, "{t:?} of text {i}");
            }
        }
    }

    #[test]
    fn offsets_are_where_each_trigram_came_from() {
        let mut seen = Seen::default();
        let mut got = Vec::new();
        distinct_trigrams("aé\0😀éaé😀".as_bytes(), &mut seen, &mut |t, s, e| {
            got.push((String::from_utf8(t[2..].to_vec()).unwrap(), s, e));
            ffi::SQLITE_OK
        });
        let want = [("aé😀", 0, 8), ("é😀é", 1, 10), ("😀éa", 4, 11), ("éaé", 8, 13)];
        assert_eq!(got, want.map(|(t, s, e)| (t.to_owned(), s, e)));
    }
}
