// I/O channels: whole files through random and stream channels; a 64 MiB channel-to-channel
// copy; a pipe read in order as a writer thread writes; water marks bound every partial
// chunk; DISPATCH_IO_STOP gives ECANCELED; a missing path ENOENT and a closed descriptor
// EBADF through the handler; cleanup handlers run once; EPIPE (not SIGPIPE) on a pipe whose
// reader closed; request/response on one socketpair (a read queued behind a write that waits
// for buffer space is served); barriers order both directions; dispatch_read/write.
//
// The gcc variant uses the _f forms only; the clang variant adds the block forms. Against
// the reference (GC_REFERENCE_LIBDISPATCH) the _f forms are declared here, since
// libdispatch exports them without declaring them, and the EPIPE section is skipped:
// libdispatch on Linux dies of SIGPIPE there.
#include "check.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#ifdef GC_REFERENCE_LIBDISPATCH
typedef void (*dispatch_io_handler_function_t)(void *context, bool done, dispatch_data_t data, int error);
typedef void (*dispatch_io_cleanup_function_t)(void *context, int error);
typedef void (*dispatch_io_convenience_handler_function_t)(void *context, dispatch_data_t data, int error);
dispatch_io_t dispatch_io_create_f(dispatch_io_type_t type, dispatch_fd_t fd, dispatch_queue_t queue,
		void *context, dispatch_io_cleanup_function_t cleanup_handler);
dispatch_io_t dispatch_io_create_with_path_f(dispatch_io_type_t type, const char *path, int oflag,
		mode_t mode, dispatch_queue_t queue, void *context, dispatch_io_cleanup_function_t cleanup_handler);
void dispatch_io_read_f(dispatch_io_t channel, off_t offset, size_t length, dispatch_queue_t queue,
		void *context, dispatch_io_handler_function_t io_handler);
void dispatch_io_write_f(dispatch_io_t channel, off_t offset, dispatch_data_t data,
		dispatch_queue_t queue, void *context, dispatch_io_handler_function_t io_handler);
void dispatch_io_barrier_f(dispatch_io_t channel, void *context, dispatch_function_t barrier);
dispatch_io_t dispatch_io_create_with_io_f(dispatch_io_type_t type, dispatch_io_t io, dispatch_queue_t queue,
		void *context, dispatch_io_cleanup_function_t cleanup_handler);
void dispatch_read_f(dispatch_fd_t fd, size_t length, dispatch_queue_t queue, void *context,
		dispatch_io_convenience_handler_function_t handler);
void dispatch_write_f(dispatch_fd_t fd, dispatch_data_t data, dispatch_queue_t queue, void *context,
		dispatch_io_convenience_handler_function_t handler);
dispatch_data_t dispatch_data_create_f(const void *buffer, size_t size, dispatch_queue_t queue,
		dispatch_function_t destructor);
bool dispatch_data_apply_f(dispatch_data_t data, void *context,
		bool (*applier)(void *context, dispatch_data_t region, size_t offset, const void *buffer, size_t size));
#define DISPATCH_DATA_DESTRUCTOR_FREE_F ((dispatch_function_t)(uintptr_t)(void *)DISPATCH_DATA_DESTRUCTOR_FREE)
#endif

// MARK: - Helpers

static unsigned char *random_bytes(size_t size, uint64_t seed) {
    unsigned char *p = malloc(size);
    CHECK(p != NULL);
    uint64_t x = seed | 1;
    for (size_t i = 0; i < size; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        p[i] = (unsigned char)x;
    }
    return p;
}

static void write_file(const char *path, const unsigned char *bytes, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, bytes + done, size - done);
        CHECK(n > 0);
        done += (size_t)n;
    }
    close(fd);
}

/// What a read collects: every byte, the chunk sizes, the final error, once done.
typedef struct {
    unsigned char *bytes;
    size_t size, capacity;
    size_t partial_calls, min_partial, max_partial, final_size;
    int error;
    atomic_int done_calls;
    latch_t done;
} collector_t;

static void collector_init(collector_t *c) {
    memset(c, 0, sizeof *c);
    c->min_partial = SIZE_MAX;
    latch_init(&c->done, 1);
}

static bool append_region(void *context, dispatch_data_t region, size_t offset, const void *buffer, size_t size) {
    (void)region; (void)offset;
    collector_t *c = context;
    if (c->size + size > c->capacity) {
        c->capacity = (c->size + size) * 2;
        c->bytes = realloc(c->bytes, c->capacity);
        CHECK(c->bytes != NULL);
    }
    memcpy(c->bytes + c->size, buffer, size);
    c->size += size;
    return true;
}

