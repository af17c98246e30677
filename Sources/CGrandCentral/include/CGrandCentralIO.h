// CGrandCentralIO: the system calls of I/O channels (Sources/GrandCentral/IO) that Swift's
// Glibc cannot make or cannot make safely: fcntl and open are variadic, fstat's mode bits
// are macros, and a write that must not raise SIGPIPE needs the signal mask juggled around
// it. Each function returns a count or 0 on success and a negative errno on failure (EINTR
// is retried inside); none aborts. No dispatch_* names live here.
#ifndef CGRANDCENTRAL_IO_H
#define CGRANDCENTRAL_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What fstat says a descriptor is.
#define GC_IO_KIND_REGULAR   0   // a regular file (or a block device): pread works, epoll does not
#define GC_IO_KIND_DIRECTORY 1
#define GC_IO_KIND_PIPE      2   // a FIFO
#define GC_IO_KIND_SOCKET    3
#define GC_IO_KIND_OTHER     4   // a tty or another character device: a stream

/// The GC_IO_KIND_* of `fd`, or -errno (EBADF for a closed descriptor).
int gc_io_kind(int fd);

/// open(2) with O_CLOEXEC added; the descriptor or -errno.
int gc_io_open(const char *path, int oflag, unsigned mode);

/// Sets O_NONBLOCK on `fd`, storing the status flags it had in `*old_flags`; 0 or -errno.
int gc_io_set_nonblocking(int fd, int *old_flags);

/// Puts back status flags saved by gc_io_set_nonblocking; 0 or -errno.
int gc_io_restore_flags(int fd, int flags);

/// read(2) / pread(2): bytes read (0 at end of file) or -errno (-EAGAIN on an empty
/// non-blocking stream).
ssize_t gc_io_read(int fd, void *buffer, size_t length);
ssize_t gc_io_pread(int fd, void *buffer, size_t length, int64_t offset);

/// pwrite(2): bytes written or -errno.
ssize_t gc_io_pwrite(int fd, const void *buffer, size_t length, int64_t offset);

/// write(2) that never raises SIGPIPE: a peer that has gone yields -EPIPE. Sockets use
/// send(MSG_NOSIGNAL). Anything else (pipes) is written with SIGPIPE blocked in the calling
/// thread; a SIGPIPE the write made pending is taken back with a zero-timeout sigtimedwait
/// before the old mask returns, so it is never delivered. (Rejected: ignoring SIGPIPE
/// process-wide, which changes the client's signal disposition behind its back.)
ssize_t gc_io_write(int fd, const void *buffer, size_t length, int is_socket);

#ifdef __cplusplus
}
#endif

#endif
