// I/O channels: whole files through random and stream channels; a 64 MiB channel-to-channel
// copy; a pipe read in order as a writer thread writes; water marks bound every partial
// chunk; DISPATCH_IO_STOP gives ECANCELED; a missing path ENOENT and a closed descriptor
// EBADF through the handler; cleanup handlers run once; EPIPE (not SIGPIPE) on a pipe whose
// reader closed; request/response on one socketpair (a read queued behind a write that waits
// for buffer space is served). Barriers, intervals, shared descriptors and many channels
// are in io_barriers.c; the helpers both use in io_support.h.
//
// The gcc variant uses the _f forms only; the clang variant adds the block forms. Against
// the reference (GC_REFERENCE_LIBDISPATCH) the _f forms are declared here, since
// libdispatch exports them without declaring them, and the EPIPE section is skipped:
// libdispatch on Linux dies of SIGPIPE there.
#include "io_support.h"

// MARK: - Files

static void test_file_whole(void) {
    check_section("a file read whole through a random and a stream channel");
    const size_t size = 3 * 1024 * 1024 + 12345;
    unsigned char *bytes = random_bytes(size, 1);
    char path[] = "/tmp/gc-io-file-XXXXXX";
    int tmp = mkstemp(path);
    CHECK(tmp >= 0);
    close(tmp);
    write_file(path, bytes, size);

    for (int type = 0; type < 2; type++) {
        int fd = open(path, O_RDONLY);
        CHECK(fd >= 0);
        latch_t cleaned;
        latch_init(&cleaned, 1);
        atomic_store(&cleanups, 0);
        dispatch_io_t io = dispatch_io_create_f(type == 0 ? DISPATCH_IO_RANDOM : DISPATCH_IO_STREAM, fd,
                                                global(), &cleaned, count_cleanup);
        CHECK(io != NULL);
        CHECK_EQ(dispatch_io_get_descriptor(io), fd);
        collector_t c;
        collector_init(&c);
        dispatch_io_read_f(io, 0, SIZE_MAX, global(), &c, collect);
        collector_wait(&c);
        CHECK_EQ(c.error, 0);
        CHECK_EQ(c.size, size);
        CHECK(memcmp(c.bytes, bytes, size) == 0);
        if (type == 0) CHECK_EQ(lseek(fd, 0, SEEK_CUR), 0);  // random access never moves it
        dispatch_io_close(io, 0);
#ifndef GC_REFERENCE_LIBDISPATCH
        // io.h documents -1 after close; libdispatch applies the close asynchronously, so
        // right after the call it may still return the descriptor.
        CHECK_EQ(dispatch_io_get_descriptor(io), -1);
#endif
        dispatch_release(io);
        CHECK(latch_wait(&cleaned, 10));
        sleep_ms(20);
        CHECK_EQ(atomic_load(&cleanups), 1);
        CHECK_EQ(c.done_calls, 1);
        close(fd);
        free(c.bytes);
    }
    unlink(path);
    free(bytes);
}

typedef struct {
    dispatch_io_t out;
    off_t offset;
    atomic_int writes_pending;
    atomic_int write_errors;
    bool read_done;
    int read_error;
    latch_t all_done;
} copy_t;

static void copy_write_done(void *context, bool done, dispatch_data_t data, int error) {
    (void)data;
    copy_t *c = context;
    if (!done) return;
    if (error) atomic_fetch_add(&c->write_errors, 1);
    if (atomic_fetch_sub(&c->writes_pending, 1) == 1) latch_arrive(&c->all_done);
}

static void copy_read(void *context, bool done, dispatch_data_t data, int error) {
    copy_t *c = context;
    size_t size = data ? dispatch_data_get_size(data) : 0;
    if (size > 0) {
        atomic_fetch_add(&c->writes_pending, 1);
        dispatch_io_write_f(c->out, c->offset, data, global(), c, copy_write_done);
        c->offset += (off_t)size;
    }
    if (done) {
        c->read_error = error;
        // The read's own count keeps all_done from firing early.
        if (atomic_fetch_sub(&c->writes_pending, 1) == 1) latch_arrive(&c->all_done);
    }
}

