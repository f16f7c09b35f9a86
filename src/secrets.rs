//! Credentials in text: the formats people paste into a conversation and tools print (cloud
//! provider keys, GitHub and GitLab tokens, OpenAI, Anthropic and other API keys, private key
//! blocks, JWTs, passwords in URLs, and `NAME=value` assignments of a secret-sounding name to a
//! high-entropy value), after the rule families of gitleaks and GitHub's secret scanning.
//!
//! Invariant: [`scan`] is a pure function of the text: every [`Finding`] is a byte range of it
//! (on character boundaries) holding the secret itself, never its label or its quotes, and
//! findings do not overlap (where two rules match the same bytes, the more specific one, first in
//! [`RULES`], is kept). [`preview`] never shows more of a secret than its format's public
//! prefix, [`mask`] nothing of it, and a masked text has the lines of the original (a secret of three lines
//! leaves three). [`unmask`] puts back only secrets of the original, only where their masks
//! still stand. Nothing here reads or writes anything else.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

use regex::{Regex, RegexSet, RegexSetBuilder};

/// What kind of credential a finding is (its rule's name).
pub type Kind = &'static str;

/// One credential found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: Kind,
    /// The bytes of the secret in the text scanned.
    pub range: Range<usize>,
}

/// A rule: its kind, its pattern (the secret is capture group 1, or the whole match), how many
/// characters of the secret are its format's public prefix (shown in a preview), and what a
/// match must also be.
struct Rule {
    kind: Kind,
    pattern: &'static str,
    prefix: usize,
    check: Check,
}

/// What a match must also be, beyond its pattern.
#[derive(Clone, Copy)]
enum Check {
    /// Nothing: the format says it is a credential.
    Format,
    /// Not a placeholder ([`is_placeholder`]): a password in a URL may be short and plain.
    NotPlaceholder,
    /// Random-looking ([`looks_random`]): for names that only suggest a secret.
    Random,
}

/// The rules, most specific first.
const RULES: &[Rule] = &[
    Rule {
        kind: "private key",
        pattern: r"-----BEGIN[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----[\s\S]{16,}?-----END[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----",
        prefix: 0,
        check: Check::Format,
    },
    Rule { kind: "AWS access key id", pattern: r"\b((?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16})\b", prefix: 4, check: Check::Format },
    Rule {
        kind: "AWS secret access key",
        pattern: r#"(?i)\baws_?(?:secret_?access_?key|secret_?key)\b["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        prefix: 0,
        check: Check::Random,
    },
    Rule { kind: "GitHub token", pattern: r"\b(gh[pousr]_[A-Za-z0-9]{36,255})\b", prefix: 4, check: Check::Format },
    Rule { kind: "GitHub token", pattern: r"\b(github_pat_[A-Za-z0-9_]{82})\b", prefix: 11, check: Check::Format },
    Rule { kind: "GitLab token", pattern: r"\b(gl(?:pat|dt|ptt|rt|cbt|oas|imt|ft|agent)-[A-Za-z0-9_-]{20,64})\b", prefix: 6, check: Check::Format },
    Rule { kind: "Anthropic API key", pattern: r"\b(sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{80,120})", prefix: 14, check: Check::Format },
    Rule {
        kind: "OpenAI API key",
        pattern: r"\b(sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{16,200}T3BlbkFJ[A-Za-z0-9_-]{16,200})",
        prefix: 8,
        check: Check::Format,
    },
    Rule { kind: "OpenAI API key", pattern: r"\b(sk-[A-Za-z0-9]{48})\b", prefix: 3, check: Check::Format },
    Rule { kind: "Slack token", pattern: r"\b(xox[abposr]-[0-9A-Za-z-]{10,250})\b", prefix: 5, check: Check::Format },
    Rule { kind: "Slack webhook", pattern: r"(https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{30,})", prefix: 23, check: Check::Format },
    Rule { kind: "Stripe key", pattern: r"\b((?:sk|rk)_(?:live|test)_[0-9A-Za-z]{24,99})\b", prefix: 8, check: Check::Format },
    Rule { kind: "Google API key", pattern: r"\b(AIza[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|$)", prefix: 4, check: Check::Format },
    Rule { kind: "Hugging Face token", pattern: r"\b(hf_[A-Za-z0-9]{34,40})\b", prefix: 3, check: Check::Format },
    Rule { kind: "npm token", pattern: r"\b(npm_[A-Za-z0-9]{36})\b", prefix: 4, check: Check::Format },
    Rule { kind: "PyPI token", pattern: r"\b(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,})", prefix: 5, check: Check::Format },
    Rule { kind: "SendGrid key", pattern: r"\b(SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})\b", prefix: 3, check: Check::Format },
    Rule { kind: "JSON web token", pattern: r"\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,})", prefix: 3, check: Check::Format },
    Rule {
        kind: "password in a URL",
        pattern: r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@\x22'<>]{1,64}:([^\s:/@\x22'<>]{6,128})@[A-Za-z0-9.-]+",
        prefix: 0,
        check: Check::NotPlaceholder,
    },
    Rule {
        kind: "secret assignment",
        pattern: r#"(?i)\b[A-Z0-9_.-]{0,40}(?:secret|token|api_?key|apikey|password|passwd|access_?key|private_?key|client_?secret|auth)[A-Z0-9_]{0,20}\b["']?\s*(?::|=|:=|=>)\s*["']?([A-Za-z0-9/+_.=~!@#$%^&*-]{16,200})"#,
        prefix: 0,
        check: Check::Random,
    },
];

