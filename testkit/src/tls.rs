//! TLS: certificates made at test time with the `openssl` command-line
//! tool ([`Certs`]: a CA, a server certificate it signs for `localhost` and
//! `127.0.0.1`, and an unrelated CA), and a private `redis-server` that
//! speaks only TLS on TCP ([`TlsServer`]: `--port 0 --tls-port P`). Clients
//! bring their own TLS connector (rustls or native-tls), trusting
//! [`TlsServer::ca`].

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::Process;

/// A directory of test certificates, removed on drop.
pub struct Certs {
    /// The directory: `ca.crt`, `ca.key`, `server.crt`, `server.key`,
    /// `other-ca.crt`, ...
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
            certs.request_with_new_key(
                &format!("{ca}.key"),
                &[
                    "-x509",
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
                ],
            );
        }
        certs.request_with_new_key(
            "server.key",
            &["-out", "server.csr", "-subj", "/CN=localhost"],
        );
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

    /// `openssl req` with `args`, making a new unencrypted EC P-256 key
    /// written to `key`.
    fn request_with_new_key(&self, key: &str, args: &[&str]) {
        let mut all = vec![
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            key,
        ];
        all.extend_from_slice(args);
        self.openssl(&all);
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

    /// The path of `file` in the directory.
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

/// Whether the `redis-server` on `PATH` is built with TLS: started with a
/// `tls-port` and no certificate, it exits at once either way, and says why.
fn has_tls() -> bool {
    let mut child = Command::new("redis-server")
        .args(tls_only_args(crate::free_port()))
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
/// port (and, for the kit's own readiness check, on a Unix socket), killed
/// on drop.
pub struct TlsServer {
    _child: Process,
    /// The TLS port on 127.0.0.1.
    pub port: u16,
    /// The CA that signed the server's certificate (PEM).
    pub ca: Vec<u8>,
}

impl TlsServer {
    /// Start one with `certs` (no client certificates required) and wait
    /// until it answers (at most 10 s). `None`, with a loud "skipped" line,
    /// when the `redis-server` on `PATH` is built without TLS (as the Redis
    /// 6.2 of the server matrix is); unless `REDIS_TLS_REQUIRED` is set (CI's
    /// TLS step), which makes that a failure.
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
        let port = crate::free_port();
        // Ours alone: if it answers on this socket, it runs, and so it bound
        // the TLS port (a server that cannot bind a port exits at start).
        let socket = certs.path(&format!("redis-{port}.sock"));
        let path = |f: &str| certs.path(f).to_string_lossy().into_owned();
        let mut args = tls_only_args(port);
        args.extend(["--unixsocket".into(), socket.to_string_lossy().into_owned()]);
        args.extend(["--tls-cert-file".into(), path("server.crt")]);
        args.extend(["--tls-key-file".into(), path("server.key")]);
        args.extend(["--tls-ca-cert-file".into(), path("ca.crt")]);
        args.extend(["--tls-auth-clients".into(), "no".into()]);
        let mut child = Process::spawn("redis-server", &args)
            .unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if child.has_exited() {
                return None; // port taken (or no TLS in this redis-server)
            }
            if answers(&socket) {
                return Some(TlsServer {
                    _child: child,
                    port,
                    ca: certs.pem("ca.crt"),
                });
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
}

/// Whether a server answers `PING` on the Unix socket at `path`.
fn answers(path: &std::path::Path) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(path) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 64];
    s.write_all(b"PING\r\n").is_ok()
        && matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

/// The kit's usual arguments, with no plain TCP port and TLS on `port`.
fn tls_only_args(port: u16) -> Vec<String> {
    let mut args = crate::server::base_args(0);
    args.extend(["--tls-port".to_string(), port.to_string()]);
    args
}