static void test_copy_64mib(void) {
    check_section("a 64 MiB file copied channel to channel");
    const size_t size = 64u << 20;
    unsigned char *bytes = random_bytes(size, 2);
    char src[] = "/tmp/gc-io-src-XXXXXX", dst[] = "/tmp/gc-io-dst-XXXXXX";
    int a = mkstemp(src), b = mkstemp(dst);
    CHECK(a >= 0 && b >= 0);
    close(a); close(b);
    write_file(src, bytes, size);

    dispatch_queue_t q = dispatch_queue_create("copy", NULL);
    dispatch_io_t in = dispatch_io_create_with_path_f(DISPATCH_IO_RANDOM, src, O_RDONLY, 0, q, NULL, NULL);
    copy_t c = { .out = dispatch_io_create_with_path_f(DISPATCH_IO_RANDOM, dst, O_WRONLY | O_TRUNC, 0, q, NULL, NULL) };
    atomic_store(&c.writes_pending, 1);
    latch_init(&c.all_done, 1);
    dispatch_io_set_high_water(in, 4u << 20);
    dispatch_io_read_f(in, 0, SIZE_MAX, q, &c, copy_read);
    CHECK(latch_wait(&c.all_done, 30));
    CHECK_EQ(c.read_error, 0);
    CHECK_EQ(atomic_load(&c.write_errors), 0);
    CHECK_EQ((size_t)c.offset, size);
    dispatch_io_close(in, 0);
    dispatch_io_close(c.out, 0);
    dispatch_release(in);
    dispatch_release(c.out);

    int fd = open(dst, O_RDONLY);
    CHECK(fd >= 0);
    unsigned char *copy = malloc(size);
    size_t got = 0;
    ssize_t n;
    while ((n = read(fd, copy + got, size - got)) > 0) got += (size_t)n;
    close(fd);
    CHECK_EQ(got, size);
    CHECK(memcmp(copy, bytes, size) == 0);
    free(copy);
    free(bytes);
    unlink(src);
    unlink(dst);
    dispatch_release(q);
}

// MARK: - Pipes

typedef struct {
    int fd;
    const unsigned char *bytes;
    size_t size;
    size_t piece;
} writer_t;

static void *writer_thread(void *context) {
    writer_t *w = context;
    size_t done = 0, i = 0;
    while (done < w->size) {
        size_t n = w->piece ? w->piece : 1 + (i * 7919) % 5000;
        if (n > w->size - done) n = w->size - done;
        ssize_t r = write(w->fd, w->bytes + done, n);
        CHECK(r > 0);
        done += (size_t)r;
        if (++i % 64 == 0) sleep_ms(1);
    }
    close(w->fd);
    return NULL;
}

static void test_pipe_in_order(size_t low, size_t high) {
    check_section(low || high ? "water marks bound every partial chunk" : "a pipe delivers what a writer wrote, in order");
    int p[2];
    CHECK(pipe(p) == 0);
    const size_t size = 2u << 20;
    unsigned char *bytes = random_bytes(size, 3);
    writer_t w = { p[1], bytes, size, 0 };
    pthread_t thread;
    latch_t cleaned;
    latch_init(&cleaned, 1);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &cleaned, latch_arrive_cleanup);
    if (high) dispatch_io_set_high_water(io, high);
    if (low) dispatch_io_set_low_water(io, low);
    collector_t c;
    collector_init(&c);
    dispatch_queue_t reader = dispatch_queue_create("reader", NULL);
    dispatch_io_read_f(io, 0, SIZE_MAX, reader, &c, collect);
    CHECK(pthread_create(&thread, NULL, writer_thread, &w) == 0);
    collector_wait(&c);
    pthread_join(thread, NULL);
    CHECK_EQ(c.error, 0);
    CHECK_EQ(c.size, size);
    CHECK(memcmp(c.bytes, bytes, size) == 0);
    CHECK(c.partial_calls > 0);
    if (high) {
        CHECKF(c.max_partial <= high, "largest partial chunk %zu > high water %zu", c.max_partial, high);
        CHECK(c.final_size <= high);
    }
    if (low) CHECKF(c.min_partial >= low, "smallest partial chunk %zu < low water %zu", c.min_partial, low);
    dispatch_io_close(io, 0);
    dispatch_release(io);
    CHECK(latch_wait(&cleaned, 10));  // the channel owns the descriptor until then
    close(p[0]);
    dispatch_release(reader);
    free(c.bytes);
    free(bytes);
}

static void test_stop(void) {
    check_section("DISPATCH_IO_STOP cancels outstanding reads with ECANCELED");
    int p[2];
    CHECK(pipe(p) == 0);
    latch_t cleaned;
    latch_init(&cleaned, 1);
    atomic_store(&cleanups, 0);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &cleaned, count_cleanup);
    collector_t c1, c2;
    collector_init(&c1);
    collector_init(&c2);
    dispatch_io_read_f(io, 0, 100, global(), &c1, collect);   // waits: nothing is written
    dispatch_io_read_f(io, 0, 100, global(), &c2, collect);   // queued behind it
    sleep_ms(50);
    dispatch_io_close(io, DISPATCH_IO_STOP);
    collector_wait(&c1);
    collector_wait(&c2);
    CHECK_EQ(c1.error, ECANCELED);
    CHECK_EQ(c2.error, ECANCELED);
    CHECK(latch_wait(&cleaned, 10));
    // Later operations on a closed channel are cancelled too.
    collector_t c3;
    collector_init(&c3);
    dispatch_io_read_f(io, 0, 100, global(), &c3, collect);
    collector_wait(&c3);
    CHECK_EQ(c3.error, ECANCELED);
    dispatch_release(io);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&cleanups), 1);
    // The channel gave the descriptor its blocking mode back.
    CHECK_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
    close(p[0]);
    close(p[1]);
    free(c1.bytes);
    free(c2.bytes);
    free(c3.bytes);
}

