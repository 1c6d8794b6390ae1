//! Scenario 4: 4 worker processes × 2 tasks on one name, every library in
//! every worker, all following one wall-clock schedule of slots (the
//! workers' side is `rounds`, run as `Job::Rounds`).

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result};

use super::contended::{analyze, contend, Event};
use super::{add_command_metrics, ms, order, Bench};
use crate::java;
use crate::libs::{Kind, Lib, ALL};
use crate::report::Record;
use crate::server;
use crate::util::{now_ns, sleep_until_ns};
use crate::workers::{Job, Slot, Synced};

/// One process set's answers: per process, per slot of the set, the events.
type PerProcess = Vec<Vec<Vec<Event>>>;

/// Scenario 4: 4 worker processes × 2 tasks on one name, every library in
/// every worker, all following one wall-clock schedule of slots.
pub async fn run(b: &mut Bench<'_>) -> Result<()> {
    let kinds = b.kinds(&ALL);
    let p = b.params;
    run_with(
        b,
        "s4",
        &kinds,
        p.s4_processes,
        p.s4_tasks_each,
        p.s4_rounds,
    )
    .await
}

/// Scenario 4's schedule with `processes` worker processes of `tasks_each`
/// tasks, `rounds` rounds of the subjects `kinds`, recorded as `id`
/// (the processes curve runs it for every point).
pub async fn run_with(
    b: &mut Bench<'_>,
    id: &str,
    kinds: &[Kind],
    processes: u32,
    tasks_each: u32,
    rounds: usize,
) -> Result<()> {
    let (url, admin, params, records, pooled) =
        (b.url, &mut b.admin, b.params, &mut b.records, &mut b.pooled);
    server::flushall(admin).await?;
    let (length, warm, gap) = (
        ms(params.s4_round_ms).as_nanos() as u64,
        ms(params.warm_ms).as_nanos() as u64,
        ms(params.s4_gap_ms).as_nanos() as u64,
    );
    // Slot i: tasks start at offset - warm, the window is [offset, offset +
    // length], then a gap for the last holds to finish.
    let mut slots = Vec::new();
    let mut offset = gap + warm;
    for r in 0..rounds {
        for i in order(kinds.len(), r) {
            let kind = kinds[i];
            slots.push(Slot {
                round: r,
                kind,
                name: format!("{id}:{}:{r}", kind.key()),
                offset_ns: offset,
                warm_ns: warm,
                length_ns: length,
            });
            offset += length + gap + warm;
        }
    }
    // The Rust workers run the libraries' slots; Java, as one more set of
    // processes per setup (defaults, tuned: one JVM per worker process, as
    // many threads as its tasks), runs its slots of the same schedule.
    let ours: Vec<Slot> = slots
        .iter()
        .filter(|s| !s.kind.is_java())
        .cloned()
        .collect();
    let libs: Vec<Kind> = kinds.iter().copied().filter(|k| !k.is_java()).collect();
    let java_kinds: Vec<Kind> = kinds.iter().copied().filter(|k| k.is_java()).collect();
    let jobs = (0..processes)
        .map(|p| Job::Rounds {
            kinds: libs.clone(),
            url: url.to_owned(),
            tasks: tasks_each,
            first_task: p * tasks_each,
            slots: ours.clone(),
        })
        .collect();
    let mut workers = Synced::start(jobs, Duration::from_secs(60)).await?;
    // Per Java setup: its JVMs, and the spec of its slots.
    let mut jvm_sets = Vec::new();
    if let Some(java) = b.java.as_ref() {
        for kind in &java_kinds {
            let starting = (0..processes).map(|_| java.start(*kind, url, java::Warm::Contend));
            let jvms = futures::future::try_join_all(starting).await?;
            let spec: Vec<String> = slots
                .iter()
                .filter(|s| s.kind == *kind)
                .map(|s| format!("{}:{}:{}:{}", s.name, s.offset_ns, s.warm_ns, s.length_ns))
                .collect();
            jvm_sets.push((*kind, jvms, spec.join(",")));
        }
    }
    let base = now_ns() + 100_000_000;
    workers.go(base).await?;
    for (_, jvms, spec) in &mut jvm_sets {
        for (p, jvm) in (0u32..).zip(jvms.iter_mut()) {
            let (tasks, first) = (tasks_each, p * tasks_each);
            jvm.send(&format!("slots {base} {tasks} {first} 0 {spec}"))
                .await?;
        }
    }
    // Server counters in the middle of every gap: before each slot's
    // warm-up, and after the last slot.
    let mut marks = Vec::with_capacity(slots.len() + 1);
    for at in slots
        .iter()
        .map(|s| s.offset_ns)
        .chain(std::iter::once(offset))
    {
        sleep_until_ns(base + at - warm - gap / 2).await;
        marks.push((
            server::commandstats(admin).await?,
            server::server_cpu_us(admin).await?,
        ));
    }
    let schedule_s = offset as f64 / 1e9;
    let answers = workers
        .finish(Duration::from_secs_f64(60.0 + schedule_s))
        .await?;
    // Per process set, per process, per slot of that set: the events.
    let mut per_process: Vec<Vec<Vec<Event>>> = Vec::new();
    for a in answers {
        per_process.push(serde_json::from_value(a)?);
    }
    // Per process set (the Rust workers, then each Java setup's JVMs), per
    // process, per slot of that set: the events; and the next slot of each.
    let mut sets: HashMap<Option<Kind>, (PerProcess, usize)> = HashMap::new();
    sets.insert(None, (per_process, 0));
    for (kind, jvms, _) in &mut jvm_sets {
        let mut per_jvm: PerProcess = Vec::new();
        for jvm in jvms.iter_mut() {
            let answer = jvm.recv(java::ANSWER).await?;
            per_jvm.push(serde_json::from_str(&answer)?);
        }
        sets.insert(Some(*kind), (per_jvm, 0));
    }
    let tasks = processes * tasks_each;
    for (i, slot) in slots.iter().enumerate() {
        let key = slot.kind.is_java().then_some(slot.kind);
        let (set, next) = sets
            .get_mut(&key)
            .context("a slot of a subject that did not run")?;
        let index = *next;
        *next += 1;
        let mut events = Vec::new();
        for p in set.iter_mut() {
            events.append(p.get_mut(index).context("a worker's answer lacks a slot")?);
        }
        let start = base + slot.offset_ns;
        let c = analyze(events, tasks, start, start + slot.length_ns);
        let mut m = c.metrics;
        let diff = server::diff(&marks[i].0, &marks[i + 1].0);
        let acquisitions = m["acquisitions_all"];
        m.insert(
            "server_cpu_us_per_acq".into(),
            (marks[i + 1].1 - marks[i].1) / acquisitions.max(1.0),
        );
        add_command_metrics(slot.kind, &mut m, &diff);
        pooled.add(id, slot.kind.key(), c.handover_us, &c.per_task);
        records.push(Record::new(id, slot.kind.key(), slot.round, m));
    }
    Ok(())
}

