//! The Redis command layer every lock uses, knowing no lock: scripts by EVALSHA with the NOSCRIPT fallback, error translation,
//! retries of idempotent commands, and deletion of unlock latches (carried
//! by the next script to the same node, else batched in the background).

use std::future::Future;
use std::time::Duration;

use fred::interfaces::{ClientLike, ClusterInterface, EventInterface, KeysInterface};
use fred::types::{Key, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::base::backoff::{equal_jitter, BackOff, BackOffState};
use crate::base::error::{Error, Result};
use crate::connection::config::Config;
use crate::connection::deferred_delete::DeferredDeletes;
use crate::connection::script::ScriptCall;

/// The longest pause between two tries of a give-back of permits that keeps
/// trying until it lands: a few seconds, since it also tries again as soon
/// as the connection is re-established.
const LONGEST_PAUSE: Duration = Duration::from_secs(4);

/// How long a master's replica count is trusted before it is read again
/// (replicas added to a master that had none send no `WAIT` to notice them).
const RECOUNT: Duration = Duration::from_secs(10);

/// The command layer: scripts by EVALSHA with NOSCRIPT fallback, error
/// translation, and retries for idempotent commands.
#[derive(Clone)]
pub(crate) struct Redis {
    pub(crate) client: fred::clients::Client,
    timeout: Duration,
    retry_attempts: u32,
    retry_delay: Duration,
    /// Set at shutdown: every command fails with `Error::Closed`.
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Unlock latch keys to delete: by the next script, else by
    /// [`delete_latches`].
    latches: std::sync::Arc<DeferredDeletes>,
    /// `WAIT` for replicas after every write, at most this long.
    replica_sync: Option<Duration>,
    /// Connected replicas per master (`""` without a cluster) and when they
    /// were counted, from `INFO replication`; counted again when a `WAIT`
    /// counts otherwise, and at least every [`RECOUNT`].
    replicas:
        std::sync::Arc<parking_lot::Mutex<std::collections::HashMap<String, (usize, Instant)>>>,
    /// Whether the server is a cluster: only then does a command need its
    /// key's hash slot.
    clustered: bool,
    /// Where the client connects, as errors name it
    /// ([`Config::server_description`]).
    server: std::sync::Arc<str>,
}

/// How long an idempotent call (a release, an undo, leaving a queue)
/// keeps trying after transient errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Patience {
    /// `retry_attempts` times: someone awaits the answer.
    Attempts,
    /// Until then: nobody awaits it (a dropped guard, a cancelled call),
    /// and after then it cannot matter any more (the hold's lease, the
    /// permit latch's life).
    Until(Instant),
}

impl Redis {
    /// The command layer over `client`, and its latch-deleting task.
    pub(crate) fn start(client: fred::clients::Client, config: &Config) -> (Redis, JoinHandle<()>) {
        let clustered = config.redis.server.is_clustered();
        let latches = std::sync::Arc::new(DeferredDeletes::new(clustered));
        let redis = Redis {
            client,
            timeout: config.timeout,
            retry_attempts: config.retry_attempts,
            retry_delay: config.retry_delay,
            closed: Default::default(),
            latches,
            replica_sync: config.replica_sync,
            replicas: Default::default(),
            clustered,
            server: config.server_description().into(),
        };
        let task = tokio::spawn(delete_latches(redis.clone()));
        (redis, task)
    }

    /// Where the client connects (`host:port`, or a deployment's hosts),
    /// as errors name it.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// A fred error as ours ([`Error::from_redis`]), naming the server it
    /// concerns: in a cluster the node that serves `key`'s slot, as last
    /// seen, else [`server`](Self::server).
    pub(crate) fn error(&self, err: fred::error::Error, key: &str) -> Error {
        let error = Error::from_redis(err, key, self.timeout);
        if error.server().is_some() {
            return error;
        }
        let node = (self.clustered && !key.is_empty())
            .then(|| {
                let slot = fred::util::redis_keyslot(key.as_bytes());
                self.client
                    .cached_cluster_state()
                    .and_then(|state| state.get_server(slot).map(ToString::to_string))
            })
            .flatten();
        match node {
            Some(node) => error.at(&node),
            None => error.at(&self.server),
        }
    }

