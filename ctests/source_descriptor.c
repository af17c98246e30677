// Read and write sources (DISPATCH_SOURCE_TYPE_READ, DISPATCH_SOURCE_TYPE_WRITE): a pipe
// read source reports the bytes readable and stops after cancel; a read and a write source
// on one socketpair both fire; a read source on a regular file reports the bytes to end of
// file; a write source on a pipe reports space; a socket whose peer hung up fires with 0
// (end of file), also for a source created after the hang-up, and costs no CPU while its
// source is suspended; a descriptor closed and reused while its source is being cancelled
// delivers nothing to a new source on the reused number; 1,000 create/activate/cancel
// cycles across 2 threads, closing in the cancel handlers, never crash; 100,000 one-byte
// messages on a pipe, each written after the last was read, are each read once, in order.
#include "check.h"

#include <sys/socket.h>

static uint64_t process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    CHECK(flags >= 0);
    CHECK_EQ(fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
}

static void write_bytes(int fd, size_t count) {
    char buffer[4096];
    memset(buffer, 'x', sizeof buffer);
    while (count > 0) {
        ssize_t n = write(fd, buffer, count < sizeof buffer ? count : sizeof buffer);
        CHECKF(n > 0, "write: %s", strerror(errno));
        count -= (size_t)n;
    }
}

// MARK: - A probe

enum {
    ACT_READ = 1,           // read the bytes the data announces
    ACT_CANCEL_FIRST = 2,   // cancel the source on the first call
    ACT_SUSPEND_FIRST = 4,  // suspend the source on the first call
    ACT_CANCEL_EOF = 8,     // cancel when the data is 0
};

#define LOG_MAX 64

typedef struct {
    dispatch_source_t source;
    int fd;
    int actions;
    atomic_long calls;
    atomic_long bytes;          // bytes read by ACT_READ
    atomic_long cancels;
    atomic_long after_cancel;   // event handler calls that began after the cancel handler
    atomic_long eof_reads;      // read() returned 0
    unsigned long data_at[LOG_MAX];
} fd_probe_t;

static void fd_event(void *context) {
    fd_probe_t *probe = context;
    if (atomic_load(&probe->cancels) != 0) atomic_fetch_add(&probe->after_cancel, 1);
    unsigned long data = dispatch_source_get_data(probe->source);
    long index = atomic_load(&probe->calls);
    if (index < LOG_MAX) probe->data_at[index] = data;
    if (probe->actions & ACT_READ) {
        char buffer[4096];
        size_t want = data == 0 ? 1 : (data < sizeof buffer ? data : sizeof buffer);
        ssize_t n = read(probe->fd, buffer, want);
        if (n > 0) atomic_fetch_add(&probe->bytes, n);
        if (n == 0) atomic_fetch_add(&probe->eof_reads, 1);
    }
    bool first = index == 0;
    atomic_fetch_add(&probe->calls, 1);
    if ((probe->actions & ACT_CANCEL_FIRST) && first) dispatch_source_cancel(probe->source);
    if ((probe->actions & ACT_SUSPEND_FIRST) && first) dispatch_suspend(probe->source);
    if ((probe->actions & ACT_CANCEL_EOF) && data == 0) dispatch_source_cancel(probe->source);
}

static void fd_cancel(void *context) {
    fd_probe_t *probe = context;
    atomic_fetch_add(&probe->cancels, 1);
}

static dispatch_source_t fd_source(fd_probe_t *probe, dispatch_source_type_t type, int fd, int actions,
                                   dispatch_queue_t queue) {
    memset(probe, 0, sizeof *probe);
    dispatch_source_t source = dispatch_source_create(type, (uintptr_t)fd, 0, queue);
    CHECK(source != NULL);
    probe->source = source;
    probe->fd = fd;
    probe->actions = actions;
    dispatch_set_context(source, probe);
    dispatch_source_set_event_handler_f(source, fd_event);
    dispatch_source_set_cancel_handler_f(source, fd_cancel);
    return source;
}

