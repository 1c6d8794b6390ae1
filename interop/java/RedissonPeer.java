// A real Java Redisson client driven line by line from stdin, for the Rust
// interop tests (tests/java.rs; the process and its line protocol on the Rust
// side: testkit/src/java/). Written for this repository; it uses only
// Redisson's public API that exists from 3.17.0 to 4.7.0 and reaches newer
// kinds (fenced lock 3.23+, non-reentrant locks 4.7) through reflection,
// answering "unsupported" where a version lacks them.
//
// Usage:
//   java -cp REDISSON_CLASSPATH:DIR RedissonPeer --single redis://127.0.0.1:6379
//   java ... RedissonPeer --cluster redis://a:1,redis://b:2 [--sharded on|off|auto]
//   java ... RedissonPeer --sentinel MASTER --nodes redis://s1:1,redis://s2:2
//   options: --watchdog MS (lockWatchdogTimeout)
//   java ... RedissonPeer --api CLASS...   (no Redis: the public API, see api())
//
// On start it prints one line: `ready <clientId> <redissonVersion> <publishCommand>`
// (or `fatal <ExceptionClass> <message>`). Then every stdin line is a command
//   <id> <slot> <op> <args...>
// answered by exactly one line
//   <id> ok <elapsedMs> [value]
//   <id> err <elapsedMs> <ExceptionClass> <message>
//   <id> unsupported <elapsedMs> <reason>
// A slot ("t1", "t2", ...) is a dedicated Java thread, created on first use,
// that runs its commands in order; Redisson owners are `clientId:threadId` of
// that thread. Commands to different slots run concurrently.
//
// Objects are named KIND:NAME, KIND one of
//   lock fair nrlock nrfair read write spin fenced   (locks)
//   sem pes latch                                    (synchronizers)
// Ops (durations in ms, -1 = none/watchdog):
//   threadid | info | ping
//   lock OBJ [leaseMs]            -> ""                  tryLock OBJ waitMs leaseMs -> true|false
//   unlock OBJ | forceunlock OBJ -> bool | islocked OBJ | held OBJ | holdcount OBJ | ttl OBJ
//   locktoken fenced:N [leaseMs] -> token               trylocktoken fenced:N waitMs leaseMs -> token|null
//   token fenced:N -> token|null
//   trysetpermits sem|pes:N P -> bool     addpermits sem|pes:N P     available sem|pes:N -> int
//   acquire sem:N [P]         tryacquire sem:N waitMs [P] -> bool     release sem:N [P]
//   acquire pes:N leaseMs -> id        tryacquire pes:N waitMs leaseMs -> id|null
//   release pes:N ID          tryrelease pes:N ID -> bool
//   trysetcount latch:N C -> bool  countdown latch:N  count latch:N -> long  await latch:N ms -> bool
//   exists sem|pes|latch:N -> bool     delete sem|pes|latch:N -> bool          (RObject)
//   expire sem|pes:N ms -> bool        clearexpire sem|pes:N -> bool
//   remainttl sem|pes:N -> long                                                (RExpirable)
//   counter OBJ KEY N [windowMs]  N times: take OBJ, GET KEY, sleep, SET KEY+1, give OBJ back -> N
//   quit (exits at once; no reply)

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;
import java.util.function.IntPredicate;
import java.util.function.IntSupplier;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RExpirable;
import org.redisson.api.RLock;
import org.redisson.api.RObject;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;
import org.redisson.config.SentinelServersConfig;
import org.redisson.config.SingleServerConfig;

public final class RedissonPeer {
    private static final PrintStream OUT =
            new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    private static final Map<String, Slot> SLOTS = new ConcurrentHashMap<>();
    private static RedissonClient redisson;
    private static String version = "unknown";