    /// Refuse every command from now on (shutdown).
    pub(crate) fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Run `script` once. `keys[0]` names the key in a WRONGTYPE error.
    /// fred never drops it for having timed out ([`Late::Deliver`]): for
    /// every call that gives something back or changes what a caller cannot
    /// check again.
    ///
    /// If no other script is in flight, queued unlock latches of the
    /// script's node go first, as a `DEL` that fred writes in the same write
    /// as the `EVALSHA` (see [`send_del`] and `deferred_delete.rs`).
    pub(crate) async fn eval(&self, build: impl Fn() -> ScriptCall) -> Result<Value> {
        self.eval_as(build, Late::Deliver).await
    }

    /// [`eval`](Self::eval) for an acquire attempt, whose caller undoes an
    /// outcome it cannot know: once it has timed out, fred drops it instead
    /// of writing it late ([`Late::Skip`]), and it costs less to send.
    pub(crate) async fn eval_attempt(&self, build: impl Fn() -> ScriptCall) -> Result<Value> {
        self.eval_as(build, Late::Skip).await
    }

    /// Run `script` once, what becomes of it when late as `late` says.
    pub(crate) async fn eval_as(
        &self,
        build: impl Fn() -> ScriptCall,
        late: Late,
    ) -> Result<Value> {
        self.check_open()?;
        let call = build();
        let writes = call.script.writes;
        // A cheap handle (reference counted), named in a WRONGTYPE error.
        let first_key = call.keys.first().cloned();
        let key = first_key.as_ref().and_then(Key::as_str).unwrap_or_default();
        let (_in_flight, carried) = self.latches.script(first_key.as_ref().map(|_| key));
        if !carried.is_empty() {
            send_del(&self.client, carried.clone());
        }
        let send = |command, call| {
            send_script(
                &self.client,
                command,
                call,
                self.clustered,
                late,
                self.timeout,
            )
        };
        let reply = match send(ScriptBy::Sha, call).await {
            // EVAL runs the script and caches it for the next EVALSHA; the
            // arguments are built again rather than kept for this.
            Err(e) if e.details().starts_with("NOSCRIPT") => send(ScriptBy::Body, build()).await,
            other => other,
        };
        if reply.is_err() && !carried.is_empty() {
            // The DEL went ahead of the script on the same connection: it
            // may have been lost with it. Deleting again is harmless.
            self.latches.restore(carried);
        }
        let reply = reply.map_err(|e| self.error(e, key))?;
        if let (Some(wait), true) = (self.replica_sync, writes) {
            Box::pin(self.sync_replicas(key, wait)).await?;
        }
        Ok(reply)
    }

    /// `WAIT` until every connected replica of the master that serves `key`
    /// has the writes made so far on our connection to it (at most `wait`);
    /// [`Error::NotReplicated`] if the master has replicas and none
    /// confirmed (docs/PROTOCOL.md §9.1, §9.3). Fewer than all is accepted, as
    /// by Redisson. Called after a write that ran, so any failure here is
    /// `NotReplicated` too: the caller undoes or resends the write.
    async fn sync_replicas(&self, key: &str, wait: Duration) -> Result<()> {
        let slot = fred::util::redis_keyslot(key.as_bytes());
        // The same node, and so the same connection, as the write.
        let node = self.client.with_options(&fred::types::config::Options {
            cluster_hash: Some(fred::types::ClusterHash::Custom(slot)),
            timeout: Some(self.timeout.saturating_add(wait)),
            ..Default::default()
        });
        let server = self
            .client
            .cached_cluster_state()
            .and_then(|state| state.get_server(slot).map(ToString::to_string))
            .unwrap_or_default();
        let not_replicated = |replicas: usize, cause: &dyn std::fmt::Display| {
            tracing::warn!(error = %cause, "could not wait for replicas after a write");
            Error::NotReplicated {
                replicas,
                timeout: wait,
            }
        };
        let known = self
            .replicas
            .lock()
            .get(&server)
            .filter(|(_, counted)| counted.elapsed() < RECOUNT)
            .map(|(n, _)| *n);
        let replicas = match known {
            Some(n) => n,
            None => {
                let info: String = node
                    .custom(fred::cmd!("INFO"), vec!["replication"])
                    .await
                    .map_err(|e| not_replicated(0, &e))?;
                let n = info
                    .lines()
                    .find_map(|l| l.strip_prefix("connected_slaves:"))
                    .and_then(|n| n.trim().parse().ok())
                    .ok_or_else(|| {
                        not_replicated(0, &"INFO replication without connected_slaves")
                    })?;
                self.replicas
                    .lock()
                    .insert(server.clone(), (n, Instant::now()));
                n
            }
        };
        if replicas == 0 {
            return Ok(());
        }
        let acked: i64 = node
            .custom(
                fred::cmd!("WAIT"),
                vec![
                    Value::from(replicas as i64),
                    Value::from(crate::connection::script::millis(wait)),
                ],
            )
            .await
            .map_err(|e| not_replicated(replicas, &e))?;
        if usize::try_from(acked).ok() != Some(replicas) {
            // Replicas came or went: count them again next time.
            self.replicas.lock().remove(&server);
        }
        if acked <= 0 {
            return Err(Error::NotReplicated {
                replicas,
                timeout: wait,
            });
        }
        Ok(())
    }

