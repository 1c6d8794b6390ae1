//! What each scenario's tables show: its title, subjects, metrics (rows of
//! the values table, with their labels), and the pairs and metrics of its
//! ratios table. A new subject is one more key in `subjects` (and `pairs`).

/// (metric key, row label).
type Metrics = &'static [(&'static str, &'static str)];

pub struct Section {
    pub id: &'static str,
    pub title: &'static str,
    pub subjects: &'static [&'static str],
    /// The rows of the values table, in groups (shown in this order).
    metrics: &'static [Metrics],
    /// (A, B) pairs of the ratios table.
    pub pairs: &'static [(&'static str, &'static str)],
    /// The metrics of the ratios table.
    pub ratio_metrics: &'static [&'static str],
    /// Contended scenarios: also the handover quantiles of all rounds pooled.
    pub pooled: bool,
    /// Sequential scenarios are measured in runs, not interleaved rounds.
    pub sequential: bool,
}

impl Section {
    /// The rows of the values table: (metric key, label).
    pub fn metrics(&self) -> impl Iterator<Item = &(&'static str, &'static str)> {
        self.metrics.iter().copied().flatten()
    }

    pub fn metric_label(&self, metric: &str) -> String {
        self.metrics()
            .find(|(m, _)| *m == metric)
            .map_or(metric.to_string(), |(_, l)| l.to_string())
    }
}

pub fn subject_label(s: &str) -> &str {
    match s {
        "ours" => "redisson-lock",
        "arl" => "async-redis-lock",
        "lock" => "per-item lock",
        "watch" => "WATCH/MULTI",
        "floorp" => "floor, pipelined",
        "java" => "Redisson (Java)",
        "javatuned" => "Redisson (Java, tuned)",
        "javapool" => "Redisson (Java), pool for all names",
        other => other,
    }
}

// Java with its defaults (`java`) and tuned (`javatuned`): the
// targets compare with the faster of the two.
const LIBS: &[&str] = &["ours", "ceiling", "rslock", "arl", "java", "javatuned"];
const WITH_FLOOR: &[&str] = &[
    "ours",
    "ceiling",
    "floor",
    "rslock",
    "arl",
    "java",
    "javatuned",
];
const WITH_FLOORS: &[&str] = &[
    "ours",
    "ceiling",
    "floor",
    "floorp",
    "rslock",
    "arl",
    "java",
    "javatuned",
];
const VS: &[(&str, &str)] = &[
    ("ours", "ceiling"),
    ("ours", "rslock"),
    ("ours", "arl"),
    ("ours", "java"),
    ("ours", "javatuned"),
];
const VS_FLOOR: &[(&str, &str)] = &[
    ("ours", "floor"),
    ("ceiling", "floor"),
    ("ours", "ceiling"),
    ("ours", "rslock"),
    ("ours", "arl"),
    ("ours", "java"),
    ("ours", "javatuned"),
];

/// The costs of a lock+unlock pair (scenarios 1 and 2).
const PAIR_COSTS: Metrics = &[
    ("client_cpu_us_per_pair", "client CPU µs/pair (user+sys)"),
    ("client_user_us_per_pair", "client user CPU µs/pair"),
    ("client_sys_us_per_pair", "client sys CPU µs/pair"),
    ("client_csw_per_pair", "client context switches/pair"),
    ("server_cpu_us_per_pair", "redis-server CPU µs/pair"),
    ("round_trips_per_acq", "client commands/pair"),
    ("server_cmds_per_acq", "server commands/pair"),
];
const UNCONTENDED: &[Metrics] = &[
    &[
        ("pairs_per_s", "lock+unlock pairs/s"),
        ("pair_mean_us", "wall µs/pair (1e6 / pairs/s)"),
        ("pair_p50_us", "pair p50 µs"),
        ("pair_p99_us", "pair p99 µs"),
    ],
    PAIR_COSTS,
];
const UNCONTENDED_RATIOS: &[&str] = &[
    "pairs_per_s",
    "pair_p50_us",
    "pair_p99_us",
    "client_cpu_us_per_pair",
    "server_cpu_us_per_pair",
];

