//! How a host's ranking index ([`super::ranking`]) follows the texts of a PostgreSQL server.
//!
//! On SQLite the index lives beside the database file and follows the texts by their ids, as
//! one writer at a time commits them in the order of their ids. A server has no file beside it,
//! and its writers commit at once: a text can become visible after one with a higher id. So each
//! host keeps its own index in its cache directory ([`index_dir`]: one per server, database and
//! role), and follows the texts by the transactions that added them
//! (`schema/postgres/0028_ranking_index_per_host.sql`: `texts.added`, `ranking_deletions`).
//!
//! Invariant, kept by [`catch_up`]: an index at mark `m` holds every text added by a
//! transaction older than `m.settled.xmin` that still exists, and of the texts added by newer
//! ones those in `m.settled.recent` (all it holds of them, when `complete`); it has applied
//! every deletion of an older transaction and those in `m.settled.gone`. A catch-up first reads
//! the oldest transaction still running (`pg_snapshot_xmin`), then the texts and deletions of
//! transactions from the mark's on: every transaction older than the new watermark had ended
//! before the texts are read, so its texts are seen or were never committed. Transaction ids
//! (`xid8`) never wrap around. An index whose mark names another server, database, table or
//! role, or a transaction the server has not reached (a database restored from an older copy),
//! is rebuilt.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Connection, StoreError};

/// The most runs of recent text ids (or deleted ones) a mark lists; past that the texts of the
/// recent transactions are replaced in the index when read again, which is as right and costs
/// more. (A transaction left open for long, anywhere on the server, keeps the watermark back
/// and every text since recent: their ids come in few runs.)
const MAX_RECENT: usize = 10_000;

/// How far an index follows a server's transactions: kept in its mark ([`super::ranking::Mark`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    /// The oldest transaction still running at the last catch-up.
    pub xmin: u64,
    /// The texts of transactions from `xmin` on that the index holds, as runs of ids (first,
    /// last), in order.
    pub recent: Vec<(i64, i64)>,
    /// The deletions of transactions from `xmin` on that it has applied.
    pub gone: Vec<i64>,
    /// Whether `recent` lists every such text the index holds.
    pub complete: bool,
}

/// The server as an index must follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerState {
    /// Which server, database and store (see [`identity`]).
    pub store: i64,
    /// The oldest transaction running now (the next one, when none is).
    pub xmin: u64,
}

impl Settled {
    /// Whether the index holds text `id` of a recent transaction, for certain.
    fn holds(&self, id: i64) -> bool {
        self.complete
            && self
                .recent
                .binary_search_by(|&(first, last)| {
                    if last < id {
                        std::cmp::Ordering::Less
                    } else if first > id {
                        std::cmp::Ordering::Greater
                    } else {
                        std::cmp::Ordering::Equal
                    }
                })
                .is_ok()
    }
}

/// Sorted, distinct `ids` as runs of consecutive ones (first, last).
fn runs(ids: &[i64]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for &id in ids {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == id => *last = id,
            _ => out.push((id, id)),
        }
    }
    out
}

impl ServerState {
    pub fn read(conn: &Connection) -> Result<ServerState, StoreError> {
        let (store, _) = identity(conn)?;
        Ok(ServerState { store, xmin: oldest_running(conn)? })
    }

    /// Whether an index of `store` at `settled` may belong to this server as it is now (else it
    /// is rebuilt): not from transactions the server has not reached (a cluster recovered to an
    /// earlier point, or a dump restored into another).
    pub fn admits(&self, store: i64, settled: Option<&Settled>) -> bool {
        store == self.store && settled.is_some_and(|s| s.xmin <= self.xmin)
    }
}

/// The oldest transaction still running, as `xid8` (the next one to start when none runs).
fn oldest_running(conn: &Connection) -> Result<u64, StoreError> {
    let xmin: String = conn.prepare_cached("SELECT pg_snapshot_xmin(pg_current_snapshot())::text")?.query_row((), |r| r.get(0))?;
    xmin.parse().map_err(|_| StoreError::Corrupt(format!("the server gave {xmin:?} for its oldest running transaction")))
}

