//! The crate's error type.

use std::time::Duration;

/// Everything that can go wrong when talking to a lock.
///
/// The variants are stable categories a caller can match on; the text of the
/// underlying Redis or connection error is kept for logs. Both `Display` and
/// `Debug` read as a sentence (`Debug` with the variant's name first), with
/// what to check where there is something to check, so a `main` that
/// returns this crate's [`Result`] prints something a user can act on.
#[derive(Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A lock name was empty (or otherwise unusable as a Redis key).
    #[error("invalid lock name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A duration or count that makes no sense for the call, such as a zero lease.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The configuration cannot be used (bad URL, zero timeout, ...).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Unlock by an owner that does not hold the lock (Redisson's
    /// `IllegalMonitorStateException`). Also what a holder sees after its lock
    /// expired or was force-unlocked behind its back.
    #[error("lock {name:?} is not held by owner {owner}")]
    NotHeld {
        /// Lock name.
        name: String,
        /// The owner field (`<clientId>:<ownerId>`) that tried to act.
        owner: String,
    },
    /// The lock was lost while work ran under it
    /// ([`Lock::run`](crate::Lock::run)): force-unlocked, gone, or no longer
    /// certain to be held; the work was stopped.
    #[error("lock {name:?} was lost while the work ran ({reason}); the work was stopped")]
    Lost {
        /// Lock name.
        name: String,
        /// Why it was lost.
        reason: crate::base::lost::LostReason,
    },
    /// A non-reentrant lock was acquired again by the owner that holds it.
    #[error("lock {name:?} is not reentrant and is already held by this owner")]
    NotReentrant {
        /// Lock name.
        name: String,
    },
    /// The lock's key holds another Redis type than the lock needs.
    #[error("key {key:?} holds a value of the wrong Redis type for this lock (WRONGTYPE)")]
    WrongType {
        /// The offending key.
        key: String,
    },
    /// A command got no reply within the configured timeout.
    #[error(
        "Redis did not answer within {0:?} (a paused, overloaded or unreachable server, or a \
         network stall; Config::timeout sets the wait)"
    )]
    Timeout(Duration),
    /// The connection to Redis failed or was lost (also: a command that
    /// could not be sent because no connection was up).
    #[error(
        "Redis connection error{at}: {0} (is the server up and reachable there, and the URL right?)",
        at = .0.at()
    )]
    Connection(Cause),
    /// Redis is reachable but cannot serve the command right now: it is
    /// loading its data after a restart (`LOADING`), busy with a script
    /// (`BUSY`), or its cluster is failing over (`TRYAGAIN`, `CLUSTERDOWN`,
    /// `MASTERDOWN`, `READONLY`).
    #[error("Redis is temporarily unavailable{at}: {0}", at = .0.at())]
    Unavailable(Cause),
    /// A write was made on the master, but none of its `replicas` confirmed
    /// it within `timeout` ([`Config::replica_sync`](crate::Config::replica_sync)):
    /// a failover now could lose it. Transient: an acquisition that ran is
    /// undone and tried again, an unlock is resent with its latch.
    #[error("no replica of {replicas} confirmed the write within {timeout:?}")]
    NotReplicated {
        /// The master's connected replicas when the write was made.
        replicas: usize,
        /// How long the client waited for them.
        timeout: Duration,
    },
    /// Redis refused the credentials (`WRONGPASS`, `NOAUTH`) or the ACL user
    /// may not run a command or touch a key or channel a lock needs
    /// (`NOPERM`). Not transient: check the user, password and ACL rules.
    #[error(
        "Redis refused access{at}: {0} (check the user name, the password and the ACL rules the \
         locks need: docs/PROTOCOL.md §9.5)",
        at = .0.at()
    )]
    Auth(Cause),
    /// The TLS handshake failed: the server's certificate is not trusted
    /// (wrong or missing CA) or not valid for the host name, the server
    /// does not speak TLS on that port, or the TLS set-up was refused. Not
    /// transient: check the CA given in
    /// [`Config::redis`](crate::Config::redis)`.tls` and the host name.
    #[error(
        "TLS handshake with Redis failed{at}: {0} (check the CA in Config::redis.tls and the \
         server's host name)",
        at = .0.at()
    )]
    Tls(Cause),
    /// Redis answered with an error not covered above.
    #[error("Redis error{at}: {0}", at = .0.at())]
    Redis(Cause),
    /// Redis answered with something this crate does not understand.
    #[error("unexpected reply from Redis: {0}")]
    Protocol(String),
    /// A state this crate's own logic rules out was reached: a bug in this
    /// crate. Please report it, with the text.
    #[error("internal error in redisson-lock (a bug: please report it): {0}")]
    Internal(String),
    /// The blocking client's own tokio runtime could not be started (the
    /// operating system refused its thread or I/O driver): nothing was
    /// connected. Not transient in the retry layer's sense; check the
    /// process's thread and file-descriptor limits.
    #[error("cannot start the blocking client's runtime: {0}")]
    Runtime(String),
    /// The client was shut down ([`Client::shutdown`](crate::Client::shutdown)).
    #[error("the client was shut down")]
    Closed,
    /// A blocking call was made from inside an async runtime, where it would
    /// stall a worker thread. Use the async API there. Tokio's
    /// `spawn_blocking` threads count as inside the runtime too; there, drive
    /// the async API with `Handle::block_on`.
    #[error(
        "blocking lock call made from inside an async runtime, where it would stall a worker \
         thread: use the async API there (from spawn_blocking, drive it with Handle::block_on), \
         or call from a thread of your own"
    )]
    BlockingInAsync,
}

