// The data symbols the public header refers to by name (hard rule 4): the main queue
// (dispatch_get_main_queue() is `&_dispatch_main_q`) and the concurrent-queue attribute
// (DISPATCH_QUEUE_CONCURRENT is `&_dispatch_queue_attr_concurrent`).
//
// Only their addresses matter: the engine recognises these two handles by address
// (CGrandCentral.h declares them weak) and never reads or writes the bytes. The structs
// are completed here, privately, with padding of a plausible size. It is not zero
// because a non-PIC executable that takes the address gets a copy relocation: the
// linker reserves st_size bytes in the executable and every reference, the library's
// included, binds to that copy. That keeps the address unique, which is all we need.
// For the same reason these symbols must keep default visibility.
#include "shim.h"

struct dispatch_queue_s {
	_Alignas(64) unsigned char opaque[128];
};

struct dispatch_queue_attr_s {
	_Alignas(16) unsigned char opaque[16];
};

struct dispatch_queue_s _dispatch_main_q;
struct dispatch_queue_attr_s _dispatch_queue_attr_concurrent;
