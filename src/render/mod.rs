//! Readable documents of a conversation: Markdown (gptme's `chats export` layout, the stored
//! text as it is) and a self-contained HTML page.
//!
//! Invariant of the HTML page: nothing stored can run or fetch. Every stored field (name,
//! role, model, content, code language) is escaped; HTML inside Markdown is shown as text;
//! links keep their `href` only for `http:`, `https:` and `mailto:` (any other destination,
//! `javascript:` or `data:` say, is shown as text); images are shown only when embedded
//! (`data:image/png|jpeg|gif|webp`), a remote one becomes a link to it and is never loaded;
//! and a Content-Security-Policy forbids every script, request and frame the page might still
//! contain, allowing only its own inline styles and embedded images.

pub mod terminal;

use std::io::Write;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use crate::codec::timestamp;
use crate::model::{Message, Role};

/// The readable documents a conversation can be written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// gptme's `chats export` layout: [`markdown`].
    Markdown,
    /// A self-contained page: [`html`].
    Html,
}

/// The conversation `name` as a document in `format`, written message by message as
/// `messages` yields them.
pub fn document(format: Format, name: &str, messages: impl Iterator<Item = Message>, out: &mut dyn Write) -> std::io::Result<()> {
    match format {
        Format::Markdown => markdown(name, messages, out),
        Format::Html => html(name, messages, out),
    }
}

/// A role as people read it, as gptme shows it: its name capitalised (`User`, `Tool`).
pub fn role_label(role: &Role) -> String {
    match role {
        Role::User => "User".into(),
        Role::Assistant => "Assistant".into(),
        Role::System => "System".into(),
        Role::Other(s) => {
            let mut c = s.chars();
            c.next().map_or(String::new(), |f| f.to_uppercase().collect::<String>() + c.as_str())
        }
    }
}

/// `strftime("%Y-%m-%d %H:%M:%S")` of a message's timestamp, as gptme's export shows it.
fn shown_time(m: &Message) -> Option<String> {
    let t = timestamp::parse(m.timestamp.as_deref()?)?;
    Some(t.naive.format("%Y-%m-%d %H:%M:%S").to_string())
}

/// gptme's `export_chat_to_markdown`: a `# name` title, then per message (hidden ones left
/// out) a `## Role  (time)` heading, a blank line, the content and a blank line, joined by
/// newlines. Written message by message as `messages` yields them.
pub fn markdown(name: &str, messages: impl Iterator<Item = Message>, out: &mut dyn Write) -> std::io::Result<()> {
    write!(out, "# {name}")?;
    for m in messages.filter(|m| !m.hide) {
        let mut header = format!("## {}", role_label(&m.role));
        if let Some(t) = shown_time(&m) {
            header.push_str(&format!("  ({t})"));
        }
        write!(out, "\n{header}\n\n{}\n", m.content)?;
    }
    Ok(())
}

/// `text` safe anywhere in HTML: in text and in quoted attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A `<div class="code">` for a code block: highlighted with inline styles when the language is
/// known (and the `highlight` feature is on), else the code escaped in a plain `<pre>`.
fn code_block(lang: &str, code: &str) -> String {
    let label = if lang.is_empty() { String::new() } else { format!("<div class=\"lang\">{}</div>", escape(lang)) };
    match highlight::highlighted(lang, code) {
        Some(html) => format!("<div class=\"code\">{label}{html}</div>"),
        None => format!("<div class=\"code\">{label}<pre>{}</pre></div>", escape(code)),
    }
}

/// Code highlighting by syntect (the `highlight` feature).
#[cfg(feature = "highlight")]
mod highlight {
    use std::sync::OnceLock;

    use syntect::highlighting::ThemeSet;
    use syntect::parsing::SyntaxSet;

    struct Highlighter {
        syntaxes: SyntaxSet,
        themes: ThemeSet,
    }

    fn highlighter() -> &'static Highlighter {
        static H: OnceLock<Highlighter> = OnceLock::new();
        H.get_or_init(|| Highlighter { syntaxes: SyntaxSet::load_defaults_newlines(), themes: ThemeSet::load_defaults() })
    }

    /// A highlighted `<pre>` (inline styles), or `None` for an unknown language.
    pub(super) fn highlighted(lang: &str, code: &str) -> Option<String> {
        let h = highlighter();
        // gptme's tool blocks name a tool: highlight them as the language they carry.
        let token = match lang.split_whitespace().next().unwrap_or("") {
            "shell" | "tmux" => "bash",
            "ipython" | "py" => "python",
            other => other,
        };
        let syntax = h.syntaxes.find_syntax_by_token(token).or_else(|| {
            // gptme's tool blocks name a file (`save hello.py`): highlight by its extension.
            lang.split_whitespace().nth(1).and_then(|f| f.rsplit('.').next()).and_then(|ext| h.syntaxes.find_syntax_by_extension(ext))
        })?;
        let theme = &h.themes.themes["InspiredGitHub"];
        syntect::html::highlighted_html_for_string(code, &h.syntaxes, syntax, theme).ok()
    }
}

