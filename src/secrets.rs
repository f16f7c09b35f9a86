//! Credentials in text: the formats people paste into a conversation and tools print (cloud
//! provider keys, GitHub and GitLab tokens, OpenAI, Anthropic and other API keys, private key
//! blocks, JWTs, passwords in URLs, and `NAME=value` assignments of a secret-sounding name to a
//! high-entropy value), after the rule families of gitleaks and GitHub's secret scanning.
//!
//! Invariant: [`scan`] is a pure function of the text: every [`Finding`] is a byte range of it
//! (on character boundaries) holding the secret itself, never its label or its quotes, and
//! findings do not overlap (where two rules match the same bytes, the more specific one, first in
//! [`RULES`], is kept). [`preview`] never shows more of a secret than its format's public prefix.
//! Nothing here reads or writes anything else.

use std::ops::Range;
use std::sync::OnceLock;

use regex::Regex;

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
fn compiled() -> &'static [(Regex, &'static Rule)] {
    static COMPILED: OnceLock<Vec<(Regex, &'static Rule)>> = OnceLock::new();
    COMPILED.get_or_init(|| RULES.iter().map(|rule| (Regex::new(&rule.pattern.replace(r"\b", r"(?-u:\b)")).expect("every rule compiles"), rule)).collect())
}

/// Every credential in `text`, in order (see the module's doc).
pub fn scan(text: &str) -> Vec<Finding> {
    let mut found: Vec<Finding> = Vec::new();
    for (regex, rule) in compiled() {
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

/// A finding as it may be shown: its format's public prefix (`ghp_`, `AKIA`, `sk-ant-api03-`),
/// never more, then `…` and how long the secret is.
pub fn preview(text: &str, finding: &Finding) -> String {
    let secret = &text[finding.range.clone()];
    let prefix = RULES.iter().find(|r| r.kind == finding.kind).map_or(0, |r| r.prefix);
    // Never more than half of it, cut on a character's boundary.
    let cut = (0..=prefix.min(secret.len() / 2)).rev().find(|&i| secret.is_char_boundary(i)).unwrap_or(0);
    let shown = &secret[..cut];
    format!("{shown}… ({} characters)", secret.chars().count())
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
}
