//! TLS to a PostgreSQL server, with libpq's `sslmode` and `sslrootcert` meanings.
//!
//! | `sslmode` | encrypted | the server's certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers it | checked as for `require` |
//! | `require` | always | not checked, unless `sslrootcert` is given: then as `verify-ca` |
//! | `verify-ca` | always | signed by a root of `sslrootcert` |
//! | `verify-full` | always | signed so, and naming the host |
//!
//! `sslrootcert` is a PEM file of roots, or `system` (the machine's roots, and `verify-full`
//! unless a weaker mode is given); without it, `verify-ca` and `verify-full` read
//! `~/.postgresql/root.crt` as libpq does. The PostgreSQL client library knows `disable`,
//! `prefer` and `require` only: the URL it is given has `verify-*` as `require` and no
//! `sslrootcert`, and the checking is this module's.
//!
//! Invariant: a certificate is accepted unchecked only where libpq would (`prefer`, `require`
//! without roots); the handshake's signatures are always checked.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// How the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Not at all (libpq's `prefer` and `require` without roots).
    Nothing,
    /// Signed by one of the roots.
    Chain,
    /// Signed so, and naming the host.
    ChainAndName,
}

/// The URL the PostgreSQL client library is given, and the TLS connector for it (`None` with
/// `sslmode=disable`).
pub fn split(url: &str) -> Result<(String, Option<tokio_postgres_rustls::MakeRustlsConnect>), String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (url, ""),
    };
    let (mut mode, mut root) = (None::<String>, None::<String>);
    let mut kept: Vec<String> = Vec::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some(("sslmode", value)) => mode = Some(percent_decoded(value)?),
            Some(("sslrootcert", value)) => root = Some(percent_decoded(value)?),
            _ => kept.push(part.to_owned()),
        }
    }
    let system = root.as_deref() == Some("system");
    let mode = mode.unwrap_or_else(|| if system { "verify-full".into() } else { "prefer".into() });
    let (library_mode, check) = match mode.as_str() {
        "disable" => ("disable", None),
        "allow" | "prefer" => ("prefer", Some(if root.is_some() { Check::Chain } else { Check::Nothing })),
        "require" => ("require", Some(if root.is_some() { Check::Chain } else { Check::Nothing })),
        "verify-ca" => ("require", Some(Check::Chain)),
        "verify-full" => ("require", Some(Check::ChainAndName)),
        other => return Err(format!("sslmode={other} is not one of disable, allow, prefer, require, verify-ca, verify-full")),
    };
    kept.push(format!("sslmode={library_mode}"));
    let url = format!("{base}?{}", kept.join("&"));
    let Some(check) = check else { return Ok((url, None)) };
    let verifier: Arc<dyn ServerCertVerifier> = match check {
        Check::Nothing => Arc::new(Unchecked(provider())),
        Check::Chain | Check::ChainAndName => {
            let roots = roots(root.as_deref())?;
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider()).build().map_err(|e| format!("the roots cannot be used: {e}"))?;
            Arc::new(Checked { webpki, name: check == Check::ChainAndName })
        }
    };
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok((url, Some(tokio_postgres_rustls::MakeRustlsConnect::new(config))))
}

/// rustls with *ring*, which builds with a C compiler alone. (Its deprecation is for lacking
/// post-quantum key exchange, which PostgreSQL servers do not offer.)
#[allow(deprecated)]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The value of parameter `key` in `url`'s query (`?key=value&…`), its `%XX` escapes decoded;
/// `None` when the URL does not give it. (For the parameters the client library reads but
/// cannot say whether they were given: [`super::server::Manager`].)
pub fn query_value(url: &str, key: &str) -> Result<Option<String>, String> {
    let query = url.split_once('?').map_or("", |(_, query)| query);
    query.split('&').filter_map(|part| part.split_once('=')).find(|(k, _)| *k == key).map(|(_, value)| percent_decoded(value)).transpose()
}

/// `value` with its `%XX` escapes decoded.
fn percent_decoded(value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| format!("{value:?} has a bad %-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{value:?} is not UTF-8 once decoded"))
}

/// The roots certificates are checked against: `sslrootcert`'s file, the system's, or libpq's
/// default file.
fn roots(root: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    if root == Some("system") {
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = store.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err("sslrootcert=system: this machine has no root certificates".into());
        }
        return Ok(store);
    }
    let path = match root {
        Some(path) => std::path::PathBuf::from(path),
        None => std::env::var_os("HOME")
            .map(|home| std::path::Path::new(&home).join(".postgresql/root.crt"))
            .ok_or("sslmode verify-ca and verify-full need sslrootcert=FILE (a PEM file of the server's roots), or sslrootcert=system")?,
    };
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&path).and_then(|certs| certs.collect::<Result<_, _>>()).map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
    let (added, _) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("sslrootcert {}: no certificate in it", path.display()));
    }
    Ok(store)
}

/// Accepts the server's certificate unchecked; checks the handshake's signatures.
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Checks the chain against the roots, and the host's name when `name`.
#[derive(Debug)]
struct Checked {
    webpki: Arc<WebPkiServerVerifier>,
    name: bool,
}

impl ServerCertVerifier for Checked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) if !self.name => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_gets_modes_it_knows_and_no_roots() {
        let (url, tls) = split("postgres://u@h/db?sslmode=disable&connect_timeout=5").unwrap();
        assert_eq!(url, "postgres://u@h/db?connect_timeout=5&sslmode=disable");
        assert!(tls.is_none());
        assert_eq!(split("postgres://u@h/db").unwrap().0, "postgres://u@h/db?sslmode=prefer");
        assert_eq!(split("postgres://u@h/db?sslmode=require").unwrap().0, "postgres://u@h/db?sslmode=require");
        let err = split("postgres://u@h/db?sslmode=verify-full&sslrootcert=/no/such%20file.pem").err().unwrap();
        assert!(err.contains("sslrootcert /no/such file.pem"), "{err}");
        assert!(split("postgres://u@h/db?sslmode=sometimes").err().unwrap().contains("sslmode=sometimes is not one of"));
    }
}