/// Throughput and handovers of a contended round (locks and semaphores).
const HANDOVERS: Metrics = &[
    ("acq_per_s", "acquisitions/s"),
    ("handover_p50_us", "handover p50 µs"),
    ("handover_p99_us", "handover p99 µs"),
    ("handover_max_us", "handover max µs"),
    ("handovers", "handovers (count)"),
];
/// The costs of an acquisition in a contended round.
const ACQUISITION_COSTS: Metrics = &[
    ("client_cpu_us_per_acq", "client CPU µs/acq"),
    ("server_cpu_us_per_acq", "redis-server CPU µs/acq"),
    ("round_trips_per_acq", "client commands/acq"),
    ("script_cmds_per_acq", "in-script commands/acq"),
    ("server_cmds_per_acq", "server commands/acq"),
];
const CONTENDED: &[Metrics] = &[
    HANDOVERS,
    &[
        ("handovers_negative", "handovers < 0 µs (count)"),
        (
            "handover_before_unlock_returned",
            "next lock returned before unlock returned",
        ),
        ("fairness_min_over_max", "fairness min/max"),
        ("same_task_reacquire_share", "same-task re-acquire share"),
        ("wait_p50_us", "wait for lock p50 µs"),
        ("wait_p99_us", "wait for lock p99 µs"),
        ("wait_max_us", "wait for lock max µs"),
        ("waits_abandoned_at_deadline", "waits cut at deadline"),
    ],
    ACQUISITION_COSTS,
];
/// Scenario 3b: as `CONTENDED`, with the pause each subject actually took.
const CONTENDED_PAUSED: &[Metrics] = &[
    HANDOVERS,
    &[
        (
            "pause_p50_us",
            "pause taken p50 µs (unlock returned → next lock called)",
        ),
        ("pause_p90_us", "pause taken p90 µs"),
        ("pause_max_us", "pause taken max µs"),
    ],
    CONTENDED[1],
    ACQUISITION_COSTS,
];
const CONTENDED_RATIOS: &[&str] = &[
    "acq_per_s",
    "handover_p50_us",
    "handover_p99_us",
    "wait_p99_us",
    "client_cpu_us_per_acq",
];

/// The figures of a purchase run (scenarios 6i and 6ii).
const PURCHASES: Metrics = &[
    ("wall_s", "wall s"),
    ("correct", "final data right (1 = yes)"),
    ("aborted", "aborted transactions"),
    ("server_cmds_per_purchase", "server commands/purchase"),
    ("server_cpu_us_per_purchase", "redis-server CPU µs/purchase"),
];

/// Scenarios 1, 1p, 1m.
const fn uncontended(id: &'static str, title: &'static str) -> Section {
    Section {
        id,
        title,
        subjects: WITH_FLOOR,
        metrics: UNCONTENDED,
        pairs: VS_FLOOR,
        ratio_metrics: UNCONTENDED_RATIOS,
        pooled: false,
        sequential: false,
    }
}

/// Scenarios 3, 3b, 4.
const fn contended(
    id: &'static str,
    title: &'static str,
    ratio_metrics: &'static [&'static str],
) -> Section {
    Section {
        id,
        title,
        subjects: LIBS,
        metrics: CONTENDED,
        pairs: VS,
        ratio_metrics,
        pooled: true,
        sequential: false,
    }
}

/// Scenarios 6i, 6ii.
const fn purchases(id: &'static str, title: &'static str, metrics: &'static [Metrics]) -> Section {
    Section {
        id,
        title,
        subjects: &["lock", "watch"],
        metrics,
        pairs: &[("watch", "lock")],
        ratio_metrics: &["wall_s", "server_cpu_us_per_purchase"],
        pooled: false,
        sequential: true,
    }
}

