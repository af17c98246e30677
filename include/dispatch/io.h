/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * io.h: I/O channels. A dispatch_io_t owns a file descriptor (or a path it opens on first
 * use) and reads and writes it asynchronously, handing the bytes over as dispatch_data_t
 * on the queue the caller names. Stream descriptors (pipes, sockets, ttys) are read and
 * written when they are ready, never by a thread blocked in read(2); regular files on pool
 * threads. Errors arrive as a handler's `error` argument, never as a crash, and writing to
 * a peer that has gone reports EPIPE instead of raising SIGPIPE.
 *
 * The calls that take blocks are declared only under __BLOCKS__; each has a _f twin taking
 * a context pointer and a function, so plain C has the whole API.
 */
#ifndef __DISPATCH_IO__
#define __DISPATCH_IO__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif


/* A file descriptor. */
typedef int dispatch_fd_t;

/* The handler of dispatch_read_f / dispatch_write_f: everything read (or, for a write,
 * the data not written, NULL when all was), and an errno or 0. The data is valid for the
 * call; retain it to keep it. */
typedef void (*dispatch_io_convenience_handler_function_t)(void *context,
		dispatch_data_t data, int error);

#ifdef __BLOCKS__
/* Reads from `fd` at its current position and calls `handler` once on `queue` with what
 * was read and an errno (0 on success; empty data at end of file). On a pipe, socket or
 * tty it waits until the descriptor is readable and delivers what is there, up to
 * `length` (SIZE_MAX: no limit): it does not wait for `length` bytes or end of file, so a
 * read loop gets one delivery per chunk the writer wrote. On a regular file it reads up
 * to `length` or end of file. Reads and writes on one descriptor are performed in the
 * order they were called, one at a time per direction. The handler runs once the library
 * has let go of the descriptor (flags restored), so it may close it; the descriptor must
 * not be closed before. A descriptor that is not open gives EBADF and empty data. */
DISPATCH_EXPORT DISPATCH_NONNULL3 DISPATCH_NONNULL4 DISPATCH_NOTHROW
void
dispatch_read(dispatch_fd_t fd, size_t length, dispatch_queue_t queue,
		void (^handler)(dispatch_data_t data, int error));

/* Writes all of `data` to `fd` and calls `handler` once on `queue`: NULL data and 0 when
 * everything was written, else the part not written (NULL when nothing could start, e.g.
 * EBADF) and the errno. Writes on one descriptor are performed in call order, so
 * consecutive dispatch_write calls append in that order. */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_NONNULL3 DISPATCH_NONNULL4 DISPATCH_NOTHROW
void
dispatch_write(dispatch_fd_t fd, dispatch_data_t data, dispatch_queue_t queue,
		void (^handler)(dispatch_data_t data, int error));
#endif

/* dispatch_read with a function handler, called as handler(context, data, error). */
DISPATCH_EXPORT DISPATCH_NONNULL3 DISPATCH_NONNULL5 DISPATCH_NOTHROW
void
dispatch_read_f(dispatch_fd_t fd, size_t length, dispatch_queue_t queue,
		void *context, dispatch_io_convenience_handler_function_t handler);

/* dispatch_write with a function handler, called as handler(context, data, error). */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_NONNULL3 DISPATCH_NONNULL5 DISPATCH_NOTHROW
void
dispatch_write_f(dispatch_fd_t fd, dispatch_data_t data, dispatch_queue_t queue,
		void *context, dispatch_io_convenience_handler_function_t handler);

DISPATCH_DECL(dispatch_io);

/* Channel types. A stream channel reads and writes sequentially at the descriptor's
 * position (offsets are ignored); a random-access channel reads and writes at the offsets
 * given, relative to the position when the channel was created, with pread/pwrite, and
 * never moves the position. Random access on a pipe or socket fails with ESPIPE. */