/// The rules compiled, once. Word boundaries are ASCII ones (every rule's secret is ASCII):
/// Unicode's keep the regex crate from its fast engines and were nine tenths of a scan.
/// The rules compiled: each alone, and all as one set that tells in one pass over a text
/// which of them match anywhere in it (most texts hold no secret, and one pass costs about what
/// one rule's does).
struct Compiled {
    set: RegexSet,
    each: Vec<(Regex, &'static Rule)>,
}

fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(|| {
        // `\b` as ASCII: Unicode word boundaries cost the faster engines.
        let patterns: Vec<String> = RULES.iter().map(|rule| rule.pattern.replace(r"\b", r"(?-u:\b)")).collect();
        Compiled {
            // Room for the set's whole lazy DFA: with the default its states were built again
            // and again, which cost more than the search.
            set: RegexSetBuilder::new(&patterns).dfa_size_limit(64 << 20).build().expect("every rule compiles"),
            each: patterns.iter().zip(RULES).map(|(p, rule)| (Regex::new(p).expect("every rule compiles"), rule)).collect(),
        }
    })
}

/// Every credential in `text`, in order (see the module's doc).
pub fn scan(text: &str) -> Vec<Finding> {
    let compiled = compiled();
    let mut found: Vec<Finding> = Vec::new();
    for i in compiled.set.matches(text).iter() {
        let (regex, rule) = &compiled.each[i];
        for caps in regex.captures_iter(text) {
            let Some(secret) = caps.get(1).or_else(|| caps.get(0)) else { continue };
            let kept = match rule.check {
                Check::Format => true,
                Check::NotPlaceholder => !is_placeholder(secret.as_str()),
                Check::Random => looks_random(secret.as_str()),
            };
            if !kept {
                continue;
            }
            let range = secret.range();
            if found.iter().all(|f| f.range.end <= range.start || range.end <= f.range.start) {
                found.push(Finding { kind: rule.kind, range });
            }
        }
    }
    found.sort_by_key(|f| f.range.start);
    found
}

/// Whether `value` looks like a generated secret rather than a word, a placeholder or a
/// reference: at least 16 characters, letters and digits both, no run of one character
/// making a quarter of it, not a template (`${…}`, `<…>`, `{{…}}`, `xxxx`, `****`), and a
/// Shannon entropy of at least 3.5 bits a character.
pub fn looks_random(value: &str) -> bool {
    if value.len() < 16 || is_placeholder(value) {
        return false;
    }
    if !value.bytes().any(|b| b.is_ascii_digit()) || !value.bytes().any(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    let mut counts = [0usize; 256];
    for b in value.bytes() {
        counts[b as usize] += 1;
    }
    if counts.iter().any(|&c| c * 4 > value.len()) {
        return false;
    }
    let n = value.len() as f64;
    let entropy: f64 = counts.iter().filter(|&&c| c > 0).map(|&c| c as f64 / n).map(|p| -p * p.log2()).sum();
    entropy >= 3.5
}

/// Whether `value` stands for a secret rather than being one: a template (`${…}`, `<…>`,
/// `{{…}}`, `$VAR`), a mask (`xxxx`, `****`), or a word people write in its place.
pub fn is_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let marks =
        ["${", "{{", "<", "$", "%s", "xxxx", "****", "....", "your", "example", "changeme", "placeholder", "redacted", "password", "passwd", "secret", "token"];
    marks.iter().any(|m| lower.contains(m))
}