static void collect(void *context, bool done, dispatch_data_t data, int error) {
    collector_t *c = context;
    size_t size = data ? dispatch_data_get_size(data) : 0;
    if (data) dispatch_data_apply_f(data, c, append_region);
    if (!done) {
        CHECKF(size > 0, "a partial call carries data");
        c->partial_calls++;
        if (size < c->min_partial) c->min_partial = size;
        if (size > c->max_partial) c->max_partial = size;
        return;
    }
    c->final_size = size;
    c->error = error;
    atomic_fetch_add(&c->done_calls, 1);
    latch_arrive(&c->done);
}

#define collector_wait(c) CHECKF(latch_wait(&(c)->done, 30), "%s finished", #c)

static atomic_int cleanups;
static int last_cleanup_error;
static void count_cleanup(void *context, int error) {
    last_cleanup_error = error;
    atomic_fetch_add(&cleanups, 1);
    if (context) latch_arrive(context);
}

static void latch_arrive_cleanup(void *context, int error) {
    (void)error;
    latch_arrive(context);
}

static dispatch_queue_t global(void) { return dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0); }

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

// MARK: - Barriers and conveniences

static atomic_int order_step;
static void barrier_step(void *context) {
    int *seen = context;
    *seen = atomic_fetch_add(&order_step, 1);
}
static void ordered_write(void *context, bool done, dispatch_data_t data, int error) {
    (void)data;
    CHECK_EQ(error, 0);
    if (done) *(int *)context = atomic_fetch_add(&order_step, 1);
}

static void test_barrier(void) {
    check_section("a barrier runs after earlier operations and before later ones");
    char path[] = "/tmp/gc-io-barrier-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    dispatch_queue_t q = dispatch_queue_create("barrier", NULL);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_RANDOM, fd, q, NULL, NULL);
    static char text[] = "0123456789";
    dispatch_data_t data = dispatch_data_create_f(text, 10, NULL, NULL);
    int write_step = -1, barrier_seen = -1;
    dispatch_io_write_f(io, 0, data, q, &write_step, ordered_write);
    dispatch_io_barrier_f(io, &barrier_seen, barrier_step);
    collector_t c;
    collector_init(&c);
    dispatch_io_read_f(io, 0, SIZE_MAX, q, &c, collect);
    collector_wait(&c);
    CHECK_EQ(write_step, 0);
    CHECK_EQ(barrier_seen, 1);
    CHECK_EQ(c.size, 10);  // the read saw the write
    CHECK(memcmp(c.bytes, text, 10) == 0);
    dispatch_io_close(io, 0);
    dispatch_release(io);
    dispatch_release(data);
    dispatch_release(q);
    close(fd);
    unlink(path);
    free(c.bytes);
}

// A read loop: dispatch_read delivers what a pipe holds, so it reads again until `want`
// bytes have come (or end of file, or an error).
typedef struct { size_t size, want; int fd, error, reads; unsigned char first; latch_t done; } once_t;
static void read_once(void *context, dispatch_data_t data, int error) {
    once_t *o = context;
    size_t got = dispatch_data_get_size(data);
    const void *buffer; size_t size;
    dispatch_data_t map = dispatch_data_create_map(data, &buffer, &size);
    if (size && o->size == 0) o->first = *(const unsigned char *)buffer;
    dispatch_release(map);
    o->size += got;
    o->error = error;
    o->reads++;
    if (error == 0 && got > 0 && o->size < o->want) {
        dispatch_read_f(o->fd, o->want - o->size, dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), o, read_once);
        return;
    }
    latch_arrive(&o->done);
}
static void wrote_once(void *context, dispatch_data_t data, int error) {
    once_t *o = context;
    o->size = data ? dispatch_data_get_size(data) : 0;
    o->error = error;
    latch_arrive(&o->done);
}