static void fd_finish(fd_probe_t *probe) {
    dispatch_source_cancel(probe->source);
    WAIT_FOR_COUNT(&probe->cancels, 1, 10);
    CHECK_EQ(atomic_load(&probe->cancels), 1);
    CHECK_EQ(atomic_load(&probe->after_cancel), 0);
    dispatch_release(probe->source);
}

// MARK: - Pipes, sockets, files

static void pipe_read(void) {
    check_section("a pipe read source reports the byte count, and no handler runs after the cancel handler");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.pipe", NULL);
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    set_nonblocking(fds[0]);
    write_bytes(fds[1], 100);
    static fd_probe_t probe;
    dispatch_source_t source = fd_source(&probe, DISPATCH_SOURCE_TYPE_READ, fds[0], ACT_READ, queue);
    CHECK_EQ(dispatch_source_get_handle(source), (uintptr_t)fds[0]);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.bytes, 100, 10);
    CHECK_EQ(probe.data_at[0], 100);
    sleep_ms(30);
    long calls = atomic_load(&probe.calls);
    CHECK_EQ(calls, 1);  // all read: nothing more to report
    write_bytes(fds[1], 50);
    WAIT_FOR_COUNT(&probe.bytes, 150, 10);
    CHECK_EQ(probe.data_at[1], 50);
    dispatch_source_cancel(source);
    WAIT_FOR_COUNT(&probe.cancels, 1, 10);
    calls = atomic_load(&probe.calls);
    write_bytes(fds[1], 10);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&probe.calls), calls);
    CHECK_EQ(atomic_load(&probe.after_cancel), 0);
    CHECK_EQ(atomic_load(&probe.cancels), 1);
    dispatch_release(source);
    close(fds[0]);
    close(fds[1]);
    dispatch_release(queue);
}

// MARK: - Ping-pong

// One byte at a time: the main thread writes the next byte only once the handler has read
// the last one, so every event comes soon after the previous handler returned (the event
// thread may be polling, and the source's re-arm, which the handler asks for 0-60 µs after
// it let the next byte be written, arrives while it does or as it stops), and every 97th
// byte comes after a pause longer than any polling window (the loop goes back to sleep, and
// a re-arm must not be stranded on the way). Every byte is delivered once, in order.
enum { PING_ROUNDS = 100000 };
static int ping_fd;
static atomic_long ping_reads, ping_wrong, ping_empty;
static dispatch_semaphore_t ping_read_done;
static void ping_event(void *context) {
    (void)context;
    unsigned char byte;
    ssize_t n = read(ping_fd, &byte, 1);
    if (n != 1) {
        atomic_fetch_add(&ping_empty, 1);  // a call with nothing to read: not an error, counted
        return;
    }
    long index = atomic_fetch_add(&ping_reads, 1);
    if (byte != (unsigned char)index) atomic_fetch_add(&ping_wrong, 1);
    dispatch_semaphore_signal(ping_read_done);
    // Return (and ask for the re-arm) 0-60 µs later: some re-arms arrive as the event
    // thread stops polling.
    busy_wait_ns((uint64_t)(index % 61) * 1000);
}

static void ping_cancel(void *context) {
    (void)context;
    dispatch_semaphore_signal(ping_read_done);
}

