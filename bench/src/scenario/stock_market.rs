//! Scenarios 6i (stock) and 6ii (market): worker processes doing fixed
//! read-modify-write work on one Redis key, under a `redisson_lock` lock or
//! with WATCH/MULTI/EXEC. The driver (`run`) sets the data up, starts the
//! workers and checks the result; the workers' side is `stock` and `market`
//! (`Job::Stock`, `Job::Market`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use fred::interfaces::{HashesInterface, KeysInterface};

use super::{order, Admin, Bench, Counted, Counters, Metrics, MAX_ITER};
use crate::libs;
use crate::report::Record;
use crate::server;
use crate::util::{now_ns, sleep_until_ns};
use crate::workers::{run_workers, Job, Method};

/// Scenario `id` (`s6i` or `s6ii`): every method in fresh worker
/// processes, run after run (order ABBA).
pub async fn run(b: &mut Bench<'_>, id: &str) -> Result<()> {
    let methods: Vec<Method> = [Method::Lock, Method::Watch]
        .into_iter()
        .filter(|m| b.params.wants_method(*m))
        .collect();
    let runs = b.params.runs;
    for run in 0..runs {
        b.progress
            .show(&format!("scenario {id}, run {}/{runs}", run + 1));
        for i in order(methods.len(), run) {
            let method = methods[i];
            let m = if id == "s6i" {
                stock_run(b, method).await?
            } else {
                market_run(b, method).await?
            };
            b.records.push(Record::new(id, method.key(), run, m));
        }
    }
    Ok(())
}

/// What the worker processes of one run did, together.
struct Outcome {
    answers: Vec<serde_json::Value>,
    counted: Counted,
    start: u64,
    bought: u64,
}

impl Outcome {
    /// Start `processes` worker processes, each on `job(start)`, all
    /// beginning at `start` (400 ms from now), and wait for them, with the
    /// server's counters around.
    async fn of(
        admin: &mut Admin,
        processes: usize,
        job: impl Fn(u64) -> Job,
        limit: Duration,
    ) -> Result<Outcome> {
        let counters = Counters::start(admin).await?;
        let start = now_ns() + 400_000_000;
        let jobs = (0..processes).map(|_| job(start)).collect();
        let answers = run_workers(jobs, limit).await?;
        let counted = counters.stop(admin, Duration::ZERO).await?;
        let bought = answers.iter().filter_map(|a| a["bought"].as_u64()).sum();
        Ok(Outcome {
            answers,
            counted,
            start,
            bought,
        })
    }

    /// The figures every run reports.
    fn metrics(&self, correct: bool) -> Metrics {
        let finish = self
            .answers
            .iter()
            .filter_map(|a| a["finish_ns"].as_u64())
            .max()
            .unwrap_or(self.start);
        let aborted: u64 = self
            .answers
            .iter()
            .filter_map(|a| a["aborted"].as_u64())
            .sum();
        let purchases = (self.bought as f64 / 2.0).max(1.0);
        Metrics::from([
            (
                "server_cmds_per_purchase".into(),
                libs::total_commands(&self.counted.commands) as f64 / purchases,
            ),
            (
                "server_cpu_us_per_purchase".into(),
                self.counted.server_cpu_us / purchases,
            ),
            ("wall_s".into(), (finish - self.start) as f64 / 1e9),
            ("correct".into(), if correct { 1.0 } else { 0.0 }),
            ("aborted".into(), aborted as f64),
            ("bought".into(), self.bought as f64),
        ])
    }
}

/// Scenario 6 (i): processes take 2 units at a time from one stock key.
async fn stock_run(b: &mut Bench<'_>, method: Method) -> Result<Metrics> {
    let (url, admin, params) = (b.url, &mut b.admin, b.params);
    server::flushall(admin).await?;
    let _: () = redis::cmd("SET")
        .arg("stock")
        .arg(params.stock_units)
        .query_async(admin)
        .await?;
    let job = |start_ns| Job::Stock {
        method,
        url: url.to_owned(),
        start_ns,
        limit_s: 120,
    };
    let outcome = Outcome::of(admin, params.stock_processes, job, Duration::from_secs(150)).await?;
    let bought = outcome.bought as i64;
    let left: i64 = redis::cmd("GET")
        .arg("stock")
        .query_async::<Option<i64>>(admin)
        .await?
        .unwrap_or(-1);
    let correct = left == 0 && bought == params.stock_units;
    if !correct {
        eprintln!(
            "scenario 6i ({method:?}) WRONG: stock left {left}, bought {bought} of {}",
            params.stock_units
        );
    }
    Ok(outcome.metrics(correct))
}

