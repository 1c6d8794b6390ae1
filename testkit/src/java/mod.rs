//! A real Java Redisson client beside the crate: finds (or builds) a Redisson
//! class path under `target/redisson-java/VERSION/` ([`redisson`], or
//! [`locate`] without the tests' policy), compiles `interop/java/*.java`
//! against it (once per version and source hash, into
//! `target/redisson-peer/`), starts the tests' peer as a child process on the
//! same Redis and talks to it line by line ([`Peer`]; see the header of
//! `RedissonPeer.java` for the commands). The JVM is killed on drop. Paths
//! are relative to the workspace root.
//!
//! Every command and reply, and every note a test adds, goes into one
//! [`Steps`] log, which assertion messages print, so a failure says which
//! side did what, in which order, and when. What the scenarios do is the
//! tests' business: this is the process and its line protocol.

mod peer;
mod steps;

pub use peer::{Peer, Pending, Reply, Status, Topology};
pub use steps::Steps;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};

/// The Redisson versions the tests know, newest first.
pub const VERSIONS: [&str; 4] = ["4.7.0", "3.45.0", "3.23.0", "3.17.0"];

/// The workspace root (the kit's parent directory).
fn root() -> PathBuf {
    let kit = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    kit.parent()
        .expect("the kit lies in the workspace")
        .to_path_buf()
}

/// `REDISSON_VERSIONS` as a list, if set and not empty.
pub fn required_versions() -> Option<Vec<String>> {
    let v = std::env::var("REDISSON_VERSIONS").ok()?;
    let list: Vec<String> = v
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!list.is_empty()).then_some(list)
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Skip loudly, or fail under `CI=true`.
fn skip_or_fail(why: &str) -> Option<Redisson> {
    assert!(
        !ci(),
        "CI=true and the Java interop tests cannot run: {why}"
    );
    println!("skipped: {why} (Java Redisson interop not tested)");
    eprintln!("skipped: {why} (Java Redisson interop not tested)");
    None
}

/// Whether `java` and `javac` both run (asked once per process).
fn has_java() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| has_program("java") && has_program("javac"))
}

fn has_program(name: &str) -> bool {
    std::process::Command::new(name)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The class path file of a built version.
fn classpath_file(version: &str) -> PathBuf {
    root()
        .join("target/redisson-java")
        .join(version)
        .join("classpath")
}

/// A Redisson build and the peer compiled against it.
#[derive(Clone, Debug)]
pub struct Redisson {
    /// The Redisson version (`4.7.0`, ...).
    pub version: String,
    /// The whole `-cp`: Redisson's jars and the peer's classes.
    pub classpath: String,
}

/// The Redisson build of `version`, with the peer compiled against it, or
/// `None` (after printing why) when this version is not to be tested here.
///
/// * `REDISSON_VERSIONS` set: a listed version must be usable (else panic);
///   an unlisted one is skipped.
/// * Unset: without `java`/`javac` (or, when nothing is built, without
///   `../shared/redisson-java/build.sh`) print "skipped" and return `None`,
///   or panic under `CI=true`. When no version is built at all, build 4.7.0
///   once per process. Versions not built are skipped.
pub fn redisson(version: &str) -> Option<Redisson> {
    assert!(
        VERSIONS.contains(&version),
        "unknown Redisson version {version}"
    );
    let required = required_versions();
    if let Some(list) = &required {
        if !list.iter().any(|v| v == version) {
            println!("skipped: Redisson {version} is not in REDISSON_VERSIONS={list:?}");
            return None;
        }
        assert!(
            has_java(),
            "REDISSON_VERSIONS lists {version} but java/javac are not on PATH"
        );
        assert!(
            classpath_file(version).exists(),
            "REDISSON_VERSIONS lists {version} but {} does not exist: build it first \
             (bash ../shared/redisson-java/build.sh target/redisson-java/4.7.0, or \
             interop/redisson/build.sh {version} target/redisson-java/{version})",
            classpath_file(version).display()
        );
    } else {
        if !has_java() {
            return skip_or_fail("java/javac not found on PATH");
        }
        if !VERSIONS.iter().any(|v| classpath_file(v).exists()) {
            if let Err(why) = build_default() {
                return skip_or_fail(&why);
            }
        }
        if !classpath_file(version).exists() {
            println!(
                "skipped: Redisson {version} is not built ({} missing)",
                classpath_file(version).display()
            );
            return None;
        }
    }
    Some(locate(version).unwrap_or_else(|e| panic!("{e}")))
}

/// The Redisson build of `version` with the Java programs compiled against
/// it, or why it cannot be had here, without the tests' policy: no panic,
/// `REDISSON_VERSIONS` and `CI` are not read. When no version is built at
/// all, 4.7.0 is built once (as [`redisson`] does). For the benchmark.
pub fn locate(version: &str) -> Result<Redisson, String> {
    if !has_java() {
        return Err("java/javac not found on PATH".into());
    }
    if !VERSIONS.iter().any(|v| classpath_file(v).exists()) {
        build_default()?;
    }
    let file = classpath_file(version);
    let jars = std::fs::read_to_string(&file).map_err(|e| {
        format!(
            "Redisson {version} is not built ({}: {e}); build it with \
             bash interop/redisson/build.sh {version} target/redisson-java/{version}",
            file.display()
        )
    })?;
    let jars = jars.trim().to_string();
    let classes = compile_peer(version, &jars)?;
    Ok(Redisson {
        version: version.to_string(),
        classpath: format!("{jars}:{}", classes.display()),
    })
}

/// Build Redisson 4.7.0 with `../shared/redisson-java/build.sh`, once per
/// process.
fn build_default() -> Result<(), String> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let script = root().join("../shared/redisson-java/build.sh");
            if !script.exists() {
                return Err(format!(
                    "no Redisson build in target/redisson-java/ and no {} to make one",
                    script.display()
                ));
            }
            let out = root().join("target/redisson-java/4.7.0");
            eprintln!("building Redisson 4.7.0 with {} ...", script.display());
            let result = std::process::Command::new("bash")
                .arg(&script)
                .arg(&out)
                .arg("4.7.0")
                .output()
                .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
            if !result.status.success() || !classpath_file("4.7.0").exists() {
                return Err(format!(
                    "{} failed ({}): {}",
                    script.display(),
                    result.status,
                    String::from_utf8_lossy(&result.stderr)
                ));
            }
            Ok(())
        })
        .clone()
}

