// dispatch_read / dispatch_write (the convenience calls), as libdispatch documents them:
//
// - a read delivers what is available once the descriptor is readable, up to `length`
//   (SIZE_MAX: whatever is there): on a pipe or socket it does not wait for `length` or end
//   of file, so a read loop that calls dispatch_read again from its handler gets one
//   delivery per chunk the writer wrote; on a regular file it reads up to `length` or end of
//   file;
// - reads and writes on one descriptor are performed in call order, one at a time per
//   direction: consecutive chunks of a buffer written by concurrent dispatch_write calls
//   leave the file byte-identical to the buffer, and consecutive dispatch_read calls on a
//   file get consecutive ranges;
// - the handler runs after the library has let go of the descriptor (flags restored), so
//   it may close it at once and the number may be reused by the next call.
//
// The gcc variant uses the _f forms only; the clang variant adds the block form. Against the
// reference (GC_REFERENCE_LIBDISPATCH) the _f forms are declared in io_support.h, since
// libdispatch exports them without declaring them.
#include "io_support.h"

static bool copy_region(void *context, dispatch_data_t region, size_t offset, const void *buffer, size_t size) {
    (void)region;
    memcpy((unsigned char *)context + offset, buffer, size);
    return true;
}

/// The bytes of `data` in a malloc'ed buffer (NULL for empty data).
static unsigned char *flatten(dispatch_data_t data) {
    size_t size = dispatch_data_get_size(data);
    if (size == 0) return NULL;
    unsigned char *p = malloc(size);
    CHECK(p != NULL);
    dispatch_data_apply_f(data, p, copy_region);
    return p;
}

static unsigned char *read_file(const char *path, size_t *size) {
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    unsigned char *p = malloc((size_t)st.st_size + 1);
    CHECK(p != NULL);
    size_t done = 0;
    while (done < (size_t)st.st_size) {
        ssize_t n = read(fd, p + done, (size_t)st.st_size - done);
        CHECK(n > 0);
        done += (size_t)n;
    }
    close(fd);
    *size = done;
    return p;
}

// MARK: - A read loop on a pipe and a socket

enum { LOOP_CHUNKS = 12, LOOP_CHUNK = 100 };

/// The state of one read loop: every delivery's size and bytes, and the end.
typedef struct {
    int fd;
    unsigned char got[LOOP_CHUNKS * LOOP_CHUNK];
    size_t sizes[LOOP_CHUNKS + 8];
    atomic_int deliveries;
    size_t total;
    int error;
    int nonblocking_in_handler;
    latch_t finished;
} read_loop_t;

static void read_loop_step(void *context, dispatch_data_t data, int error) {
    read_loop_t *r = context;
    size_t size = dispatch_data_get_size(data);
    int flags = fcntl(r->fd, F_GETFL);
    if (flags & O_NONBLOCK) r->nonblocking_in_handler++;
    if (error != 0 || size == 0) {  // end of file (or an error): the loop ends
        r->error = error;
        latch_arrive(&r->finished);
        return;
    }
    int n = atomic_load(&r->deliveries);
    CHECKF(n < LOOP_CHUNKS + 8, "too many deliveries");
    CHECK(r->total + size <= sizeof r->got);
    dispatch_data_apply_f(data, r->got + r->total, copy_region);
    r->sizes[n] = size;
    r->total += size;
    atomic_store(&r->deliveries, n + 1);
    dispatch_read_f(r->fd, SIZE_MAX, global(), r, read_loop_step);
}

