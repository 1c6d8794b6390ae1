//! Tracing: the spans and events the README documents (acquire, wait,
//! renew, release; lost locks, reconnects, re-subscriptions) carry the lock
//! name and the documented fields, and nothing recorded ever contains the
//! password the client connected with.
//!
//! The test runs on tokio's current-thread runtime with a subscriber set for
//! its thread alone, so the client's tasks report to it and other tests'
//! clients do not.
mod common;

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{unique, Server};
use fred::prelude::*;
use redisson_lock::{Client, Config};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One span: its name and every field recorded on it (at creation or later).
#[derive(Clone, Debug, Default)]
struct SpanRecord {
    name: String,
    fields: HashMap<String, String>,
    /// How many times each field was recorded after the span's creation.
    records: HashMap<String, u32>,
}

/// One event: its level, message and fields.
#[derive(Clone, Debug)]
struct EventRecord {
    level: Level,
    fields: HashMap<String, String>,
}

#[derive(Default)]
struct Recorded {
    spans: HashMap<u64, SpanRecord>,
    events: Vec<EventRecord>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Recorded>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let mut span = SpanRecord {
            name: attrs.metadata().name().to_owned(),
            ..SpanRecord::default()
        };
        attrs.record(&mut Fields(&mut span.fields));
        self.0.lock().unwrap().spans.insert(id.into_u64(), span);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Some(span) = self.0.lock().unwrap().spans.get_mut(&id.into_u64()) {
            let mut fields = HashMap::new();
            values.record(&mut Fields(&mut fields));
            for (name, value) in fields {
                *span.records.entry(name.clone()).or_default() += 1;
                span.fields.insert(name, value);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if !event.metadata().target().starts_with("redisson_lock") {
            return;
        }
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().events.push(EventRecord {
            level: *event.metadata().level(),
            fields,
        });
    }
}

impl Capture {
    fn spans(&self, name: &str) -> Vec<SpanRecord> {
        let recorded = self.0.lock().unwrap();
        let mut spans: Vec<_> = recorded
            .spans
            .iter()
            .filter(|(_, s)| s.name == name)
            .map(|(id, s)| (*id, s.clone()))
            .collect();
        spans.sort_by_key(|(id, _)| *id);
        spans.into_iter().map(|(_, s)| s).collect()
    }

    /// The spans named `name` whose `lock` field is `lock`.
    fn spans_of(&self, name: &str, lock: &str) -> Vec<HashMap<String, String>> {
        self.spans(name)
            .into_iter()
            .filter(|s| s.fields.get("lock").map(String::as_str) == Some(lock))
            .map(|s| s.fields)
            .collect()
    }

    fn events(&self, message: &str) -> Vec<EventRecord> {
        self.0
            .lock()
            .unwrap()
            .events
            .iter()
            .filter(|e| e.fields.get("message").is_some_and(|m| m.contains(message)))
            .cloned()
            .collect()
    }

    /// Everything recorded, as text.
    fn all_text(&self) -> String {
        let recorded = self.0.lock().unwrap();
        let mut text = String::new();
        for span in recorded.spans.values() {
            text.push_str(&format!("{span:?}\n"));
        }
        for event in &recorded.events {
            text.push_str(&format!("{event:?}\n"));
        }
        text
    }
}

fn field<'a>(fields: &'a HashMap<String, String>, name: &str) -> &'a str {
    fields
        .get(name)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no field {name} in {fields:?}"))
}

const PASSWORD: &str = "obs-secret-Pa55";

