//! A write transaction that holds any number of whole conversations.
//!
//! [`WriteBatch::begin`] takes the database's write lock up front ([`Connection::begin_write`]:
//! on a server, the lock of the source the connection is scoped to), so concurrent writers
//! queue instead of failing midway. Each conversation is written inside its
//! own savepoint ([`WriteBatch::conversation`]): a conversation that fails is rolled back alone
//! and the batch goes on. [`WriteBatch::commit`] brings the full-text indexes up to date and
//! commits (a batch begun with [`WriteBatch::begin_unindexed`] leaves them to
//! [`super::fts::catch_up`]); readers then see every conversation of the batch at once, each of
//! them whole. A batch dropped without committing (an error, a crash) leaves the store as it was
//! before it.

use super::{fts, Connection, ConversationWriter, StoreError};

pub struct WriteBatch<'c> {
    conn: &'c mut Connection,
    open: bool,
    /// Whether commits index what they add ([`fts::index_own`]).
    indexed: bool,
    /// The highest text id handed out when the transaction under way began.
    seq: i64,
}

impl<'c> WriteBatch<'c> {
    pub fn begin(conn: &'c mut Connection) -> Result<Self, StoreError> {
        Self::begin_with(conn, true)
    }

    /// A batch whose commits leave the word and substring indexes behind, for an import: its
    /// conversations can be listed as each batch commits, and the caller then indexes them all
    /// with [`fts::catch_up`] (if it dies first, the next search does).
    pub fn begin_unindexed(conn: &'c mut Connection) -> Result<Self, StoreError> {
        Self::begin_with(conn, false)
    }

    fn begin_with(conn: &'c mut Connection, indexed: bool) -> Result<Self, StoreError> {
        conn.begin_write()?;
        let mut batch = WriteBatch { conn, open: true, indexed, seq: 0 };
        batch.seq = fts::text_seq(batch.conn)?;
        Ok(batch)
    }

    /// The connection, for the store's reads (and row edits) inside the batch.
    pub fn conn(&self) -> &Connection {
        self.conn
    }

    /// Starts (re)writing one conversation in a savepoint of this batch.
    pub fn conversation(&mut self, chat_id: &str, source_dir: &str, fingerprint: &[u8]) -> Result<ConversationWriter<'_>, StoreError> {
        ConversationWriter::begin(self.conn, chat_id, source_dir, fingerprint)
    }

    /// Starts adding lines to stored conversation `conversation_id`, in a savepoint.
    pub fn resume_conversation(&mut self, conversation_id: i64) -> Result<ConversationWriter<'_>, StoreError> {
        ConversationWriter::resume(self.conn, conversation_id)
    }

    /// Whether the batch should commit now for its source's text dictionary to be trained
    /// ([`super::texts::Dictionaries::due`]): the texts it writes after are compressed with it.
    pub fn dictionary_due(&self) -> bool {
        self.conn.dictionaries().due()
    }

    /// Indexes what the batch added (unless begun unindexed), commits, and opens the next
    /// transaction so the batch can go on.
    pub fn commit(&mut self) -> Result<(), StoreError> {
        self.commit_inner()?;
        super::texts::train(self.conn)?;
        self.conn.begin_write()?;
        self.open = true;
        self.seq = fts::text_seq(self.conn)?;
        Ok(())
    }

    /// Indexes, commits and ends the batch (and trains the store's text dictionary once it is
    /// due: [`super::texts::train`]).
    pub fn finish(mut self) -> Result<(), StoreError> {
        self.commit_inner()?;
        super::texts::train(self.conn)?;
        Ok(())
    }

    fn commit_inner(&mut self) -> Result<(), StoreError> {
        super::texts::remove_unheld(self.conn)?;
        if self.indexed {
            fts::index_own(self.conn, self.seq)?;
        }
        self.conn.execute_batch("COMMIT")?;
        self.open = false;
        Ok(())
    }
}

impl Drop for WriteBatch<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// A savepoint on a store connection, as rusqlite's `Savepoint`: [`Savepoint::commit`]
/// releases it; dropped without that, it rolls back what was done since it began (and is
/// released), leaving the enclosing transaction as it was.
pub(super) struct Savepoint<'c> {
    conn: &'c mut Connection,
    committed: bool,
}

impl<'c> Savepoint<'c> {
    pub(super) fn begin(conn: &'c mut Connection) -> super::sql::Result<Self> {
        conn.execute_batch("SAVEPOINT sessiondb_sp")?;
        Ok(Savepoint { conn, committed: false })
    }

    pub(super) fn commit(mut self) -> super::sql::Result<()> {
        self.conn.execute_batch("RELEASE sessiondb_sp")?;
        self.committed = true;
        Ok(())
    }
}

impl std::ops::Deref for Savepoint<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Savepoint<'_> {
    fn drop(&mut self) {
        if !self.committed {
            let _ = self.conn.execute_batch("ROLLBACK TO sessiondb_sp").and_then(|()| self.conn.execute_batch("RELEASE sessiondb_sp"));
        }
    }
}
