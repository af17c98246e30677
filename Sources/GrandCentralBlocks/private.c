// The variadic private calls (private.h), which Swift cannot define: libdispatch's log.
//
// As libdispatch on Linux (observed with the toolchain's library): the log is off unless
// LIBDISPATCH_LOG says where it goes. LIBDISPATCH_LOG=file appends to
// /var/tmp/libdispatch.<pid>.log, opened on the first message with a header line;
// GrandCentral also takes LIBDISPATCH_LOG=stderr (libdispatch's Linux build accepts the
// word and prints nothing). Anything else, or nothing, discards messages.
#include "shim.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static pthread_once_t gc_log_once = PTHREAD_ONCE_INIT;
static int gc_log_fd = -1;

static void gc_log_open(void)
{
	const char *where = getenv("LIBDISPATCH_LOG");
	if (where == NULL) return;
	if (strcmp(where, "stderr") == 0) {
		gc_log_fd = STDERR_FILENO;
	} else if (strcmp(where, "file") == 0) {
		char path[64];
		snprintf(path, sizeof path, "/var/tmp/libdispatch.%d.log", (int)getpid());
		gc_log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
		if (gc_log_fd < 0) return;
		struct timeval now;
		gettimeofday(&now, NULL);
		extern const char *program_invocation_short_name;
		dprintf(gc_log_fd, "=== log file opened for %s[%d] at %ld.%06ld ===\n",
				program_invocation_short_name, (int)getpid(), (long)now.tv_sec, (long)now.tv_usec);
	}
}

/// One message, one line (a newline is added), written with a single write(2).
void _dispatch_log(const char *message, ...)
{
	pthread_once(&gc_log_once, gc_log_open);
	if (gc_log_fd < 0 || message == NULL) return;
	char line[2048];
	va_list ap;
	va_start(ap, message);
	int n = vsnprintf(line, sizeof line - 1, message, ap);
	va_end(ap);
	if (n < 0) return;
	if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
	line[n++] = '\n';
	ssize_t unused = write(gc_log_fd, line, (size_t)n);
	(void)unused;
}

/// libdispatch's internal-error report: "BUG in libdispatch: <version> - <line> - 0x<value>"
/// to the log above (libdispatch's Linux build has an empty version string).
void _dispatch_bug(size_t line, long value)
{
	_dispatch_log("BUG in libdispatch: %s - %lu - 0x%llx", "", (unsigned long)line,
			(unsigned long long)value);
}
