//! Which requests the server admits at all, before any route or token is looked at: the
//! defences against web pages the user happens to visit.
//!
//! Invariant: a request is answered only when its `Host` names this server as it listens
//! (`localhost`, a loopback address, the address it is bound to — any address of the machine
//! when bound to all of them —, the machine's own name when it listens beyond loopback, and the
//! names given with `--allow-host`), so that a page whose name was rebound to this machine's
//! address (DNS rebinding) reads and writes nothing. A request that may change something (any
//! method but GET, HEAD and OPTIONS) is admitted only when a browser would have sent it from
//! this server's own pages or from the `--cors-origin` it was given: it carries
//! `Content-Type: application/json` (which no page can send to another origin without a
//! preflight, and this server approves no preflight but the `--cors-origin`'s), its `Origin`,
//! if any, is this server's own or the `--cors-origin`, and its `Sec-Fetch-Site`, if any, says
//! `same-origin` or `none` (or the `--cors-origin` sent it). The one write without a JSON body
//! is the web UI's `POST …/auth/cookie`, which carries the token in `Authorization` (a
//! header that needs a preflight as well) and changes nothing on disk.
//!
//! gptme-server 0.35.1 requires its token on every request and checks `Host` only when that
//! is turned off; its writes read JSON only from a JSON request (`get_json` refuses a
//! `text/plain` body), but its body-less `POST …/fork` is taken whatever the type.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, Shared};

/// The names and addresses requests may give as their `Host`.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// The address the server listens on.
    bound: IpAddr,
    /// Names accepted besides `localhost` (lowercase, without a trailing dot).
    names: Vec<String>,
}

impl Hosts {
    /// The hosts of a server bound to `bound`, with `extra` names (from `--allow-host`).
    /// Bound beyond loopback, the machine's own name is accepted too.
    pub fn new(bound: IpAddr, extra: &[String]) -> Hosts {
        let mut names: Vec<String> = extra.iter().map(|h| normalise(h)).filter(|h| !h.is_empty()).collect();
        if !bound.is_loopback() {
            names.push(normalise(&crate::store::sources::hostname()));
        }
        Hosts { bound, names }
    }

    /// Whether a `Host` header's value (a name or address, with or without a port) is one of
    /// this server's.
    pub fn admits(&self, host: &str) -> bool {
        let name = hostname_of(host);
        if let Ok(ip) = name.parse::<IpAddr>() {
            return ip.is_loopback() || ip == self.bound || self.bound.is_unspecified();
        }
        name == "localhost" || self.names.contains(&name)
    }
}

/// A host name as compared: lowercase, without the trailing dot of an absolute name.
fn normalise(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// The name or address of a `Host` value, without its port or an IPv6 address's brackets.
fn hostname_of(host: &str) -> String {
    let host = host.trim();
    if host.parse::<IpAddr>().is_ok() {
        return normalise(host); // an IPv6 address without brackets (and so without a port)
    }
    let bare = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => host.rsplit_once(':').map_or(host, |(name, port)| if port.bytes().all(|b| b.is_ascii_digit()) { name } else { host }),
    };
    normalise(bare)
}

/// Whether `method` may change something (every method but the three that only read).
fn writes(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The request's `Host`: the header, else the authority of an absolute-form target.
fn host_of(req: &Request) -> Option<String> {
    let header = req.headers().get(header::HOST).map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned());
    header.or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()))
}

fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned())
}

/// Why a request that may write was not sent by this server's pages (or the `--cors-origin`'s).
fn foreign_write(req: &Request, host: Option<&str>, cors_origin: Option<&str>) -> Option<(StatusCode, String)> {
    let headers = req.headers();
    let origin = text(headers, header::ORIGIN);
    let from_cors = |o: &str| cors_origin.is_some_and(|c| c.eq_ignore_ascii_case(o));
    if let Some(o) = &origin {
        // Behind a proxy that keeps the `Host`, the page's origin may be https.
        let own = host.is_some_and(|h| ["http", "https"].iter().any(|scheme| o.eq_ignore_ascii_case(&format!("{scheme}://{h}"))));
        if !own && !from_cors(o) {
            return Some((StatusCode::FORBIDDEN, format!("a write from the page of another origin ({o}) is refused: only this server's own pages may write")));
        }
    }
    if let Some(site) = text(headers, header::HeaderName::from_static("sec-fetch-site")) {
        let own = site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none");
        if !own && !origin.as_deref().is_some_and(from_cors) {
            return Some((StatusCode::FORBIDDEN, format!("a write sent by a page of another site (Sec-Fetch-Site: {site}) is refused")));
        }
    }
    // The web UI's cookie call has no body; it needs the token (in `Authorization`, which
    // needs a preflight) and writes nothing but the cookie.
    let cookie_call = req.uri().path() == "/api/v2/auth/cookie";
    let json = text(headers, header::CONTENT_TYPE).and_then(|t| t.split(';').next().map(|m| m.trim().eq_ignore_ascii_case("application/json"))).unwrap_or(false);
    if !json && !cookie_call {
        let given = text(headers, header::CONTENT_TYPE).unwrap_or_else(|| "none".into());
        return Some((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("a write must be sent as Content-Type: application/json (this one's is {given}), which another site's page cannot send"),
        ));
    }
    None
}

/// The middleware: refuses (403, 415) what [`Hosts`] and the rules above do not admit.
pub async fn admit(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let host = host_of(&req);
    if let Some(h) = &host {
        if !state.hosts.admits(h) {
            let name = hostname_of(h);
            tracing::warn!(host = %h, "refused a request naming another host");
            return ApiError(
                StatusCode::FORBIDDEN,
                format!(
                    "Host '{h}' is not one this server answers to (a page whose name points at this machine could otherwise read and write the history); if it is yours, start serve with --allow-host {name}"
                ),
            )
            .into_response();
        }
    }
    if writes(req.method()) {
        if let Some((status, why)) = foreign_write(&req, host.as_deref(), state.config.cors_origin.as_deref()) {
            tracing::warn!(method = %req.method(), path = %req.uri().path(), "{why}");
            return ApiError(status, why).into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_and_addresses() {
        let loopback = Hosts::new("127.0.0.1".parse().unwrap(), &["Proxy.Example.".into()]);
        for ok in ["127.0.0.1:5700", "localhost", "LOCALHOST.:80", "[::1]:5700", "::1", "127.0.0.2", "proxy.example:443"] {
            assert!(loopback.admits(ok), "{ok}");
        }
        for bad in ["rebind.evil.example", "rebind.evil.example:5700", "10.0.0.1", "[fe80::1]:5700", "localhost.evil.example", "", "127.0.0.1.evil.example"] {
            assert!(!loopback.admits(bad), "{bad}");
        }
        let any = Hosts::new("0.0.0.0".parse().unwrap(), &[]);
        assert!(any.admits("10.0.0.1:5700") && any.admits("[fe80::1]") && !any.admits("rebind.evil.example"));
        let one = Hosts::new("10.0.0.1".parse().unwrap(), &[]);
        assert!(one.admits("10.0.0.1") && !one.admits("10.0.0.2") && one.admits(&crate::store::sources::hostname()));
    }
}