#[tokio::test]
async fn spans_and_events_name_the_lock_and_never_the_password() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _default = tracing::subscriber::set_default(subscriber);

    // An ACL user with a password, kept across the restart below.
    let password = format!(">{PASSWORD}");
    let mut server = Server::private_with(&["--user", "obs", "on", &password, "~*", "&*", "+@all"]);
    let url = format!("redis://obs:{PASSWORD}@127.0.0.1:{}", server.port);
    let connect = || async {
        Client::connect_with(
            Config::from_url(&url)
                .unwrap()
                .lock_watchdog_timeout(Duration::from_millis(600))
                .retry_delay(Duration::from_millis(50)),
        )
        .await
        .unwrap()
    };
    let (client, other) = (connect().await, connect().await);
    let name = unique("traced");
    let lock = client.lock(&name).unwrap();

    // An acquisition and its release.
    let guard = lock.lock().await.unwrap();
    let acquired = capture.spans_of("redisson_lock.acquire", &name);
    assert_eq!(acquired.len(), 1, "{acquired:?}");
    assert_eq!(field(&acquired[0], "kind"), "lock");
    assert_eq!(field(&acquired[0], "owner"), guard.field());
    assert_eq!(field(&acquired[0], "outcome"), "acquired");
    field(&acquired[0], "waited_ms").parse::<u64>().unwrap();
    assert!(!acquired[0].contains_key("wait_ms"), "no time limit");

    // Busy, then a wait that times out: a wait span counts the attempts.
    let contender = other.lock(&name).unwrap();
    assert!(contender.try_lock().await.unwrap().is_none());
    assert!(contender
        .try_lock_for(Duration::from_millis(150))
        .await
        .unwrap()
        .is_none());
    let acquired = capture.spans_of("redisson_lock.acquire", &name);
    assert_eq!(field(&acquired[1], "outcome"), "busy");
    assert_eq!(field(&acquired[2], "outcome"), "timeout");
    assert_eq!(field(&acquired[2], "wait_ms"), "150");
    assert!(field(&acquired[2], "waited_ms").parse::<u64>().unwrap() >= 150);
    let waits = capture.spans_of("redisson_lock.wait", &name);
    assert_eq!(waits.len(), 1, "only the timed wait waited: {waits:?}");
    assert!(field(&waits[0], "attempts").parse::<u32>().unwrap() >= 2);
    let wait = capture
        .spans("redisson_lock.wait")
        .into_iter()
        .find(|s| s.fields.get("lock") == Some(&name))
        .unwrap();
    assert_eq!(
        wait.records.get("attempts"),
        Some(&1),
        "attempts is recorded once, when the wait ends: {wait:?}"
    );

    // Renewal batches.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let renewals = capture.spans("redisson_lock.renew");
    assert!(!renewals.is_empty());
    assert!(renewals.iter().any(|r| field(&r.fields, "holds") == "1"
        && field(&r.fields, "outcome") == "renewed"
        && field(&r.fields, "renewed") == "1"));

    guard.unlock().await.unwrap();
    let released = capture.spans_of("redisson_lock.release", &name);
    assert_eq!(released.len(), 1);
    assert_eq!(field(&released[0], "outcome"), "released");
    assert_eq!(field(&released[0], "kind"), "lock");
    assert_eq!(field(&released[0], "background"), "false");

    // A lock lost behind the holder's back: a warning naming it.
    let guard = lock.lock().await.unwrap();
    let _: i64 = client.redis().del(name.as_str()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fires");
    let lost = capture.events("lock lost");
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].level, Level::WARN);
    assert_eq!(field(&lost[0].fields, "lock"), name);
    assert_eq!(field(&lost[0].fields, "owner"), guard.field());
    let unlocked = guard.unlock().await;
    assert!(unlocked.is_err());
    let released = capture.spans_of("redisson_lock.release", &name);
    assert_eq!(field(&released[1], "outcome"), "not_held");

    // A restart of the server while a waiter waits: both connections are
    // lost and come back, and the waiter's channel is subscribed again. A
    // semaphore without permits keeps its waiter waiting across the restart
    // (the restarted server is empty, and no count is no permit).
    let semaphore = other.semaphore(&name).unwrap();
    let channel = semaphore.channel().to_owned();
    let waiter = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.acquire(1).await }
    });
    common::eventually("the semaphore waiter waits", || {
        let waiting = capture.spans_of("redisson_lock.wait", &name).len();
        async move { waiting == 2 }
    })
    .await;
    server.restart();
    common::eventually("the waiter's channel subscribed again", || {
        let again = capture.events("subscribed again").len();
        async move { again >= 1 }
    })
    .await;
    let again = capture.events("subscribing again");
    assert!(
        again.iter().any(|e| field(&e.fields, "channel") == channel
            && field(&e.fields, "reason") == "reconnect"
            && e.level == Level::DEBUG),
        "{again:?}"
    );
    semaphore.add_permits(1).await.unwrap();
    let woken = "the waiter is woken after the restart";
    let permit = common::within(Duration::from_secs(10), woken, waiter)
        .await
        .unwrap();
    permit.release().await.unwrap();
    common::eventually("reconnects reported", || {
        let back = capture.events("connection re-established").len();
        async move { back >= 2 }
    })
    .await;
    let lost = capture.events("connection lost");
    assert!(!lost.is_empty());
    assert!(lost.iter().all(|e| e.level == Level::WARN));
    let back = capture.events("connection re-established");
    assert!(back
        .iter()
        .all(|e| e.level == Level::INFO && field(&e.fields, "server").starts_with("127.0.0.1:")));

    // Nothing recorded names the password.
    let text = capture.all_text();
    assert!(text.contains(&name));
    assert!(!text.contains(PASSWORD), "the password leaked into tracing");
    client.shutdown().await;
    other.shutdown().await;
}

/// A shutdown that abandons give-backs of permits says so at WARN, once per
/// semaphore, with how many give-backs and permits; their release spans end
/// `abandoned`.
#[tokio::test]
async fn a_shutdown_reports_the_give_backs_it_abandons() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    let server = Server::start();
    let proxy = common::fault::Proxy::start(server.port).await;
    let name = unique("traced-abandon");
    let (client, kept) = common::fault::stranded_give_backs(&proxy, &name).await;
    client.shutdown().await;
    let mut warned: Vec<_> = capture
        .events("shutdown abandoned give-backs of permits")
        .into_iter()
        .map(|e| {
            assert_eq!(e.level, Level::WARN);
            let f = |n| field(&e.fields, n).to_owned();
            (f("lock"), f("kind"), f("releases"), f("permits"))
        })
        .collect();
    warned.sort();
    let pes = format!("{name}-pes");
    assert_eq!(
        warned,
        [
            (name.clone(), "semaphore".into(), "2".into(), "2".into()),
            (
                pes.clone(),
                "permit_expirable_semaphore".into(),
                "1".into(),
                "1".into()
            ),
        ]
    );
    for (lock, abandoned) in [(&name, 2), (&pes, 1)] {
        let spans = capture.spans_of("redisson_lock.release", lock);
        assert_eq!(spans.len(), abandoned, "{spans:?}");
        for span in spans {
            assert_eq!(field(&span, "background"), "true");
            assert_eq!(field(&span, "outcome"), "abandoned");
        }
    }
    drop(kept);
}
