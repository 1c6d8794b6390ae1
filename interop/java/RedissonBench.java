// The real Java Redisson client as a subject of the benchmark (bench/src/java.rs
// starts and drives it). Written for this repository; it uses only Redisson's
// public API that exists from 3.17.0 to 4.7.0, with Redisson's default Config
// (pools, threads, codec, timeouts) apart from the server address, or tuned.
//
// Usage:
//   java JVM_FLAGS -cp REDISSON_CLASSPATH:DIR RedissonBench redis://127.0.0.1:6379 WARM_MS [POOL [WARM_PATH [SETUP]]]
//
// JVM_FLAGS (bench/src/java.rs, JVM_FLAGS): a production JVM, full tiered
// JIT, G1, a fixed heap. WARM_PATH: the path the JIT warm-up runs, for
// WARM_MS (the scenario's own: pairs, parallel, contend, pause, sem), or
// `all` (a third each of pairs, contend and sem), or `none`.
//
// POOL, if given and above 0, sets subscriptionConnectionPoolSize (default 50
// connections of subscriptionsPerConnection = 5 channels each): scenario 5a
// runs Java with the default and with a pool large enough for its names.
// SETUP: `defaults` (the default), or `tuned`: Redisson configured as a
// performance-minded Java team would on this 2-core machine: nettyThreads 4,
// threads 4, a command pool of 32 connections, all 32 opened at start
// (connectionMinimumIdleSize 32) so that none is opened while measuring.
// On start it connects, warms the JVM (JIT) for WARM_MS on names `warm:*`
// (single-task pairs, 8 tasks on one lock, a 16-task semaphore), and prints one
// line: `ready <redissonVersion>` (or `fatal <ExceptionClass> <message>`).
// Then every stdin line is one command, answered by one line: JSON, `ok`, or
// `err <ExceptionClass> <message>`. Times are epoch nanoseconds (the bench's
// `util::now_ns` clock: CLOCK_REALTIME), read through System.nanoTime from one
// calibration at start; an abandoned wait has 18446744073709551615 (u64::MAX)
// as its later times, as in the bench.
//   pairs NAME MS
//       one thread locks and unlocks NAME for MS -> {"lat_us":[..],"elapsed_s":S}
//   parallel PREFIX TASKS START_NS MS
//       TASKS threads from START_NS, each on PREFIX:i -> {"pairs":N,"elapsed_s":S}
//   contend NAME TASKS FIRST BEGIN_NS DEADLINE_NS THINK_US
//       TASKS threads (numbered from FIRST) take NAME from BEGIN_NS to DEADLINE_NS
//       with tryLock(time left), pausing THINK_US after each unlock (`pause`:
//       parkNanos to 100 µs before, then spin; the Rust subjects' pause alike)
//       -> [[task,asked,acquired,releasing,released],..]
//   sem NAME PERMITS TASKS BEGIN_NS DEADLINE_NS
//       trySetPermits(PERMITS), then TASKS threads tryAcquire(time left) and
//       release one permit -> [[task,asked,acquired,releasing],..]
//   slots BASE_NS TASKS FIRST THINK_US NAME:OFFSET_NS:WARM_NS:LENGTH_NS,..
//       `contend` in every slot of a wall-clock schedule (scenario 4), from
//       BASE_NS + OFFSET - WARM to BASE_NS + OFFSET + LENGTH -> [[events],..]
//   hold PREFIX NAMES
//       a second client takes PREFIX:0 .. PREFIX:NAMES-1 -> ok
//   wait PREFIX NAMES N
//       N waiters, lockAsync(thread id 1..N) on PREFIX:(i mod NAMES), each
//       unlocking as soon as it holds -> ok (at once)
//   release LIMIT_S
//       the second client unlocks its names; waits up to LIMIT_S for the
//       waiters -> {"completed":C,"errors":E,"hang":B,"drain_s":S,"error":"first"}
//   memory
//       after a full GC -> {"rss_kib":K,"heap_bytes":B}
//   watch N WATCHDOG_MS
//       a third client (lockWatchdogTimeout WATCHDOG_MS) takes held:0..N-1 -> ok
//   unwatch
//       unlocks them -> {"unlock_errors":E}
//   jvm
//       -> {"java_version":..,"vm":..,"flags":..,"gc":..,"heap_max_mib":N,"processors":N}
//   quit

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.redisson.Redisson;
import org.redisson.api.RFuture;
import org.redisson.api.RLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public final class RedissonBench {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    private static final String NEVER = "18446744073709551615";
    /** Task threads, reused across rounds (created on first use). */
    private static final ExecutorService POOL = Executors.newCachedThreadPool();

    private static long epoch0;
    private static long mono0;

    private static RedissonClient client;
    private static RedissonClient holderClient;
    private static String address;
    private static RedissonClient watchClient;
    private static final List<RLock> WATCHED = new ArrayList<>();
    private static final List<RLock> HELD = new ArrayList<>();
    private static final List<CompletableFuture<Void>> WAITERS = new ArrayList<>();
    /** When each waiter of `wait` acquired (epoch ns; 0: not yet), and the names they wait on. */
    private static long[] acquired = new long[0];
    private static int waitNames = 1;
    private static final AtomicInteger FAILED = new AtomicInteger();
    private static final AtomicReference<String> FIRST_ERROR = new AtomicReference<>("");

    /** Epoch nanoseconds. */
    static long now() {
        return epoch0 + (System.nanoTime() - mono0);
    }

    static void sleepUntil(long epochNs) {
        long left;
        while ((left = epochNs - now()) > 0) {
            LockSupport.parkNanos(left);
        }
    }

    /** How long before a pause's deadline `pause` stops parking and spins (bench/src/pause.rs: the same). */
    static final long SPIN_NS = 100_000;

    /**
     * A precise pause of `ns` on the monotonic clock, as the Rust subjects
     * take it (bench/src/pause.rs): park (the kernel's high-resolution timer)
     * until SPIN_NS before the deadline, then spin until the deadline.
     */
    static void pause(long ns) {
        long deadline = System.nanoTime() + ns;
        long left;
        while ((left = deadline - System.nanoTime()) > SPIN_NS) {
            LockSupport.parkNanos(left - SPIN_NS);
        }
        while (System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
    }

    /** Calibrate `now()` on the sample with the smallest gap between the two clocks' reads. */
    static void calibrate() {
        long bestGap = Long.MAX_VALUE;
        for (int i = 0; i < 100; i++) {
            long a = System.nanoTime();
            Instant t = Instant.now();
            long b = System.nanoTime();
            if (b - a < bestGap) {
                bestGap = b - a;
                epoch0 = t.getEpochSecond() * 1_000_000_000L + t.getNano();
                mono0 = a + (b - a) / 2;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        calibrate();
        long warmMs = args.length > 1 ? Long.parseLong(args[1]) : 0;
        String version = "unknown";
        try {
            int pool = args.length > 2 ? Integer.parseInt(args[2]) : 0;
            address = args[0];
            Config config = new Config();
            config.useSingleServer().setAddress(args[0]);
            if (pool > 0) {
                config.useSingleServer().setSubscriptionConnectionPoolSize(pool);
            }
            if (args.length > 4 && args[4].equals("tuned")) {
                config.setNettyThreads(4);
                config.setThreads(4);
                config.useSingleServer()
                        .setConnectionPoolSize(32)
                        .setConnectionMinimumIdleSize(32);
            }
            client = Redisson.create(config);
            Config second = new Config();
            second.useSingleServer().setAddress(args[0]);
            holderClient = Redisson.create(second);
            String v = Redisson.class.getPackage().getImplementationVersion();
            if (v != null) {
                version = v;
            }
            warm(warmMs, args.length > 3 ? args[3] : "all");
        } catch (Throwable e) {
            OUT.println("fatal " + e.getClass().getName() + " " + clean(String.valueOf(e.getMessage())));
            Runtime.getRuntime().halt(3);
        }
        OUT.println("ready " + version);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String[] a : (Iterable<String[]>) in.lines()
                .map(String::trim)
                .filter(l -> !l.isEmpty())
                .map(l -> l.split(" "))
                .takeWhile(a -> !a[0].equals("quit"))::iterator) {
            OUT.println(answer(a));
        }
        OUT.flush();
        Runtime.getRuntime().halt(0);
    }

    /** The answer to one command: its result, or `err <ExceptionClass> <message>`. */
    static String answer(String[] command) {
        try {
            return run(command);
        } catch (Throwable e) {
            Throwable t = e.getCause() != null && e.getCause() != e ? e.getCause() : e;
            return "err " + t.getClass().getName() + " " + clean(String.valueOf(t.getMessage()));
        }
    }

    static String clean(String s) {
        return s.replace('\n', ' ').replace('\r', ' ');
    }

    static String run(String[] a) throws Exception {
        switch (a[0]) {
            case "pairs":
                return pairs(a[1], Long.parseLong(a[2]));
            case "parallel":
                return parallel(a[1], Integer.parseInt(a[2]), Long.parseLong(a[3]), Long.parseLong(a[4]));
            case "contend":
                return events(contend(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                        Long.parseLong(a[4]), Long.parseLong(a[5]), Long.parseLong(a[6])));
            case "sem":
                return events(semaphore(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                        Long.parseLong(a[4]), Long.parseLong(a[5])));
            case "slots":
                return slots(Long.parseLong(a[1]), Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                        Long.parseLong(a[4]), a[5]);
            case "hold":
                return hold(a[1], Integer.parseInt(a[2]));
            case "wait":
                return waiters(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]));
            case "release":
                return release(Long.parseLong(a[1]));
            case "memory":
                return memory();
            case "jvm":
                return jvm();
            case "watch":
                return watch(Integer.parseInt(a[1]), Long.parseLong(a[2]));
            case "unwatch":
                return unwatch();
            default:
                throw new IllegalArgumentException("unknown command " + a[0]);
        }
    }

    /** JIT warm-up before the first measured round: the paths every scenario uses. */
    static void warm(long ms, String path) throws Exception {
        if (ms <= 0 || path.equals("none")) {
            return;
        }
        long all = ms * 1_000_000L;
        long begin = now();
        switch (path) {
            case "pairs":
                pairs("warm:pairs", ms);
                return;
            case "parallel":
                parallel("warm:parallel", 16, begin, ms);
                return;
            case "contend":
                contend("warm:contend:" + begin, 8, 0, begin, begin + all, 0);
                return;
            case "pause":
                contend("warm:pause:" + begin, 8, 0, begin, begin + all, 1000);
                return;
            case "sem":
                semaphore("warm:sem:" + begin, 4, 16, begin, begin + all);
                return;
            default:
                break;
        }
        long third = ms / 3 * 1_000_000L;
        pairs("warm:pairs", ms / 3);
        begin = now();
        contend("warm:contend", 8, 0, begin, begin + third, 0);
        begin = now();
        semaphore("warm:sem:" + begin, 4, 16, begin, begin + third);
    }

    static String pairs(String name, long ms) {
        RLock lock = client.getLock(name);
        double[] lat = new double[1 << 16];
        int n = 0;
        long start = System.nanoTime();
        long end = start + ms * 1_000_000L;
        long t0 = start;
        while (t0 < end) {
            lock.lock();
            lock.unlock();
            long t1 = System.nanoTime();
            if (n == lat.length) {
                lat = java.util.Arrays.copyOf(lat, n * 2);
            }
            lat[n++] = (t1 - t0) / 1e3;
            t0 = t1;
        }
        double elapsed = (t0 - start) / 1e9;
        StringBuilder s = new StringBuilder("{\"elapsed_s\":").append(elapsed).append(",\"lat_us\":[");
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                s.append(',');
            }
            s.append(lat[i]);
        }
        return s.append("]}").toString();
    }

    static String parallel(String prefix, int tasks, long startNs, long ms) throws Exception {
        long deadline = startNs + ms * 1_000_000L;
        List<Future<long[]>> done = new ArrayList<>();
        for (int t = 0; t < tasks; t++) {
            RLock lock = client.getLock(prefix + ":" + t);
            done.add(POOL.submit(() -> {
                sleepUntil(startNs);
                long n = 0;
                long at;
                while ((at = now()) < deadline) {
                    lock.lock();
                    lock.unlock();
                    n++;
                }
                return new long[] {n, at};
            }));
        }
        long pairs = 0;
        long end = startNs;
        for (Future<long[]> f : done) {
            long[] r = f.get();
            pairs += r[0];
            end = Math.max(end, r[1]);
        }
        return "{\"pairs\":" + pairs + ",\"elapsed_s\":" + ((end - startNs) / 1e9) + "}";
    }

    /** One side of a contended round: take (waiting at most `waitNs`) and give back. */
    interface Taker {
        boolean take(long waitNs) throws Exception;

        void give() throws Exception;
    }

    /**
     * TASKS threads (numbered from FIRST) take and give back from BEGIN to
     * DEADLINE, pausing THINK_US after each give; each acquisition is one
     * event [task, asked, acquired, releasing] plus, with `released`, the
     * instant the give returned. A take that runs out at the deadline ends
     * the task's loop, its later times NEVER.
     */
    static List<String> race(Taker taker, int tasks, int first, long begin, long deadline, long thinkUs,
            boolean released) throws Exception {
        List<Future<List<String>>> done = new ArrayList<>();
        for (int t = 0; t < tasks; t++) {
            int task = first + t;
            done.add(POOL.submit(() -> {
                // The loop only stores numbers (as the Rust subjects push
                // tuples); the text is built after the deadline.
                long[] ev = new long[4 * 1024];
                int n = 0;
                boolean cut = false;
                sleepUntil(begin);
                long asked;
                while ((asked = now()) < deadline) {
                    if (n + 4 > ev.length) {
                        ev = java.util.Arrays.copyOf(ev, ev.length * 2);
                    }
                    if (!taker.take(deadline - asked)) {
                        ev[n++] = asked;
                        cut = true;
                        break;
                    }
                    long acquired = now();
                    long releasing = now();
                    taker.give();
                    ev[n++] = asked;
                    ev[n++] = acquired;
                    ev[n++] = releasing;
                    ev[n++] = now();
                    if (thinkUs > 0) {
                        pause(thinkUs * 1000);
                    }
                }
                List<String> events = new ArrayList<>(n / 4 + 1);
                int whole = cut ? n - 1 : n;
                for (int i = 0; i < whole; i += 4) {
                    events.add("[" + task + "," + ev[i] + "," + ev[i + 1] + "," + ev[i + 2]
                            + (released ? "," + ev[i + 3] : "") + "]");
                }
                if (cut) {
                    events.add("[" + task + "," + ev[n - 1] + "," + NEVER + "," + NEVER
                            + (released ? "," + NEVER : "") + "]");
                }
                return events;
            }));
        }
        return gather(done);
    }

    static List<String> contend(String name, int tasks, int first, long begin, long deadline, long thinkUs)
            throws Exception {
        RLock lock = client.getLock(name);
        Taker taker = new Taker() {
            public boolean take(long waitNs) throws Exception {
                return lock.tryLock(waitNs, TimeUnit.NANOSECONDS);
            }

            public void give() {
                lock.unlock();
            }
        };
        return race(taker, tasks, first, begin, deadline, thinkUs, true);
    }

    static List<String> semaphore(String name, int permits, int tasks, long begin, long deadline)
            throws Exception {
        RSemaphore sem = client.getSemaphore(name);
        if (!sem.trySetPermits(permits)) {
            throw new IllegalStateException("semaphore " + name + " already set");
        }
        Taker taker = new Taker() {
            public boolean take(long waitNs) throws Exception {
                return sem.tryAcquire(waitNs, TimeUnit.NANOSECONDS);
            }

            public void give() {
                sem.release();
            }
        };
        return race(taker, tasks, 0, begin, deadline, 0, false);
    }

    static List<String> gather(List<Future<List<String>>> done) throws Exception {
        List<String> all = new ArrayList<>();
        for (Future<List<String>> f : done) {
            all.addAll(f.get());
        }
        return all;
    }

    static String events(List<String> events) {
        return "[" + String.join(",", events) + "]";
    }

    static String slots(long base, int tasks, int first, long thinkUs, String spec) throws Exception {
        StringBuilder s = new StringBuilder("[");
        String[] slots = spec.split(",");
        for (int i = 0; i < slots.length; i++) {
            String[] f = slots[i].split(":");
            // NAME may hold ':' itself: the last three fields are numbers.
            int k = f.length;
            String name = String.join(":", java.util.Arrays.copyOfRange(f, 0, k - 3));
            long offset = Long.parseLong(f[k - 3]);
            long warm = Long.parseLong(f[k - 2]);
            long length = Long.parseLong(f[k - 1]);
            if (i > 0) {
                s.append(',');
            }
            s.append(events(contend(name, tasks, first, base + offset - warm, base + offset + length, thinkUs)));
        }
        return s.append("]").toString();
    }

    static String hold(String prefix, int names) {
        for (int i = 0; i < names; i++) {
            RLock lock = holderClient.getLock(prefix + ":" + i);
            lock.lock();
            HELD.add(lock);
        }
        return "ok";
    }

    static String waiters(String prefix, int names, int n) {
        FAILED.set(0);
        FIRST_ERROR.set("");
        WAITERS.clear();
        acquired = new long[n];
        waitNames = names;
        long[] at = acquired;
        for (int i = 0; i < n; i++) {
            int index = i;
            long threadId = i + 1;
            RLock lock = client.getLock(prefix + ":" + (i % names));
            CompletableFuture<Void> done = new CompletableFuture<>();
            RFuture<Void> locked = lock.lockAsync(threadId);
            locked.whenComplete((ok, e) -> {
                if (e != null) {
                    fail(e);
                    done.complete(null);
                    return;
                }
                at[index] = now();
                lock.unlockAsync(threadId).whenComplete((ok2, e2) -> {
                    if (e2 != null) {
                        fail(e2);
                    }
                    done.complete(null);
                });
            });
            WAITERS.add(done);
        }
        return "ok";
    }

    static void fail(Throwable e) {
        FAILED.incrementAndGet();
        Throwable t = e.getCause() != null ? e.getCause() : e;
        FIRST_ERROR.compareAndSet("", t.getClass().getName() + ": " + clean(String.valueOf(t.getMessage())));
    }

    static String release(long limitS) throws Exception {
        long released = System.nanoTime();
        // The instant each name's unlock was called: a name's wake-up
        // latency runs from it to its first waiter's acquisition.
        long[] unlocked = new long[HELD.size()];
        for (int i = 0; i < HELD.size(); i++) {
            unlocked[i] = now();
            HELD.get(i).unlock();
        }
        HELD.clear();
        boolean hang = false;
        try {
            CompletableFuture.allOf(WAITERS.toArray(new CompletableFuture[0])).get(limitS, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            hang = true;
        }
        double drain = (System.nanoTime() - released) / 1e9;
        long finished = WAITERS.stream().filter(CompletableFuture::isDone).count();
        int failed = FAILED.get();
        long[] first = new long[unlocked.length];
        java.util.Arrays.fill(first, Long.MAX_VALUE);
        for (int i = 0; i < acquired.length; i++) {
            int name = i % waitNames;
            if (acquired[i] != 0 && name < first.length) {
                first[name] = Math.min(first[name], acquired[i]);
            }
        }
        double[] wake = new double[first.length];
        int w = 0;
        for (int i = 0; i < first.length; i++) {
            if (first[i] != Long.MAX_VALUE) {
                wake[w++] = (first[i] - unlocked[i]) / 1e3;
            }
        }
        wake = java.util.Arrays.copyOf(wake, w);
        java.util.Arrays.sort(wake);
        return "{\"wake_p50_us\":" + quantile(wake, 0.50) + ",\"wake_p99_us\":" + quantile(wake, 0.99)
                + ",\"completed\":" + (finished - failed) + ",\"errors\":" + failed + ",\"hang\":" + hang
                + ",\"drain_s\":" + drain + ",\"error\":\"" + FIRST_ERROR.get().replace("\\", "\\\\").replace("\"", "'")
                + "\"}";
    }

    /**
     * Curve of held watchdog locks: a third client (Redisson's defaults, its
     * lockWatchdogTimeout set to WATCHDOG_MS) takes `held:0..N-1` without a
     * lease, so that its watchdog renews them.
     */
    static String watch(int n, long watchdogMs) throws Exception {
        Config c = new Config();
        c.useSingleServer().setAddress(address);
        c.setLockWatchdogTimeout(watchdogMs);
        watchClient = Redisson.create(c);
        WATCHED.clear();
        List<RFuture<Void>> taking = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            RLock lock = watchClient.getLock("held:" + i);
            WATCHED.add(lock);
            taking.add(lock.lockAsync(1));
            if (taking.size() == 256) {
                for (RFuture<Void> f : taking) {
                    f.toCompletableFuture().get();
                }
                taking.clear();
            }
        }
        for (RFuture<Void> f : taking) {
            f.toCompletableFuture().get();
        }
        return "ok";
    }

    static String unwatch() throws Exception {
        int errors = 0;
        List<RFuture<Void>> giving = new ArrayList<>();
        for (RLock lock : WATCHED) {
            giving.add(lock.unlockAsync(1));
        }
        for (RFuture<Void> f : giving) {
            try {
                f.toCompletableFuture().get();
            } catch (Exception e) {
                errors++;
            }
        }
        WATCHED.clear();
        // No shutdown: Netty's graceful one takes seconds; the bench ends this JVM.
        return "{\"unlock_errors\":" + errors + "}";
    }

    /** The bench's quantile (util::quantile): the ceil(q n)-th smallest of sorted `v`; NaN as 0 when empty. */
    static double quantile(double[] v, double q) {
        if (v.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(q * v.length);
        return v[Math.max(1, Math.min(rank, v.length)) - 1];
    }

    /** The JVM as it runs: its version, flags, collector, heap and processors. */
    static String jvm() {
        java.lang.management.RuntimeMXBean rt = java.lang.management.ManagementFactory.getRuntimeMXBean();
        List<String> gcs = new ArrayList<>();
        for (java.lang.management.GarbageCollectorMXBean gc
                : java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()) {
            gcs.add(gc.getName());
        }
        return "{\"java_version\":\"" + System.getProperty("java.version") + "\",\"vm\":\""
                + System.getProperty("java.vm.name") + " " + System.getProperty("java.vm.version")
                + "\",\"flags\":\"" + String.join(" ", rt.getInputArguments()).replace("\"", "'")
                + "\",\"gc\":\"" + String.join(", ", gcs) + "\",\"heap_max_mib\":"
                + Runtime.getRuntime().maxMemory() / (1024 * 1024) + ",\"processors\":"
                + Runtime.getRuntime().availableProcessors() + "}";
    }

    static String memory() throws Exception {
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        Runtime r = Runtime.getRuntime();
        long heap = r.totalMemory() - r.freeMemory();
        long rss = 0;
        for (String l : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (l.startsWith("VmRSS:")) {
                rss = Long.parseLong(l.replaceAll("[^0-9]", ""));
            }
        }
        return "{\"rss_kib\":" + rss + ",\"heap_bytes\":" + heap + "}";
    }
}