/// The public prefix of a finding's secret (`ghp_`, `AKIA`, `sk-ant-api03-`): what its format
/// says of every such secret, never more than half of it, cut on a character's boundary.
fn public_prefix(secret: &str, kind: Kind) -> &str {
    let prefix = RULES.iter().find(|r| r.kind == kind).map_or(0, |r| r.prefix);
    let cut = (0..=prefix.min(secret.len() / 2)).rev().find(|&i| secret.is_char_boundary(i)).unwrap_or(0);
    &secret[..cut]
}

/// A finding as it may be shown: its format's public prefix (`ghp_`, `AKIA`, `sk-ant-api03-`),
/// never more, then `…` and how long the secret is.
pub fn preview(text: &str, finding: &Finding) -> String {
    let secret = &text[finding.range.clone()];
    format!("{}… ({} characters)", public_prefix(secret, finding.kind), secret.chars().count())
}

/// What stands in a masked text for a secret: `‹masked KIND›`, then as many line breaks as the
/// secret had, so that lines keep their numbers. Not its public prefix: in Markdown (the web
/// UI's), a prefix's last `_` before the mark (`ghp_‹`) would open an emphasis to the end of the
/// paragraph; the kind says what the prefix would.
fn mask_of(secret: &str, kind: Kind) -> String {
    let breaks = "\n".repeat(secret.matches('\n').count());
    format!("‹masked {kind}›{breaks}")
}

/// What [`mask`] hides in `text`: every finding, and every other place the text repeats a
/// secret of eight bytes or more that a finding holds (a key found as `API_KEY=…` and pasted
/// bare further on, where no rule would know it), in order, never overlapping.
fn to_mask(text: &str) -> Vec<Finding> {
    let mut found = scan(text);
    let mut values: Vec<(&str, Kind)> = found.iter().map(|f| (&text[f.range.clone()], f.kind)).filter(|(v, _)| v.len() >= 8).collect();
    values.sort_unstable();
    values.dedup_by_key(|(v, _)| *v);
    let mut more = Vec::new();
    for (value, kind) in values {
        for (at, _) in text.match_indices(value) {
            let range = at..at + value.len();
            if found.iter().chain(&more).all(|f: &Finding| f.range.end <= range.start || range.end <= f.range.start) {
                more.push(Finding { kind, range });
            }
        }
    }
    if !more.is_empty() {
        found.extend(more);
        found.sort_by_key(|f| f.range.start);
    }
    found
}

