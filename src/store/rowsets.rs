//! Many rows of one table in few statements: `INSERT … VALUES (…), (…), …`, in the dialect
//! both engines share.
//!
//! On a server each statement is a round trip, so an import that wrote a row per statement
//! spent its time waiting (four per message line: 4–6× SQLite's time). Rows go here in chunks
//! of power-of-two sizes up to [`MAX_ROWS`] (41 rows: 32, 8 and 1), so that a table has at most
//! `log2(MAX_ROWS) + 1` statement shapes, each prepared once per connection; SQLite takes the
//! same statements (fewer steps of its VM than a row each, no slower).
//!
//! Invariant: every row given is in exactly one statement, and the statements follow the rows'
//! order, as do the rows within each, so that ids handed out by the table follow it too.

use std::ops::Range;

use super::sql::{Row, ToSql};
use super::{Connection, StoreError};

/// The most rows one statement holds: 256 messages of 23 columns bind 5,888 parameters, well
/// within both engines' limits (SQLite 32,766, PostgreSQL 65,535).
pub const MAX_ROWS: usize = 256;

/// An insert of rows of `columns` values: `head` (`INSERT INTO t (a, b) VALUES`), the rows'
/// parameters, then `tail` (`ON CONFLICT …`, `RETURNING …`, or nothing).
pub struct Insert {
    pub head: &'static str,
    pub columns: usize,
    pub tail: &'static str,
}

/// The ranges `n` rows are written in: chunks of [`MAX_ROWS`], then one of each power of two
/// the rest holds, largest first.
pub fn chunks(n: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let rest = n - start;
        let size = if rest >= MAX_ROWS { MAX_ROWS } else { 1 << (usize::BITS - 1 - rest.leading_zeros()) };
        out.push(start..start + size);
        start += size;
    }
    out
}

/// `?first, ?first+1, …`: `n` numbered parameters.
pub fn parameters(first: usize, n: usize) -> String {
    (first..first + n).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ")
}

impl Insert {
    fn sql(&self, rows: usize) -> String {
        let tuples: Vec<String> = (0..rows).map(|r| format!("({})", parameters(1 + r * self.columns, self.columns))).collect();
        format!("{} {} {}", self.head, tuples.join(", "), self.tail)
    }

    /// Inserts `rows`, whose values `bind` gives (exactly [`Insert::columns`] of them, in
    /// order), passing each row a `RETURNING` tail returns to `returned`.
    pub fn run<'r, R>(
        &self,
        conn: &Connection,
        rows: &'r [R],
        bind: impl Fn(&'r R, &mut Vec<&'r dyn ToSql>),
        mut returned: impl FnMut(&Row<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let returning = self.tail.contains("RETURNING");
        for range in chunks(rows.len()) {
            let mut values: Vec<&dyn ToSql> = Vec::with_capacity(range.len() * self.columns);
            for row in &rows[range.clone()] {
                bind(row, &mut values);
            }
            debug_assert_eq!(values.len(), range.len() * self.columns, "{}", self.head);
            let mut stmt = conn.prepare_cached(&self.sql(range.len()))?;
            if returning {
                let mut out = stmt.query(values.as_slice())?;
                while let Some(row) = out.next()? {
                    returned(&row)?;
                }
            } else {
                stmt.execute(values.as_slice())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_row_once_in_order() {
        for n in [0, 1, 2, 3, 41, 255, 256, 257, 600, 1024, 1025] {
            let ranges = chunks(n);
            let mut next = 0;
            for r in &ranges {
                assert_eq!(r.start, next, "{n}");
                assert!(r.len().is_power_of_two() && r.len() <= MAX_ROWS, "{n}: {r:?}");
                next = r.end;
            }
            assert_eq!(next, n);
        }
        assert_eq!(chunks(41).iter().map(|r| r.len()).collect::<Vec<_>>(), [32, 8, 1]);
    }

    #[test]
    fn statements_number_their_parameters_row_after_row() {
        let insert = Insert { head: "INSERT INTO t (a, b) VALUES", columns: 2, tail: "RETURNING a" };
        assert_eq!(insert.sql(2), "INSERT INTO t (a, b) VALUES (?1, ?2), (?3, ?4) RETURNING a");
        assert_eq!(parameters(3, 2), "?3, ?4");
    }
}