/// The variant's name, then its text: `Connection("Redis connection error at
/// …")`, never the structures underneath (a `main` returning [`Result`]
/// prints this).
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let variant = match self {
            Error::InvalidName { .. } => "InvalidName",
            Error::InvalidArgument(_) => "InvalidArgument",
            Error::Config(_) => "Config",
            Error::NotHeld { .. } => "NotHeld",
            Error::Lost { .. } => "Lost",
            Error::NotReentrant { .. } => "NotReentrant",
            Error::WrongType { .. } => "WrongType",
            Error::Timeout(_) => "Timeout",
            Error::Connection(_) => "Connection",
            Error::Unavailable(_) => "Unavailable",
            Error::NotReplicated { .. } => "NotReplicated",
            Error::Auth(_) => "Auth",
            Error::Tls(_) => "Tls",
            Error::Redis(_) => "Redis",
            Error::Protocol(_) => "Protocol",
            Error::Internal(_) => "Internal",
            Error::Runtime(_) => "Runtime",
            Error::Closed => "Closed",
            Error::BlockingInAsync => "BlockingInAsync",
        };
        f.debug_tuple(variant)
            .field(&format_args!("{self}"))
            .finish()
    }
}

impl Error {
    /// Whether the operation may succeed if simply tried again (a timeout,
    /// a lost connection, or a server that is temporarily unavailable), as
    /// opposed to a definite answer.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Timeout(_)
                | Error::Connection(_)
                | Error::Unavailable(_)
                | Error::NotReplicated { .. }
        )
    }

    /// Translate a fred error, naming `key` when Redis reports WRONGTYPE.
    pub(crate) fn from_redis(err: fred::error::Error, key: &str, timeout: Duration) -> Error {
        use fred::error::ErrorKind;
        let details = err.details();
        if details.contains(NON_REENTRANT) {
            return Error::NotReentrant {
                name: key.to_owned(),
            };
        }
        if details.contains("WRONGTYPE") {
            return Error::WrongType {
                key: key.to_owned(),
            };
        }
        if details.contains(INVALID_ARGUMENT) {
            return Error::InvalidArgument(details.to_owned());
        }
        if details.starts_with("WRONGPASS")
            || details.starts_with("NOAUTH")
            || details.contains("NOPERM")
            // An ACL refusal inside a script (Redis 7: "ERR The user
            // executing the script can't publish to the channel ...").
            || details.contains("The user executing the script can't")
            // ... and Valkey's ("ERR ACL failure in script: No permissions to
            // access a channel ...").
            || details.contains("ACL failure in script")
            || err.kind() == &ErrorKind::Auth
        {
            return Error::Auth(Cause::redis(err));
        }
        if is_tls_failure(&err) {
            let what = if details.contains("InvalidCertificate")
                || details.contains("certificate verify failed")
            {
                "the server's certificate was not accepted (not signed by a trusted CA, \
                 expired, or not for this host name)"
            } else {
                "the handshake was refused"
            };
            return Error::Tls(Cause {
                message: format!("{what}: {err}"),
                source: Some(err),
                server: None,
            });
        }
        if UNAVAILABLE.iter().any(|code| details.starts_with(code)) {
            return Error::Unavailable(Cause::redis(err));
        }
        match err.kind() {
            ErrorKind::Timeout => Error::Timeout(timeout),
            // fred answers "Failed to route command" (kind Unknown or
            // Routing) when no connection is up to write the command to.
            ErrorKind::IO | ErrorKind::Canceled | ErrorKind::Backpressure | ErrorKind::Routing => {
                Error::Connection(Cause::redis(err))
            }
            // ... and "Too many failed write attempts" when the connection
            // a command was written to closed (or redirected it) before it
            // could be answered.
            ErrorKind::Unknown
                if details.contains("Failed to route")
                    || details.contains("Too many failed write attempts") =>
            {
                Error::Connection(Cause::redis(err))
            }
            ErrorKind::Config | ErrorKind::Url => Error::Config(err.to_string()),
            ErrorKind::Parse | ErrorKind::Protocol => Error::Protocol(err.to_string()),
            _ => Error::Redis(Cause::redis(err)),
        }
    }
}

