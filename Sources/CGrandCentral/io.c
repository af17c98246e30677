// The system calls of I/O channels; see CGrandCentralIO.h.
#include "CGrandCentralIO.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/// `call` (a system call returning -1 and setting errno on failure), repeated while a
/// signal interrupts it; the result as the call's value or -errno.
#define GC_RETRY_EINTR(type, call) \
	({ \
		type gc_result_; \
		do { \
			gc_result_ = (call); \
		} while (gc_result_ < 0 && errno == EINTR); \
		gc_result_ < 0 ? (type)-errno : gc_result_; \
	})

int gc_io_kind(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0) return -errno;
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) return GC_IO_KIND_REGULAR;
	if (S_ISDIR(st.st_mode)) return GC_IO_KIND_DIRECTORY;
	if (S_ISFIFO(st.st_mode)) return GC_IO_KIND_PIPE;
	if (S_ISSOCK(st.st_mode)) return GC_IO_KIND_SOCKET;
	return GC_IO_KIND_OTHER;
}

int gc_io_open(const char *path, int oflag, unsigned mode)
{
	return GC_RETRY_EINTR(int, open(path, oflag | O_CLOEXEC, (mode_t)mode));
}

int gc_io_set_nonblocking(int fd, int *old_flags)
{
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0) return -errno;
	*old_flags = flags;
	if (flags & O_NONBLOCK) return 0;
	return fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? -errno : 0;
}

int gc_io_restore_flags(int fd, int flags)
{
	return fcntl(fd, F_SETFL, flags) < 0 ? -errno : 0;
}

ssize_t gc_io_read(int fd, void *buffer, size_t length)
{
	return GC_RETRY_EINTR(ssize_t, read(fd, buffer, length));
}

ssize_t gc_io_pread(int fd, void *buffer, size_t length, int64_t offset)
{
	return GC_RETRY_EINTR(ssize_t, pread(fd, buffer, length, (off_t)offset));
}

ssize_t gc_io_pwrite(int fd, const void *buffer, size_t length, int64_t offset)
{
	return GC_RETRY_EINTR(ssize_t, pwrite(fd, buffer, length, (off_t)offset));
}

ssize_t gc_io_write(int fd, const void *buffer, size_t length, int is_socket)
{
	ssize_t n;
	if (is_socket) {
		do {
			n = send(fd, buffer, length, MSG_NOSIGNAL);
		} while (n < 0 && errno == EINTR);
		if (n >= 0 || errno != ENOTSOCK) return n < 0 ? -errno : n;
	}
	sigset_t pipe_only, old;
	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
	do {
		n = write(fd, buffer, length);
	} while (n < 0 && errno == EINTR);
	int error = n < 0 ? errno : 0;
	if (error == EPIPE) {
		// The kernel made SIGPIPE pending on this thread; take it back before it can be
		// delivered. (If it was blocked before the call, it stays consumed: the write that
		// raised it reports EPIPE instead.)
		struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_only, NULL, &zero) < 0 && errno == EINTR) {}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return error ? -error : n;
}
