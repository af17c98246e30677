// I/O channels, the promises of dispatch_io_create(3) and dispatch_io_read(3) that programs
// depend on:
//
// - a path channel checks its path when it is created (stat; lstat with O_NOFOLLOW; with
//   O_CREAT and a missing file, stat of the parent directory): a failure there is the
//   channel's error (every operation ends with it, the cleanup handler runs once with it);
//   a failure of the later open(2) is the operation's error (the cleanup handler runs once
//   with 0);
// - relative paths and unknown channel types give NULL, for every create call;
// - a random channel's offsets are relative to the descriptor's file position when the
//   channel was created, and a read that runs into end of file delivers the bytes up to it;
// - a barrier applies to the descriptor: it waits for the earlier operations of every
//   channel on the descriptor and holds back their later ones;
// - a write that goes out in more than one piece reports progress: handler calls with
//   done == false carrying the data not yet written.
//
// The gcc variant uses the _f forms only; the clang variant adds a block form. Against the
// reference (GC_REFERENCE_LIBDISPATCH) the _f forms are declared in io_support.h, since
// libdispatch exports them without declaring them.
#include "io_support.h"

/// A temporary file holding `size` bytes of `bytes`; its path in `path` (a mkstemp template).
static void make_file(char *path, const unsigned char *bytes, size_t size) {
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    write_all(fd, bytes, size);
    close(fd);
}

typedef struct {
    atomic_int calls;
    int error;
    latch_t ran;
} cleanup_t;

static void cleanup_init(cleanup_t *c) {
    atomic_store(&c->calls, 0);
    c->error = -1;
    latch_init(&c->ran, 1);
}

static void record_cleanup(void *context, int error) {
    cleanup_t *c = context;
    c->error = error;
    atomic_fetch_add(&c->calls, 1);
    latch_arrive(&c->ran);
}

/// Waits for the cleanup handler and checks it ran once with `error`.
static void check_cleanup(cleanup_t *c, int error) {
    CHECKF(latch_wait(&c->ran, 10), "the cleanup handler ran");
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c->calls), 1);
    CHECKF(c->error == error, "cleanup error %d (%s), expected %d (%s)", c->error, strerror(c->error), error,
           strerror(error));
    latch_destroy(&c->ran);
}

/// Closes and releases `io`, then check_cleanup.
static void close_and_check_cleanup(dispatch_io_t io, cleanup_t *c, int error) {
    dispatch_io_close(io, 0);
    dispatch_release(io);
    check_cleanup(c, error);
}

// MARK: - Path channels check the path when created

/// A path channel whose check at creation fails with `error`: a read and a write both end
/// with it, and the cleanup handler runs once with it.
static void expect_channel_error(dispatch_io_type_t type, const char *path, int oflag, int error) {
    cleanup_t cleaned;
    cleanup_init(&cleaned);
    dispatch_io_t io = dispatch_io_create_with_path_f(type, path, oflag, 0600, global(), &cleaned, record_cleanup);
    CHECKF(io != NULL, "a path that fails its check still gives a channel");
    collector_t r, w;
    collector_init(&r);
    collector_init(&w);
    dispatch_io_read_f(io, 0, 100, global(), &r, collect);
    dispatch_data_t d = dispatch_data_create_f("abc", 3, NULL, NULL);
    dispatch_io_write_f(io, 0, d, global(), &w, track_write);
    dispatch_release(d);
    collector_wait(&r);
    collector_wait(&w);
    CHECKF(r.error == error, "read error %d (%s), expected %d (%s)", r.error, strerror(r.error), error, strerror(error));
    CHECKF(w.error == error, "write error %d (%s), expected %d", w.error, strerror(w.error), error);
    CHECK_EQ(r.size, (size_t)0);
    close_and_check_cleanup(io, &cleaned, error);
    collector_free(&r);
    collector_free(&w);
}