/// A writer that writes LOOP_CHUNKS chunks of LOOP_CHUNK bytes to `write_fd`, each after
/// the reader has received the one before (and a pause), then closes it; the reader loops
/// on dispatch_read(SIZE_MAX) from its handler and must see each chunk as one delivery.
static void read_loop(int read_fd, int write_fd, const unsigned char *bytes) {
    read_loop_t *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    r->fd = read_fd;
    latch_init(&r->finished, 1);
    dispatch_read_f(read_fd, SIZE_MAX, global(), r, read_loop_step);
    for (int i = 0; i < LOOP_CHUNKS; i++) {
        sleep_ms(20);
        write_all(write_fd, bytes + i * LOOP_CHUNK, LOOP_CHUNK);
        uint64_t give_up = now_ns() + 10 * NSEC_PER_SEC;
        while (atomic_load(&r->deliveries) <= i && now_ns() < give_up) usleep(500);
        CHECKF(atomic_load(&r->deliveries) == i + 1,
               "chunk %d of %d bytes written: %d deliveries after 10 s (a read waits for more than what is there)",
               i, LOOP_CHUNK, atomic_load(&r->deliveries));
    }
    close(write_fd);
    CHECK(latch_wait(&r->finished, 10));
    CHECK_EQ(r->error, 0);
    CHECK_EQ(atomic_load(&r->deliveries), LOOP_CHUNKS);
    for (int i = 0; i < LOOP_CHUNKS; i++) CHECK_EQ(r->sizes[i], (size_t)LOOP_CHUNK);
    CHECK_EQ(r->total, (size_t)(LOOP_CHUNKS * LOOP_CHUNK));
    CHECK(memcmp(r->got, bytes, r->total) == 0);
    CHECKF(r->nonblocking_in_handler == 0, "%d handlers saw O_NONBLOCK still set", r->nonblocking_in_handler);
    close(read_fd);
    latch_destroy(&r->finished);
    free(r);
}

static void test_read_loop(void) {
    unsigned char *bytes = random_bytes(LOOP_CHUNKS * LOOP_CHUNK, 11);
    check_section("a read loop on a pipe gets one delivery per chunk");
    int p[2];
    CHECK(pipe(p) == 0);
    read_loop(p[0], p[1], bytes);
    check_section("a read loop on a socket gets one delivery per chunk");
    int s[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0);
    read_loop(s[0], s[1], bytes);
    free(bytes);
}

// MARK: - What one read delivers

typedef struct {
    size_t size;
    int error;
    unsigned char *bytes;
    latch_t done;
} one_read_t;

static void one_read_done(void *context, dispatch_data_t data, int error) {
    one_read_t *r = context;
    r->size = dispatch_data_get_size(data);
    r->bytes = flatten(data);
    r->error = error;
    latch_arrive(&r->done);
}

/// dispatch_read_f(fd, length) and its outcome.
static one_read_t *read_once(int fd, size_t length) {
    one_read_t *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    latch_init(&r->done, 1);
    dispatch_read_f(fd, length, global(), r, one_read_done);
    CHECKF(latch_wait(&r->done, 10), "dispatch_read(%d, %zu) delivered within 10 s", fd, length);
    return r;
}

static void one_read_free(one_read_t *r) {
    latch_destroy(&r->done);
    free(r->bytes);
    free(r);
}

static void test_read_lengths(void) {
    unsigned char *bytes = random_bytes(5000, 12);

    check_section("a pipe holding 50 bytes, length 100: the 50 bytes");
    int p[2];
    CHECK(pipe(p) == 0);
    write_all(p[1], bytes, 50);
    one_read_t *r = read_once(p[0], 100);
    CHECK_EQ(r->error, 0);
    CHECK_EQ(r->size, (size_t)50);
    CHECK(memcmp(r->bytes, bytes, 50) == 0);
    one_read_free(r);

    check_section("a pipe holding 200 bytes, length 100: 100, then the next 100");
    write_all(p[1], bytes + 50, 200);
    r = read_once(p[0], 100);
    CHECK_EQ(r->size, (size_t)100);
    CHECK(memcmp(r->bytes, bytes + 50, 100) == 0);
    one_read_free(r);
    r = read_once(p[0], SIZE_MAX);
    CHECK_EQ(r->size, (size_t)100);
    CHECK(memcmp(r->bytes, bytes + 150, 100) == 0);
    one_read_free(r);

    check_section("an empty pipe: the read waits for the first bytes, then delivers them");
    one_read_t waiting = {0};
    latch_init(&waiting.done, 1);
    dispatch_read_f(p[0], 1000, global(), &waiting, one_read_done);
    sleep_ms(100);
    CHECKF(latch_count(&waiting.done) == 1, "a read on an empty pipe delivered before any write");
    write_all(p[1], bytes, 30);
    CHECK(latch_wait(&waiting.done, 10));
    CHECK_EQ(waiting.error, 0);
    CHECK_EQ(waiting.size, (size_t)30);
    free(waiting.bytes);
    latch_destroy(&waiting.done);

    check_section("a closed writer: the read delivers empty data, error 0");
    close(p[1]);
    r = read_once(p[0], SIZE_MAX);
    CHECK_EQ(r->error, 0);
    CHECK_EQ(r->size, (size_t)0);
    one_read_free(r);
    close(p[0]);

    check_section("a regular file: up to length, then the rest to end of file");
    char path[] = "/tmp/gc-io-conv-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    write_all(fd, bytes, 5000);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    r = read_once(fd, 1000);
    CHECK_EQ(r->error, 0);
    CHECK_EQ(r->size, (size_t)1000);
    CHECK(memcmp(r->bytes, bytes, 1000) == 0);
    one_read_free(r);
    r = read_once(fd, SIZE_MAX);
    CHECK_EQ(r->error, 0);
    CHECK_EQ(r->size, (size_t)4000);
    CHECK(memcmp(r->bytes, bytes + 1000, 4000) == 0);
    one_read_free(r);
    close(fd);
    unlink(path);
    free(bytes);
}

