//! The exclusive locks' waiters (left waiting, handed the lock, or
//! cancelled) and their Redis state: hash, TTL, fair queue and deadlines,
//! fencing token, read with plain commands and compared with the model.

use std::time::{Duration, Instant};

use fred::prelude::*;
use redisson_lock::{AnyKind, LockGuard};

use super::guards::{Half, Real, Reals};
use super::locks::{confirmed, Handles, Kind, Model, Out};
use super::{Env, Step, StepResult};

pub(super) type Waiter = tokio::task::JoinHandle<redisson_lock::Result<Option<LockGuard<AnyKind>>>>;

/// The lock is free (since `freed`) and waiters wait: the head of the
/// queue (fair kinds) or any one of them (the others) must take it, and
/// nobody else.
pub(super) async fn handover(
    step: &mut Step<'_>,
    m: &mut Model,
    tasks: &mut Vec<(usize, Waiter)>,
    reals: &mut Reals,
    freed: Instant,
) -> StepResult<()> {
    let finished = tokio::time::timeout(
        Duration::from_secs(3),
        futures::future::select_all(tasks.iter_mut().map(|(_, t)| t)),
    )
    .await;
    let (result, index, _) = match finished {
        Ok(done) => done,
        Err(_) => return step.mismatch("no waiter took the free lock within 3 s".into()),
    };
    let (o, _) = tasks.remove(index);
    let guard = match result {
        Ok(Ok(Some(g))) => g,
        other => {
            let other = other.map(|r| r.map(|g| g.is_some()));
            return step.mismatch(format!("owner{o}'s waiter ended with {other:?}"));
        }
    };
    step.record(&format!("  owner{o}'s waiter"), "Acquired");
    if m.kind.fair() && m.waiting.first() != Some(&o) {
        return step.mismatch(format!(
            "owner{o} took the fair lock, but the head of the queue is owner{:?}",
            m.waiting.first()
        ));
    }
    m.waiting.retain(|&w| w != o);
    let now = Instant::now();
    match m.acquire(o, None, freed, now) {
        Ok(count) => {
            let g =
                m.g.acquired((o, Half::Lock), count, None, confirmed(None, freed, now));
            reals.set(g, Real::Any(guard));
            Ok(())
        }
        Err(out) => step.mismatch(format!("owner{o}'s waiter acquired; model: {out:?}")),
    }
}

/// Wait until owner `o`'s waiter, just spawned, waits: queued (fair
/// kinds) or subscribed (a subscription of its client may already be
/// there, a `lost()` watcher's: then it is simply there, as for the spin
/// lock, which shows nothing).
pub(super) async fn waiting(env: &Env, kind: Kind, name: &str, o: usize) -> Result<(), String> {
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let field = env.field(o);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let waiting = if kind.fair() {
            let q: Vec<String> = env.raw.lrange(&queue, 0, -1).await.unwrap_or_default();
            q.contains(&field)
        } else if kind == Kind::Spin {
            true
        } else {
            crate::common::numsub(&env.raw, &format!("redisson_lock__channel:{{{name}}}")).await
                >= 1
        };
        if waiting {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("owner{o}'s waiter never started waiting"));
        }
        tokio::task::yield_now().await;
    }
}