/// `text` with every secret in it masked ([`mask_of`], [`to_mask`]); borrowed when it holds
/// none.
pub fn mask(text: &str) -> Cow<'_, str> {
    let found = to_mask(text);
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in &found {
        out.push_str(&text[at..f.range.start]);
        out.push_str(&mask_of(&text[f.range.clone()], f.kind));
        at = f.range.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// How the secrets this module finds begin, where their format says: what a text cut short
/// ([`mask_preview`]) may end in before enough of a secret is left to match its rule.
const OPENINGS: &[&str] = &[
    "-----BEGIN",
    "AKIA",
    "ASIA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "gldt-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "xox",
    "hooks.slack.com/",
    "AIza",
    "hf_",
    "npm_",
    "pypi-",
    "SG.",
    "eyJ",
];

/// A preview (a message's first characters, cut and ended with `...`, as gptme's listing shows
/// the last message) masked: every whole secret in it, and a last word cut short that begins
/// like a secret ([`OPENINGS`], then a digit or eight characters more), holds a URL's password, or looks random ([`looks_random`]),
/// or a private key's block cut before its end, since what is left of a cut secret no longer
/// matches its rule.
pub fn mask_preview(preview: &str) -> Cow<'_, str> {
    let masked = mask(preview);
    let Some(body) = masked.strip_suffix("...") else { return masked };
    // A private key's block cut before its end line: from its first line on.
    if let Some(begin) = body.rfind("-----BEGIN").filter(|&b| body[b..].contains("PRIVATE KEY") && !body[b..].contains("-----END")) {
        return Cow::Owned(format!("{}‹masked, cut›...", &body[..begin]));
    }
    let start = body.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let last = &body[start..];
    let url_password = last.find("://").is_some_and(|i| last[i + 3..].contains(':'));
    let word = last.trim_start_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-');
    let word = word.rsplit(['=', ':', '"', '\'', '(']).next().unwrap_or(word);
    // After an opening, what a word (`ASIAN`) would not have: a digit, or eight characters more.
    let opens = |o: &&str| word.strip_prefix(*o).is_some_and(|rest| rest.len() >= 8 || rest.bytes().any(|b| b.is_ascii_digit()));
    let suspect = url_password || OPENINGS.iter().any(opens) || last.contains("hooks.slack.com/") || looks_random(word);
    if !suspect || last.contains("‹masked ") {
        return masked;
    }
    Cow::Owned(format!("{}‹masked, cut›...", &body[..start]))
}

/// A stored JSON line with the secrets of the message it holds masked: each secret of
/// `content` (the line's decoded `content`) replaced where the line spells it (as gptme's
/// writer escapes it, `\n` and `\uXXXX`, or as this program's does), then what the line
/// still shows scanned as text. Borrowed when nothing was masked.
pub fn mask_json_line<'a>(line: &'a [u8], content: &str) -> Cow<'a, [u8]> {
    let Ok(raw) = std::str::from_utf8(line) else { return Cow::Borrowed(line) };
    let mut out = Cow::Borrowed(raw);
    for f in to_mask(content) {
        let secret = &content[f.range.clone()];
        let masked = json_body(&mask_of(secret, f.kind), false);
        for spelled in [json_body(secret, true), json_body(secret, false)] {
            if let Some(replaced) = replace_unescaped(&out, &spelled, &masked) {
                out = Cow::Owned(replaced);
            }
        }
    }
    let out = match mask(&out) {
        Cow::Borrowed(_) => out,
        Cow::Owned(more) => Cow::Owned(more),
    };
    match out {
        Cow::Borrowed(_) => Cow::Borrowed(line),
        Cow::Owned(text) => Cow::Owned(text.into_bytes()),
    }
}

/// `json` with every `spelled` that begins a character of a JSON string (not the letter of an
/// escape: `n` after a `\`) replaced by `with`; `None` when there is none.
fn replace_unescaped(json: &str, spelled: &str, with: &str) -> Option<String> {
    let mut out = String::new();
    let mut at = 0;
    for (i, _) in json.match_indices(spelled) {
        let backslashes = json[..i].bytes().rev().take_while(|&b| b == b'\\').count();
        if i < at || backslashes % 2 == 1 {
            continue;
        }
        out.push_str(&json[at..i]);
        out.push_str(with);
        at = i + spelled.len();
    }
    if at == 0 {
        return None;
    }
    out.push_str(&json[at..]);
    Some(out)
}