// MARK: - Call order

typedef struct {
    atomic_long done;
    atomic_int errors;
} counter_t;

static void count_write(void *context, dispatch_data_t data, int error) {
    counter_t *c = context;
    if (error != 0 || (data != NULL && dispatch_data_get_size(data) != 0)) atomic_fetch_add(&c->errors, 1);
    atomic_fetch_add(&c->done, 1);
}

/// Concurrent dispatch_writes of consecutive chunks of one buffer onto one file, issued in
/// order from one thread: the file must equal the buffer, every round.
static void test_write_order(void) {
    check_section("concurrent dispatch_writes of consecutive chunks: the file equals the buffer");
    enum { CHUNKS = 64, CHUNK = 1000, ROUNDS = 1600 };
    unsigned char *bytes = random_bytes(CHUNKS * CHUNK, 13);
    char path[] = "/tmp/gc-io-order-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    int wrong_rounds = 0;
    for (int round = 0; round < ROUNDS; round++) {
        fd = open(path, O_WRONLY | O_TRUNC);
        CHECK(fd >= 0);
        counter_t c = {0};
        for (int i = 0; i < CHUNKS; i++) {
            // Each chunk its own data object (a copy of its part of the buffer).
            dispatch_data_t d = dispatch_data_create_f(bytes + i * CHUNK, CHUNK, NULL, NULL);
            dispatch_write_f(fd, d, global(), &c, count_write);
            dispatch_release(d);
        }
        WAIT_FOR_COUNT(&c.done, CHUNKS, 30);
        CHECK_EQ(atomic_load(&c.errors), 0);
        close(fd);
        size_t size;
        unsigned char *got = read_file(path, &size);
        CHECK_EQ(size, (size_t)(CHUNKS * CHUNK));
        if (memcmp(got, bytes, size) != 0) wrong_rounds++;
        free(got);
    }
    CHECKF(wrong_rounds == 0, "%d of %d rounds left the file different from the buffer", wrong_rounds, ROUNDS);
    unlink(path);
    free(bytes);
}

typedef struct {
    int index;
    unsigned char *expected;
    atomic_int *wrong;
    atomic_long *done;
} ordered_read_t;

static void check_ordered_read(void *context, dispatch_data_t data, int error) {
    ordered_read_t *r = context;
    unsigned char *got = flatten(data);
    if (error != 0 || dispatch_data_get_size(data) != 1000 || memcmp(got, r->expected + r->index * 1000, 1000) != 0) {
        atomic_fetch_add(r->wrong, 1);
    }
    free(got);
    atomic_fetch_add(r->done, 1);
}

/// Concurrent dispatch_reads of 1000 bytes each on one file: read i gets bytes
/// [1000 i, 1000 (i + 1)).
static void test_read_order(void) {
    check_section("concurrent dispatch_reads on a file: consecutive ranges in call order");
    enum { READS = 64, ROUNDS = 800 };
    unsigned char *bytes = random_bytes(READS * 1000, 14);
    char path[] = "/tmp/gc-io-rorder-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    write_all(fd, bytes, READS * 1000);
    close(fd);
    ordered_read_t reads[READS];
    atomic_int wrong = 0;
    for (int round = 0; round < ROUNDS; round++) {
        fd = open(path, O_RDONLY);
        CHECK(fd >= 0);
        atomic_long done = 0;
        for (int i = 0; i < READS; i++) {
            reads[i] = (ordered_read_t){ .index = i, .expected = bytes, .wrong = &wrong, .done = &done };
            dispatch_read_f(fd, 1000, global(), &reads[i], check_ordered_read);
        }
        WAIT_FOR_COUNT(&done, READS, 30);
        close(fd);
    }
    CHECKF(atomic_load(&wrong) == 0, "%d of %d reads got the wrong range", atomic_load(&wrong), READS * ROUNDS);
    unlink(path);
    free(bytes);
}

