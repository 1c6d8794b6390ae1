//! TLS test tools: the kit's certificates and TLS-only server
//! ([`redisson_lock_testkit::tls`]), and fred TLS connectors that trust a
//! given CA through rustls or native-tls, per this crate's TLS features.

use std::time::Duration;

use fred::prelude::*;
use fred::types::config::TlsConnector;
use redisson_lock::Config;

pub use redisson_lock_testkit::tls::{Certs, TlsServer};

/// Which TLS library a connector uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    #[cfg(feature = "tls-rustls")]
    Rustls,
    #[cfg(feature = "tls-native-tls")]
    NativeTls,
}

impl Backend {
    /// Every backend this build has.
    pub fn all() -> Vec<Backend> {
        vec![
            #[cfg(feature = "tls-rustls")]
            Backend::Rustls,
            #[cfg(feature = "tls-native-tls")]
            Backend::NativeTls,
        ]
    }

    /// A connector trusting only the CA in `ca_pem`: the README's recipe.
    pub fn connector(self, ca_pem: &[u8]) -> TlsConnector {
        match self {
            #[cfg(feature = "tls-rustls")]
            Backend::Rustls => {
                use fred::rustls::{self, pki_types::pem::PemObject, pki_types::CertificateDer};
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(ca_pem) {
                    roots.add(cert.expect("a PEM certificate")).expect("a CA");
                }
                let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .expect("TLS versions")
                    .with_root_certificates(roots)
                    .with_no_client_auth()
                    .into()
            }
            #[cfg(feature = "tls-native-tls")]
            Backend::NativeTls => {
                use fred::native_tls;
                let ca = native_tls::Certificate::from_pem(ca_pem).expect("a PEM certificate");
                native_tls::TlsConnector::builder()
                    .add_root_certificate(ca)
                    .disable_built_in_roots(true)
                    .build()
                    .expect("a native-tls connector")
                    .into()
            }
        }
    }
}

/// What the tests do with a [`TlsServer`] through this build's TLS backends.
#[allow(async_fn_in_trait)]
pub trait TlsServerExt {
    /// A client config for `url` that trusts this server's CA through `backend`.
    fn config(&self, url: &str, backend: Backend) -> Config;
    /// A plain fred client over TLS (the first backend), to look at Redis.
    async fn raw(&self) -> fred::clients::Client;
}

impl TlsServerExt for TlsServer {
    /// A client config for `url` that trusts this server's CA through `backend`.
    fn config(&self, url: &str, backend: Backend) -> Config {
        let mut config = Config::from_url(url).expect("a rediss URL parses");
        config.redis.tls = Some(backend.connector(&self.ca).into());
        config
    }

    /// A plain fred client over TLS (the first backend), to look at Redis.
    async fn raw(&self) -> fred::clients::Client {
        let url = format!("redis://127.0.0.1:{}", self.port);
        let mut config = fred::types::config::Config::from_url(&url).expect("a URL");
        config.tls = Some(Backend::all()[0].connector(&self.ca).into());
        let client = fred::types::Builder::from_config(config)
            .with_connection_config(|c| c.connection_timeout = Duration::from_secs(5))
            .build()
            .expect("a fred client");
        tokio::time::timeout(Duration::from_secs(5), client.init())
            .await
            .expect("raw TLS client connects within 5 s")
            .expect("raw TLS client connects");
        client
    }
}