static void test_conveniences(void) {
    check_section("dispatch_read_f and dispatch_write_f");
    int p[2];
    CHECK(pipe(p) == 0);
#ifndef GC_REFERENCE_LIBDISPATCH
    const size_t size = 300000;  // more than a pipe holds: both sides take turns
#else
    const size_t size = 60000;   // libdispatch on Linux stalls when the write must wait for the read
#endif
    unsigned char *bytes = random_bytes(size, 5);
    dispatch_data_t data = dispatch_data_create_f(bytes, size, NULL, DISPATCH_DATA_DESTRUCTOR_FREE_F);
    once_t r = { .fd = p[0], .want = size }, w = {0};
    latch_init(&r.done, 1);
    latch_init(&w.done, 1);
    dispatch_read_f(p[0], size, global(), &r, read_once);
    dispatch_write_f(p[1], data, global(), &w, wrote_once);
    CHECK(latch_wait(&w.done, 10));
    CHECK(latch_wait(&r.done, 10));
    CHECK_EQ(w.error, 0);
    CHECK_EQ(w.size, 0);
    CHECK_EQ(r.error, 0);
    CHECK_EQ(r.size, size);
    CHECK_EQ(r.first, bytes[0]);
    dispatch_release(data);
    close(p[0]);
    close(p[1]);
}

#ifdef __BLOCKS__
static void test_blocks(void) {
    check_section("the block forms");
    const size_t size = 100000;
    unsigned char *bytes = random_bytes(size, 6);
    char path[] = "/tmp/gc-io-blocks-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    write_file(path, bytes, size);
    __block size_t total = 0;
    __block int cleanup_calls = 0;
    latch_t done, cleaned, once;
    latch_init(&done, 1);
    latch_init(&cleaned, 1);
    latch_init(&once, 1);
    latch_t *done_p = &done, *cleaned_p = &cleaned, *once_p = &once;
    dispatch_queue_t q = dispatch_queue_create("blocks", NULL);
    dispatch_io_t io = dispatch_io_create_with_path(DISPATCH_IO_STREAM, path, O_RDONLY, 0, q, ^(int error) {
        CHECK_EQ(error, 0);
        cleanup_calls++;
        latch_arrive(cleaned_p);
    });
    dispatch_io_set_high_water(io, 4096);
    dispatch_io_read(io, 0, SIZE_MAX, q, ^(bool is_done, dispatch_data_t data, int error) {
        CHECK_EQ(error, 0);
        if (data) {
            CHECK(dispatch_data_get_size(data) <= 4096);
            total += dispatch_data_get_size(data);
        }
        if (is_done) latch_arrive(done_p);
    });
    __block bool barrier_ran = false;
    dispatch_io_barrier(io, ^{ barrier_ran = true; });
    CHECK(latch_wait(&done, 10));
    dispatch_io_close(io, 0);
    dispatch_release(io);
    CHECK(latch_wait(&cleaned, 10));
    CHECK(barrier_ran);
    CHECK_EQ(total, size);
    CHECK_EQ(cleanup_calls, 1);

    fd = open(path, O_RDONLY);
    __block size_t got = 0;
    dispatch_read(fd, SIZE_MAX, q, ^(dispatch_data_t data, int error) {
        CHECK_EQ(error, 0);
        got = dispatch_data_get_size(data);
        latch_arrive(once_p);
    });
    CHECK(latch_wait(&once, 10));
    CHECK_EQ(got, size);
    close(fd);
    unlink(path);
    free(bytes);
    dispatch_release(q);
}
#endif

// MARK: - Interval

typedef struct {
    atomic_size_t partial_bytes;
    atomic_int partial_calls;
    latch_t done;
} interval_probe_t;

static void interval_collect(void *context, bool done, dispatch_data_t data, int error) {
    (void)error;
    interval_probe_t *probe = context;
    if (!done) {
        atomic_fetch_add(&probe->partial_calls, 1);
        atomic_fetch_add(&probe->partial_bytes, dispatch_data_get_size(data));
        return;
    }
    latch_arrive(&probe->done);
}

static void test_strict_interval(void) {
    check_section("a strict interval delivers data below the low water mark while the stream is idle");
    int p[2];
    CHECK(pipe(p) == 0);
    latch_t cleaned;
    latch_init(&cleaned, 1);
    dispatch_io_t io = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &cleaned, latch_arrive_cleanup);
    dispatch_io_set_low_water(io, 1000);
    dispatch_io_set_interval(io, 50 * NSEC_PER_MSEC, DISPATCH_IO_STRICT_INTERVAL);
    interval_probe_t probe = { 0 };
    latch_init(&probe.done, 1);
    dispatch_queue_t reader = dispatch_queue_create("interval", NULL);
    dispatch_io_read_f(io, 0, SIZE_MAX, reader, &probe, interval_collect);
    CHECK(write(p[1], "0123456789", 10) == 10);
    // Nothing else is written: only the interval can deliver these 10 bytes.
    uint64_t give_up = now_ns() + 5 * NSEC_PER_SEC;
    while (atomic_load(&probe.partial_bytes) < 10 && now_ns() < give_up) usleep(1000);
    CHECKF(atomic_load(&probe.partial_bytes) == 10, "10 bytes below the low water mark were delivered "
           "by the strict interval (got %zu)", atomic_load(&probe.partial_bytes));
    close(p[1]);
    CHECKF(latch_wait(&probe.done, 10), "the read ended at end of file");
    dispatch_io_close(io, 0);
    dispatch_release(io);
    CHECK(latch_wait(&cleaned, 10));
    close(p[0]);
    dispatch_release(reader);
}