/// The same without any operation: closing the channel runs the cleanup handler once,
/// with the error of the check.
static void expect_channel_error_unused(dispatch_io_type_t type, const char *path, int oflag, int error) {
    cleanup_t cleaned;
    cleanup_init(&cleaned);
    dispatch_io_t io = dispatch_io_create_with_path_f(type, path, oflag, 0600, global(), &cleaned, record_cleanup);
    CHECK(io != NULL);
    close_and_check_cleanup(io, &cleaned, error);
}

static void test_path_checked_at_creation(void) {
    check_section("a missing path, no operation: the cleanup handler runs once with ENOENT");
    expect_channel_error_unused(DISPATCH_IO_STREAM, "/tmp/gc-io-channels-no-such-file", O_RDONLY, ENOENT);
    expect_channel_error_unused(DISPATCH_IO_RANDOM, "/tmp/gc-io-channels-no-such-dir/file", O_RDWR | O_CREAT, ENOENT);
    expect_channel_error_unused(DISPATCH_IO_STREAM, "/tmp", O_RDONLY, EISDIR);

    check_section("a missing path: ENOENT for every operation and for the cleanup handler");
    expect_channel_error(DISPATCH_IO_STREAM, "/tmp/gc-io-channels-no-such-file", O_RDONLY, ENOENT);
    expect_channel_error(DISPATCH_IO_RANDOM, "/tmp/gc-io-channels-no-such-file", O_RDWR, ENOENT);

    check_section("O_CREAT under a missing directory: ENOENT for the channel");
    expect_channel_error(DISPATCH_IO_STREAM, "/tmp/gc-io-channels-no-such-dir/file", O_WRONLY | O_CREAT, ENOENT);

    check_section("a directory: EISDIR for the channel");
    expect_channel_error(DISPATCH_IO_STREAM, "/tmp", O_RDONLY, EISDIR);
    expect_channel_error(DISPATCH_IO_RANDOM, "/tmp", O_RDONLY, EISDIR);

    check_section("a random channel on a FIFO: ESPIPE for the channel");
    char fifo[] = "/tmp/gc-io-channels-fifo-XXXXXX";
    int tmp = mkstemp(fifo);
    CHECK(tmp >= 0);
    close(tmp);
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    expect_channel_error(DISPATCH_IO_RANDOM, fifo, O_RDWR, ESPIPE);
    unlink(fifo);

    check_section("O_NOFOLLOW on a dangling symlink: lstat finds the link, so the open fails (operation error)");
    // stat would fail (ENOENT); lstat succeeds on the link itself, so the channel is made
    // and the open(2) with O_NOFOLLOW fails with ELOOP: the operation's error, cleanup 0.
    char link[] = "/tmp/gc-io-channels-link-XXXXXX";
    tmp = mkstemp(link);
    CHECK(tmp >= 0);
    close(tmp);
    unlink(link);
    CHECK(symlink("/tmp/gc-io-channels-no-such-target", link) == 0);
    cleanup_t cleaned;
    cleanup_init(&cleaned);
    dispatch_io_t io = dispatch_io_create_with_path_f(DISPATCH_IO_STREAM, link, O_RDONLY | O_NOFOLLOW, 0, global(),
                                                      &cleaned, record_cleanup);
    CHECK(io != NULL);
    collector_t r;
    collector_init(&r);
    dispatch_io_read_f(io, 0, 100, global(), &r, collect);
    collector_wait(&r);
    CHECKF(r.error == ELOOP, "read error %d (%s), expected ELOOP", r.error, strerror(r.error));
    close_and_check_cleanup(io, &cleaned, 0);
    collector_free(&r);
    unlink(link);

    check_section("O_CREAT under an existing directory: the file is created at the first operation");
    char created[] = "/tmp/gc-io-channels-new-XXXXXX";
    tmp = mkstemp(created);
    CHECK(tmp >= 0);
    close(tmp);
    unlink(created);
    cleanup_init(&cleaned);
    io = dispatch_io_create_with_path_f(DISPATCH_IO_STREAM, created, O_WRONLY | O_CREAT, 0600, global(), &cleaned,
                                        record_cleanup);
    CHECK(io != NULL);
    collector_t w;
    collector_init(&w);
    dispatch_data_t d = dispatch_data_create_f("hello", 5, NULL, NULL);
    dispatch_io_write_f(io, 0, d, global(), &w, track_write);
    dispatch_release(d);
    collector_wait(&w);
    CHECK_EQ(w.error, 0);
    close_and_check_cleanup(io, &cleaned, 0);
    struct stat st;
    CHECK(stat(created, &st) == 0);
    CHECK_EQ(st.st_size, 5);
    collector_free(&w);

    check_section("a failed open(2) (O_EXCL on an existing file): the operation's error, cleanup 0");
    cleanup_init(&cleaned);
    io = dispatch_io_create_with_path_f(DISPATCH_IO_STREAM, created, O_WRONLY | O_CREAT | O_EXCL, 0600, global(),
                                        &cleaned, record_cleanup);
    CHECK(io != NULL);
    collector_init(&w);
    d = dispatch_data_create_f("again", 5, NULL, NULL);
    dispatch_io_write_f(io, 0, d, global(), &w, track_write);
    dispatch_release(d);
    collector_wait(&w);
    CHECKF(w.error == EEXIST, "write error %d (%s), expected EEXIST", w.error, strerror(w.error));
    close_and_check_cleanup(io, &cleaned, 0);
    collector_free(&w);
    unlink(created);
}