/// Scenario 6 (ii): a hash market; processes buy 2 units round-robin.
async fn market_run(b: &mut Bench<'_>, method: Method) -> Result<Metrics> {
    let (url, admin, params) = (b.url, &mut b.admin, b.params);
    server::flushall(admin).await?;
    let mut hset = redis::cmd("HSET");
    hset.arg("market");
    for i in 0..params.market_items {
        hset.arg(market_field(i)).arg(params.market_units);
    }
    let _: i64 = hset.query_async(admin).await?;
    let job = |start_ns| Job::Market {
        method,
        url: url.to_owned(),
        start_ns,
        items: params.market_items,
        target: params.market_target,
        limit_s: 240,
    };
    let outcome = Outcome::of(
        admin,
        params.market_processes,
        job,
        Duration::from_secs(300),
    )
    .await?;
    let answers = &outcome.answers;
    let long_waits: u64 = answers
        .iter()
        .filter_map(|a| a["long_waits"].as_u64())
        .sum();
    let max_wait_ms = answers
        .iter()
        .filter_map(|a| a["max_wait_ms"].as_f64())
        .fold(0.0, f64::max);
    let bought = outcome.bought;
    let mut sold = vec![0i64; params.market_items];
    for a in answers {
        for (i, n) in a["per_item"].as_array().into_iter().flatten().enumerate() {
            if let Some(slot) = sold.get_mut(i) {
                *slot += n.as_i64().unwrap_or(0);
            }
        }
    }
    let left: BTreeMap<String, i64> = redis::cmd("HGETALL")
        .arg("market")
        .query_async(admin)
        .await?;
    let mut wrong = 0usize;
    for (i, purchases) in sold.iter().enumerate() {
        let expected = params.market_units - 2 * purchases;
        if left.get(&market_field(i)).copied() != Some(expected) {
            wrong += 1;
        }
    }
    let total_left: i64 = left.values().sum();
    let expected_total = params.market_units * params.market_items as i64 - bought as i64;
    let correct = wrong == 0
        && bought == params.market_target * params.market_processes as u64
        && total_left == expected_total;
    if !correct {
        eprintln!("scenario 6ii ({method:?}) WRONG: {wrong} items differ, bought {bought}, left {total_left} (expected {expected_total})");
    }
    let mut m = outcome.metrics(correct);
    m.insert("items_wrong".into(), wrong as f64);
    m.insert("lock_waits_over_1s".into(), long_waits as f64);
    m.insert("max_lock_wait_ms".into(), max_wait_ms);
    Ok(m)
}

fn market_field(i: usize) -> String {
    format!("item-{i}")
}

/// A worker's loop: from `start_ns` on, at most `limit` long and `MAX_ITER`
/// iterations.
struct Budget {
    what: &'static str,
    started: Instant,
    limit: Duration,
    iterations: u64,
}

impl Budget {
    async fn from(start_ns: u64, limit: Duration, what: &'static str) -> Budget {
        sleep_until_ns(start_ns).await;
        Budget {
            what,
            started: Instant::now(),
            limit,
            iterations: 0,
        }
    }

    /// Count one iteration; an error once over budget.
    fn next(&mut self) -> Result<()> {
        self.iterations += 1;
        ensure!(
            self.started.elapsed() < self.limit && self.iterations < MAX_ITER,
            "{} did not finish",
            self.what
        );
        Ok(())
    }
}

/// WATCH `key` on `con`.
async fn watch(con: &mut Admin, key: &str) -> Result<()> {
    let _: () = redis::cmd("WATCH").arg(key).query_async(con).await?;
    Ok(())
}

async fn unwatch(con: &mut Admin) -> Result<()> {
    let _: () = redis::cmd("UNWATCH").query_async(con).await?;
    Ok(())
}

/// Run the MULTI/EXEC `transaction`: false if it was aborted (a watched
/// key changed).
async fn exec(con: &mut Admin, transaction: &redis::Pipeline) -> Result<bool> {
    let reply: redis::Value = transaction.query_async(con).await?;
    Ok(!matches!(reply, redis::Value::Nil))
}