// MARK: - Barriers open path channels; channels that share a descriptor

typedef struct {
    dispatch_io_t io;
    int fd;
    latch_t ran;
} barrier_probe_t;

static void barrier_get_descriptor(void *context) {
    barrier_probe_t *probe = context;
    probe->fd = dispatch_io_get_descriptor(probe->io);
    latch_arrive(&probe->ran);
}

static void test_barrier_opens_path(void) {
    check_section("dispatch_io_get_descriptor in a barrier opens a path channel");
    char path[] = "/tmp/gc-io-barrier-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "abc", 3) == 3);
    close(fd);
    latch_t cleaned;
    latch_init(&cleaned, 1);
    barrier_probe_t probe = { .fd = -2 };
    latch_init(&probe.ran, 1);
    probe.io = dispatch_io_create_with_path_f(DISPATCH_IO_RANDOM, path, O_RDONLY, 0, global(), &cleaned,
                                              latch_arrive_cleanup);
    CHECK(probe.io != NULL);
    CHECK_EQ(dispatch_io_get_descriptor(probe.io), -1);  // not opened yet
    dispatch_io_barrier_f(probe.io, &probe, barrier_get_descriptor);
    CHECK(latch_wait(&probe.ran, 10));
    CHECKF(probe.fd >= 0, "the barrier got a descriptor (%d)", probe.fd);
    dispatch_io_close(probe.io, 0);
    dispatch_release(probe.io);
    CHECK(latch_wait(&cleaned, 10));
    unlink(path);
}

static void test_shared_channels(void) {
    check_section("two channels on one descriptor (dispatch_io_create_with_io) read it and clean up once each");
    char path[] = "/tmp/gc-io-shared-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const size_t size = 100000;
    unsigned char *bytes = random_bytes(size, 11);
    write_file(path, bytes, size);
    atomic_store(&cleanups, 0);
    latch_t cleaned;
    latch_init(&cleaned, 2);
    dispatch_io_t first = dispatch_io_create_f(DISPATCH_IO_RANDOM, fd, global(), &cleaned, count_cleanup);
    dispatch_io_t second = dispatch_io_create_with_io_f(DISPATCH_IO_RANDOM, first, global(), &cleaned, count_cleanup);
    CHECK(second != NULL);
    collector_t a, b;
    collector_init(&a);
    collector_init(&b);
    dispatch_io_read_f(first, 0, size / 2, global(), &a, collect);
    dispatch_io_read_f(second, (off_t)(size / 2), SIZE_MAX, global(), &b, collect);
    collector_wait(&a);
    collector_wait(&b);
    CHECK_EQ(a.error, 0);
    CHECK_EQ(b.error, 0);
    CHECK_EQ(a.size, size / 2);
    CHECK_EQ(b.size, size - size / 2);
    CHECK(memcmp(a.bytes, bytes, size / 2) == 0);
    CHECK(memcmp(b.bytes, bytes + size / 2, size - size / 2) == 0);
    dispatch_io_close(first, 0);
    dispatch_io_close(second, 0);
    dispatch_release(first);
    dispatch_release(second);
    CHECK(latch_wait(&cleaned, 10));
    CHECK_EQ(atomic_load(&cleanups), 2);
    CHECK(fcntl(fd, F_GETFD) != -1);  // the library never closes the caller's descriptor
    close(fd);
    unlink(path);
    free(a.bytes);
    free(b.bytes);
    free(bytes);
}