pub const SECTIONS: &[Section] = &[
    uncontended("s1", "1 uncontended: 1 task, 1 name, on a runtime worker"),
    uncontended(
        "s1p",
        "1p uncontended, the bench and redis-server pinned to one CPU",
    ),
    uncontended(
        "s1m",
        "1m uncontended, the loop on the block_on thread (as before issue 12)",
    ),
    Section {
        id: "s2",
        title: "2 parallel: 16 tasks, own names (floor: 16 threads and connections; floor, pipelined: 1 thread, 1 connection)",
        subjects: WITH_FLOORS,
        metrics: &[&[("pairs_per_s", "pairs/s (total)")], PAIR_COSTS],
        pairs: &[
            ("ours", "floorp"),
            ("ceiling", "floorp"),
            ("ours", "floor"),
            ("ours", "ceiling"),
            ("ours", "rslock"),
            ("ours", "arl"),
            ("ours", "java"),
            ("ours", "javatuned"),
        ],
        ratio_metrics: &[
            "pairs_per_s",
            "client_cpu_us_per_pair",
            "server_cpu_us_per_pair",
        ],
        pooled: false,
        sequential: false,
    },
    contended(
        "s3",
        "3 contended: 8 tasks, 1 process, 1 name",
        CONTENDED_RATIOS,
    ),
    Section {
        metrics: CONTENDED_PAUSED,
        ..contended(
            "s3b",
            "3b contended, a precise 1 ms pause outside the lock after each unlock, the same for every subject",
            &[
                "acq_per_s",
                "handover_p50_us",
                "handover_p99_us",
                "wait_p50_us",
                "wait_p99_us",
                "pause_p50_us",
                "client_cpu_us_per_acq",
            ],
        )
    },
    contended(
        "s4",
        "4 contended: 4 processes x 2 tasks, 1 name",
        &["acq_per_s", "handover_p50_us", "handover_p99_us", "wait_p99_us"],
    ),
    Section {
        id: "sem",
        title: "sem semaphore: 4 permits, 16 tasks, 1 process, take 1 and give it back at once",
        subjects: &["ours", "ceiling", "java", "javatuned"],
        metrics: &[
            HANDOVERS,
            &[
                ("acquired_while_free", "acquired a free permit (count)"),
                ("wait_p50_us", "wait for permit p50 µs"),
                ("wait_p99_us", "wait for permit p99 µs"),
                ("waits_abandoned_at_deadline", "waits cut at deadline"),
            ],
            ACQUISITION_COSTS,
        ],
        pairs: &[
            ("ours", "ceiling"),
            ("ours", "java"),
            ("ours", "javatuned"),
        ],
        ratio_metrics: &["acq_per_s", "handover_p50_us", "handover_p99_us"],
        pooled: false,
        sequential: false,
    },
    Section {
        id: "s5w",
        title: "5a scale: waiters on held names, 1 process",
        subjects: &["ours", "ceiling", "java", "javapool"],
        metrics: &[&[
            ("waiters", "waiters"),
            ("names", "names"),
            ("subscription_pool", "Java subscriptionConnectionPoolSize"),
            ("heap_live_bytes_per_waiter", "heap live bytes/waiter (all waiting)"),
            (
                "heap_peak_start_bytes_per_waiter",
                "heap peak bytes/waiter (until all waiting)",
            ),
            (
                "heap_peak_bytes_per_waiter",
                "heap peak bytes/waiter (until drained)",
            ),
            (
                "heap_after_drain_bytes_per_waiter",
                "heap still live after drain, bytes/waiter",
            ),
            ("bytes_per_waiter", "RSS bytes/waiter (all waiting)"),
            (
                "rss_after_drain_bytes_per_waiter",
                "RSS after drain, bytes/waiter",
            ),
            ("lock_future_bytes", "size of one lock() future, bytes"),
            ("subscribed_channels", "channels subscribed"),
            ("all_waiting_after_s", "s until all waiting"),
            ("drain_s", "s to drain after release"),
            ("completed", "completed"),
            ("errors", "errors"),
            ("hang", "hang (1 = yes)"),
        ]],
        pairs: &[("ours", "ceiling"), ("ours", "java"), ("ours", "javapool")],
        ratio_metrics: &[
            "heap_live_bytes_per_waiter",
            "heap_peak_start_bytes_per_waiter",
            "heap_peak_bytes_per_waiter",
            "bytes_per_waiter",
        ],
        pooled: false,
        sequential: true,
    },
    Section {
        id: "s5r",
        title: "5b scale: held watchdog locks",
        subjects: &["ours"],
        metrics: &[&[
            ("locks", "held locks"),
            ("interval_ms", "renewal interval ms"),
            ("renew_calls_per_interval", "renewal script calls/interval"),
            ("expected_calls_per_interval", "ceil(locks / batch)"),
            ("runs_per_interval", "renewal runs per interval"),
            ("keys_alive", "lock keys alive after window"),
            ("lost", "guards lost"),
        ]],
        pairs: &[],
        ratio_metrics: &[],
        pooled: false,
        sequential: true,
    },
    purchases(
        "s6i",
        "6i stock 10 000, 2 processes, -2 per step",
        &[PURCHASES],
    ),
    purchases(
        "s6ii",
        "6ii market 500 x 2000, 8 processes x 10 000 units",
        &[
            PURCHASES,
            &[
                ("lock_waits_over_1s", "lock waits >= 1 s"),
                ("max_lock_wait_ms", "longest lock wait ms"),
            ],
        ],
    ),
];