impl Error {
    /// A connection error of this crate's own (no underlying fred error).
    /// An [`Error::Auth`] with `message` (a refusal the client found).
    pub(crate) fn auth(message: impl Into<String>) -> Error {
        Error::Auth(Cause {
            message: message.into(),
            source: None,
            server: None,
        })
    }

    pub(crate) fn connection(message: impl Into<String>) -> Error {
        Error::Connection(Cause {
            message: message.into(),
            source: None,
            server: None,
        })
    }

    /// The same error, naming `server` (`host:port`, or a deployment's
    /// hosts; never credentials) as the one it concerns, unless it already
    /// names one. Errors without a [`Cause`] are returned as they are.
    pub(crate) fn at(mut self, server: &str) -> Error {
        if let Error::Connection(cause)
        | Error::Unavailable(cause)
        | Error::Auth(cause)
        | Error::Tls(cause)
        | Error::Redis(cause) = &mut self
        {
            if cause.server.is_none() && !server.is_empty() {
                cause.server = Some(server.into());
            }
        }
        self
    }

    /// The server this error concerns, as `host:port` (or, where no single
    /// node is known, the deployment's configured hosts), if the error came
    /// from talking to Redis. Never shows credentials.
    pub fn server(&self) -> Option<&str> {
        match self {
            Error::Connection(cause)
            | Error::Unavailable(cause)
            | Error::Auth(cause)
            | Error::Tls(cause)
            | Error::Redis(cause) => cause.server(),
            _ => None,
        }
    }
}

/// What went wrong underneath an [`Error::Connection`],
/// [`Error::Unavailable`], [`Error::Auth`], [`Error::Tls`] or
/// [`Error::Redis`]: a message, which the error's text includes, and the
/// Redis client's error it was made from ([`redis_error`](Self::redis_error)).
///
/// The error's [`source`](std::error::Error::source) is `None`: its text
/// already says what the Redis client's error says, and a chain printed
/// with its sources (`anyhow`'s `{:#}`) reads it once.
///
/// ```
/// # async fn demo() {
/// use redisson_lock::{Client, Config, Error};
/// // Nothing listens on port 1 of loopback: the connection is refused.
/// let config = Config::from_url("redis://127.0.0.1:1").unwrap();
/// if let Err(Error::Connection(cause)) = Client::connect_with(config).await {
///     assert!(std::error::Error::source(&Error::Connection(cause.clone())).is_none());
///     let _fred: Option<&fred::error::Error> = cause.redis_error();
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Cause {
    message: String,
    source: Option<fred::error::Error>,
    /// The server it concerns (`host:port`), once known.
    server: Option<std::sync::Arc<str>>,
}

impl Cause {
    fn redis(err: fred::error::Error) -> Cause {
        Cause {
            message: readable(&err),
            source: Some(err),
            server: None,
        }
    }

