//! `sessiondb secrets [CHAT_ID]`: the credentials the store's conversations hold — in messages
//! of every branch and in attached files — each with where it is, its kind and a preview that
//! shows no more than its format's public prefix ([`sessiondb::secrets`]). Reads only.

use std::collections::HashSet;
use std::io::Read;

use super::term::{self, say};
use super::Failure;
use sessiondb::store::queries::{self, EntryKind};
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct Args {
    /// Only this conversation (a chat id, or SOURCE:CHAT)
    #[arg(value_name = "CHAT_ID")]
    chat_id: Option<String>,
    /// Include test and eval conversations, as --all does for list, search and stats
    #[arg(long = "all")]
    include_test: bool,
    /// Print the findings as JSON
    #[arg(long)]
    json: bool,
}

/// The largest attached file read for credentials; a larger one is read up to this.
const FILE_LIMIT: u64 = 4 << 20;

/// Where a credential is.
enum Place {
    Message { branch: String, index: usize, role: String },
    File { path: String },
}

struct Found {
    conversation: String,
    place: Place,
    kind: &'static str,
    preview: String,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let conn = store.connection()?;
    let chats: Vec<String> = match &args.chat_id {
        Some(chat) => vec![chat.clone()],
        None => {
            let names: HashSet<String> = queries::chat_ids(&conn)?.into_iter().collect();
            queries::list_conversations(&conn, args.include_test, None)?.iter().map(|c| queries::name_among(&names, c)).collect()
        }
    };
    let mut found = Vec::new();
    let (mut messages, mut files) = (0usize, 0usize);
    for chat in &chats {
        // A message several branches share is reported once, in the first branch holding it.
        let mut seen: HashSet<String> = HashSet::new();
        for branch in queries::branch_names(&conn, chat)? {
            for (index, message) in queries::branch_messages(&conn, chat, &branch)?.into_iter().enumerate() {
                if !seen.insert(message.content.clone()) {
                    continue;
                }
                messages += 1;
                for f in sessiondb::secrets::scan(&message.content) {
                    let place = Place::Message { branch: branch.clone(), index, role: message.role.as_str().to_owned() };
                    found.push(Found { conversation: chat.clone(), place, kind: f.kind, preview: sessiondb::secrets::preview(&message.content, &f) });
                }
            }
        }
        let id = queries::conversation_id(&conn, chat)?;
        for entry in queries::entries(&conn, id)? {
            let EntryKind::Blob(sha) = entry.kind else { continue };
            if !sessiondb::layout::is_attachment(&entry.path) {
                continue;
            }
            let mut bytes = Vec::new();
            queries::open_blob(&conn, &sha)?.take(FILE_LIMIT).read_to_end(&mut bytes).map_err(Failure::from)?;
            files += 1;
            let text = String::from_utf8_lossy(&bytes);
            for f in sessiondb::secrets::scan(&text) {
                let place = Place::File { path: entry.path.clone() };
                found.push(Found { conversation: chat.clone(), place, kind: f.kind, preview: sessiondb::secrets::preview(&text, &f) });
            }
        }
    }
    if args.json {
        let rows: Vec<serde_json::Value> = found
            .iter()
            .map(|f| {
                let mut row = serde_json::json!({"id": f.conversation, "kind": f.kind, "preview": f.preview});
                match &f.place {
                    Place::Message { branch, index, role } => {
                        row["branch"] = (*branch).clone().into();
                        row["message"] = (*index).into();
                        row["role"] = (*role).clone().into();
                    }
                    Place::File { path } => row["file"] = (*path).clone().into(),
                }
                row
            })
            .collect();
        super::print_json(&serde_json::json!({"conversations": chats.len(), "messages": messages, "files": files, "found": found.len(), "findings": rows}));
        return Ok(0);
    }
    for f in &found {
        let place = match &f.place {
            Place::Message { branch, index, role } => format!("{branch}, message {index} ({role})"),
            Place::File { path } => path.clone(),
        };
        say!("{}  {}: {} {}", term::visible_line(&f.conversation), term::visible_line(&place), f.kind, term::visible_line(&f.preview));
    }
    say!(
        "{} in {} messages and {} attached files of {}",
        super::plural(found.len() as u64, "credential"),
        super::grouped(messages as u64),
        super::grouped(files as u64),
        super::plural(chats.len() as u64, "conversation")
    );
    Ok(0)
}