/// Take 2 units of "stock" at a time until it is 0.
pub async fn stock(
    method: Method,
    url: &str,
    start_ns: u64,
    limit: Duration,
) -> Result<serde_json::Value> {
    let (mut bought, mut aborted) = (0u64, 0u64);
    match method {
        Method::Lock => {
            let client = redisson_lock::Client::connect(url).await?;
            let redis = client.redis().clone();
            let lock = client.lock("stock-lock")?;
            let mut budget = Budget::from(start_ns, limit, "stock (lock)").await;
            loop {
                budget.next()?;
                let guard = lock.lock().await?;
                let n: i64 = redis.get::<Option<i64>, _>("stock").await?.unwrap_or(0);
                if n <= 0 {
                    guard.unlock().await?;
                    break;
                }
                let _: () = redis.set("stock", n - 2, None, None, false).await?;
                guard.unlock().await?;
                bought += 2;
            }
        }
        Method::Watch => {
            let mut con = server::admin(url).await?;
            let mut budget = Budget::from(start_ns, limit, "stock (watch)").await;
            loop {
                budget.next()?;
                watch(&mut con, "stock").await?;
                let n: i64 = redis::cmd("GET")
                    .arg("stock")
                    .query_async::<Option<i64>>(&mut con)
                    .await?
                    .unwrap_or(0);
                if n <= 0 {
                    unwatch(&mut con).await?;
                    break;
                }
                if exec(&mut con, redis::pipe().atomic().set("stock", n - 2)).await? {
                    bought += 2;
                } else {
                    aborted += 1;
                }
            }
        }
    }
    Ok(serde_json::json!({ "bought": bought, "aborted": aborted, "finish_ns": now_ns() }))
}

/// Buy 2 units of item i, i+1, … round-robin until `target` units are bought.
pub async fn market(
    method: Method,
    url: &str,
    start_ns: u64,
    items: usize,
    target: u64,
    limit: Duration,
) -> Result<serde_json::Value> {
    let (mut bought, mut aborted) = (0u64, 0u64);
    let mut per_item = vec![0u64; items];
    let mut i = 0usize;
    // Lock waits of a second or more (a lost wake-up falls back to the TTL).
    let (mut long_waits, mut max_wait) = (0u64, Duration::ZERO);
    match method {
        Method::Lock => {
            let client = redisson_lock::Client::connect(url).await?;
            let redis = client.redis().clone();
            let locks = (0..items)
                .map(|i| client.lock(&format!("market-lock:{i}")))
                .collect::<redisson_lock::Result<Vec<_>>>()?;
            let mut budget = Budget::from(start_ns, limit, "market (lock)").await;
            while bought < target {
                budget.next()?;
                let asked = Instant::now();
                let guard = locks[i].lock().await?;
                let waited = asked.elapsed();
                max_wait = max_wait.max(waited);
                if waited >= Duration::from_secs(1) {
                    long_waits += 1;
                }
                let n: i64 = redis
                    .hget::<Option<i64>, _, _>("market", market_field(i))
                    .await?
                    .unwrap_or(0);
                if n >= 2 {
                    let _: i64 = redis.hset("market", (market_field(i), n - 2)).await?;
                    bought += 2;
                    per_item[i] += 1;
                }
                guard.unlock().await?;
                i = (i + 1) % items;
            }
        }
        Method::Watch => {
            let mut con = server::admin(url).await?;
            let mut budget = Budget::from(start_ns, limit, "market (watch)").await;
            while bought < target {
                budget.next()?;
                watch(&mut con, "market").await?;
                let n: i64 = redis::cmd("HGET")
                    .arg("market")
                    .arg(market_field(i))
                    .query_async::<Option<i64>>(&mut con)
                    .await?
                    .unwrap_or(0);
                if n < 2 {
                    unwatch(&mut con).await?;
                } else if exec(
                    &mut con,
                    redis::pipe()
                        .atomic()
                        .hset("market", market_field(i), n - 2),
                )
                .await?
                {
                    bought += 2;
                    per_item[i] += 1;
                } else {
                    aborted += 1;
                }
                i = (i + 1) % items;
            }
        }
    }
    if bought > target {
        bail!("bought {bought} > target {target}");
    }
    Ok(serde_json::json!({
        "bought": bought,
        "aborted": aborted,
        "per_item": per_item,
        "finish_ns": now_ns(),
        "long_waits": long_waits,
        "max_wait_ms": max_wait.as_secs_f64() * 1e3,
    }))
}