/// Without the `highlight` feature every code block is plain.
#[cfg(not(feature = "highlight"))]
mod highlight {
    pub(super) fn highlighted(_lang: &str, _code: &str) -> Option<String> {
        None
    }
}

/// Where a link or image destination may lead from the page.
#[derive(Debug, PartialEq)]
enum Destination {
    /// `http:`, `https:` or `mailto:`: a link a reader may follow.
    Web,
    /// An image carried in the page itself (`data:image/png;...` and the like).
    Embedded,
    /// Anything else (`javascript:`, `vbscript:`, `data:text/html`, `file:`, relative paths):
    /// shown as text.
    Neither,
}

fn destination(url: &str) -> Destination {
    let lower = url.to_ascii_lowercase();
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| lower.starts_with(p));
    if starts(&["http://", "https://", "mailto:"]) {
        Destination::Web
    } else if starts(&["data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;"]) {
        Destination::Embedded
    } else {
        Destination::Neither
    }
}

/// How the end of a link or image is written, decided at its start.
enum Close {
    /// As it came.
    Keep,
    /// An image written as a link: it ends as a link.
    AsLink,
    /// The tag was dropped (its content stays as text); the destination follows as text
    /// unless the content already shows it (an autolink).
    Dropped(Option<String>),
}

/// The Markdown events with every link and image held to the page's rule (see the module
/// documentation): a link inside a link, or a remote image inside one, is text.
fn safe_links<'a>(events: impl Iterator<Item = Event<'a>>) -> Vec<Event<'a>> {
    use pulldown_cmark::LinkType;
    let mut out = Vec::new();
    let mut open: Vec<Close> = Vec::new();
    let mut links = 0usize;
    for event in events {
        match event {
            Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
                if destination(&dest_url) == Destination::Web && links == 0 {
                    links += 1;
                    open.push(Close::Keep);
                    out.push(Event::Start(Tag::Link { link_type, dest_url, title, id }));
                } else {
                    let shown = matches!(link_type, LinkType::Autolink | LinkType::Email);
                    open.push(Close::Dropped((!shown).then(|| dest_url.to_string())));
                }
            }
            Event::Start(Tag::Image { link_type, dest_url, title, id }) => match destination(&dest_url) {
                Destination::Embedded => {
                    open.push(Close::Keep);
                    out.push(Event::Start(Tag::Image { link_type, dest_url, title, id }));
                }
                Destination::Web if links == 0 => {
                    links += 1;
                    open.push(Close::AsLink);
                    out.push(Event::Start(Tag::Link { link_type: LinkType::Inline, dest_url, title, id }));
                    out.push(Event::Text("image: ".into()));
                }
                _ => {
                    out.push(Event::Text("image: ".into()));
                    open.push(Close::Dropped(Some(dest_url.to_string())));
                }
            },
            Event::End(end @ (TagEnd::Link | TagEnd::Image)) => match open.pop() {
                Some(Close::Keep) => {
                    links -= usize::from(end == TagEnd::Link);
                    out.push(Event::End(end));
                }
                Some(Close::AsLink) => {
                    links -= 1;
                    out.push(Event::End(TagEnd::Link));
                }
                Some(Close::Dropped(Some(url))) => out.push(Event::Text(format!(" ({url})").into())),
                Some(Close::Dropped(None)) | None => {}
            },
            e => out.push(e),
        }
    }
    out
}