static void test_bad_input(void) {
    check_section("relative paths and unknown types: NULL from every create call");
    CHECK(dispatch_io_create_with_path_f(DISPATCH_IO_STREAM, "relative/file", O_RDONLY, 0, global(), NULL, NULL) == NULL);
    CHECK(dispatch_io_create_with_path_f(DISPATCH_IO_RANDOM, "file", O_RDWR | O_CREAT, 0600, global(), NULL, NULL) == NULL);
    CHECK(dispatch_io_create_with_path_f(DISPATCH_IO_STREAM, "", O_RDONLY, 0, global(), NULL, NULL) == NULL);
    CHECK(dispatch_io_create_with_path_f(7, "/tmp", O_RDONLY, 0, global(), NULL, NULL) == NULL);
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK(dispatch_io_create_f(7, p[0], global(), NULL, NULL) == NULL);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), NULL, NULL);
    CHECK(io != NULL);
    CHECK(dispatch_io_create_with_io_f(7, io, global(), NULL, NULL) == NULL);
    dispatch_io_close(io, 0);
    dispatch_release(io);
    sleep_ms(50);
    close(p[0]);
    close(p[1]);
#ifdef __BLOCKS__
    CHECK(dispatch_io_create_with_path(DISPATCH_IO_STREAM, "relative", O_RDONLY, 0, global(), ^(int e) { (void)e; }) == NULL);
    CHECK(dispatch_io_create(5, 0, global(), ^(int e) { (void)e; }) == NULL);
#endif
}

// MARK: - Random channels: offsets from the position at creation; end of file

/// dispatch_io_read_f(io, offset, length) collected.
static void read_at(dispatch_io_t io, off_t offset, size_t length, collector_t *c) {
    collector_init(c);
    dispatch_io_read_f(io, offset, length, global(), c, collect);
    collector_wait(c);
    CHECK_EQ(atomic_load(&c->done_calls), 1);
}