#define DISPATCH_IO_STREAM 0
#define DISPATCH_IO_RANDOM 1
typedef unsigned long dispatch_io_type_t;

/* A cleanup handler: called once, on the channel's queue. A channel that failed when it
 * was created (a descriptor that is not open: EBADF; a path that failed its check; a
 * random channel on a pipe or socket: ESPIPE) calls it at once with that error. Otherwise
 * it is called with 0 when the channel has let go of its descriptor (after close or the
 * last release, once every operation has finished, and, as in libdispatch, every other
 * channel on the descriptor too). */
typedef void (*dispatch_io_cleanup_function_t)(void *context, int error);

/* An I/O handler: `done` on the last call of an operation; `data` the bytes read since the
 * previous call (a read) or the bytes not yet written (a write; NULL when none); `error`
 * an errno (ECANCELED after DISPATCH_IO_STOP) or 0. A write goes out in pieces of at most
 * the high water mark and, while data is left, calls the handler with done == false and
 * the data not yet written each time the low water mark's worth has gone out (with no
 * low water mark set: 1 MiB, or the high water mark if smaller). The data is valid for
 * the call. */
typedef void (*dispatch_io_handler_function_t)(void *context, bool done,
		dispatch_data_t data, int error);

#ifdef __BLOCKS__
/* Creates a channel over `fd`, which belongs to the channel until the cleanup handler
 * (may be NULL) has been called on `queue`. A stream descriptor is made non-blocking
 * meanwhile and gets its flags back at cleanup. A descriptor that is not open gives EBADF
 * to every operation (and to the cleanup handler, at once); so does ESPIPE for a random
 * channel on a pipe or socket. A random channel's offset 0 is the descriptor's file
 * position now. NULL for a type that is neither STREAM nor RANDOM. */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_io_t
dispatch_io_create(dispatch_io_type_t type, dispatch_fd_t fd, dispatch_queue_t queue,
		void (^cleanup_handler)(int error));

/* Creates a channel that opens `path` with `oflag` and `mode` when its first operation
 * starts, and closes it at cleanup. NULL for a relative path or an unknown type. The path
 * is checked now: stat(2) (lstat(2) with O_NOFOLLOW), and with O_CREAT and a missing
 * file, stat of its parent directory. A failure there (ENOENT, EISDIR for a directory,
 * ESPIPE for a FIFO or socket on a random channel, ...) is the channel's error: every
 * operation ends with it and the cleanup handler is called with it at once. A failure of
 * the later open(2) (EACCES, EEXIST with O_EXCL, ...) is the operations' error; the
 * cleanup handler then gets 0. */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED
DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_io_t
dispatch_io_create_with_path(dispatch_io_type_t type, const char *path, int oflag,
		mode_t mode, dispatch_queue_t queue, void (^cleanup_handler)(int error));

/* Creates a channel of `type` over the same descriptor (or path) as `io`. The descriptor
 * is given back when every channel sharing it has cleaned up. A random channel's offset 0
 * is the descriptor's file position now (0 for a path). NULL for an unknown type. */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED
DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_io_t
dispatch_io_create_with_io(dispatch_io_type_t type, dispatch_io_t io, dispatch_queue_t queue,
		void (^cleanup_handler)(int error));

typedef void (^dispatch_io_handler_t)(bool done, dispatch_data_t data, int error);

/* Reads `length` bytes (SIZE_MAX: to end of file) at `offset` (random channels), calling
 * `io_handler` on `queue` with the data as it arrives, between the low and high water
 * marks, then once with `done`. A read that reaches end of file delivers the bytes before
 * it and completes with 0. Reads on one channel run in the order they were queued. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL4 DISPATCH_NONNULL5 DISPATCH_NOTHROW
void
dispatch_io_read(dispatch_io_t channel, off_t offset, size_t length, dispatch_queue_t queue,
		dispatch_io_handler_t io_handler);

/* Writes `data` at `offset` (random channels), then calls `io_handler` on `queue` with
 * `done`. Writes run in the order they were queued, independently of reads. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NONNULL4 DISPATCH_NONNULL5
DISPATCH_NOTHROW
void
dispatch_io_write(dispatch_io_t channel, off_t offset, dispatch_data_t data,
		dispatch_queue_t queue, dispatch_io_handler_t io_handler);
#endif

/* The function forms of the channel constructors and operations above. */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_io_t
dispatch_io_create_f(dispatch_io_type_t type, dispatch_fd_t fd, dispatch_queue_t queue,
		void *context, dispatch_io_cleanup_function_t cleanup_handler);

DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED
DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_io_t
dispatch_io_create_with_path_f(dispatch_io_type_t type, const char *path, int oflag,
		mode_t mode, dispatch_queue_t queue, void *context,
		dispatch_io_cleanup_function_t cleanup_handler);

DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED
DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_io_t
dispatch_io_create_with_io_f(dispatch_io_type_t type, dispatch_io_t io, dispatch_queue_t queue,
		void *context, dispatch_io_cleanup_function_t cleanup_handler);

DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL4 DISPATCH_NONNULL6 DISPATCH_NOTHROW
void
dispatch_io_read_f(dispatch_io_t channel, off_t offset, size_t length, dispatch_queue_t queue,
		void *context, dispatch_io_handler_function_t io_handler);

DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NONNULL4 DISPATCH_NONNULL6
DISPATCH_NOTHROW
void
dispatch_io_write_f(dispatch_io_t channel, off_t offset, dispatch_data_t data,
		dispatch_queue_t queue, void *context, dispatch_io_handler_function_t io_handler);

/* Close flag: cancel the operations still outstanding; they report ECANCELED. */
#define DISPATCH_IO_STOP 0x1
typedef unsigned long dispatch_io_close_flags_t;

/* Closes the channel: later operations fail with ECANCELED; those queued run to their end
 * (with DISPATCH_IO_STOP: are cancelled); then the cleanup handler runs. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_io_close(dispatch_io_t channel, dispatch_io_close_flags_t flags);

#ifdef __BLOCKS__
/* Runs `barrier` on a global queue once every operation queued before it has finished;
 * no operation queued after it starts before it returns. A barrier applies to the
 * descriptor: it waits for, and holds back, the operations of every channel on the same
 * descriptor (made on the same fd, or with dispatch_io_create_with_io), not only its own. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_io_barrier(dispatch_io_t channel, dispatch_block_t barrier);
#endif

/* dispatch_io_barrier with a function, called as barrier(context). */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_io_barrier_f(dispatch_io_t channel, void *context, dispatch_function_t barrier);

/* The channel's descriptor; -1 before a path channel has opened it and after close. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_fd_t
dispatch_io_get_descriptor(dispatch_io_t channel);

/* Most bytes a partial read handler call carries (default SIZE_MAX). Applies to operations
 * queued afterwards. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_io_set_high_water(dispatch_io_t channel, size_t high_water);

/* Fewest bytes a partial read handler call carries (default: whatever one read returned;
 * SIZE_MAX: no partial calls). Applies to operations queued afterwards. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_io_set_low_water(dispatch_io_t channel, size_t low_water);

/* Interval flag: deliver at each interval even below the low water mark. */
#define DISPATCH_IO_STRICT_INTERVAL 0x1
typedef unsigned long dispatch_io_interval_flags_t;

/* Partial read results are delivered at least every `interval` nanoseconds while data
 * keeps arriving (checked after each read). With DISPATCH_IO_STRICT_INTERVAL they are
 * delivered at the interval even below the low water mark; an interval with no data read
 * since the last call delivers nothing (no empty partial calls). Writes report progress
 * by the water marks only. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_io_set_interval(dispatch_io_t channel, uint64_t interval,
		dispatch_io_interval_flags_t flags);


#endif /* __DISPATCH_IO__ */