static void test_errors(void) {
    check_section("a missing path gives ENOENT, a closed descriptor EBADF, a directory EISDIR");
    dispatch_io_t io = dispatch_io_create_with_path_f(DISPATCH_IO_RANDOM, "/tmp/gc-io-no-such-file/x", O_RDONLY, 0,
                                                      global(), NULL, NULL);
    CHECK(io != NULL);
    collector_t c;
    collector_init(&c);
    dispatch_io_read_f(io, 0, 10, global(), &c, collect);
    collector_wait(&c);
    CHECK_EQ(c.error, ENOENT);
    dispatch_io_close(io, 0);
    dispatch_release(io);

    int fd = open("/dev/null", O_RDONLY);
    close(fd);
    io = dispatch_io_create_f(DISPATCH_IO_STREAM, fd, global(), NULL, NULL);
    CHECK(io != NULL);
    collector_init(&c);
    dispatch_io_read_f(io, 0, 10, global(), &c, collect);
    collector_wait(&c);
    CHECK_EQ(c.error, EBADF);
    dispatch_io_close(io, 0);
    dispatch_release(io);

    io = dispatch_io_create_with_path_f(DISPATCH_IO_RANDOM, "/tmp", O_RDONLY, 0, global(), NULL, NULL);
    collector_init(&c);
    dispatch_io_read_f(io, 0, 10, global(), &c, collect);
    collector_wait(&c);
    CHECK_EQ(c.error, EISDIR);
    dispatch_io_close(io, 0);
    dispatch_release(io);
}

static void test_epipe(void) {
#ifndef GC_REFERENCE_LIBDISPATCH
    check_section("writing to a pipe whose reader closed gives EPIPE, and the process lives");
    int p[2];
    CHECK(pipe(p) == 0);
    close(p[0]);
    latch_t cleaned;
    latch_init(&cleaned, 1);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_STREAM, p[1], global(), &cleaned, latch_arrive_cleanup);
    static char text[] = "nobody is listening";
    dispatch_data_t data = dispatch_data_create_f(text, sizeof text, NULL, NULL);
    collector_t c;
    collector_init(&c);
    dispatch_io_write_f(io, 0, data, global(), &c, collect);
    collector_wait(&c);
    CHECK_EQ(c.error, EPIPE);
    CHECK_EQ(c.size, sizeof text);  // the unwritten rest comes back
    dispatch_io_close(io, 0);
    dispatch_release(io);
    dispatch_release(data);
    CHECK(latch_wait(&cleaned, 10));
    close(p[1]);
    free(c.bytes);
#endif
}

// MARK: - Request/response on one socket

static atomic_int response_seen;

static void *peer_thread(void *context) {
    int fd = *(int *)context;
    CHECK(write(fd, "pong", 4) == 4);
    // Read nothing until the channel has delivered the response: its big write is stuck
    // until then, so the response must get past it.
    while (!atomic_load(&response_seen)) sleep_ms(1);
    char buffer[65536];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) {}
    return NULL;
}

static void test_request_response(void) {
    check_section("a read queued behind a blocked write on one socket is served");
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, peer_thread, &sv[1]) == 0);
    latch_t cleaned;
    latch_init(&cleaned, 1);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_STREAM, sv[0], global(), &cleaned, latch_arrive_cleanup);
    const size_t big = 16u << 20;
    unsigned char *bytes = random_bytes(big, 4);
    dispatch_data_t request = dispatch_data_create_f(bytes, big, NULL, DISPATCH_DATA_DESTRUCTOR_FREE_F);
    collector_t wrote, response;
    collector_init(&wrote);
    collector_init(&response);
    dispatch_io_write_f(io, 0, request, global(), &wrote, collect);
    dispatch_io_read_f(io, 0, 4, global(), &response, collect);
    collector_wait(&response);
    CHECK_EQ(response.error, 0);
    CHECK_EQ(response.size, 4);
    CHECK(memcmp(response.bytes, "pong", 4) == 0);
    atomic_store(&response_seen, 1);
    collector_wait(&wrote);
    CHECK_EQ(wrote.error, 0);
    dispatch_io_close(io, 0);
    dispatch_release(io);
    dispatch_release(request);
    CHECK(latch_wait(&cleaned, 10));
    shutdown(sv[0], SHUT_RDWR);
    pthread_join(thread, NULL);
    close(sv[0]);
    close(sv[1]);
    free(response.bytes);
    free(wrote.bytes);
}

int main(void) {
    check_start("io", 120);
    test_file_whole();
    test_copy_64mib();
    test_pipe_in_order(0, 0);
    test_pipe_in_order(1000, 4000);
    test_pipe_in_order(0, 777);
    test_stop();
    test_errors();
    test_epipe();
    test_request_response();
    check_pass();
    return 0;
}