static void test_random_offsets(void) {
    enum { SIZE = 4000, BASE = 1000 };
    unsigned char *bytes = random_bytes(SIZE, 21);
    char path[] = "/tmp/gc-io-random-XXXXXX";
    make_file(path, bytes, SIZE);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    CHECK(lseek(fd, BASE, SEEK_SET) == BASE);
    cleanup_t cleaned;
    cleanup_init(&cleaned);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_RANDOM, fd, global(), &cleaned, record_cleanup);
    CHECK(io != NULL);

    check_section("a random channel on a descriptor at 1000: a read at 0 reads from 1000");
    collector_t c;
    read_at(io, 0, 100, &c);
    CHECK_EQ(c.error, 0);
    CHECK_EQ(c.size, (size_t)100);
    CHECK(memcmp(c.bytes, bytes + BASE, 100) == 0);
    collector_free(&c);

    check_section("a write at 1000 lands at 2000");
    collector_t w;
    collector_init(&w);
    dispatch_data_t d = dispatch_data_create_f("0123456789", 10, NULL, NULL);
    dispatch_io_write_f(io, 1000, d, global(), &w, track_write);
    dispatch_release(d);
    collector_wait(&w);
    CHECK_EQ(w.error, 0);
    collector_free(&w);
    unsigned char probe[10];
    CHECK(pread(fd, probe, 10, 2000) == 10);
    CHECKF(memcmp(probe, "0123456789", 10) == 0, "the write did not land at 2000");
    CHECK(pread(fd, probe, 10, 1000) == 10);
    CHECKF(memcmp(probe, bytes + 1000, 10) == 0, "the write landed at 1000");
    memcpy(bytes + 2000, "0123456789", 10);

    check_section("a read running into end of file delivers the bytes up to it");
    read_at(io, SIZE - BASE - 100, 500, &c);   // 100 bytes before the end
    CHECK_EQ(c.error, 0);
    CHECK_EQ(c.size, (size_t)100);
    CHECK(memcmp(c.bytes, bytes + SIZE - 100, 100) == 0);
    collector_free(&c);
    read_at(io, SIZE - BASE - 1, SIZE_MAX, &c);   // the last byte
    CHECK_EQ(c.error, 0);
    CHECK_EQ(c.size, (size_t)1);
    CHECK_EQ(c.bytes[0], bytes[SIZE - 1]);
    collector_free(&c);

    check_section("a read at and past end of file delivers nothing and completes");
    read_at(io, SIZE - BASE, 100, &c);
    CHECK_EQ(c.error, 0);
    CHECK_EQ(c.size, (size_t)0);
    collector_free(&c);
    read_at(io, SIZE, 100, &c);
    CHECK_EQ(c.error, 0);
    CHECK_EQ(c.size, (size_t)0);
    collector_free(&c);

    check_section("a whole read from 0 is the file from the position at creation on");
    read_at(io, 0, SIZE_MAX, &c);
    CHECK_EQ(c.error, 0);
    CHECK_EQ(c.size, (size_t)(SIZE - BASE));
    CHECK(memcmp(c.bytes, bytes + BASE, SIZE - BASE) == 0);
    collector_free(&c);

    check_section("dispatch_io_create_with_io: a random channel from the descriptor's position then");
    CHECK(lseek(fd, 3000, SEEK_SET) == 3000);
    cleanup_t cleaned2;
    cleanup_init(&cleaned2);
    dispatch_io_t second = dispatch_io_create_with_io_f(DISPATCH_IO_RANDOM, io, global(), &cleaned2, record_cleanup);
    CHECK(second != NULL);
    read_at(second, 0, 50, &c);
    CHECK_EQ(c.error, 0);
    CHECK_EQ(c.size, (size_t)50);
    CHECK(memcmp(c.bytes, bytes + 3000, 50) == 0);
    collector_free(&c);
    read_at(io, 0, 50, &c);   // the first channel keeps its own base
    CHECK(memcmp(c.bytes, bytes + BASE, 50) == 0);
    collector_free(&c);

    // Each cleanup handler waits for every channel on the descriptor (libdispatch).
    dispatch_io_close(second, 0);
    dispatch_release(second);
    dispatch_io_close(io, 0);
    dispatch_release(io);
    check_cleanup(&cleaned2, 0);
    check_cleanup(&cleaned, 0);
    close(fd);
    unlink(path);
    free(bytes);
}

// MARK: - Barriers apply to the descriptor

typedef struct {
    atomic_int ran;
    latch_t *release;                // the barrier waits for it, if set
} barrier_t;

static void barrier_body(void *context) {
    barrier_t *b = context;
    atomic_store(&b->ran, 1);
    if (b->release) CHECK(latch_wait(b->release, 20));
}