static void pipe_ping_pong(void) {
    check_section("up to 100,000 one-byte messages on a pipe, each written after the last was read: each read once, in order");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.ping", NULL);
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    set_nonblocking(fds[0]);
    ping_fd = fds[0];
    ping_read_done = dispatch_semaphore_create(0);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_READ, (uintptr_t)fds[0], 0, queue);
    dispatch_source_set_event_handler_f(source, ping_event);
    dispatch_source_set_cancel_handler_f(source, ping_cancel);
    dispatch_activate(source);
    // About 10 s on an idle machine; at a load average of 30-40 it took 52-55 s (libdispatch
    // 26-34 s), so the messages stop at a 15 s budget, with a floor of 500 (1,869 got
    // through in one run beside a TSan run and a fork flood, load average 140).
    uint64_t end = now_ns() + 15 * NSEC_PER_SEC;
    long sent = 0;
    while (sent < PING_ROUNDS && now_ns() < end) {
        if (sent % 97 == 0) busy_wait_ns(100000);
        unsigned char byte = (unsigned char)sent;
        CHECK_EQ(write(fds[1], &byte, 1), 1);
        CHECKF(dispatch_semaphore_wait(ping_read_done, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)) == 0,
               "message %ld was not read within 10 s", sent);
        sent++;
    }
    printf("   %ld of %d messages in the budget\n", sent, PING_ROUNDS);
    CHECKF(sent >= 500, "only %ld messages in 15 s", sent);
    CHECK_EQ(atomic_load(&ping_reads), sent);
    CHECK_EQ(atomic_load(&ping_wrong), 0);
    // Closed only after the cancel handler: libdispatch loses the events of a number that
    // was closed before it and reused (see descriptor_reuse).
    dispatch_source_cancel(source);
    CHECK(dispatch_semaphore_wait(ping_read_done, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)) == 0);
    dispatch_release(source);
    close(fds[0]);
    close(fds[1]);
    dispatch_release(ping_read_done);
    dispatch_release(queue);
}

static void socketpair_read_and_write(void) {
    check_section("a read and a write source on one socket both fire");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.socketpair", DISPATCH_QUEUE_CONCURRENT);
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    set_nonblocking(sv[0]);
    static fd_probe_t reader, writer;
    dispatch_source_t r = fd_source(&reader, DISPATCH_SOURCE_TYPE_READ, sv[0], ACT_READ, queue);
    dispatch_source_t w = fd_source(&writer, DISPATCH_SOURCE_TYPE_WRITE, sv[0], ACT_CANCEL_FIRST, queue);
    dispatch_activate(r);
    dispatch_activate(w);
    WAIT_FOR_COUNT(&writer.calls, 1, 10);
#ifndef GC_REFERENCE_LIBDISPATCH
    // GrandCentral reports an estimate of the space; libdispatch on Linux fires with 0 on
    // a writable socket (and 1 on a pipe), so only that it fires is GCD's.
    CHECKF(writer.data_at[0] > 0, "the write source reported %lu bytes of space", writer.data_at[0]);
#endif
    sleep_ms(20);
    CHECK_EQ(atomic_load(&reader.calls), 0);
    CHECK_EQ(write(sv[1], "hello", 5), 5);
    WAIT_FOR_COUNT(&reader.bytes, 5, 10);
    CHECK_EQ(reader.data_at[0], 5);
    // And the read source keeps working after the write source on its descriptor is gone.
    WAIT_FOR_COUNT(&writer.cancels, 1, 10);
    CHECK_EQ(write(sv[1], "again", 5), 5);
    WAIT_FOR_COUNT(&reader.bytes, 10, 10);
    fd_finish(&reader);
    fd_finish(&writer);
    close(sv[0]);
    close(sv[1]);
    dispatch_release(queue);
}