    /// The server this concerns: `host:port`, or for a deployment where no
    /// single node is known, its configured hosts (`cluster
    /// 10.0.0.1:7000, 10.0.0.2:7000`). Never shows credentials.
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// ` at <server>` for an error's text, or nothing.
    fn at(&self) -> String {
        self.server
            .as_deref()
            .map(|s| format!(" at {s}"))
            .unwrap_or_default()
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The Redis client's error, if this came from one.
    pub fn redis_error(&self) -> Option<&fred::error::Error> {
        self.source.as_ref()
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// No [`source`](std::error::Error::source): the message is the Redis
/// client's error in words ([`redis_error`](Cause::redis_error) has it).
impl std::error::Error for Cause {}

/// fred's error as text for people: fred shows an I/O error by its Rust
/// `Debug` form (`Os { code: 111, kind: ConnectionRefused, message:
/// "Connection refused" }`); that becomes `I/O error: Connection refused (os
/// error 111)`. Anything else is fred's own text.
fn readable(err: &fred::error::Error) -> String {
    let details = err.details();
    let quoted = |field: &str| {
        let start = details.find(field)? + field.len();
        let end = details[start..].find('"')?;
        Some(&details[start..start + end])
    };
    let word = |field: &str| {
        let start = details.find(field)? + field.len();
        let end = details[start..]
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(details.len() - start);
        Some(&details[start..start + end])
    };
    if details.starts_with("Os {") {
        if let (Some(message), Some(code)) = (quoted("message: \""), word("code: ")) {
            return format!("I/O error: {message} (os error {code})");
        }
    }
    if details.starts_with("Custom {") {
        if let Some(message) = quoted("error: \"") {
            return format!("I/O error: {message}");
        }
    }
    if let Some(kind) = details
        .strip_prefix("Kind(")
        .and_then(|k| k.strip_suffix(')'))
    {
        return format!("I/O error: {kind}");
    }
    err.to_string()
}

/// Whether fred's error is a failed TLS handshake: native-tls's errors
/// arrive as fred's TLS kind; rustls's as an I/O error of kind `InvalidData`
/// wrapping the `rustls::Error` (shown by its `Debug`).
fn is_tls_failure(err: &fred::error::Error) -> bool {
    use fred::error::ErrorKind;
    // Matched by name: `ErrorKind::Tls` exists only when fred has a TLS
    // feature, which may come from another crate than this one.
    if err.kind().to_str() == "TLS Error" {
        return true;
    }
    const RUSTLS: [&str; 8] = [
        "InvalidCertificate",
        "NoCertificatesPresented",
        "AlertReceived",
        "InvalidMessage",
        "PeerIncompatible",
        "PeerMisbehaved",
        "InappropriateHandshakeMessage",
        "InappropriateMessage",
    ];
    *err.kind() == ErrorKind::IO
        && err.details().contains("InvalidData")
        && RUSTLS.iter().any(|name| err.details().contains(name))
}

/// The text of the error reply a non-reentrant lock gives on re-entry
/// (Redisson 4.7's, docs/PROTOCOL.md §4.8).
pub(crate) const NON_REENTRANT: &str = "NON_REENTRANT_REACQUIRE";

/// The error code our scripts reply when an argument is out of range.
const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";

/// Error replies of a server that is up but cannot serve for now.
const UNAVAILABLE: [&str; 6] = [
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "MASTERDOWN",
    "READONLY",
];

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::readable;
    use fred::error::{Error as FredError, ErrorKind};

    #[test]
    fn io_errors_read_as_text_not_rust_debug() {
        let refused = FredError::new(
            ErrorKind::IO,
            r#"Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }"#,
        );
        assert_eq!(
            readable(&refused),
            "I/O error: Connection refused (os error 111)"
        );
        let custom = FredError::new(
            ErrorKind::IO,
            r#"Custom { kind: Other, error: "stream closed" }"#,
        );
        assert_eq!(readable(&custom), "I/O error: stream closed");
        let kind = FredError::new(ErrorKind::IO, "Kind(UnexpectedEof)");
        assert_eq!(readable(&kind), "I/O error: UnexpectedEof");
        let plain = FredError::new(ErrorKind::Unknown, "Failed to route command.");
        assert_eq!(readable(&plain), plain.to_string());
    }

    #[test]
    fn errors_name_their_server_once() {
        let refused = FredError::new(
            ErrorKind::IO,
            r#"Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }"#,
        );
        let error = super::Error::from_redis(refused, "", std::time::Duration::ZERO)
            .at("127.0.0.1:6379")
            .at("10.0.0.9:6379");
        assert_eq!(
            error.to_string(),
            "Redis connection error at 127.0.0.1:6379: I/O error: Connection refused (os error 111) \
             (is the server up and reachable there, and the URL right?)"
        );
        assert_eq!(error.server(), Some("127.0.0.1:6379"));
        let closed = super::Error::Closed.at("127.0.0.1:6379");
        assert_eq!(closed.server(), None);
    }
}