/// A worker's part of the schedule: connect (and warm up) every library,
/// print `ready`, read the common base instant (`now_ns`) from stdin, then
/// run this process's `tasks` tasks in every slot; answers with the events
/// of each slot.
pub async fn rounds(
    kinds: Vec<Kind>,
    url: &str,
    tasks: u32,
    first_task: u32,
    slots: Vec<Slot>,
) -> Result<serde_json::Value> {
    let mut libs = HashMap::new();
    for kind in kinds {
        let lib = Lib::connect(kind, url).await?;
        let warm = format!("s4:warm:{}:{first_task}", kind.key());
        for _ in 0..20 {
            lib.lock(&warm).await?.unlock().await?;
        }
        libs.insert(kind, lib);
    }
    println!("ready");
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await??;
    let base: u64 = line.trim().parse().context("base instant on stdin")?;
    let mut answer = Vec::with_capacity(slots.len());
    for slot in slots {
        let lib = libs
            .get(&slot.kind)
            .context("slot of a library not connected")?;
        let start = base + slot.offset_ns;
        let events = contend(
            lib,
            &slot.name,
            tasks,
            first_task,
            start - slot.warm_ns,
            start + slot.length_ns,
            Duration::ZERO,
        )
        .await?;
        answer.push(events);
    }
    Ok(serde_json::to_value(answer)?)
}
