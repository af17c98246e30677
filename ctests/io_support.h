// What the I/O tests (io.c, io_barriers.c, io_channels.c, io_convenience.c) share: the _f
// declarations the reference libdispatch exports without declaring
// (GC_REFERENCE_LIBDISPATCH), random file contents, a collector for what a read or write
// delivers, and cleanup handlers that count.
#ifndef GC_CTESTS_IO_SUPPORT_H
#define GC_CTESTS_IO_SUPPORT_H
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

static inline unsigned char *random_bytes(size_t size, uint64_t seed) {
    unsigned char *p = malloc(size);
    CHECK(p != NULL);
    uint64_t x = seed | 1;
    for (size_t i = 0; i < size; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        p[i] = (unsigned char)x;
    }
    return p;
}

static inline void write_all(int fd, const void *bytes, size_t size) {
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, (const unsigned char *)bytes + done, size - done);
        CHECK(n > 0);
        done += (size_t)n;
    }
}

static inline void write_file(const char *path, const unsigned char *bytes, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    write_all(fd, bytes, size);
    close(fd);
}

enum { COLLECTOR_SIZES = 64 };

/// What an operation delivers: every byte (a read's), the partial calls and their sizes
/// (the first COLLECTOR_SIZES of them in order), the final call's size, data and error,
/// once done.
typedef struct {
    unsigned char *bytes;
    size_t size, capacity;
    size_t partial_calls, min_partial, max_partial, final_size;
    size_t partial_sizes[COLLECTOR_SIZES];
    bool final_data_null;
    int error;
    atomic_int done_calls;
    latch_t done;
} collector_t;

static inline void collector_init(collector_t *c) {
    memset(c, 0, sizeof *c);
    c->min_partial = SIZE_MAX;
    latch_init(&c->done, 1);
}

static inline void collector_free(collector_t *c) {
    latch_destroy(&c->done);
    free(c->bytes);
}

static inline bool append_region(void *context, dispatch_data_t region, size_t offset, const void *buffer, size_t size) {
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

/// Records a call's size (a partial one's, or the final one's with its data and error).
static inline void collector_record(collector_t *c, bool done, dispatch_data_t data, int error) {
    size_t size = data ? dispatch_data_get_size(data) : 0;
    if (!done) {
        if (c->partial_calls < COLLECTOR_SIZES) c->partial_sizes[c->partial_calls] = size;
        c->partial_calls++;
        if (size < c->min_partial) c->min_partial = size;
        if (size > c->max_partial) c->max_partial = size;
        return;
    }
    c->final_size = size;
    c->final_data_null = data == NULL;
    c->error = error;
    atomic_fetch_add(&c->done_calls, 1);
    latch_arrive(&c->done);
}

/// A read's handler: collects every byte; a partial call must carry data.
static inline void collect(void *context, bool done, dispatch_data_t data, int error) {
    collector_t *c = context;
    if (data) dispatch_data_apply_f(data, c, append_region);
    if (!done) CHECKF(data && dispatch_data_get_size(data) > 0, "a partial call carries data");
    collector_record(c, done, data, error);
}

/// A write's handler: records the size of each partial call's data (what is not yet
/// written) and the end.
static inline void track_write(void *context, bool done, dispatch_data_t data, int error) {
    collector_record(context, done, data, error);
}

#define collector_wait(c) CHECKF(latch_wait(&(c)->done, 30), "%s finished", #c)

static atomic_int cleanups;
static int last_cleanup_error;
static inline void count_cleanup(void *context, int error) {
    last_cleanup_error = error;
    atomic_fetch_add(&cleanups, 1);
    if (context) latch_arrive(context);
}

static inline void latch_arrive_cleanup(void *context, int error) {
    (void)error;
    latch_arrive(context);
}

static inline dispatch_queue_t global(void) { return dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0); }

#endif