// MARK: - The handler may close the descriptor

typedef struct {
    int fd;
    int error;
    latch_t done;
} closing_write_t;

static void close_in_handler(void *context, dispatch_data_t data, int error) {
    (void)data;
    closing_write_t *w = context;
    w->error = error;
    CHECK(close(w->fd) == 0);
    latch_arrive(&w->done);
}

/// Each round opens a file (the same descriptor number comes back), writes it with
/// dispatch_write and closes it in the handler; every file gets its bytes.
static void test_close_in_handler(void) {
    check_section("the handler closes the descriptor; the number is reused at once");
    enum { ROUNDS = 300 };
    char path[] = "/tmp/gc-io-close-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    unsigned char *bytes = random_bytes(ROUNDS + 4096, 15);
    for (int round = 0; round < ROUNDS; round++) {
        fd = open(path, O_WRONLY | O_TRUNC);
        CHECK(fd >= 0);
        closing_write_t w = { .fd = fd };
        latch_init(&w.done, 1);
        dispatch_data_t d = dispatch_data_create_f(bytes + round, 4096, NULL, NULL);
        dispatch_write_f(fd, d, global(), &w, close_in_handler);
        dispatch_release(d);
        CHECK(latch_wait(&w.done, 10));
        CHECK_EQ(w.error, 0);
        latch_destroy(&w.done);
        size_t size;
        unsigned char *got = read_file(path, &size);
        CHECK_EQ(size, (size_t)4096);
        CHECKF(memcmp(got, bytes + round, 4096) == 0, "round %d: the file holds the wrong bytes", round);
        free(got);
    }
    unlink(path);
    free(bytes);
}

typedef struct {
    int error;
    bool data_null;
    size_t size;
    latch_t done;
} bad_fd_t;

static void bad_fd_done(void *context, dispatch_data_t data, int error) {
    bad_fd_t *b = context;
    b->error = error;
    b->data_null = data == NULL;
    b->size = data ? dispatch_data_get_size(data) : 0;
    latch_arrive(&b->done);
}

static void test_bad_descriptor(void) {
    check_section("a closed descriptor: EBADF, empty data for a read, NULL for a write");
    int fd = open("/dev/null", O_RDONLY);
    CHECK(fd >= 0);
    close(fd);
    bad_fd_t r = {0}, w = {0};
    latch_init(&r.done, 1);
    latch_init(&w.done, 1);
    dispatch_read_f(fd, 100, global(), &r, bad_fd_done);
    dispatch_data_t d = dispatch_data_create_f("abc", 3, NULL, NULL);
    dispatch_write_f(fd, d, global(), &w, bad_fd_done);
    dispatch_release(d);
    CHECK(latch_wait(&r.done, 10));
    CHECK(latch_wait(&w.done, 10));
    CHECK_EQ(r.error, EBADF);
    CHECK(!r.data_null);
    CHECK_EQ(r.size, (size_t)0);
    CHECK_EQ(w.error, EBADF);
    CHECK(w.data_null);
    latch_destroy(&r.done);
    latch_destroy(&w.done);
}

#ifdef __BLOCKS__
static void test_block_read_loop(void) {
    check_section("the block form: a read loop on a pipe");
    int p[2];
    CHECK(pipe(p) == 0);
    int read_fd = p[0];
    __block int deliveries = 0;
    __block size_t total = 0;
    latch_t finished;
    latch_init(&finished, 1);
    latch_t *finished_p = &finished;
    __block void (^step)(dispatch_data_t, int);
    void (^loop)(dispatch_data_t, int) = ^(dispatch_data_t data, int error) {
        CHECK_EQ(error, 0);
        size_t size = dispatch_data_get_size(data);
        if (size == 0) { latch_arrive(finished_p); return; }
        deliveries++;
        total += size;
        dispatch_read(read_fd, SIZE_MAX, global(), step);
    };
    step = loop;
    dispatch_read(p[0], SIZE_MAX, global(), step);
    for (int i = 0; i < 5; i++) {
        sleep_ms(20);
        write_all(p[1], "0123456789", 10);
        uint64_t give_up = now_ns() + 10 * NSEC_PER_SEC;
        while (__atomic_load_n(&deliveries, __ATOMIC_ACQUIRE) <= i && now_ns() < give_up) usleep(500);
        CHECK_EQ(__atomic_load_n(&deliveries, __ATOMIC_ACQUIRE), i + 1);
    }
    close(p[1]);
    CHECK(latch_wait(&finished, 10));
    CHECK_EQ(total, (size_t)50);
    close(p[0]);
    latch_destroy(&finished);
}
#endif