static void regular_file(void) {
    check_section("a read source on a regular file reports the bytes to end of file");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.file", NULL);
    char path[] = "/tmp/gc-ctests-source-file-XXXXXX";
    int fd = mkstemp(path);
    CHECKF(fd >= 0, "mkstemp: %s", strerror(errno));
    unlink(path);
    write_bytes(fd, 1234);
    CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
    static fd_probe_t probe;
    // 1234 at position 0; the handler reads them all; then 0 (end of file), and it cancels.
    dispatch_source_t source = fd_source(&probe, DISPATCH_SOURCE_TYPE_READ, fd, ACT_READ | ACT_CANCEL_EOF, queue);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.cancels, 1, 10);
    long calls = atomic_load(&probe.calls);
    printf("   %ld calls; data:", calls);
    for (long i = 0; i < calls && i < LOG_MAX; i++) printf(" %lu", probe.data_at[i]);
    printf("\n");
    CHECK_EQ(probe.data_at[0], 1234);
    CHECK_EQ(atomic_load(&probe.bytes), 1234);
    CHECK(calls >= 2 && calls <= LOG_MAX);
    CHECK_EQ(probe.data_at[calls - 1], 0);
    dispatch_release(source);

    // From the middle of the file: the bytes from the file position.
    CHECK_EQ(lseek(fd, 1000, SEEK_SET), 1000);
    static fd_probe_t middle;
    source = fd_source(&middle, DISPATCH_SOURCE_TYPE_READ, fd, ACT_CANCEL_FIRST, queue);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&middle.cancels, 1, 10);
    CHECK_EQ(middle.data_at[0], 234);
    dispatch_release(source);
    close(fd);
    dispatch_release(queue);
}

static void pipe_write(void) {
    check_section("a write source on a pipe fires with data > 0");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.pipe-write", NULL);
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    static fd_probe_t probe;
    dispatch_source_t source = fd_source(&probe, DISPATCH_SOURCE_TYPE_WRITE, fds[1], ACT_CANCEL_FIRST, queue);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.cancels, 1, 10);
    CHECK_EQ(atomic_load(&probe.calls), 1);
    CHECKF(probe.data_at[0] > 0, "the write source reported %lu", probe.data_at[0]);
    printf("   reported %lu bytes of space\n", probe.data_at[0]);
    dispatch_release(source);
    close(fds[0]);
    close(fds[1]);
    dispatch_release(queue);
}

// MARK: - Hang-ups

static void peer_hangup(void) {
    check_section("a socket whose peer closed fires with 0 (end of file), also for a source created after");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.hangup", NULL);
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    set_nonblocking(sv[0]);
    static fd_probe_t before, after;
    dispatch_source_t a = fd_source(&before, DISPATCH_SOURCE_TYPE_READ, sv[0], ACT_READ | ACT_CANCEL_EOF, queue);
    dispatch_activate(a);
    sleep_ms(30);
    CHECK_EQ(atomic_load(&before.calls), 0);
    close(sv[1]);
    WAIT_FOR_COUNT(&before.cancels, 1, 10);
    CHECK_EQ(before.data_at[0], 0);
    CHECK(atomic_load(&before.eof_reads) >= 1);
    dispatch_release(a);

    dispatch_source_t b = fd_source(&after, DISPATCH_SOURCE_TYPE_READ, sv[0], ACT_READ | ACT_CANCEL_EOF, queue);
    dispatch_activate(b);
    WAIT_FOR_COUNT(&after.cancels, 1, 10);
    CHECK_EQ(after.data_at[0], 0);
    CHECK(atomic_load(&after.eof_reads) >= 1);
    dispatch_release(b);
    close(sv[0]);
    dispatch_release(queue);
}

static void suspended_hangup_costs_nothing(void) {
    check_section("a suspended read source on a hung-up socket costs no CPU and fires after resume");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.hangup-suspended", NULL);
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    // The handler suspends the source at its first call and does not read: the socket
    // stays at end of file, ready, the whole time.
    static fd_probe_t probe;
    dispatch_source_t source = fd_source(&probe, DISPATCH_SOURCE_TYPE_READ, sv[0], ACT_SUSPEND_FIRST, queue);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.calls, 1, 10);
    sleep_ms(20);
    uint64_t cpu0 = process_cpu_ns();
    sleep_ms(300);
    uint64_t cpu = process_cpu_ns() - cpu0;
    printf("   %.1f ms of CPU in 300 ms while suspended\n", (double)cpu / 1e6);
    CHECK_EQ(atomic_load(&probe.calls), 1);
    CHECKF(cpu < 60 * NSEC_PER_MSEC, "%.1f ms of CPU in 300 ms: something spins on the hung-up socket",
           (double)cpu / 1e6);
    dispatch_resume(source);