/// FNV-1a, 64 bits: a stable hash of the peer's source for its cache key.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The Java programs, compiled together: the tests' peer and the bench's
/// worker (`RedissonBench.java`).
const SOURCES: [&str; 2] = ["RedissonPeer.java", "RedissonBench.java"];

/// Compile the Java programs ([`SOURCES`]) against `jars` into
/// `target/redisson-peer/VERSION-HASH/` unless already there; returns that
/// directory. Safe against parallel tests and processes (compiles into a
/// temporary directory, then renames).
fn compile_peer(version: &str, jars: &str) -> Result<PathBuf, String> {
    static COMPILED: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, dir)) = compiled.iter().find(|(v, _)| v == version) {
        return Ok(dir.clone());
    }
    let sources: Vec<PathBuf> = SOURCES
        .iter()
        .map(|f| root().join("interop/java").join(f))
        .collect();
    let mut text = Vec::new();
    for source in &sources {
        text.extend(std::fs::read(source).map_err(|e| format!("read {}: {e}", source.display()))?);
    }
    let hash = fnv(&[text.as_slice(), jars.as_bytes()].concat());
    let base = root().join("target/redisson-peer");
    let dir = base.join(format!("{version}-{hash:016x}"));
    let done = |dir: &PathBuf| {
        SOURCES
            .iter()
            .all(|f| dir.join(f.replace(".java", ".class")).exists())
    };
    if !done(&dir) {
        let tmp = base.join(format!(
            "{version}-{hash:016x}.tmp-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&tmp).map_err(|e| format!("create {}: {e}", tmp.display()))?;
        let out = std::process::Command::new("javac")
            .args([
                "--release",
                "17",
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-cp",
                jars,
                "-d",
            ])
            .arg(&tmp)
            .args(&sources)
            .output()
            .map_err(|e| format!("javac does not run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "javac of interop/java against Redisson {version} failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        if std::fs::rename(&tmp, &dir).is_err() {
            // Another process got there first.
            let _ = std::fs::remove_dir_all(&tmp);
        }
        if !done(&dir) {
            return Err(format!("compiled classes missing in {}", dir.display()));
        }
    }
    compiled.push((version.to_string(), dir.clone()));
    Ok(dir)
}