/// Message content (Markdown) as HTML: raw HTML in the content is shown as text, fenced
/// code is highlighted, links and images follow [`safe_links`].
fn content_html(text: &str) -> String {
    let mut out = String::new();
    let mut events = Vec::new();
    let mut in_code: Option<(String, String)> = None;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS) {
        match (&mut in_code, event) {
            (None, Event::Start(Tag::CodeBlock(kind))) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => l.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                in_code = Some((lang, String::new()));
            }
            (Some((_, code)), Event::Text(t)) => code.push_str(&t),
            (Some(_), Event::End(TagEnd::CodeBlock)) => {
                let (lang, code) = in_code.take().expect("in a code block");
                events.push(Event::Html(code_block(&lang, &code).into()));
            }
            (Some(_), _) => {}
            (None, Event::Html(h)) | (None, Event::InlineHtml(h)) => events.push(Event::Text(h)),
            (None, e) => events.push(e),
        }
    }
    pulldown_cmark::html::push_html(&mut out, safe_links(events.into_iter()).into_iter());
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1f2328;background:#fff}
h1{font-size:1.5rem}.msg h1,.msg h2,.msg h3,.msg h4{font-size:1.05rem;margin:.8rem 0 .4rem}.msg{border:1px solid #d0d7de;border-radius:8px;margin:1rem 0;padding:.25rem 1rem}
.msg header{font-size:.85rem;color:#57606a;border-bottom:1px solid #eaeef2;padding:.4rem 0;display:flex;gap:.75rem}
.msg header b{color:#1f2328}.user{background:#f6f8fa}.assistant{background:#fff}.system{background:#fffbea}
.hidden{opacity:.6}.code{margin:.5rem 0}.code .lang{font:.75rem monospace;color:#57606a;padding:.2rem .5rem;background:#eaeef2;border-radius:6px 6px 0 0}
pre{overflow-x:auto;padding:.75rem;border-radius:0 0 6px 6px;margin:0;font-size:.85rem}code{font-size:.9em}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:.2rem .5rem}";

/// The page's Content-Security-Policy: nothing but its own inline styles and embedded images;
/// no script, request, frame, form, plugin or base URL.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";

/// A self-contained HTML page of the conversation. Hidden messages are included, marked (an
/// HTML page can show them faded; gptme's Markdown export leaves them out). Written message by
/// message as `messages` yields them.
pub fn html(name: &str, messages: impl Iterator<Item = Message>, out: &mut dyn Write) -> std::io::Result<()> {
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n<meta name=\"referrer\" content=\"no-referrer\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title><style>{STYLE}</style></head>\n<body><h1>{title}</h1>\n",
        title = escape(name)
    )?;
    for m in messages {
        let m = &m;
        let class = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            _ => "system",
        };
        let hidden = if m.hide { " hidden" } else { "" };
        let time = shown_time(m).map(|t| format!("<time>{}</time>", escape(&t))).unwrap_or_default();
        let model = m.model().map(|x| format!("<span>{}</span>", escape(x))).unwrap_or_default();
        let flags = [(m.pinned, "pinned"), (m.hide, "hidden")].iter().filter(|(f, _)| *f).map(|(_, n)| format!("<span>{n}</span>")).collect::<String>();
        out.write_all(
            format!(
                "<section class=\"msg {class}{hidden}\"><header><b>{}</b>{time}{model}{flags}</header>{}</section>\n",
                escape(&role_label(&m.role)),
                content_html(&m.content)
            )
            .as_bytes(),
        )?;
    }
    out.write_all(b"</body></html>\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_gptme_layout() {
        let mut hidden = Message::new(Role::System, "secret", None);
        hidden.hide = true;
        let ms = vec![Message::new(Role::User, "hi", Some("2026-07-16T10:00:00.5".into())), hidden, Message::new(Role::Assistant, "yo", None)];
        let mut out = Vec::new();
        markdown("c", ms.into_iter(), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "# c\n## User  (2026-07-16 10:00:00)\n\nhi\n\n## Assistant\n\nyo\n");
    }

    #[test]
    fn html_is_self_contained_and_safe() {
        let ms = vec![Message::new(Role::Assistant, "<script>alert(1)</script>\n\n```rust\nfn main() {}\n```\n", None)];
        let mut out = Vec::new();
        html("t <x>", ms.into_iter(), &mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;"));
        assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("src="));
        assert!(page.contains("<title>t &lt;x&gt;</title>"));
        if cfg!(feature = "highlight") {
            assert!(page.contains("style=\""), "code is highlighted with inline styles");
        }
    }

    #[test]
    fn hostile_fields_links_and_images_are_inert() {
        let mut m = Message::new(
            Role::Other("<img src=x onerror=alert(1)>".into()),
            "[a](javascript:alert(1)) [b](VBScript:x) [c](data:text/html,<script>x</script>) [d](https://example.org/?q=\"x') [e](mailto:a@b.c) [f](rel/path)\n\n\
             ![g](http://127.0.0.1:9/x.png) ![h](data:image/png;base64,AAAA) ![i](data:image/svg+xml,<svg/onload=x>) [![j](https://a/j.png)](https://b/)\n\n\
             <script>x</script> <iframe src=\"https://a\"></iframe> <svg onload=x>",
            None,
        );
        m.metadata = Some(crate::codec::json::parse(r#"{"model": "<b onmouseover=x>m</b>"}"#).unwrap().value);
        let mut out = Vec::new();
        html("n'\"<x>", std::iter::once(m), &mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        let body = &page[page.find("<body>").unwrap()..];
        for bad in [
            "<img src=x",
            "<script",
            "<iframe",
            "<svg",
            "<b ",
            "javascript:alert(1)\"",
            "href=\"VBScript",
            "href=\"data:",
            "href=\"rel",
            "<img src=\"http",
            "<img src=\"data:image/svg",
        ] {
            assert!(!body.contains(bad), "{bad} in {body}");
        }
        for good in [
            "<b>&lt;img src=x onerror=alert(1)&gt;</b>",
            "a (javascript:alert(1))",
            "<a href=\"https://example.org/?q=%22x&#x27;\">d</a>",
            "<a href=\"mailto:a@b.c\">e</a>",
            "f (rel/path)",
            "<a href=\"http://127.0.0.1:9/x.png\">image: g</a>",
            "<img src=\"data:image/png;base64,AAAA\" alt=\"h\" />",
            "image: i (data:image/svg+xml,&lt;svg/onload=x&gt;)",
            "<a href=\"https://b/\">image: j (https://a/j.png)</a>",
            "&lt;script&gt;x&lt;/script&gt;",
            "<span>&lt;b onmouseover=x&gt;m&lt;/b&gt;</span>",
        ] {
            assert!(body.contains(good), "{good} not in {body}");
        }
        assert!(page.contains("<title>n&#39;&quot;&lt;x&gt;</title>"));
        assert!(page.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"));
    }
}