    /// Run an idempotent operation on the lock (or key) `name`, trying
    /// again after transient errors, `retry_attempts` times.
    pub(crate) async fn retrying<T, F, Fut>(&self, name: &str, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let attempts = self.retry_attempts;
        self.retry(name, op, self.retry_delay, |tries, _| tries < attempts)
            .await
    }

    /// Run an idempotent operation on `name` nobody awaits (a cleanup in
    /// the background), trying again after transient errors until it
    /// succeeds or `until` has passed.
    pub(crate) async fn persisting<T, F, Fut>(&self, name: &str, until: Instant, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let pause = self.retry_delay.max(Duration::from_millis(10));
        self.retry(name, op, pause, |_, pause| Instant::now() + pause < until)
            .await
    }

    /// The pauses between the tries of a give-back that keeps trying until
    /// it lands (`give_back.rs`): from `retry_delay` (at least 10 ms),
    /// doubling, up to [`LONGEST_PAUSE`] (or `retry_delay`, if longer).
    pub(crate) fn persistent_backoff(&self) -> BackOffState {
        let initial = self.retry_delay.max(Duration::from_millis(10));
        BackOffState::new(BackOff::Exponential {
            initial,
            max: LONGEST_PAUSE.max(initial),
            multiplier: 2,
        })
    }