/// How many texts a catch-up from `settled` would take or take out: the texts and deletions of
/// transactions from `settled.xmin` on that the index has not taken yet (every text with no
/// watermark).
pub fn behind(conn: &Connection, settled: Option<&Settled>) -> Result<i64, StoreError> {
    let Some(settled) = settled else { return Ok(conn.prepare_cached("SELECT count(*) FROM texts")?.query_row((), |r| r.get(0))?) };
    let since = settled.xmin.to_string();
    let added: Vec<i64> =
        conn.prepare_cached("SELECT id FROM texts WHERE added >= ?1::text::xid8")?.query_map([&since], |r| r.get(0))?.collect::<Result<_, _>>()?;
    let deleted: Vec<i64> = conn
        .prepare_cached("SELECT text_id FROM ranking_deletions WHERE deleted >= ?1::text::xid8")?
        .query_map([&since], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let added = added.iter().filter(|&&id| !settled.holds(id)).count();
    let deleted = deleted.iter().filter(|id| !settled.gone.contains(id)).count();
    Ok((added + deleted) as i64)
}

/// One catch-up of an index at `settled` (`None`: an empty index): `delete` is given each text
/// to take out, `add` each text to put in (id, text, whether the index may hold it already and
/// it is to be replaced). Returns the new watermark and the highest text id added.
pub fn catch_up(
    conn: &Connection,
    settled: Option<&Settled>,
    delete: &mut dyn FnMut(i64) -> Result<(), super::ranking::RankingError>,
    add: &mut dyn FnMut(i64, String, bool) -> Result<(), super::ranking::RankingError>,
) -> Result<(Settled, i64), super::ranking::RankingError> {
    // First: every transaction older than this has ended before anything below is read.
    let xmin = oldest_running(conn)?;
    let since = settled.map_or(0, |s| s.xmin).to_string();
    let now = xmin.to_string();
    let mut gone = Vec::new();
    {
        let mut log = conn.prepare_cached("SELECT text_id, deleted >= ?2::text::xid8 FROM ranking_deletions WHERE deleted >= ?1::text::xid8")?;
        let mut rows = log.query([&since, &now])?;
        while let Some(r) = rows.next()? {
            let (text, recent): (i64, bool) = (r.get(0)?, r.get(1)?);
            delete(text)?;
            if recent {
                gone.push(text);
            }
        }
    }
    let mut recent = Vec::new();
    let mut highest = 0;
    {
        let mut texts = conn.prepare_cached("SELECT id, data, added >= ?2::text::xid8 FROM texts WHERE added >= ?1::text::xid8 ORDER BY id")?;
        let mut rows = texts.query([&since, &now])?;
        while let Some(r) = rows.next()? {
            let (id, is_recent): (i64, bool) = (r.get(0)?, r.get(2)?);
            if is_recent {
                recent.push(id);
            }
            highest = highest.max(id);
            if settled.is_some_and(|s| s.holds(id)) {
                continue;
            }
            let content = conn.decode_text(id, &r.get::<_, Vec<u8>>(1)?)?;
            // Without a complete list, a text of a recent transaction may be there already.
            add(id, content, settled.is_some_and(|s| !s.complete))?;
        }
    }
    // The texts come by id.
    let mut recent = runs(&recent);
    let complete = recent.len() <= MAX_RECENT && gone.len() <= MAX_RECENT;
    if !complete {
        recent.clear();
        gone.clear();
    }
    Ok((Settled { xmin, recent, gone, complete }, highest))
}

/// Who the server, database and reader are, as a number (a mark's `store`) and as the name of
/// their index's directory: the cluster's system identifier (when the role may read it), the
/// server's address and port, the database's name and object id and those of its `texts` table
/// (a database or table made again, even from a dump of the same, is another), and the role
/// connected, as roles may be allowed to
/// read different rows (row-level security): no role's index answers for another.
pub fn identity(conn: &Connection) -> Result<(i64, String), StoreError> {
    let described: String = conn
        .prepare_cached(
            "SELECT concat_ws(' ',
                 CASE WHEN has_function_privilege('pg_control_system()', 'execute') THEN (SELECT system_identifier::text FROM pg_control_system()) END,
                 coalesce(host(inet_server_addr()), 'local'), current_setting('port'), current_database(),
                 (SELECT oid::text FROM pg_database WHERE datname = current_database()), 'texts'::regclass::oid::text, current_user)",
        )?
        .query_row((), |r| r.get(0))?;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(described.as_bytes());
    let store = i64::from_le_bytes(digest[..8].try_into().expect("eight bytes"));
    let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    Ok((store, name))
}

/// Where this host keeps the ranking index of the server's store `conn` is connected to:
/// `$XDG_CACHE_HOME/sessiondb/ranking/<identity>` (else `~/.cache/…`); `None` when neither is
/// set, and searches answer from the server alone.
pub fn index_dir(conn: &Connection) -> Result<Option<PathBuf>, StoreError> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let Some(cache) = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache"))) else { return Ok(None) };
    let (_, name) = identity(conn)?;
    Ok(Some(cache.join("sessiondb").join("ranking").join(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_ids_are_kept_as_runs_and_found_in_them() {
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[3, 4, 5, 9, 11, 12]), vec![(3, 5), (9, 9), (11, 12)]);
        let settled = Settled { xmin: 1, recent: runs(&[3, 4, 5, 9, 11, 12]), gone: Vec::new(), complete: true };
        let held: Vec<i64> = (0..15).filter(|&id| settled.holds(id)).collect();
        assert_eq!(held, vec![3, 4, 5, 9, 11, 12]);
        assert!(!Settled { complete: false, ..settled }.holds(4), "an incomplete list vouches for nothing");
    }
}
