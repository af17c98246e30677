// The variadic entry points, which Swift cannot define.
#include "shim.h"

#include <stdarg.h>
#include <unistd.h>

// The header's -pedantic wrappers (object.h) would rename the definitions below.
#undef dispatch_debug
#undef dispatch_debugv

char *_gc_debug_description(void *object);  // GrandCentralExports/Object.swift

void dispatch_debugv(dispatch_object_t object, const char *message, va_list ap) {
    char prefix[512] = "";
    if (message) vsnprintf(prefix, sizeof prefix, message, ap);
    char *description = _gc_debug_description(object._do);
    char line[1536];
    int n = snprintf(line, sizeof line, "%s%s%s\n", prefix, prefix[0] ? ": " : "", description ? description : "");
    free(description);
    if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
    if (n > 0) { ssize_t unused = write(2, line, (size_t)n); (void)unused; }
}

void dispatch_debug(dispatch_object_t object, const char *message, ...) {
    va_list ap;
    va_start(ap, message);
    dispatch_debugv(object, message, ap);
    va_end(ap);
}