    /** Thrown for a kind or operation this Redisson version does not have. */
    static final class Unsupported extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Unsupported(String why) {
            super(why);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--api")) {
            api(Arrays.copyOfRange(args, 1, args.length));
            return;
        }
        try {
            redisson = Redisson.create(config(args));
        } catch (Throwable e) {
            Throwable t = unwrap(e);
            OUT.println("fatal " + t.getClass().getName() + " " + clean(String.valueOf(t.getMessage())));
            Runtime.getRuntime().halt(3);
        }
        String v = Redisson.class.getPackage().getImplementationVersion();
        if (v != null) {
            version = v;
        }
        boolean cluster = Arrays.asList(args).contains("--cluster");
        String publish = publishCommand();
        // Redisson 3.22/3.23 (no ShardedSubscriptionMode yet) learns asynchronously,
        // after connecting, whether a cluster shards pub/sub: give it a moment.
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        while (cluster && publish.equals("PUBLISH") && !hasShardedMode() && hasPublishCommand()
                && System.nanoTime() < until) {
            Thread.sleep(20);
            publish = publishCommand();
        }
        OUT.println("ready " + redisson.getId() + " " + version + " " + publish);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split(" ");
            if (parts.length >= 3 && parts[2].equals("quit")) {
                break;
            }
            if (parts.length < 3) {
                OUT.println((parts.length > 0 ? parts[0] : "?") + " err 0 BadCommand " + clean(line));
                continue;
            }
            SLOTS.computeIfAbsent(parts[1], Slot::new).queue.add(parts);
        }
        OUT.flush();
        Runtime.getRuntime().halt(0);
    }

    /**
     * The public methods of each named class or interface, inherited ones
     * included (Object's left out), one line each:
     * `DeclaringType name(ParamType, ...)` with simple type names; for the
     * Rust parity test (tests/java/parity.rs). An unknown class is a line
     * `missing CLASS`.
     */
    private static void api(String[] classes) {
        java.util.TreeSet<String> lines = new java.util.TreeSet<>();
        for (String name : classes) {
            Class<?> c;
            try {
                c = Class.forName(name);
            } catch (ClassNotFoundException e) {
                lines.add("missing " + name);
                continue;
            }
            for (Method m : c.getMethods()) {
                if (m.getDeclaringClass() == Object.class || m.isSynthetic() || m.isBridge()) {
                    continue;
                }
                StringBuilder line = new StringBuilder(m.getDeclaringClass().getSimpleName())
                        .append(' ').append(m.getName()).append('(');
                Class<?>[] types = m.getParameterTypes();
                for (int i = 0; i < types.length; i++) {
                    line.append(i == 0 ? "" : ", ").append(types[i].getSimpleName());
                }
                lines.add(line.append(')').toString());
            }
        }
        for (String line : lines) {
            OUT.println(line);
        }
        OUT.flush();
    }

    private static String option(String[] args, String name, String otherwise) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals(name)) {
                return args[i + 1];
            }
        }
        return otherwise;
    }

    private static Config config(String[] args) throws Exception {
        Config config = new Config();
        String watchdog = option(args, "--watchdog", null);
        if (watchdog != null) {
            config.setLockWatchdogTimeout(Long.parseLong(watchdog));
        }
        String single = option(args, "--single", null);
        String cluster = option(args, "--cluster", null);
        String sentinel = option(args, "--sentinel", null);
        if (single != null) {
            SingleServerConfig s = config.useSingleServer().setAddress(single);
            s.setConnectionMinimumIdleSize(2).setConnectionPoolSize(8);
            s.setSubscriptionConnectionMinimumIdleSize(1).setSubscriptionConnectionPoolSize(4);
        } else if (cluster != null) {
            ClusterServersConfig c = config.useClusterServers();
            for (String node : cluster.split(",")) {
                c.addNodeAddress(node);
            }
            c.setReadMode(ReadMode.MASTER);
            c.setMasterConnectionMinimumIdleSize(2).setSlaveConnectionMinimumIdleSize(1);
            c.setSubscriptionConnectionMinimumIdleSize(1);
            String sharded = option(args, "--sharded", null);
            if (sharded != null) {
                setShardedMode(c, sharded);
            }
        } else if (sentinel != null) {
            String[] addrs = option(args, "--nodes", "").split(",");
            SentinelServersConfig s = config.useSentinelServers().setMasterName(sentinel);
            for (String a : addrs) {
                s.addSentinelAddress(a);
            }
            s.setReadMode(ReadMode.MASTER);
            s.setMasterConnectionMinimumIdleSize(2).setSlaveConnectionMinimumIdleSize(1);
            s.setSubscriptionConnectionMinimumIdleSize(1);
        } else {
            throw new IllegalArgumentException("need --single URL, --cluster URLS or --sentinel NAME URLS");
        }
        return config;
    }

    /** ClusterServersConfig.setShardedSubscriptionMode (3.24+), if this version has it. */
    private static void setShardedMode(ClusterServersConfig c, String mode) throws Exception {
        Class<?> modes;
        try {
            modes = Class.forName("org.redisson.config.ShardedSubscriptionMode");
        } catch (ClassNotFoundException e) {
            return; // older versions decide by themselves; `ready` reports what they chose
        }
        @SuppressWarnings({"unchecked", "rawtypes"})
        Object value = Enum.valueOf((Class) modes, mode.toUpperCase());
        c.getClass().getMethod("setShardedSubscriptionMode", modes).invoke(c, value);
    }

    private static boolean hasShardedMode() {
        try {
            Class.forName("org.redisson.config.ShardedSubscriptionMode");
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    private static boolean hasPublishCommand() {
        try {
            Object s = ((Redisson) redisson).getCommandExecutor().getConnectionManager().getSubscribeService();
            s.getClass().getMethod("getPublishCommand");
            return true;
        } catch (Exception e) {
            return false;
        }
    }

    /** The command this client publishes with: PUBLISH, or SPUBLISH (3.22+ on a sharding cluster). */
    private static String publishCommand() {
        try {
            Object s = ((Redisson) redisson).getCommandExecutor().getConnectionManager().getSubscribeService();
            return String.valueOf(s.getClass().getMethod("getPublishCommand").invoke(s)).toUpperCase();
        } catch (NoSuchMethodException e) {
            return "PUBLISH"; // before 3.22 every script published with a literal `publish`
        } catch (Exception e) {
            return "unknown";
        }
    }

    /** One worker thread: its commands run in order, and Redisson's owner is this thread. */
    static final class Slot implements Runnable {
        final String name;
        final BlockingQueue<String[]> queue = new LinkedBlockingQueue<>();

        Slot(String name) {
            this.name = name;
            Thread t = new Thread(this, "peer-" + name);
            t.setDaemon(true);
            t.start();
        }

        @Override
        public void run() {
            while (true) {
                String[] cmd;
                try {
                    cmd = queue.take();
                } catch (InterruptedException e) {
                    return;
                }
                long start = System.nanoTime();
                String reply;
                try {
                    String value = execute(Arrays.copyOfRange(cmd, 2, cmd.length));
                    reply = "ok " + ms(start) + (value == null ? "" : " " + value);
                } catch (Throwable e) {
                    Throwable t = unwrap(e);
                    if (t instanceof Unsupported) {
                        reply = "unsupported " + ms(start) + " " + clean(t.getMessage());
                    } else {
                        StringBuilder msg = new StringBuilder(String.valueOf(t.getMessage()));
                        for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
                            msg.append(" | caused by ").append(c.getClass().getName()).append(": ").append(c.getMessage());
                        }
                        reply = "err " + ms(start) + " " + t.getClass().getName() + " " + clean(msg.toString());
                        System.err.println("command " + String.join(" ", cmd) + " failed:");
                        t.printStackTrace();
                    }
                }
                synchronized (OUT) {
                    OUT.println(cmd[0] + " " + reply);
                }
            }
        }
    }

    private static long ms(long start) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    }

    private static Throwable unwrap(Throwable e) {
        while ((e instanceof InvocationTargetException || e instanceof CompletionException
                || e instanceof ExecutionException) && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    private static String clean(String s) {
        return s.replace('\r', ' ').replace('\n', ' ');
    }

    private static Object call(Object target, String method, Class<?>[] types, Object... args) throws Exception {
        Method m;
        try {
            m = findPublic(target.getClass(), method, types);
        } catch (NoSuchMethodException e) {
            throw new Unsupported(method + " is not in Redisson " + version);
        }
        return m.invoke(target, args);
    }

    /** A public method reachable through a public class or interface (Redisson's impls are public). */
    private static Method findPublic(Class<?> c, String name, Class<?>[] types) throws NoSuchMethodException {
        return c.getMethod(name, types);
    }

    private static RLock lock(String kind, String name) throws Exception {
        switch (kind) {
            case "lock":
                return redisson.getLock(name);
            case "fair":
                return redisson.getFairLock(name);
            case "read":
                return redisson.getReadWriteLock(name).readLock();
            case "write":
                return redisson.getReadWriteLock(name).writeLock();
            case "spin":
                return redisson.getSpinLock(name);
            case "nrlock":
                return (RLock) call(redisson, "getNonReentrantLock", new Class<?>[] {String.class}, name);
            case "nrfair":
                return (RLock) call(redisson, "getNonReentrantFairLock", new Class<?>[] {String.class}, name);
            case "fenced":
                return (RLock) call(redisson, "getFencedLock", new Class<?>[] {String.class}, name);
            default:
                throw new IllegalArgumentException("not a lock kind: " + kind);
        }
    }

    private static Object fenced(String name) throws Exception {
        return call(redisson, "getFencedLock", new Class<?>[] {String.class}, name);
    }

    private static String execute(String[] a) throws Exception {
        String op = a[0];
        switch (op) {
            case "threadid":
                return Long.toString(Thread.currentThread().getId());
            case "ping":
                return "pong";
            case "info":
                return redisson.getId() + " " + version + " " + publishCommand();
            default:
                break;
        }
        if (op.equals("counter")) {
            return counter(a);
        }
        String[] obj = a[1].split(":", 2);
        String kind = obj[0];
        String name = obj[1];
        if (kind.equals("sem") || kind.equals("pes") || kind.equals("latch")) {
            String answer = object(kind, name, a);
            if (answer != null) {
                return answer;
            }
        }
        switch (kind) {
            case "sem":
                return semaphore(redisson.getSemaphore(name), a);
            case "pes":
                return permits(redisson.getPermitExpirableSemaphore(name), a);
            case "latch":
                return latch(redisson.getCountDownLatch(name), a);
            default:
                break;
        }
        if (op.equals("locktoken") || op.equals("trylocktoken") || op.equals("token")) {
            return token(fenced(name), a);
        }
        RLock lock = lock(kind, name);
        switch (op) {
            case "lock": {
                long lease = a.length > 2 ? Long.parseLong(a[2]) : -1;
                if (lease < 0) {
                    lock.lock();
                } else {
                    lock.lock(lease, TimeUnit.MILLISECONDS);
                }
                return null;
            }
            case "trylock":
                return Boolean.toString(lock.tryLock(Long.parseLong(a[2]), Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "unlock":
                lock.unlock();
                return null;
            case "forceunlock":
                return Boolean.toString(lock.forceUnlock());
            case "islocked":
                return Boolean.toString(lock.isLocked());
            case "held":
                return Boolean.toString(lock.isHeldByCurrentThread());
            case "holdcount":
                return Integer.toString(lock.getHoldCount());
            case "ttl":
                return Long.toString(lock.remainTimeToLive());
            default:
                throw new IllegalArgumentException("unknown lock op: " + op);
        }
    }

    private static String token(Object fenced, String[] a) throws Exception {
        switch (a[0]) {
            case "locktoken": {
                long lease = a.length > 2 ? Long.parseLong(a[2]) : -1;
                Object t = lease < 0
                        ? call(fenced, "lockAndGetToken", new Class<?>[0])
                        : call(fenced, "lockAndGetToken", new Class<?>[] {long.class, TimeUnit.class}, lease, TimeUnit.MILLISECONDS);
                return String.valueOf(t);
            }
            case "trylocktoken":
                return String.valueOf(call(fenced, "tryLockAndGetToken", new Class<?>[] {long.class, long.class, TimeUnit.class},
                        Long.parseLong(a[2]), Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            default:
                return String.valueOf(call(fenced, "getToken", new Class<?>[0]));
        }
    }

    /** The RObject / RExpirable ops of a synchronizer, or null for any other op. */
    private static String object(String kind, String name, String[] a) {
        RObject o = kind.equals("sem") ? redisson.getSemaphore(name)
                : kind.equals("pes") ? redisson.getPermitExpirableSemaphore(name)
                : redisson.getCountDownLatch(name);
        switch (a[0]) {
            case "exists":
                return Boolean.toString(o.isExists());
            case "delete":
                return Boolean.toString(o.delete());
            case "expire":
                return Boolean.toString(((RExpirable) o).expire(Long.parseLong(a[2]), TimeUnit.MILLISECONDS));
            case "clearexpire":
                return Boolean.toString(((RExpirable) o).clearExpire());
            case "remainttl":
                return Long.toString(((RExpirable) o).remainTimeToLive());
            default:
                return null;
        }
    }

    /** trysetpermits, addpermits and available: alike for both semaphores, which share no interface. */
    private static String counts(String[] a, IntPredicate trySet, IntConsumer add, IntSupplier available) {
        switch (a[0]) {
            case "trysetpermits":
                return Boolean.toString(trySet.test(Integer.parseInt(a[2])));
            case "addpermits":
                add.accept(Integer.parseInt(a[2]));
                return null;
            default:
                return Integer.toString(available.getAsInt());
        }
    }

    private static String semaphore(RSemaphore s, String[] a) throws Exception {
        int n = 1;
        switch (a[0]) {
            case "trysetpermits":
            case "addpermits":
            case "available":
                return counts(a, s::trySetPermits, s::addPermits, s::availablePermits);
            case "acquire":
                s.acquire(a.length > 2 ? Integer.parseInt(a[2]) : n);
                return null;
            case "tryacquire":
                return Boolean.toString(s.tryAcquire(a.length > 3 ? Integer.parseInt(a[3]) : n, Long.parseLong(a[2]), TimeUnit.MILLISECONDS));
            case "release":
                s.release(a.length > 2 ? Integer.parseInt(a[2]) : n);
                return null;
            default:
                throw new IllegalArgumentException("unknown semaphore op: " + a[0]);
        }
    }

    private static String permits(RPermitExpirableSemaphore s, String[] a) throws Exception {
        switch (a[0]) {
            case "trysetpermits":
            case "addpermits":
            case "available":
                return counts(a, s::trySetPermits, s::addPermits, s::availablePermits);
            case "acquire": {
                long lease = a.length > 2 ? Long.parseLong(a[2]) : -1;
                return lease < 0 ? s.acquire() : s.acquire(lease, TimeUnit.MILLISECONDS);
            }
            case "tryacquire":
                return String.valueOf(s.tryAcquire(Long.parseLong(a[2]), Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "release":
                s.release(a[2]);
                return null;
            case "tryrelease":
                return Boolean.toString(s.tryRelease(a[2]));
            default:
                throw new IllegalArgumentException("unknown permit semaphore op: " + a[0]);
        }
    }

    private static String latch(RCountDownLatch l, String[] a) throws Exception {
        switch (a[0]) {
            case "trysetcount":
                return Boolean.toString(l.trySetCount(Long.parseLong(a[2])));
            case "countdown":
                l.countDown();
                return null;
            case "count":
                return Long.toString(l.getCount());
            case "await":
                return Boolean.toString(l.await(Long.parseLong(a[2]), TimeUnit.MILLISECONDS));
            default:
                throw new IllegalArgumentException("unknown latch op: " + a[0]);
        }
    }

    /** N rounds of: take, GET key, wait a little, SET key+1, give back (proves mutual exclusion). */
    private static String counter(String[] a) throws Exception {
        String[] obj = a[1].split(":", 2);
        String kind = obj[0];
        String name = obj[1];
        RBucket<String> key = redisson.getBucket(a[2], StringCodec.INSTANCE);
        int rounds = Integer.parseInt(a[3]);
        long window = a.length > 4 ? Long.parseLong(a[4]) : 1;
        RLock lock = kind.equals("sem") || kind.equals("pes") ? null : lock(kind, name);
        RSemaphore sem = kind.equals("sem") ? redisson.getSemaphore(name) : null;
        RPermitExpirableSemaphore pes = kind.equals("pes") ? redisson.getPermitExpirableSemaphore(name) : null;
        for (int i = 0; i < rounds; i++) {
            String id = null;
            if (lock != null) {
                lock.lock();
            } else if (sem != null) {
                sem.acquire();
            } else {
                id = pes.acquire();
            }
            try {
                String v = key.get();
                long x = v == null ? 0 : Long.parseLong(v);
                if (window > 0) {
                    Thread.sleep(window);
                }
                key.set(Long.toString(x + 1));
            } finally {
                if (lock != null) {
                    lock.unlock();
                } else if (sem != null) {
                    sem.release();
                } else {
                    pes.release(id);
                }
            }
        }
        return Integer.toString(rounds);
    }
}