/// Start a 2 s wait on a lock another owner holds, let it subscribe (or, for
/// the spin lock, be polled a few times), drop it, and wait until what it
/// left in Redis is gone: its subscription (the channel keeps the
/// `watchers` clients whose guards' `lost()` listen on it) and (fair kinds)
/// its queue entry.
pub(super) async fn cancel_waiter(
    env: &Env,
    h: &Handles,
    kind: Kind,
    name: &str,
    o: usize,
    polls: u8,
    watchers: i64,
) -> Out {
    let field = env.field(o);
    let channel = if kind.fair() {
        format!("redisson_lock__channel:{{{name}}}:{field}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    };
    {
        let fut = h.any[o].try_lock_for(Duration::from_secs(2));
        tokio::pin!(fut);
        if kind != Kind::Spin {
            let subscribed = async {
                loop {
                    if crate::common::numsub(&env.raw, &channel).await >= 1 {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
            };
            tokio::select! {
                r = &mut fut => return Out::Other(format!("the waiter ended: {:?}", r.map(|g| g.is_some()))),
                () = subscribed => {}
            }
        }
        for _ in 0..polls {
            tokio::select! {
                biased;
                r = &mut fut => return Out::Other(format!("the waiter ended: {:?}", r.map(|g| g.is_some()))),
                () = tokio::task::yield_now() => {}
            }
        }
    }
    // A barrier on the waiter's command connection: an attempt the dropped
    // future had sent runs before this PING, i.e. while the lock is still
    // busy, not after a later step frees it (then it would take the lock
    // and be undone in the background, racing the next steps).
    if let Err(e) = env.client(o).redis().ping::<Value>(None).await {
        return Out::Other(format!("barrier PING: {e}"));
    }
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let subs = crate::common::numsub(&env.raw, &channel).await;
        let queued: i64 = env
            .raw
            .exists(vec![queue.clone(), timeouts.clone()])
            .await
            .unwrap_or(-1);
        if subs == watchers && queued == 0 {
            return Out::Busy;
        }
        if Instant::now() > deadline {
            return Out::Other(format!(
                "after the drop: {subs} subscribers ({watchers} watching clients), queue/timeout keys {queued}"
            ));
        }
        tokio::task::yield_now().await;
    }
}

pub(super) struct State {
    pub(super) hash: std::collections::HashMap<String, String>,
    pub(super) pttl: i64,
    pub(super) r: (Instant, Instant),
    queue: Vec<String>,
    timeouts: Vec<String>,
    token: Option<String>,
}

pub(super) async fn read_state(env: &Env, kind: Kind, name: &str) -> Result<State, String> {
    let raw = &env.raw;
    let r0 = Instant::now();
    let e = |e: fred::error::Error| e.to_string();
    let hash = raw.hgetall(name).await.map_err(e)?;
    let pttl = raw.pttl(name).await.map_err(e)?;
    let r1 = Instant::now();
    let queue = raw
        .lrange(format!("redisson_lock_queue:{{{name}}}"), 0, -1)
        .await
        .map_err(e)?;
    let timeouts = raw
        .zrange(
            format!("redisson_lock_timeout:{{{name}}}"),
            0,
            -1,
            None,
            false,
            None,
            false,
        )
        .await
        .map_err(e)?;
    let token = if kind == Kind::Fenced {
        raw.get(format!("redisson_lock_token:{{{name}}}"))
            .await
            .map_err(e)?
    } else {
        None
    };
    Ok(State {
        hash,
        pttl,
        r: (r0, r1),
        queue,
        timeouts,
        token,
    })
}

pub(super) fn check_state(
    env: &Env,
    step: &mut Step<'_>,
    m: &Model,
    name: &str,
    state: Result<State, String>,
) -> StepResult<State> {
    let s = match state {
        Ok(s) => s,
        Err(e) => {
            step.mismatch(format!("reading state of {name}: {e}"))?;
            unreachable!("a mismatch stops the case")
        }
    };
    let expected: std::collections::HashMap<String, String> = m
        .holder
        .map(|(o, c)| (env.field(o), c.to_string()))
        .into_iter()
        .collect();
    step.expect("HGETALL N", s.hash.clone(), expected)?;
    match m.holder {
        None => step.expect("PTTL N", s.pttl, -2)?,
        Some(_) => {
            if !m.n.fits(m.renewing(), s.pttl, s.r.0, s.r.1) {
                step.mismatch(format!(
                    "PTTL N: real {}, model {}",
                    s.pttl,
                    super::window_str(m.n.at(m.renewing(), s.r.1), s.r.0)
                ))?;
            }
        }
    }
    let queued: Vec<String> = if m.kind.fair() {
        m.waiting.iter().map(|&o| env.field(o)).collect()
    } else {
        Vec::new()
    };
    step.expect("LRANGE queue", s.queue.clone(), queued.clone())?;
    step.expect("ZRANGE timeouts (by deadline)", s.timeouts.clone(), queued)?;
    if m.kind == Kind::Fenced {
        let t = (m.token > 0).then(|| m.token.to_string());
        step.expect("GET token", s.token.clone(), t)?;
    }
    Ok(s)
}