#ifndef GC_REFERENCE_LIBDISPATCH
    // GrandCentral promises more here: libdispatch on Linux (observed) never reports the
    // hang-up again once the handler that saw it suspended the source, so its source sits
    // silent after the resume; here the socket is still at end of file, so it fires.
    WAIT_FOR_COUNT(&probe.calls, 2, 10);
    CHECK_EQ(probe.data_at[1], 0);
#endif
    fd_finish(&probe);
    close(sv[0]);
    dispatch_release(queue);
}

// MARK: - Descriptor reuse

#define REUSE_ROUNDS 60

typedef struct {
    int fds[2];
    bool close_in_handler;
    atomic_long cancels;
} reuse_old_t;

static void reuse_old_event(void *context) {
    (void)context;  // never reads: the old pipe stays readable
}

static void reuse_old_cancel(void *context) {
    reuse_old_t *old = context;
    if (old->close_in_handler) {
        close(old->fds[0]);
        close(old->fds[1]);
    }
    atomic_fetch_add(&old->cancels, 1);
}

static void reuse_round(int round, bool close_in_handler, long *reused) {
    dispatch_queue_t queue = dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0);
    static reuse_old_t old;
    memset(&old, 0, sizeof old);
    old.close_in_handler = close_in_handler;
    CHECK_EQ(pipe(old.fds), 0);
    write_bytes(old.fds[1], 1);  // ready: an event for it may be in flight at the cancel
    dispatch_source_t a = dispatch_source_create(DISPATCH_SOURCE_TYPE_READ, (uintptr_t)old.fds[0], 0, queue);
    CHECK(a != NULL);
    dispatch_set_context(a, &old);
    dispatch_source_set_event_handler_f(a, reuse_old_event);
    dispatch_source_set_cancel_handler_f(a, reuse_old_cancel);
    dispatch_activate(a);
    if (round % 3 == 1) sched_yield();
    if (round % 3 == 2) sleep_ms(1);
    int old_read = old.fds[0];
    dispatch_source_cancel(a);
    if (!close_in_handler) {
        // The program closes first, before the cancel handler ran.
        close(old.fds[0]);
        close(old.fds[1]);
    } else {
        WAIT_FOR_COUNT(&old.cancels, 1, 10);
    }
    dispatch_release(a);

    int fresh[2];
    CHECK_EQ(pipe(fresh), 0);
    if (fresh[0] == old_read || fresh[1] == old_read) (*reused)++;
    static fd_probe_t probe;
    dispatch_source_t b = fd_source(&probe, DISPATCH_SOURCE_TYPE_READ, fresh[0], ACT_READ, queue);
    dispatch_activate(b);
    sleep_ms(15);
    CHECKF(atomic_load(&probe.calls) == 0,
           "round %d: a source on a new pipe (fd %d, the old one was %d) fired with data %lu before it was written",
           round, fresh[0], old_read, probe.data_at[0]);
    write_bytes(fresh[1], 1);
    WAIT_FOR_COUNT(&probe.bytes, 1, 10);
    CHECK_EQ(probe.data_at[0], 1);
    fd_finish(&probe);
    WAIT_FOR_COUNT(&old.cancels, 1, 10);
    CHECK_EQ(atomic_load(&old.cancels), 1);
    close(fresh[0]);
    close(fresh[1]);
}

