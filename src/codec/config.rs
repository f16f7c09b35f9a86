//! `config.toml`: a conversation's `[chat]` settings.
//!
//! The file itself is kept byte for byte as an opaque file; this module only reads the fields
//! that listing needs. A file that does not parse is reported and yields no fields, as gptme
//! falls back to defaults for it.

/// The `[chat]` fields sessiondb indexes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatConfig {
    /// Display name; gptme falls back to the chat id when absent.
    pub name: Option<String>,
    pub model: Option<String>,
    pub workspace: Option<String>,
}

/// Reads the `[chat]` table, or says why the text is not valid TOML.
pub fn parse_chat_config(text: &str) -> Result<ChatConfig, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.message().to_owned())?;
    let chat = table.get("chat").and_then(toml::Value::as_table);
    let field = |key: &str| chat.and_then(|c| c.get(key)).and_then(toml::Value::as_str).map(str::to_owned);
    Ok(ChatConfig { name: field("name").filter(|n| !n.is_empty()), model: field("model"), workspace: field("workspace") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_chat_table() {
        let c = parse_chat_config("[chat]\nname = \"My chat\"\nmodel = \"m\"\n\n[env]\nA = \"b\"\n").unwrap();
        assert_eq!(c.name.as_deref(), Some("My chat"));
        assert_eq!(c.model.as_deref(), Some("m"));
        assert_eq!(parse_chat_config("").unwrap(), ChatConfig::default());
        assert!(parse_chat_config("[chat\n").is_err());
    }
}