/// `text` as the inside of a JSON string: with `ascii`, every character past ASCII as
/// `\uXXXX` (Python's `json.dumps`, which gptme writes with), else as itself.
fn json_body(text: &str, ascii: bool) -> String {
    let quoted = serde_json::to_string(text).expect("a string serialises");
    let body = &quoted[1..quoted.len() - 1];
    if !ascii || body.is_ascii() {
        return body.to_owned();
    }
    let mut out = String::with_capacity(body.len() + 16);
    for c in body.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// `edited` (a masked text as someone changed it) with the secrets of `original` put back where
/// their masks still stand, in order: what a masked surface that writes (the web UI's edit)
/// must store, so that showing a message masked and saving it never loses its secrets. A mask
/// removed or changed leaves its secret out, as the editor wanted.
pub fn unmask<'a>(edited: &'a str, original: &str) -> Cow<'a, str> {
    let found = to_mask(original);
    if found.is_empty() {
        return Cow::Borrowed(edited);
    }
    let secrets: Vec<(&str, String)> = found.iter().map(|f| (&original[f.range.clone()], mask_of(&original[f.range.clone()], f.kind))).collect();
    // Every mask standing in the edited text, in order (the longer where two overlap).
    let mut standing: Vec<(usize, &str)> = Vec::new();
    for (_, masked) in &secrets {
        standing.extend(edited.match_indices(masked.as_str()));
    }
    standing.sort_by_key(|&(at, m)| (at, std::cmp::Reverse(m.len())));
    standing.dedup_by(|later, kept| later.0 < kept.0 + kept.1.len());
    // The secrets matched to the masks in order: the longest common subsequence of the two.
    let (n, m) = (secrets.len(), standing.len());
    let mut longest = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            longest[i][j] = if secrets[i].1 == standing[j].1 { longest[i + 1][j + 1] + 1 } else { longest[i + 1][j].max(longest[i][j + 1]) };
        }
    }
    if longest[0][0] == 0 {
        return Cow::Borrowed(edited);
    }
    let mut out = String::with_capacity(edited.len());
    let (mut i, mut j, mut at) = (0, 0, 0);
    while i < n && j < m {
        if secrets[i].1 == standing[j].1 && longest[i][j] == longest[i + 1][j + 1] + 1 {
            out.push_str(&edited[at..standing[j].0]);
            out.push_str(secrets[i].0);
            at = standing[j].0 + standing[j].1.len();
            (i, j) = (i + 1, j + 1);
        } else if longest[i + 1][j] >= longest[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out.push_str(&edited[at..]);
    Cow::Owned(out)
}

/// Whether a surface shows secrets as they are or masked ([`mask`]): masked unless the user
/// asked (`--show-secrets`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shown {
    #[default]
    Masked,
    AsTheyAre,
}

impl Shown {
    /// `--show-secrets` given or not.
    pub fn from_flag(show: bool) -> Shown {
        if show {
            Shown::AsTheyAre
        } else {
            Shown::Masked
        }
    }