static void test_independent_channels_share(void) {
    check_section("two channels made on one pipe: the first to close neither blocks the pipe nor cleans up early");
    int p[2];
    CHECK(pipe(p) == 0);
    atomic_store(&cleanups, 0);
    latch_t cleaned;
    latch_init(&cleaned, 2);
    dispatch_io_t first = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &cleaned, count_cleanup);
    dispatch_io_t second = dispatch_io_create_f(DISPATCH_IO_STREAM, p[0], global(), &cleaned, count_cleanup);
    collector_t c;
    collector_init(&c);
    dispatch_io_read_f(second, 0, 10, global(), &c, collect);   // waits: nothing written yet
    dispatch_io_close(first, 0);
    dispatch_release(first);
    sleep_ms(50);
    CHECKF(fcntl(p[0], F_GETFL) & O_NONBLOCK, "the pipe is still non-blocking while the second channel reads");
    CHECK_EQ(atomic_load(&cleanups), 0);  // the first cleanup waits for the second channel
    CHECK(write(p[1], "0123456789", 10) == 10);
    collector_wait(&c);
    CHECK_EQ(c.error, 0);
    CHECK_EQ(c.size, 10);
    dispatch_io_close(second, 0);
    dispatch_release(second);
    CHECK(latch_wait(&cleaned, 10));
    CHECK_EQ(atomic_load(&cleanups), 2);
    CHECK_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);  // the blocking mode it had, given back
    close(p[0]);
    close(p[1]);
    free(c.bytes);
}

// MARK: - A thousand stream channels, a handful of threads

enum { MANY_CHANNELS = 1000 };
static atomic_int many_done;
static void many_read(void *context, bool done, dispatch_data_t data, int error) {
    (void)context;
    (void)data;
    if (done) {
        CHECK_EQ(error, 0);
        atomic_fetch_add(&many_done, 1);
    }
}

static int thread_count(void) {
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL);
    char line[256];
    int threads = -1;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "Threads: %d", &threads) == 1) break;
    }
    fclose(f);
    return threads;
}

static void test_many_channels(void) {
    check_section("1,000 stream channels waiting for data need no thread each");
    struct rlimit limit;
    CHECK(getrlimit(RLIMIT_NOFILE, &limit) == 0);
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
        getrlimit(RLIMIT_NOFILE, &limit);
    }
    int count = MANY_CHANNELS;
    if (limit.rlim_cur != RLIM_INFINITY && (rlim_t)(2 * count + 64) > limit.rlim_cur) {
        count = (int)(limit.rlim_cur - 64) / 2;
    }
    CHECKF(count >= 100, "room for at least 100 pipes (descriptor limit %llu)", (unsigned long long)limit.rlim_cur);
    int (*pipes)[2] = calloc((size_t)count, sizeof *pipes);
    dispatch_io_t *channels = calloc((size_t)count, sizeof *channels);
    latch_t cleaned;
    latch_init(&cleaned, count);
    atomic_store(&many_done, 0);
    int before = thread_count();
    for (int i = 0; i < count; i++) {
        CHECK(pipe(pipes[i]) == 0);
        channels[i] = dispatch_io_create_f(DISPATCH_IO_STREAM, pipes[i][0], global(), &cleaned, latch_arrive_cleanup);
        dispatch_io_read_f(channels[i], 0, 1, global(), NULL, many_read);
    }
    sleep_ms(300);  // every read has started and is waiting for its pipe
    int waiting = thread_count();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
#ifndef GC_REFERENCE_LIBDISPATCH
    // GrandCentral only: libdispatch on Linux parks a thread per waiting read (observed:
    // 1,000 reads grew it from 19 to 259 threads, its limit).
    CHECKF(waiting - before <= cpus + 16, "%d reads waiting on empty pipes grew the process from %d to %d threads",
           count, before, waiting);
#else
    (void)waiting;
    (void)cpus;
#endif
    for (int i = 0; i < count; i++) CHECK(write(pipes[i][1], "x", 1) == 1);
    uint64_t give_up = now_ns() + 30 * NSEC_PER_SEC;
    while (atomic_load(&many_done) < count && now_ns() < give_up) usleep(1000);
    CHECKF(atomic_load(&many_done) == count, "%d of %d reads completed", atomic_load(&many_done), count);
    for (int i = 0; i < count; i++) {
        dispatch_io_close(channels[i], 0);
        dispatch_release(channels[i]);
    }
    CHECK(latch_wait(&cleaned, 30));
    for (int i = 0; i < count; i++) {
        close(pipes[i][0]);
        close(pipes[i][1]);
    }
    free(pipes);
    free(channels);
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
    test_barrier();
    test_conveniences();
    test_strict_interval();
    test_barrier_opens_path();
    test_shared_channels();
    test_independent_channels_share();
    test_many_channels();
#ifdef __BLOCKS__
    test_blocks();
#endif
    check_pass();
    return 0;
}