/// `make_second` makes a second channel on `first`'s descriptor `fd`.
static void barrier_across(dispatch_io_t first, dispatch_io_t second, int write_fd) {
    // A read on the first channel waits for data; a barrier on the second must wait for it.
    collector_t earlier;
    collector_init(&earlier);
    dispatch_io_read_f(first, 0, 10, global(), &earlier, collect);
    // libdispatch queues an operation and a barrier of different channels through each
    // channel's own queue first, so a barrier called right after a read on another channel
    // may reach the descriptor first; give the read time to be queued.
    sleep_ms(100);
    barrier_t b = {0};
    latch_t release;
    latch_init(&release, 1);
    b.release = &release;
    dispatch_io_barrier_f(second, &b, barrier_body);
    sleep_ms(200);
    CHECKF(atomic_load(&b.ran) == 0, "a barrier on one channel ran while a read on another channel of its descriptor was pending");
    // Later operations of the first channel wait for the barrier.
    collector_t later;
    collector_init(&later);
    dispatch_io_read_f(first, 0, 10, global(), &later, collect);
    CHECK(atomic_load(&b.ran) == 0);
    write_all(write_fd, "0123456789", 10);
    collector_wait(&earlier);
    uint64_t give_up = now_ns() + 10 * NSEC_PER_SEC;
    while (!atomic_load(&b.ran) && now_ns() < give_up) usleep(500);
    CHECK(atomic_load(&b.ran));
    // (The barrier follows the read's I/O; libdispatch may run it before the read's handler
    // has been called, so the handler's call is not part of the contract checked here.)
    write_all(write_fd, "abcdefghij", 10);
    sleep_ms(200);
    CHECKF(atomic_load(&later.done_calls) == 0, "a read queued after a barrier on another channel ran before the barrier returned");
    latch_arrive(&release);
    collector_wait(&later);
    CHECK_EQ(later.error, 0);
    CHECK_EQ(later.size, (size_t)10);
    CHECK(memcmp(later.bytes, "abcdefghij", 10) == 0);
    collector_free(&earlier);
    collector_free(&later);
    latch_destroy(&release);
}

static void close_both(dispatch_io_t first, cleanup_t *c1, dispatch_io_t second, cleanup_t *c2) {
    dispatch_io_close(second, 0);
    dispatch_release(second);
    dispatch_io_close(first, 0);
    dispatch_release(first);
    check_cleanup(c2, 0);
    check_cleanup(c1, 0);
}

static void test_barrier_per_descriptor(void) {
    check_section("a barrier on a second channel made on the same descriptor waits for the first's read");
    int p[2];
    CHECK(pipe(p) == 0);
    cleanup_t c1, c2;
    cleanup_init(&c1);
    cleanup_init(&c2);
    dispatch_io_t first = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &c1, record_cleanup);
    dispatch_io_t second = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &c2, record_cleanup);
    barrier_across(first, second, p[1]);
    close_both(first, &c1, second, &c2);

    check_section("a barrier on a channel made with dispatch_io_create_with_io waits for the first's read");
    cleanup_init(&c1);
    cleanup_init(&c2);
    first = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &c1, record_cleanup);
    second = dispatch_io_create_with_io_f(DISPATCH_IO_STREAM, first, global(), &c2, record_cleanup);
    CHECK(second != NULL);
    barrier_across(first, second, p[1]);
    close_both(first, &c1, second, &c2);
    close(p[0]);
    close(p[1]);
}

// MARK: - dispatch_io_create_with_io from a closed channel

/// A channel made from `source` after dispatch_io_close(source, flags): it is made, its
/// read ends with ECANCELED and no data, and its cleanup handler runs once with ECANCELED
/// without waiting for the source (libdispatch's checks at creation; GrandCentral gave
/// EBADF, and with a read still pending on the source the new channel shared the pipe).
static void expect_cancelled_from_closed(dispatch_io_t source, unsigned long flags) {
    dispatch_io_close(source, flags);
    cleanup_t cleaned;
    cleanup_init(&cleaned);
    dispatch_io_t io = dispatch_io_create_with_io_f(DISPATCH_IO_STREAM, source, global(), &cleaned, record_cleanup);
    CHECKF(io != NULL, "a channel made from a closed one is still made");
    collector_t r;
    collector_init(&r);
    dispatch_io_read_f(io, 0, 4, global(), &r, collect);
    collector_wait(&r);
    CHECKF(r.error == ECANCELED, "read error %d (%s), expected ECANCELED", r.error, strerror(r.error));
    CHECK_EQ(r.size, (size_t)0);
    collector_free(&r);
    close_and_check_cleanup(io, &cleaned, ECANCELED);
}

