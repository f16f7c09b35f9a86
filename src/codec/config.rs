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

/// A TOML basic string as tomlkit writes one: quotes, backslashes and control characters
/// escaped, everything else literal.
pub fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether a line is a table header, and if so whether it is `[chat]`.
fn header(line: &str) -> Option<bool> {
    let t = line.trim_start();
    if !t.starts_with('[') {
        return None;
    }
    let inner = t.trim_start_matches('[');
    let name = inner.split(']').next().unwrap_or("").trim();
    Some(!t.starts_with("[[") && (name == "chat" || name == "\"chat\""))
}

/// Where a value starting at the beginning of `s` ends (a string literal or a bare scalar).
fn value_end(s: &str) -> usize {
    let b = s.as_bytes();
    match b.first() {
        Some(b'"') => {
            let mut i = 1;
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'"' => return i + 1,
                    _ => i += 1,
                }
            }
            b.len()
        }
        Some(b'\'') => s[1..].find('\'').map_or(b.len(), |i| i + 2),
        _ => s.find(|c: char| c == '#' || c.is_whitespace()).unwrap_or(s.len()),
    }
}

/// Sets `[chat] name` in a config.toml text as gptme's `rename_conversation` (tomlkit) does:
/// an existing value is replaced in place (indentation, spacing and a trailing comment kept),
/// else the key is added after the last item of `[chat]`, else a `[chat]` table is appended.
/// Everything else is left byte for byte. Refuses a text that is not valid TOML.
pub fn set_chat_name(text: &str, name: &str) -> Result<String, String> {
    text.parse::<toml::Table>().map_err(|e| e.message().to_owned())?;
    let value = toml_string(name);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let start = lines.iter().position(|l| header(l) == Some(true));
    let Some(start) = start else {
        let mut out = text.to_owned();
        if !out.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push('\n');
        }
        out.push_str(&format!("[chat]\nname = {value}\n"));
        return Ok(out);
    };
    let end = lines[start + 1..].iter().position(|l| header(l).is_some()).map_or(lines.len(), |i| start + 1 + i);
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    for i in start + 1..end {
        let line = lines[i];
        let trimmed = line.trim_start();
        let key_len = if trimmed.starts_with("name") {
            4
        } else if trimmed.starts_with("\"name\"") {
            6
        } else {
            continue;
        };
        let after_key = &trimmed[key_len..];
        if !after_key.trim_start().starts_with('=') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        let eq = indent + key_len + (after_key.len() - after_key.trim_start().len()) + 1;
        let after_eq = &line[eq..];
        let spaces = after_eq.len() - after_eq.trim_start().len();
        let value_start = eq + spaces;
        let old_end = value_start + value_end(&line[value_start..]);
        out[i] = format!("{}{}{}", &line[..value_start], value, &line[old_end..]);
        return Ok(out.concat());
    }
    let last_item = (start + 1..end).rev().find(|&i| {
        let t = lines[i].trim();
        !t.is_empty() && !t.starts_with('#')
    });
    let at = last_item.map_or(start, |i| i);
    if !out[at].ends_with('\n') {
        out[at].push('\n');
    }
    out.insert(at + 1, format!("name = {value}\n"));
    Ok(out.concat())
}

#[cfg(test)]
mod tests {
    #[test]
    fn renames_like_tomlkit() {
        let name = "New \"n\" é\t";
        let cases = [
            ("", "[chat]\nname = \"New \\\"n\\\" é\\t\"\n"),
            ("[chat]\nname = \"old\"\n", "[chat]\nname = \"New \\\"n\\\" é\\t\"\n"),
            ("[chat]\nmodel = \"m\"\n\n[env]\nA = \"1\"\n", "[chat]\nmodel = \"m\"\nname = \"New \\\"n\\\" é\\t\"\n\n[env]\nA = \"1\"\n"),
            ("[env]\nA = \"1\"\n", "[env]\nA = \"1\"\n\n[chat]\nname = \"New \\\"n\\\" é\\t\"\n"),
            ("# comment\n[chat]\nname = 'old' # c\nmodel = \"x\"\n", "# comment\n[chat]\nname = \"New \\\"n\\\" é\\t\" # c\nmodel = \"x\"\n"),
            ("[chat]\n  name   =   \"old\"\nworkspace = \"/x\"\n", "[chat]\n  name   =   \"New \\\"n\\\" é\\t\"\nworkspace = \"/x\"\n"),
            ("a = 1\n", "a = 1\n\n[chat]\nname = \"New \\\"n\\\" é\\t\"\n"),
        ];
        for (before, after) in cases {
            assert_eq!(super::set_chat_name(before, name).unwrap(), after, "{before:?}");
        }
        assert!(super::set_chat_name("[chat\n", "x").is_err());
    }

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