static void descriptor_reuse(void) {
    check_section("a descriptor closed in the cancel handler and reused: the new source fires only when written");
    long reused = 0;
    for (int round = 0; round < REUSE_ROUNDS; round++) reuse_round(round, true, &reused);
    printf("   %ld of %d rounds reused the number\n", reused, REUSE_ROUNDS);
    CHECK(reused > REUSE_ROUNDS / 2);

#ifdef GC_REFERENCE_LIBDISPATCH
    // GrandCentral promises more: libdispatch on Linux (observed) loses the new source's
    // events when the program closed the old descriptor before the old source's cancel
    // handler ran: the new source never fires, even after the write. GrandCentral removes
    // the old registration before it adds the new one, and drops stale events by
    // generation.
    check_section("(skipped against libdispatch: closing before the cancel handler loses the reused number's events)");
    return;
#endif
    check_section("a descriptor closed before the cancel handler ran and reused: the new source fires only when written");
    reused = 0;
    for (int round = 0; round < REUSE_ROUNDS; round++) reuse_round(round, false, &reused);
    printf("   %ld of %d rounds reused the number\n", reused, REUSE_ROUNDS);
    CHECK(reused > REUSE_ROUNDS / 2);
}

// MARK: - Churn

#define CHURN_THREADS 2
#define CHURN_CYCLES 500

typedef struct {
    int fds[2];
    atomic_int events;
} churn_item_t;

static atomic_long churn_cancelled;

static void churn_event(void *context) {
    churn_item_t *item = context;
    char byte;
    ssize_t ignored = read(item->fds[0], &byte, 1);
    (void)ignored;
    atomic_fetch_add(&item->events, 1);
}

static void churn_cancel(void *context) {
    churn_item_t *item = context;
    close(item->fds[0]);
    close(item->fds[1]);
    free(item);
    atomic_fetch_add(&churn_cancelled, 1);
}

static void *churn_main(void *context) {
    long index = (long)context;
    dispatch_queue_t queues[2] = {
        dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0),
        dispatch_queue_create("com.grandcentral.tests.source-fd.churn", NULL),
    };
    for (int i = 0; i < CHURN_CYCLES; i++) {
        churn_item_t *item = calloc(1, sizeof *item);
        CHECK(item != NULL);
        CHECK_EQ(pipe(item->fds), 0);
        set_nonblocking(item->fds[0]);
        if ((i + index) % 2) write_bytes(item->fds[1], 1);
        // Every fifth a write source on the write end, the others read sources.
        dispatch_source_t source = dispatch_source_create(i % 5 == 4 ? DISPATCH_SOURCE_TYPE_WRITE : DISPATCH_SOURCE_TYPE_READ,
                                                          (uintptr_t)(i % 5 == 4 ? item->fds[1] : item->fds[0]), 0,
                                                          queues[i % 2]);
        CHECK(source != NULL);
        dispatch_set_context(source, item);
        dispatch_source_set_event_handler_f(source, churn_event);
        dispatch_source_set_cancel_handler_f(source, churn_cancel);
        dispatch_activate(source);
        if (i % 4 == 0) sched_yield();
        if (i % 16 == 0) sleep_ms(1);
        dispatch_source_cancel(source);
        dispatch_release(source);
    }
    dispatch_release(queues[1]);
    return NULL;
}

static void churn(void) {
    check_section("1,000 read/write sources created, activated, cancelled and released on 2 threads, closing in cancel handlers");
    atomic_store(&churn_cancelled, 0);
    uint64_t t0 = now_ns();
    pthread_t threads[CHURN_THREADS];
    for (long t = 0; t < CHURN_THREADS; t++) CHECK_EQ(pthread_create(&threads[t], NULL, churn_main, (void *)t), 0);
    for (int t = 0; t < CHURN_THREADS; t++) pthread_join(threads[t], NULL);
    WAIT_FOR_COUNT(&churn_cancelled, CHURN_THREADS * CHURN_CYCLES, 30);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&churn_cancelled), CHURN_THREADS * CHURN_CYCLES);
    printf("   %d cycles in %.0f ms\n", CHURN_THREADS * CHURN_CYCLES, (double)(now_ns() - t0) / 1e6);
}

// MARK: - /dev/null

