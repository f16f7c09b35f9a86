//! How each shell is told about sessiondb and how its answers are worded: the registration
//! script (`sessiondb completions SHELL`, `COMPLETE=SHELL sessiondb`) and the candidates
//! printed at each Tab.
//!
//! Invariants: every registration completes the command *name* `sessiondb` and asks the
//! `sessiondb` found on `PATH` (a path registered instead is never what a person types, so
//! nothing completed). Whatever a candidate holds (a chat id may hold `$(…)`, backticks, `;`,
//! spaces, quotes or control characters: gptme allows them), what the shell inserts is that
//! text as one literal word, never code: bash inserts replies as they are, so sessiondb quotes
//! them ([`bash_word`]) and the registration reads them without globbing or splitting; zsh's
//! `compadd` and fish quote what they insert themselves. And a word the person has typed
//! quoted (`evil-\$\(t`) is matched unquoted ([`unquoted`]), so completing goes on from there.

use std::ffi::OsString;

use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Shells, Zsh};

/// The command that is completed, and that the shell asks for candidates.
pub const NAME: &str = "sessiondb";

/// The shells sessiondb completes in.
pub fn all() -> Shells<'static> {
    Shells(&[&Quoting(Bash), &Quoting(Elvish), &Quoting(Fish), &Quoting(Powershell), &Quoting(Zsh)])
}

/// A shell of clap_complete's, registered for [`NAME`], whose typed words are unquoted before
/// they are matched, and whose bash replies are quoted.
struct Quoting<S>(S);

impl<S: EnvCompleter> EnvCompleter for Quoting<S> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn is(&self, name: &str) -> bool {
        self.0.is(name)
    }

    fn write_registration(&self, var: &str, name: &str, _bin: &str, _completer: &str, buf: &mut dyn std::io::Write) -> std::io::Result<()> {
        if self.0.name() == "bash" {
            return buf.write_all(bash_registration(var).as_bytes());
        }
        self.0.write_registration(var, name, NAME, NAME, buf)
    }

    fn write_complete(
        &self,
        cmd: &mut clap::Command,
        args: Vec<OsString>,
        current_dir: Option<&std::path::Path>,
        buf: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        // Bash and zsh pass the words as typed; fish passes them unquoted but for the last.
        let last = args.len().saturating_sub(1);
        let fish = self.0.name() == "fish";
        let args: Vec<OsString> = args.into_iter().enumerate().map(|(i, a)| if fish && i != last { a } else { unquoted(&a.to_string_lossy()).into() }).collect();
        if self.0.name() != "bash" {
            return self.0.write_complete(cmd, args, current_dir, buf);
        }
        // What the registration below passes: the index of the word under the cursor, and
        // the separator of the replies.
        let index = std::env::var("_CLAP_COMPLETE_INDEX").ok().and_then(|i| i.parse().ok()).unwrap_or_default();
        let separator = std::env::var("_CLAP_IFS").unwrap_or_else(|_| "\n".into());
        let candidates = clap_complete::engine::complete(cmd, args, index, current_dir)?;
        let words: Vec<String> = candidates.iter().map(|c| bash_word(&c.get_value().to_string_lossy())).collect();
        buf.write_all(words.join(&separator).as_bytes())
    }
}

/// The bash registration: clap_complete's, except that the replies, quoted already
/// ([`bash_word`]), are read as they are: split at vertical tabs only, never globbed (clap's
/// `COMPREPLY=( $(…) )` would expand a `*` in a reply against the current directory).
fn bash_registration(var: &str) -> String {
    r#"
_sessiondb_complete() {
    local IFS=$'\013'
    local _CLAP_COMPLETE_INDEX=${COMP_CWORD}
    local _CLAP_COMPLETE_COMP_TYPE=${COMP_TYPE}
    if compopt +o nospace 2> /dev/null; then
        local _CLAP_COMPLETE_SPACE=false
    else
        local _CLAP_COMPLETE_SPACE=true
    fi
    local words=("${COMP_WORDS[@]}")
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        words[COMP_CWORD]="$2"
    fi
    local reply
    if ! reply=$( \
        _CLAP_IFS="$IFS" \
        _CLAP_COMPLETE_INDEX="$_CLAP_COMPLETE_INDEX" \
        _CLAP_COMPLETE_COMP_TYPE="$_CLAP_COMPLETE_COMP_TYPE" \
        _CLAP_COMPLETE_SPACE="$_CLAP_COMPLETE_SPACE" \
        VAR="bash" \
        NAME -- "${words[@]}" \
    ); then
        unset COMPREPLY
        return
    fi
    COMPREPLY=()
    [[ -n $reply ]] && read -r -d '' -a COMPREPLY < <(printf '%s' "$reply")
    if [[ $_CLAP_COMPLETE_SPACE == false ]] && [[ "${COMPREPLY-}" =~ [=/:]$ ]]; then
        compopt -o nospace
    fi
}
if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -o nospace -o bashdefault -o nosort -F _sessiondb_complete NAME
else
    complete -o nospace -o bashdefault -F _sessiondb_complete NAME
fi
"#
    .replace("VAR", var)
    .replace("NAME", NAME)
}

