//! TLS test tools: certificates made at test time with the `openssl`
//! command-line tool (a CA, a server certificate it signs for `localhost`
//! and `127.0.0.1`, and an unrelated CA), a private `redis-server` that
//! speaks only TLS (`--port 0 --tls-port P`), and fred TLS connectors that
//! trust a given CA through rustls or native-tls.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fred::prelude::*;
use fred::types::config::TlsConnector;
use redisson_lock::Config;

/// A directory of test certificates, removed on drop.
pub struct Certs {
    pub dir: PathBuf,
}

impl Certs {
    /// A CA, a server certificate signed by it (SAN `localhost`,
    /// `127.0.0.1`), and another CA that signed nothing here. EC P-256 keys:
    /// quick to make.
    pub fn generate() -> Certs {
        let dir = std::env::temp_dir().join(format!("tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("create the certificate directory");
        let certs = Certs { dir };
        for ca in ["ca", "other-ca"] {
            certs.openssl(&[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.crt"),
                "-days",
                "2",
                "-subj",
                &format!("/CN=redisson-lock test {ca}"),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]);
        }
        certs.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ]);
        std::fs::write(
            certs.dir.join("server.ext"),
            "basicConstraints=critical,CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth\n\
             subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .expect("write server.ext");
        certs.openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ]);
        certs
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run openssl ({e}): install it (e.g. `apt-get install -y openssl`)")
            });
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The PEM text of `file` (e.g. `ca.crt`).
    pub fn pem(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).expect("read a certificate")
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

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

/// Whether the `redis-server` on `PATH` is built with TLS: started with a
/// `tls-port` and no certificate, it exits at once either way, and says why.
fn has_tls() -> bool {
    let mut child = Command::new("redis-server")
        .args(["--port", "0", "--tls-port", &super::free_port().to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            let mut out = String::new();
            if let Some(mut stdout) = child.stdout.take() {
                let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
            }
            if let Some(mut stderr) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut stderr, &mut out);
            }
            // Without TLS: Redis 6 refuses the directive ("Bad directive"),
            // Redis 7+ and Valkey have no TLS connection type. With TLS, the
            // probe exits too, for want of a certificate.
            return !(out.contains("Bad directive")
                || out.contains("connection type tls")
                || out.contains("TLS support"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Still running after it read its configuration: TLS is there.
    let _ = child.kill();
    let _ = child.wait();
    true
}

/// A private `redis-server` listening only with TLS on a free loopback
/// port, killed on drop.
pub struct TlsServer {
    child: Child,
    pub port: u16,
    /// The CA that signed the server's certificate.
    pub ca: Vec<u8>,
}

impl TlsServer {
    /// Start one with `certs` (no client certificates required) and wait
    /// until it answers over TLS with our token (at most 10 s). `None`, with
    /// a loud "skipped" line, when the `redis-server` on `PATH` is built
    /// without TLS (as the Redis 6.2 of the server matrix is); unless
    /// `REDIS_TLS_REQUIRED` is set (CI's TLS step), which makes that a failure.
    pub async fn start(certs: &Certs) -> Option<TlsServer> {
        if !has_tls() {
            assert!(
                std::env::var_os("REDIS_TLS_REQUIRED").is_none(),
                "REDIS_TLS_REQUIRED is set, but the redis-server on PATH has no TLS"
            );
            println!("skipped: the redis-server on PATH is built without TLS");
            return None;
        }
        for _ in 0..10 {
            if let Some(server) = TlsServer::try_start(certs).await {
                return Some(server);
            }
        }
        panic!("could not start a TLS redis-server on a free port");
    }

    async fn try_start(certs: &Certs) -> Option<TlsServer> {
        let port = super::free_port();
        let token = format!("harness-{}.rdb", uuid::Uuid::new_v4().simple());
        let path = |f: &str| certs.path(f).to_string_lossy().into_owned();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dbfilename", &token])
            .args(["--tls-cert-file", &path("server.crt")])
            .args(["--tls-key-file", &path("server.key")])
            .args(["--tls-ca-cert-file", &path("ca.crt")])
            .args(["--tls-auth-clients", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
        let mut server = TlsServer {
            child,
            port,
            ca: certs.pem("ca.crt"),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = server.child.try_wait() {
                return None; // port taken (or no TLS in this redis-server)
            }
            if let Some(raw) = server.try_raw(Duration::from_millis(500)).await {
                let name: Vec<String> = raw
                    .custom(fred::cmd!("CONFIG"), vec!["GET", "dbfilename"])
                    .await
                    .unwrap_or_default();
                let _ = raw.quit().await;
                if name.iter().any(|n| n == &token) {
                    return Some(server);
                }
                return None; // another server on this port
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// `rediss://[auth@]127.0.0.1:P`.
    pub fn url(&self, auth: Option<&str>) -> String {
        match auth {
            Some(auth) => format!("rediss://{auth}@127.0.0.1:{}", self.port),
            None => format!("rediss://127.0.0.1:{}", self.port),
        }
    }

    /// A client config for `url` that trusts this server's CA through `backend`.
    pub fn config(&self, url: &str, backend: Backend) -> Config {
        let mut config = Config::from_url(url).expect("a rediss URL parses");
        config.redis.tls = Some(backend.connector(&self.ca).into());
        config
    }

    /// A plain fred client over TLS (the first backend), to look at Redis.
    pub async fn raw(&self) -> fred::clients::Client {
        self.try_raw(Duration::from_secs(5))
            .await
            .expect("raw TLS client connects")
    }

    async fn try_raw(&self, timeout: Duration) -> Option<fred::clients::Client> {
        let mut config =
            fred::types::config::Config::from_url(&format!("redis://127.0.0.1:{}", self.port))
                .ok()?;
        config.tls = Some(Backend::all()[0].connector(&self.ca).into());
        let client = fred::types::Builder::from_config(config)
            .with_connection_config(|c| c.connection_timeout = timeout)
            .build()
            .ok()?;
        match tokio::time::timeout(timeout, client.init()).await {
            Ok(Ok(_)) => Some(client),
            _ => {
                let _ = tokio::time::timeout(Duration::from_millis(100), client.quit()).await;
                None
            }
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