    /// Sleep the next pause of `backoff` (with equal jitter), or until the
    /// command connection is re-established, whichever comes first.
    pub(crate) async fn pause(&self, backoff: &mut BackOffState) {
        use tokio::sync::broadcast::error::RecvError;
        let mut reconnects = self.client.reconnect_rx();
        let reconnected = async {
            match reconnects.recv().await {
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                // The client is gone: only the pause is left.
                Err(RecvError::Closed) => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(equal_jitter(backoff.next_delay())) => {}
            () = reconnected => {}
        }
    }

    /// Run an idempotent operation on `name` with `patience`:
    /// [`retrying`](Self::retrying) or [`persisting`](Self::persisting).
    pub(crate) async fn patiently<T, F, Fut>(
        &self,
        name: &str,
        patience: Patience,
        op: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        match patience {
            Patience::Attempts => self.retrying(name, op).await,
            Patience::Until(until) => self.persisting(name, until, op).await,
        }
    }

    /// Run `op`; while it fails with a transient error and `again(tries so
    /// far, pause)` allows, pause (with jitter) and run it again. Each retry
    /// is a debug event naming `name`, the lock or key it is for.
    async fn retry<T, F, Fut>(
        &self,
        name: &str,
        mut op: F,
        pause: Duration,
        again: impl Fn(u32, Duration) -> bool,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut tries = 0u32;
        let start = Instant::now();
        loop {
            match op().await {
                Err(e) if e.is_transient() && again(tries, pause) => {
                    tries = tries.saturating_add(1);
                    tracing::debug!(lock = name, error = %e, attempt = tries, "retrying Redis command");
                    tokio::time::sleep(equal_jitter(pause)).await;
                }
                // After retries, a timeout names the whole time spent, not
                // the last try's.
                Err(Error::Timeout(_)) if tries > 0 => return Err(Error::Timeout(start.elapsed())),
                other => return other,
            }
        }
    }

    /// A plain single-key command, with retries, translating errors. Each
    /// try is boxed: fred's command future is about 15 KB, which every
    /// future awaiting this one (a hold's watch, say) would carry.
    pub(crate) async fn key_command<T, F, Fut>(&self, key: &str, op: F) -> Result<T>
    where
        F: Fn(fred::clients::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, fred::error::Error>>,
    {
        self.retrying(key, || {
            let fut = self
                .check_open()
                .map(|()| Box::pin(op(self.client.clone())));
            async move { fut?.await.map_err(|e| self.error(e, key)) }
        })
        .await
    }

    /// A plain command that writes `key` (and keys in its slot), sent once:
    /// after a transient error its outcome is unknown, and a resend could
    /// answer otherwise (a second `DEL` says the key was not there). Waits
    /// for replicas afterwards, as scripts that write do, when
    /// [`Config::replica_sync`] is set.
    pub(crate) async fn write_once<T, F, Fut>(&self, key: &str, op: F) -> Result<T>
    where
        F: FnOnce(fred::clients::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, fred::error::Error>>,
    {
        self.check_open()?;
        let reply = op(self.client.clone())
            .await
            .map_err(|e| self.error(e, key))?;
        if let Some(wait) = self.replica_sync {
            Box::pin(self.sync_replicas(key, wait)).await?;
        }
        Ok(reply)
    }

    /// Delete an unlock latch soon, without waiting for it: carried by the
    /// next script, or at once in the background if the client is
    /// `contended` (has waiters) or has other scripts in flight (`deferred_delete.rs`).
    pub(crate) fn delete_later(&self, key: String, contended: bool) {
        self.latches.add(key, contended);
    }

    /// Delete every latch still queued, now (at shutdown).
    pub(crate) async fn delete_queued_latches(&self) {
        for keys in self.latches.take_all() {
            delete(self, keys).await;
        }
    }
}

/// What becomes of a script call that times out while fred holds it (for a
/// reconnect, or queued behind others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Late {
    /// Never dropped for having timed out: a release, an undo, leaving a
    /// queue, a renewal. fred runs it with no timeout of its own, so it
    /// never marks it timed out, and one it still holds when a reconnect
    /// completes is written then (one whose write fails is not resent:
    /// `max_command_attempts` is 1). The caller's wait for the reply is
    /// bounded here.
    Deliver,
    /// Not written once timed out: an acquire attempt, whose caller sends
    /// its undo after the timeout. fred times it out and marks it, and
    /// skips a marked command it has not written yet. If the attempt was
    /// written before the mark, the undo follows it in order on the same
    /// connection; if not, it never runs and the undo is harmless.
    Skip,
    /// As [`Skip`](Self::Skip), timed out after this long instead of the
    /// client's `timeout` (at least 1 ms): a give-back of permits that must
    /// not run after a deadline (`give_back.rs`). The future must not be
    /// dropped before it ends: only fred's own timeout marks it.
    SkipAfter(Duration),
    /// Never timed out, by fred or here: the call ends with its reply or
    /// with the failure of the connection it was written to, however long
    /// that takes (a reconnect in between included: fred writes it once
    /// connected). A give-back of permits that keeps trying until it lands
    /// (`give_back.rs`) waits for its one call rather than piling up more.
    Await,
}

/// How a script call names its script.
#[derive(Clone, Copy)]
enum ScriptBy {
    /// `EVALSHA sha`: the usual way, the script cached on the server.
    Sha,
    /// `EVAL body`: after a `NOSCRIPT` reply; caches it for the next call.
    Body,
}

/// `call` as `EVALSHA` or `EVAL` (as `by` says), as fred's `evalsha` and
/// `eval` would send it, its reply awaited at most `timeout`; if that runs
/// out, what becomes of the call is as [`Late`] says. Boxed: the future of
/// a script call is part of every acquire attempt kept alive for
/// cancellation safety, once per waiter, and fred's command futures are
/// large (about 5 KB: fred reserves room in every one for unblocking a
/// blocked connection).
///
/// The hash slot of the first key routes it on a `clustered` server; any
/// other server ignores it, so it is not computed there.
fn send_script(
    client: &fred::clients::Client,
    by: ScriptBy,
    call: ScriptCall,
    clustered: bool,
    late: Late,
    timeout: Duration,
) -> futures::future::BoxFuture<'_, std::result::Result<Value, fred::error::Error>> {
    let slot = match call.keys.first() {
        Some(key) if clustered => fred::util::redis_keyslot(key.as_bytes()),
        _ => 0,
    };
    let (name, script) = match by {
        ScriptBy::Sha => ("EVALSHA", call.script.sha_value()),
        ScriptBy::Body => (
            "EVAL",
            Value::String(fred::bytes_utils::Str::from_static(call.script.body)),
        ),
    };
    let mut args = Vec::with_capacity(2 + call.keys.len() + call.args.len());
    args.push(script);
    args.push(Value::from(call.keys.len() as i64));
    args.extend(call.keys.into_iter().map(Value::from));
    args.extend(call.args);
    let command =
        fred::types::CustomCommand::new_static(name, fred::types::ClusterHash::Custom(slot), false);
    let fred_timeout = |timeout| {
        client.with_options(&fred::types::config::Options {
            timeout: Some(timeout),
            ..Default::default()
        })
    };
    match late {
        // fred's own timeout is `timeout` (the client's default). An async
        // block: fred's future is made inside the box when first polled.
        Late::Skip => Box::pin(async move { client.custom::<Value, _>(command, args).await }),
        // fred reads a zero timeout as none.
        Late::SkipAfter(limit) => Box::pin(async move {
            let limit = limit.max(Duration::from_millis(1));
            fred_timeout(limit).custom::<Value, _>(command, args).await
        }),
        Late::Await => Box::pin(async move {
            fred_timeout(Duration::ZERO)
                .custom::<Value, _>(command, args)
                .await
        }),
        Late::Deliver => Box::pin(async move {
            let untimed = fred_timeout(Duration::ZERO);
            tokio::time::timeout(timeout, untimed.custom::<Value, _>(command, args))
                .await
                .map_err(|_| {
                    fred::error::Error::new(fred::error::ErrorKind::Timeout, "Request timed out.")
                })?
        }),
    }
}

/// Send `DEL keys` without waiting for its reply: the command is handed to
/// fred's connection task at once (the first poll of fred's command future
/// sends it; the dropped future only gives up the reply). A command sent
/// right after it from the same thread joins it in fred's queue, and fred
/// writes queued commands with one flush: one write, one read on the server.
fn send_del(client: &fred::clients::Client, keys: Vec<String>) {
    use futures::FutureExt;
    // Pinned in place: fred's command future is large, and not worth a copy.
    let _ = std::pin::pin!(client.del::<Value, _>(keys)).now_or_never();
}

/// Delete the unlock latches no script carried within
/// [`WINDOW`](crate::connection::deferred_delete::WINDOW), or at once those queued while the
/// client had waiters or scripts in flight (docs/PROTOCOL.md §2.4), one
/// `DEL` per batch (per hash slot on a cluster). Runs for the life of the
/// client.
async fn delete_latches(redis: Redis) {
    loop {
        redis.latches.wait().await;
        redis.delete_queued_latches().await;
    }
}

/// Delete latch keys, retrying after transient errors; a latch that cannot
/// be deleted expires by itself (its TTL covers one unlock's retries).
async fn delete(redis: &Redis, keys: Vec<String>) {
    let name = keys.first().map_or("", String::as_str);
    let outcome = redis
        .retrying(name, || {
            let keys = keys.clone();
            async move {
                redis
                    .client
                    .del::<i64, _>(keys)
                    .await
                    .map_err(|e| redis.error(e, ""))
            }
        })
        .await;
    if let Err(e) = outcome {
        tracing::debug!(error = %e, "deleting unlock latches failed; they expire by themselves");
    }
}