static void dev_null(void) {
#ifdef GC_REFERENCE_LIBDISPATCH
    // GrandCentral differs on purpose: epoll refuses /dev/null, and libdispatch on Linux
    // then leaves the source silent forever; GrandCentral treats a descriptor epoll cannot
    // watch as always ready (as kqueue does a regular file): end of file, data 0.
    check_section("(skipped against libdispatch: a read source on /dev/null stays silent there)");
#else
    check_section("a read source on /dev/null fires with 0 (end of file)");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.devnull", NULL);
    int fd = open("/dev/null", O_RDONLY);
    CHECK(fd >= 0);
    static fd_probe_t probe;
    dispatch_source_t source = fd_source(&probe, DISPATCH_SOURCE_TYPE_READ, fd, ACT_READ | ACT_CANCEL_EOF, queue);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.cancels, 1, 10);
    CHECK_EQ(probe.data_at[0], 0);
    CHECK(atomic_load(&probe.eof_reads) >= 1);
    dispatch_release(source);
    close(fd);
    dispatch_release(queue);
#endif
}

static void descriptor_not_open(void) {
    check_section("a read source on a descriptor that is not open reports it at most once, then is silent");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.badfd", NULL);
    int fd = 900;
    while (fcntl(fd, F_GETFD) != -1) fd++;  // a number nothing has open
    static fd_probe_t probe;
    dispatch_source_t source = fd_source(&probe, DISPATCH_SOURCE_TYPE_READ, fd, ACT_READ, queue);
    uint64_t start = now_ns();
    dispatch_activate(source);
    // libdispatch stays silent; GrandCentral reports the error once (data 0, read fails
    // with EBADF) and does not spin re-reporting it: the first report is the positive
    // control for how long a report takes, and the watch for a second one is three times
    // that (200 ms at least).
#ifdef GC_REFERENCE_LIBDISPATCH
    sleep_ms(200);
    CHECKF(atomic_load(&probe.calls) <= 1, "%ld handler calls in 200 ms", atomic_load(&probe.calls));
#else
    WAIT_FOR_COUNT(&probe.calls, 1, 10);
    quiet_period(now_ns() - start, 200);
    CHECKF(atomic_load(&probe.calls) == 1, "%ld handler calls: the error was reported again", atomic_load(&probe.calls));
#endif
    fd_finish(&probe);
    dispatch_release(queue);
}

#ifdef __BLOCKS__
static void block_handlers(void) {
    check_section("block handlers: a pipe read source reads what was written, then cancels once");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-fd.blocks", NULL);
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    int rfd = fds[0];
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_READ, (uintptr_t)rfd, 0, queue);
    __block long got = 0;
    __block atomic_long cancels = 0;
    dispatch_source_set_event_handler(source, ^{
        char buffer[64];
        size_t want = dispatch_source_get_data(source);
        ssize_t n = read(rfd, buffer, want < sizeof buffer ? want : sizeof buffer);
        if (n > 0) got += n;
        if (got >= 12) dispatch_source_cancel(source);
    });
    dispatch_source_set_cancel_handler(source, ^{
        close(rfd);  // the usual place to close a source's descriptor
        atomic_fetch_add(&cancels, 1);
    });
    dispatch_resume(source);
    CHECK_EQ(write(fds[1], "hello, world", 12), 12);
    WAIT_FOR_COUNT(&cancels, 1, 10);
    CHECK_EQ(got, 12);
    dispatch_release(source);
    close(fds[1]);
    dispatch_release(queue);
}
#endif

int main(void) {
    check_start("source_descriptor", 55);
    signal(SIGPIPE, SIG_IGN);
    pipe_read();
    pipe_ping_pong();
    socketpair_read_and_write();
    regular_file();
    pipe_write();
    peer_hangup();
    suspended_hangup_costs_nothing();
    descriptor_reuse();
    churn();
    dev_null();
    descriptor_not_open();
#ifdef __BLOCKS__
    block_handlers();
#endif
    check_pass();
    return 0;
}