static void test_with_io_from_closed(void) {
    int p[2];
    CHECK(pipe(p) == 0);
    check_section("dispatch_io_create_with_io from a closed idle channel: ECANCELED for its read and cleanup");
    cleanup_t c1;
    cleanup_init(&c1);
    dispatch_io_t first = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &c1, record_cleanup);
    expect_cancelled_from_closed(first, 0);
    dispatch_release(first);
    check_cleanup(&c1, 0);

    check_section("... from a channel closed with DISPATCH_IO_STOP: ECANCELED");
    cleanup_init(&c1);
    first = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &c1, record_cleanup);
    expect_cancelled_from_closed(first, DISPATCH_IO_STOP);
    dispatch_release(first);
    check_cleanup(&c1, 0);

    check_section("... from a closed channel with a read pending: ECANCELED at once; the pending read gets the data");
    cleanup_init(&c1);
    first = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &c1, record_cleanup);
    collector_t pending;
    collector_init(&pending);
    dispatch_io_read_f(first, 0, 4, global(), &pending, collect);
    expect_cancelled_from_closed(first, 0);
    write_all(p[1], "abcd", 4);
    collector_wait(&pending);
    CHECK_EQ(pending.error, 0);
    CHECK_EQ(pending.size, (size_t)4);
    CHECK(memcmp(pending.bytes, "abcd", 4) == 0);
    collector_free(&pending);
    dispatch_release(first);
    check_cleanup(&c1, 0);
    close(p[0]);
    close(p[1]);
}

// MARK: - A write in several pieces reports progress

static void test_write_progress(void) {
    check_section("a write in 4 KiB pieces: partial calls carry what is not yet written");
    enum { SIZE = 64 * 1024, PIECE = 4096 };
    unsigned char *bytes = random_bytes(SIZE, 31);
    char path[] = "/tmp/gc-io-progress-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_STREAM, fd, global(), NULL, NULL);
    dispatch_io_set_high_water(io, PIECE);
    dispatch_io_set_low_water(io, PIECE);
    dispatch_data_t d = dispatch_data_create_f(bytes, SIZE, NULL, NULL);
    collector_t w;
    collector_init(&w);
    dispatch_io_write_f(io, 0, d, global(), &w, track_write);
    dispatch_release(d);
    collector_wait(&w);
    CHECK_EQ(w.error, 0);
    CHECKF(w.final_data_null, "the final call of a complete write carries no data");
    CHECKF(w.partial_calls == SIZE / PIECE - 1, "%zu partial calls, expected %d", w.partial_calls, SIZE / PIECE - 1);
    for (size_t i = 0; i < w.partial_calls && i < COLLECTOR_SIZES; i++) {
        CHECKF(w.partial_sizes[i] == SIZE - (i + 1) * PIECE, "partial call %zu: %zu bytes not yet written, expected %zu",
               i, w.partial_sizes[i], (size_t)(SIZE - (i + 1) * PIECE));
    }
    dispatch_io_close(io, 0);
    dispatch_release(io);
    sleep_ms(50);
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    CHECK_EQ(st.st_size, SIZE);
    unsigned char *got = malloc(SIZE);
    CHECK(pread(fd, got, SIZE, 0) == SIZE);
    CHECK(memcmp(got, bytes, SIZE) == 0);
    free(got);
    close(fd);
    unlink(path);
    free(bytes);
}

int main(void) {
    check_start("io_channels", 120);
    test_bad_input();
    test_path_checked_at_creation();
    test_random_offsets();
    test_barrier_per_descriptor();
    test_with_io_from_closed();
    test_write_progress();
    check_pass();
    return 0;
}
