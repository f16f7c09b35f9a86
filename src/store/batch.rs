//! A write transaction that holds any number of whole conversations.
//!
//! [`WriteBatch::begin`] takes the database's write lock up front (`BEGIN IMMEDIATE`), so
//! concurrent writers queue instead of failing midway. Each conversation is written inside its
//! own savepoint ([`WriteBatch::conversation`]): a conversation that fails is rolled back alone
//! and the batch goes on. [`WriteBatch::commit`] brings the full-text index up to date and
//! commits; readers then see every conversation of the batch at once, each of them whole. A
//! batch dropped without committing (an error, a crash) leaves the store as it was before it.

use rusqlite::Connection;

use super::{fts, ConversationWriter, StoreError};

pub struct WriteBatch<'c> {
    conn: &'c mut Connection,
    open: bool,
}

impl<'c> WriteBatch<'c> {
    pub fn begin(conn: &'c mut Connection) -> Result<Self, StoreError> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        Ok(WriteBatch { conn, open: true })
    }

    /// The connection, for reads inside the batch.
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

    /// Indexes what the batch added, commits, and opens the next transaction so the batch can
    /// go on.
    pub fn commit(&mut self) -> Result<(), StoreError> {
        self.commit_inner()?;
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        self.open = true;
        Ok(())
    }

    /// Indexes, commits and ends the batch.
    pub fn finish(mut self) -> Result<(), StoreError> {
        self.commit_inner()
    }

    fn commit_inner(&mut self) -> Result<(), StoreError> {
        fts::index_pending(self.conn)?;
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