/// `value` as one bash word that stands for exactly `value`: letters, digits and `-_./,:@+%=`
/// as they are, any other ASCII character after a backslash, control characters as `$'\xHH'`
/// (a backslash before a newline would join lines), other characters as they are (bash gives
/// none of them a meaning).
pub fn bash_word(value: &str) -> String {
    if value.is_empty() {
        return "''".into();
    }
    let mut word = String::with_capacity(value.len());
    for c in value.chars() {
        if c.is_ascii_alphanumeric() || "-_./,:@+%=".contains(c) {
            word.push(c);
        } else if c.is_control() {
            word.push_str(&if c.is_ascii() { format!("$'\\x{:02x}'", c as u32) } else { format!("$'\\u{:04x}'", c as u32) });
        } else if c.is_ascii() {
            word.push('\\');
            word.push(c);
        } else {
            word.push(c);
        }
    }
    word
}

/// A word as typed, its quoting taken away, leniently (the word is unfinished: an open quote
/// runs to its end): `\c`, `'…'`, `"…"` (where `\` quotes `$`, `` ` ``, `"`, `\`) and bash's
/// `$'…'` (with `\xHH`, `\uHHHH`, `\n`, `\t`, `\e`, `\\`, `\'`).
pub fn unquoted(typed: &str) -> String {
    let mut out = String::with_capacity(typed.len());
    let mut chars = typed.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            '\'' => out.extend(chars.by_ref().take_while(|&c| c != '\'')),
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' if chars.peek().is_some_and(|n| "$`\"\\".contains(*n)) => out.extend(chars.next()),
                        c => out.push(c),
                    }
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                while let Some(c) = chars.next() {
                    match (c, chars.peek().copied()) {
                        ('\'', _) => break,
                        ('\\', Some(k @ ('x' | 'u'))) => {
                            chars.next();
                            let digits: String = std::iter::from_fn(|| chars.next_if(char::is_ascii_hexdigit)).take(if k == 'x' { 2 } else { 4 }).collect();
                            out.extend(u32::from_str_radix(&digits, 16).ok().and_then(char::from_u32));
                        }
                        ('\\', Some(e)) => {
                            chars.next();
                            out.push(match e {
                                'n' => '\n',
                                't' => '\t',
                                'r' => '\r',
                                'e' | 'E' => '\x1b',
                                other => other,
                            });
                        }
                        (c, _) => out.push(c),
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bash_word_unquotes_to_its_value() {
        for value in
            ["plain-id", "evil-$(touch pwned)`touch pwned2`;touch pwned3", "a b\tc\nd", "it's \"q\" \\ *?[x] ~/#!", "中文 😀", "\u{1b}[2J\u{9b}", "", "x=y:z"]
        {
            let word = bash_word(value);
            assert_eq!(unquoted(&word), value, "{word}");
            assert!(!word.contains(['\n', '\t', '\u{1b}', '\u{b}']), "{word:?}");
        }
        assert_eq!(bash_word("evil-$(x)"), "evil-\\$\\(x\\)");
    }

    #[test]
    fn typed_words_are_unquoted_leniently() {
        assert_eq!(unquoted(r"evil-\$\(t"), "evil-$(t");
        assert_eq!(unquoted("'a b"), "a b");
        assert_eq!(unquoted(r#""a \$b \x"#), r"a $b \x");
        assert_eq!(unquoted(r"$'\x1b'x"), "\u{1b}x");
    }
}
