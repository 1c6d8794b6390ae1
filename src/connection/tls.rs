//! Parsing a connection URL into fred's configuration: TLS for real or a
//! typed error (never plaintext for a `rediss` URL), and errors that never
//! repeat a secret of the URL.

use crate::base::error::{Error, Result};

/// Parse `url` into fred's configuration.
///
/// With a TLS feature of this crate, a TLS scheme gets the connector built
/// here (see [`default_connector`]). Without one, fred is asked, and if it
/// has no TLS support either (it then only logs a warning and would connect
/// in plaintext), the URL is refused.
pub(crate) fn parse_url(url: &str) -> Result<fred::types::config::Config> {
    let parsed = url::Url::parse(url)
        // url's errors name what is wrong, never the input.
        .map_err(|e| Error::Config(format!("invalid Redis URL: {e}")))?;
    let secrets = Secrets::of(&parsed);
    let scheme = parsed.scheme();
    if !scheme.starts_with("redis") {
        return Err(Error::Config(
            "expected a redis:// or rediss:// URL (or their -cluster, -sentinel forms)".into(),
        ));
    }
    let tls = scheme.starts_with("rediss");
    let invalid = |e: fred::error::Error| {
        Error::Config(format!("invalid Redis URL: {}", secrets.scrub(e.details())))
    };
    if tls && cfg!(any(feature = "tls-rustls", feature = "tls-native-tls")) {
        // fred's own default connector would pick rustls's process-wide
        // crypto provider, and panic where none can be chosen (both ring and
        // aws-lc-rs compiled in, none installed): parse the URL as plaintext,
        // then add our connector.
        let mut plain = parsed.clone();
        let plain_scheme = format!("redis{}", &scheme["rediss".len()..]);
        plain
            .set_scheme(&plain_scheme)
            .map_err(|()| Error::Config("invalid Redis URL scheme".into()))?;
        #[allow(unused_mut)]
        let mut config = fred::types::config::Config::from_url(plain.as_str()).map_err(invalid)?;
        #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
        {
            config.tls = Some(default_connector()?.into());
        }
        return Ok(config);
    }
    let config = fred::types::config::Config::from_url(url).map_err(invalid)?;
    if tls && !config.uses_tls() {
        return Err(Error::Config(
            "a rediss:// URL needs TLS, and this build has none: enable the crate feature \
             `tls-rustls` (or `tls-native-tls`); refusing to connect in plaintext"
                .into(),
        ));
    }
    Ok(config)
}

/// The secrets a URL carries (its password, a sentinel password), as
/// written and decoded, to scrub them from error messages.
struct Secrets(Vec<String>);

impl Secrets {
    fn of(url: &url::Url) -> Secrets {
        let mut found = Vec::new();
        let mut add = |raw: &str| {
            if !raw.is_empty() {
                found.push(raw.to_owned());
                found.push(percent_decode(raw, false));
                found.push(percent_decode(raw, true));
            }
        };
        if let Some(password) = url.password() {
            add(password);
        }
        for pair in url.query().unwrap_or_default().split('&') {
            if let Some((key, value)) = pair.split_once('=') {
                if percent_decode(key, true).eq_ignore_ascii_case("sentinelPassword") {
                    add(value);
                }
            }
        }
        found.retain(|s| !s.is_empty());
        // Longest first, so a secret containing another is scrubbed whole.
        found.sort_by_key(|s| std::cmp::Reverse(s.len()));
        found.dedup();
        Secrets(found)
    }

    /// `message` with every secret replaced by `<redacted>`.
    fn scrub(&self, message: &str) -> String {
        let mut out = message.to_owned();
        for secret in &self.0 {
            out = out.replace(secret.as_str(), "<redacted>");
        }
        out
    }
}

/// `raw` with its `%XX` escapes decoded (and `+` as a space if `form`), as
/// UTF-8 with invalid sequences replaced.
fn percent_decode(raw: &str, form: bool) -> String {
    let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
    let mut out = Vec::with_capacity(raw.len());
    let mut bytes = raw.as_bytes().iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'%' => {
                let mut ahead = bytes.clone();
                match (hex(ahead.next()), hex(ahead.next())) {
                    (Some(hi), Some(lo)) => {
                        // Two hex digits: at most 0xFF.
                        out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'%'));
                        bytes = ahead;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' if form => out.push(b' '),
            _ => out.push(b),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The connector a TLS URL gets: rustls (feature `tls-rustls`) with the
/// process-wide crypto provider if one was installed, else ring, trusting
/// the system's root certificates (those that load: none at all is not an
/// error here, since the caller may replace the connector; every handshake
/// then fails with [`Error::Tls`]). Otherwise native-tls with the system's
/// roots.
#[cfg(feature = "tls-rustls")]
fn default_connector() -> Result<fred::types::config::TlsConnector> {
    use fred::rustls;
    use std::sync::Arc;

    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let mut roots = rustls::RootCertStore::empty();
    let native = fred::rustls_native_certs::load_native_certs();
    for e in &native.errors {
        tracing::debug!(error = %e, "a system root certificate could not be loaded");
    }
    roots.add_parsable_certificates(native.certs);
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("cannot set up TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config.into())
}

#[cfg(all(feature = "tls-native-tls", not(feature = "tls-rustls")))]
fn default_connector() -> Result<fred::types::config::TlsConnector> {
    fred::types::config::TlsConnector::default_native_tls()
        .map_err(|e| Error::Config(format!("cannot set up TLS: {}", e.details())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_scrubbed_raw_and_decoded() {
        let url = url::Url::parse(
            "redis-sentinel://u:p%40ss@h:26379/0?sentinelServiceName=m&sentinelPassword=s%2Bcret",
        )
        .unwrap();
        let secrets = Secrets::of(&url);
        let shown = secrets.scrub("p%40ss p@ss s%2Bcret s+cret kept");
        assert_eq!(percent_decode("a%4", false), "a%4");
        assert_eq!(percent_decode("%%41+", false), "%A+");
        assert_eq!(percent_decode("%41+", true), "A ");
        assert_eq!(
            shown, "<redacted> <redacted> <redacted> <redacted> kept",
            "{shown}"
        );
    }
}
