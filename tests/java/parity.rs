//! The method parity table of docs/REDISSON.md against the real Redisson
//! 4.7 interfaces: every public method of the interfaces below (inherited
//! ones included; of `RedissonClient`, its lock and synchronizer factories)
//! must have a row, in a section whose heading names the
//! interface that declares it, and every row must name only methods that
//! exist there, with the crate's equivalent or a reason (`none:` or
//! `planned:`) in its second column. The Java methods come from reflection
//! in the peer (`RedissonPeer --api`, one JVM, no Redis).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use crate::common::java;

/// The version whose API the table follows.
const VERSION: &str = "4.7.0";

/// The classes whose public methods the table covers (of `RedissonClient`,
/// only the [`FACTORIES`]).
const CLASSES: [&str; 10] = [
    "org.redisson.api.RedissonClient",
    "org.redisson.api.RLock",
    "org.redisson.api.RLockAsync",
    "org.redisson.api.RFencedLock",
    "org.redisson.api.RReadWriteLock",
    "org.redisson.api.RSemaphore",
    "org.redisson.api.RPermitExpirableSemaphore",
    "org.redisson.api.RCountDownLatch",
    "org.redisson.RedissonMultiLock",
    "org.redisson.RedissonRedLock",
];

/// The lock and synchronizer factories of `RedissonClient`: every overload
/// of each must have a row.
const FACTORIES: [&str; 13] = [
    "getLock",
    "getFairLock",
    "getReadWriteLock",
    "getFencedLock",
    "getSpinLock",
    "getNonReentrantLock",
    "getNonReentrantFairLock",
    "getSemaphore",
    "getPermitExpirableSemaphore",
    "getCountDownLatch",
    "getMultiLock",
    "getRedLock",
    "getFasterMultiLock",
];

/// The guide, from the workspace root.
const GUIDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/REDISSON.md");

/// Redisson's methods: declaring type → signatures (`name(Type, …)`).
fn redisson_methods(classpath: &str) -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new("java")
        .args(["-cp", classpath, "RedissonPeer", "--api"])
        .args(CLASSES)
        .output()
        .expect("run java");
    assert!(
        out.status.success(),
        "RedissonPeer --api failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut methods: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (owner, signature) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("unexpected --api line {line:?}"));
        assert_ne!(owner, "missing", "Redisson {VERSION} has no {signature}");
        let name = signature.split('(').next().unwrap_or(signature);
        if owner == "RedissonClient" && !FACTORIES.contains(&name) {
            continue;
        }
        methods
            .entry(owner.to_string())
            .or_default()
            .insert(signature.to_string());
    }
    assert!(
        methods.values().map(BTreeSet::len).sum::<usize>() > 200,
        "too few methods listed: {methods:?}"
    );
    methods
}

/// The backticked spans of `text`.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// One row of the table: its section's types, the Java signatures it
/// names, and its second column.
struct Row {
    types: Vec<String>,
    signatures: Vec<String>,
    rust: String,
    line: usize,
}

/// The rows of the guide's "Method parity" section.
fn table_rows(guide: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut in_parity = false;
    let mut types: Vec<String> = Vec::new();
    for (i, line) in guide.lines().enumerate() {
        if line.starts_with("## ") {
            in_parity = line == "## Method parity";
            continue;
        }
        if !in_parity {
            continue;
        }
        if let Some(heading) = line.strip_prefix("### ") {
            // The types are the backticked names before a colon, if any.
            let names = heading.split(':').next().unwrap_or(heading);
            types = backticked(names).into_iter().map(String::from).collect();
            continue;
        }
        let Some(cells) = line.strip_prefix('|') else {
            continue;
        };
        let cells: Vec<&str> = cells.split('|').map(str::trim).collect();
        if cells.len() < 3 || cells[0] == "Java" || cells[0].starts_with("---") {
            continue;
        }
        rows.push(Row {
            types: types.clone(),
            signatures: backticked(cells[0]).into_iter().map(String::from).collect(),
            rust: cells[1].to_string(),
            line: i + 1,
        });
    }
    rows
}

/// The check itself. Without Java or the 4.7.0 build it prints why and
/// returns (failing under `CI=true`), by the policy of every Java test.
pub fn check() {
    let Some(redisson) = java::redisson(VERSION) else {
        return;
    };
    let methods = redisson_methods(&redisson.classpath);
    let guide = std::fs::read_to_string(GUIDE).expect("read docs/REDISSON.md");
    let rows = table_rows(&guide);
    assert!(!rows.is_empty(), "no method parity table in {GUIDE}");

    let mut problems = Vec::new();
    let mut covered: BTreeSet<(String, String)> = BTreeSet::new();
    for row in &rows {
        let rust = row.rust.as_str();
        let reason = rust.starts_with("none: ") || rust.starts_with("planned: ");
        if !reason && !rust.contains('`') {
            problems.push(format!(
                "REDISSON.md:{}: the second column names no Rust item and gives no \
                 `none:`/`planned:` reason: {rust:?}",
                row.line
            ));
        }
        for signature in &row.signatures {
            let found: Vec<&String> = row
                .types
                .iter()
                .filter(|t| methods.get(*t).is_some_and(|m| m.contains(signature)))
                .collect();
            if found.is_empty() {
                problems.push(format!(
                    "REDISSON.md:{}: `{signature}` is not a method of {:?} in Redisson {VERSION}",
                    row.line, row.types
                ));
            }
            for t in found {
                covered.insert((t.clone(), signature.clone()));
            }
        }
    }
    for (owner, signatures) in &methods {
        for signature in signatures {
            if !covered.contains(&(owner.clone(), signature.clone())) {
                problems.push(format!(
                    "Redisson {VERSION} `{owner}.{signature}` is missing from the method parity \
                     table of docs/REDISSON.md (a row in a section whose heading names `{owner}`)"
                ));
            }
        }
    }
    let total: usize = methods.values().map(BTreeSet::len).sum();
    println!(
        "Redisson {VERSION}: {total} public methods in {} types, {} table rows, {} problems",
        methods.len(),
        rows.len(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
