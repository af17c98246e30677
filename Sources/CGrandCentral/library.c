// GRANDCENTRAL_DEBUG: one line, when the library is loaded, saying which file the process
// runs GrandCentral from and which file it maps as libdispatch. GrandCentral ships as two
// files with one set of objects (libgrandcentral.so.0 for C programs, lib/grandcentral/
// libdispatch.so, the drop-in, for programs built against the toolchain); a user who runs
// a program through grandcentral-run, or wonders why a program has two runtimes, reads the
// answer here rather than in LD_DEBUG's output.
//
// The loader's own record is the truth: /proc/self/maps lists every file mapped, after
// symlinks are resolved. Read at load time, it holds the program's whole startup set; a
// libdispatch dlopen'ed later is reported by the main queue's hand-over when it finds it
// (HostMainQueue.find).

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "CGrandCentral.h"

/// True when `path`'s last component is libdispatch's soname (or a versioned variant).
static bool is_libdispatch(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    return strncmp(base, "libdispatch.so", strlen("libdispatch.so")) == 0;
}

__attribute__((constructor)) static void gc_report_library(void) {
    const char *debug = getenv("GRANDCENTRAL_DEBUG");
    if (!debug || !*debug || strcmp(debug, "0") == 0) return;

    Dl_info info;
    char self[PATH_MAX] = "?";
    if (dladdr((void *)gc_report_library, &info) && info.dli_fname) {
        if (!realpath(info.dli_fname, self)) snprintf(self, sizeof self, "%s", info.dli_fname);
    }

    // The other libdispatch files mapped (each once; maps lists a file once per segment).
    char others[1024] = "";
    FILE *maps = fopen("/proc/self/maps", "re");
    if (maps) {
        char line[PATH_MAX + 128];
        while (fgets(line, sizeof line, maps)) {
            char *path = strchr(line, '/');
            if (!path) continue;
            path[strcspn(path, "\n")] = '\0';
            if (!is_libdispatch(path) || strcmp(path, self) == 0 || strstr(others, path)) continue;
            size_t used = strlen(others);
            snprintf(others + used, sizeof others - used, "%s%s", used ? ", " : "", path);
        }
        fclose(maps);
    }

    char buf[PATH_MAX + 1536];
    if (is_libdispatch(self)) {
        snprintf(buf, sizeof buf,
                 "GrandCentral: debug: library: libdispatch is GrandCentral, the drop-in: %s%s%s%s\n", self,
                 *others ? "; also mapped: " : "", others,
                 *others ? " (a second libdispatch runtime, with its own queues)" : "");
    } else if (*others) {
        snprintf(buf, sizeof buf,
                 "GrandCentral: debug: library: GrandCentral is %s; libdispatch is %s: two runtimes, each "
                 "with its own queues and threads (GrandCentral's main queue is drained through libdispatch's)\n",
                 self, others);
    } else {
        snprintf(buf, sizeof buf, "GrandCentral: debug: library: GrandCentral is %s; no libdispatch is mapped\n",
                 self);
    }
    gc_write_stderr(buf);
}

int gc_is_this_image(const void *symbol) {
    Dl_info mine, theirs;
    if (!dladdr((void *)gc_is_this_image, &mine) || !dladdr(symbol, &theirs)) return 0;
    return mine.dli_fbase == theirs.dli_fbase;
}

const char *gc_image_path(const void *symbol) {
    Dl_info info;
    if (!dladdr(symbol, &info) || !info.dli_fname) return "?";
    return info.dli_fname;
}