    /// `text` as this surface shows it.
    pub fn text(self, text: &str) -> Cow<'_, str> {
        match self {
            Shown::Masked => mask(text),
            Shown::AsTheyAre => Cow::Borrowed(text),
        }
    }

    /// `text` made what this surface shows, in place.
    pub fn apply(self, text: &mut String) {
        if let Cow::Owned(masked) = self.text(text) {
            *text = masked;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(&'static str, &str)> {
        scan(text).into_iter().map(|f| (f.kind, &text[f.range])).collect()
    }

    #[test]
    fn each_family_is_found_and_only_the_secret_is_taken() {
        let aws = "AKIAQWERTYUIOPASDF12";
        assert_eq!(kinds(&format!("export AWS_ACCESS_KEY_ID={aws}")), [("AWS access key id", aws)]);
        let gh = format!("ghp_{}", "aB3".repeat(12));
        assert_eq!(kinds(&format!("token: {gh}.")), [("GitHub token", gh.as_str())]);
        let url = "postgres://admin:Zq8rT2vLp9Xw4Kc7@db.example.com:5432/app";
        assert_eq!(kinds(url), [("password in a URL", "Zq8rT2vLp9Xw4Kc7")]);
        let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MxxxQ\n-----END RSA PRIVATE KEY-----";
        assert_eq!(kinds(&format!("key:\n{key}\n")), [("private key", key)]);
        let assigned = "STRIPE_WEBHOOK_SECRET=\"whsec_9f8KzQ2mLx7Rt4Vb1Nc6\"";
        assert_eq!(kinds(assigned), [("secret assignment", "whsec_9f8KzQ2mLx7Rt4Vb1Nc6")]);
    }

    #[test]
    fn placeholders_hashes_and_words_are_not_secrets() {
        for text in [
            "API_KEY=your-api-key-here",
            "password: ${DB_PASSWORD}",
            "token = <insert token>",
            "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "id 123e4567-e89b-12d3-a456-426614174000",
            "postgres://user:password@localhost/db",
            "the secret = something_quite_long_but_wordy",
        ] {
            assert!(scan(text).is_empty(), "{text}: {:?}", kinds(text));
        }
    }

    #[test]
    fn a_preview_shows_the_prefix_only() {
        let text = format!("ghp_{}", "aB3".repeat(12));
        let found = &scan(&text)[0];
        assert_eq!(preview(&text, found), "ghp_… (40 characters)");
        let url = "https://bob:Zq8rT2vLp9Xw4Kc7@example.com";
        assert_eq!(preview(url, &scan(url)[0]), "… (16 characters)");
    }

    #[test]
    fn findings_never_overlap() {
        let text = format!("GITHUB_TOKEN=ghp_{} and again ghp_{}", "Xy7".repeat(12), "Xy7".repeat(12));
        let found = scan(&text);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|f| f.kind == "GitHub token"));
    }

    #[test]
    fn a_mask_keeps_the_prefix_and_the_lines_and_unmask_puts_back_what_still_stands() {
        let gh = format!("ghp_{}", "aB3".repeat(12));
        let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MxxxQ\n-----END RSA PRIVATE KEY-----";
        let text = format!("token {gh} and\n{key}\nend {gh}");
        let masked = mask(&text);
        assert_eq!(masked, "token ‹masked GitHub token› and\n‹masked private key›\n\n\nend ‹masked GitHub token›");
        assert_eq!(masked.lines().count(), text.lines().count());
        assert!(matches!(mask("nothing here"), Cow::Borrowed(_)));
        // Saved unchanged: everything back. Edited around the masks: the secrets stay.
        assert_eq!(unmask(&masked, &text), text);
        let edited = masked.replace("token ", "my token ").replace("end ", "fin ");
        assert_eq!(unmask(&edited, &text), text.replace("token ", "my token ").replace("end ", "fin "));
        // A mask removed: its secret is gone, the others keep their places.
        let cut = masked.replacen("‹masked GitHub token›", "(gone)", 1);
        assert_eq!(unmask(&cut, &text), format!("token (gone) and\n{key}\nend {gh}"));
        assert_eq!(Shown::AsTheyAre.text(&text), text);
    }

    #[test]
    fn a_json_line_is_masked_as_each_writer_spells_it() {
        let gh = format!("ghp_{}", "aB3".repeat(12));
        let content = format!("é {gh}\nKEY");
        for line in
            [format!(r#"{{"role": "user", "content": "\u00e9 {gh}\nKEY", "timestamp": "x"}}"#), serde_json::json!({"role": "user", "content": content}).to_string()]
        {
            let masked = String::from_utf8(mask_json_line(line.as_bytes(), &content).into_owned()).unwrap();
            assert!(!masked.contains(&gh) && masked.contains("‹masked GitHub token›"), "{masked}");
            assert!(serde_json::from_str::<serde_json::Value>(&masked).is_ok());
        }
        let plain = br#"{"role": "user", "content": "hello"}"#;
        assert!(matches!(mask_json_line(plain, "hello"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_preview_cut_inside_a_secret_is_masked_too() {
        let gh = format!("ghp_{}", "aB3".repeat(12));
        for cut in [&gh[..20], "postgres://app:Zq8rT2v", "sk-ant-api03-Zq8r", "-----BEGIN OPENSSH PRIVATE KEY----- b3Blbn", "key=Zq8rT2vLp9Xw4Kc7Qm"] {
            let preview = format!("here it is {cut}...");
            assert_eq!(mask_preview(&preview), "here it is ‹masked, cut›...", "{preview}");
        }
        for kept in ["the answer is in the docs...", "short and whole", "we ran it in production...", "then the task-runner...", "see MSG.txt and ASIAN..."] {
            assert_eq!(mask_preview(kept), kept);
        }
        assert_eq!(mask_preview(&format!("{gh} then words...")), "‹masked GitHub token› then words...");
    }

    #[test]
    fn a_secret_found_once_is_masked_wherever_the_text_repeats_it() {
        let value = "Zq8rT2vLp9Xw4Kc7Qm";
        let text = format!("export SERVICE_API_KEY={value}\ncurl -H 'X-Key: {value}' https://api");
        let masked = mask(&text);
        assert!(!masked.contains(value), "{masked}");
        assert_eq!(masked.matches("‹masked secret assignment›").count(), 2, "{masked}");
        assert_eq!(unmask(&masked, &text), text);
    }
}