#ifndef GC_REFERENCE_LIBDISPATCH
// GrandCentral only: libdispatch hangs here (its per-descriptor entry for the number stays
// with the stale read, and the new read waits behind it for ever).
typedef struct {
    atomic_size_t size;
    atomic_int error, calls;
    latch_t cleaned;
} channel_read_t;

static void channel_read_step(void *context, bool done, dispatch_data_t data, int error) {
    channel_read_t *r = context;
    if (data) atomic_fetch_add(&r->size, dispatch_data_get_size(data));
    if (done) {
        atomic_store(&r->error, error);
        atomic_fetch_add(&r->calls, 1);
    }
}

static void channel_read_cleanup(void *context, int error) {
    channel_read_t *r = context;
    CHECK_EQ(error, 0);
    latch_arrive(&r->cleaned);
}

static void test_stale_read_on_reused_number(void) {
    check_section("a read left pending on a pipe the client closed does not hold up the next pipe with its number");
    int a[2];
    CHECK(pipe(a) == 0);
    int n = a[0];
    // The misuse: a read waiting on n, then n closed under it. It never completes (its
    // handler would write here, so this outlives the test).
    static one_read_t stale;
    latch_init(&stale.done, 1);
    dispatch_read_f(n, 4, global(), &stale, one_read_done);
    sleep_ms(200);  // the read is registered and waiting
    close(a[0]);
    close(a[1]);
    // A correct program gets the number for a new pipe.
    int b[2];
    CHECK(pipe(b) == 0);
    if (b[0] != n) {
        CHECK(dup2(b[0], n) == n);
        close(b[0]);
    }
    write_all(b[1], "ZZZZ", 4);
    one_read_t *r = read_once(n, 4);  // fails if it does not deliver within 10 s
    CHECK_EQ(r->error, 0);
    CHECK_EQ(r->size, (size_t)4);
    CHECK(memcmp(r->bytes, "ZZZZ", 4) == 0);
    one_read_free(r);

    check_section("... and a channel on the new pipe reads it and cleans up");
    channel_read_t c;
    atomic_store(&c.size, 0);
    atomic_store(&c.error, -1);
    atomic_store(&c.calls, 0);
    latch_init(&c.cleaned, 1);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_STREAM, n, global(), &c, channel_read_cleanup);
    dispatch_io_read_f(io, 0, SIZE_MAX, global(), &c, channel_read_step);
    write_all(b[1], "YYYYYY", 6);
    close(b[1]);  // end of file completes the read
    dispatch_io_close(io, 0);
    dispatch_release(io);
    CHECKF(latch_wait(&c.cleaned, 10), "the channel on the new pipe cleaned up within 10 s");
    CHECK_EQ(atomic_load(&c.calls), 1);
    CHECK_EQ(atomic_load(&c.error), 0);
    CHECK_EQ(atomic_load(&c.size), (size_t)6);
    CHECKF((fcntl(n, F_GETFL) & O_NONBLOCK) == 0, "the new pipe's flags are put back");
    latch_destroy(&c.cleaned);
    CHECKF(latch_count(&stale.done) == 1, "the stale read did not complete with the new pipe's data");
    close(n);
}
#endif

int main(void) {
    check_start("io_convenience", 240);
    test_read_lengths();
    test_read_loop();
    test_read_order();
    test_write_order();
    test_close_in_handler();
    test_bad_descriptor();
#ifdef __BLOCKS__
    test_block_read_loop();
#endif
#ifndef GC_REFERENCE_LIBDISPATCH
    test_stale_read_on_reused_number();  // last: the stale read stays pending
#endif
    check_pass();
    return 0;
}
